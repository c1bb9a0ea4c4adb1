"""asv benchmark suite (``benchmark_dir`` in asv.conf.json) next to the model suite YAML files.

asv imports this folder as a package named after it, so it needs this file; the
benchmarks live in ``asv_linear.py``. See docs/asv.md.
"""

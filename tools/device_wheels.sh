#!/usr/bin/env bash
# Fill .whl/ (gitignored) for device calls: the wheels the lent H200 lacks (it has no
# network) and a git bundle of this checkout for the A/B's worktrees and asv; about 56 MB
# in all (FBGEMM's wheel is 36 of it), within the 64 MiB a device call carries.
#
# Usage (repo root, a machine with network): bash tools/device_wheels.sh
#   then pass carry [".whl"] to the device call.
# The bundle is tools/device_bundle.sh's: HEAD, main, and the gate checks' branches
# `planted` and `aa` (another branch's bundle: bash tools/device_bundle.sh BRANCH OUT).
set -euo pipefail
mkdir -p .whl
py=${PYTHON:-python3}
# ninfer's own dependencies the device's Python 3.12 lacks (jsonschema and its family;
# tqdm and tabulate, in case), asv's (docs/asv.md says why each is needed), then nox's:
# `nox --no-venv --no-install -s bench` is the README's main job there (the image has
# matplotlib for its plots).
"$py" -m pip download -q -d .whl --only-binary=:all: --no-deps --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 \
  jsonschema jsonschema-specifications referencing rpds-py tqdm tabulate \
  asv==0.6.6 asv_runner==0.3.2 json5==0.17.3 importlib_metadata==10.2.0 zipp==4.1.2 \
  lazy_importer==0.1.0 Pympler==1.1 virtualenv==21.15.11 distlib==0.4.4 \
  platformdirs==4.14.9 python_discovery==1.9.6 packaging==26.4 filelock==4.3.1 \
  hatchling==1.33.0 trove_classifiers==2026.9.21.13 tomlkit==0.15.2 build==1.6.1 \
  pyproject_hooks==1.3.3 pathspec==1.1.1 pluggy==1.7.0 \
  nox==2026.10.20 argcomplete==3.7.2 attrs==26.1.0 colorlog==6.12.0 dependency-groups==1.3.2 humanize==4.17.0
# The bench's peers (docs/bench.md, "Peers"): FBGEMM GenAI 1.6.0 (35.8 MB; links
# libcudart.so.13, loads against torch 2.11+cu130; numpy is its only dependency), and
# gemlite 0.6.0.post2, an sdist only: built here into a pure-Python wheel (0.2 MB; needs
# numpy, tqdm, triton>=3.6, which the device has or the wheels above give).
"$py" -m pip download -q -d .whl --only-binary=:all: --no-deps --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 fbgemm-gpu-genai==1.6.0
"$py" -m pip wheel -q --no-deps -w .whl gemlite==0.6.0.post2
bash tools/device_bundle.sh HEAD .whl/repo.bundle
ls .whl | wc -l | xargs echo "wheels and bundle in .whl:"
du -sh .whl | cut -f1 | xargs echo "size of .whl (the carry limit is 64 MiB in all):"

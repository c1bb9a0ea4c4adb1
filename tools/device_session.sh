#!/usr/bin/env bash
# One full run on a GPU machine (the device tool's H200, or any CUDA box): environment
# facts, the README example, the GPU conformance suite (BENCH=1: the suite's points too);
# logs under $OUT (default ./runs/device).
# Usage: bash tools/device_session.sh [pytest -k expression]
set -uo pipefail
OUT=${OUT:-runs/device}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
# Wheels carried in .whl (no network on the device machine) go to a private target.
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
  $PY - <<'PY'
import cupy, numpy, ml_dtypes, sys
print("python", sys.version.split()[0], "cupy", cupy.__version__, "numpy", numpy.__version__)
print("cc", cupy.cuda.Device().compute_capability, "runtime", cupy.cuda.runtime.runtimeGetVersion())
a = cupy.zeros(4, dtype=ml_dtypes.bfloat16); print("cupy bf16 ok:", a.dtype)
PY
} 2>&1 | tee "$OUT/env.txt"

echo "== README example" | tee "$OUT/readme_example.txt"
$PY - <<'PY' 2>&1 | tee -a "$OUT/readme_example.txt"
import re, pathlib
text = pathlib.Path("README.md").read_text()
block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
exec(compile(block, "README.md", "exec"), {})
PY

# BENCH=1 adds the suite's points alone and beside cuBLAS, and one ncu report (the
# performance notes' inputs); the gate's own runs are tools/device_gate.sh.
if [ -n "${BENCH:-}" ]; then
  echo "== bench"
  $PY -m ninfer.bench --suite all --list | tail -1
  ( time $PY -m ninfer.bench --suite all --no-progress --json-out "$OUT/bench_all.json" ) 2>&1 | tee "$OUT/bench_all.txt" | tail -80
  ( time $PY -m ninfer.bench --suite all --peer cublas --no-progress --json-out "$OUT/bench_all_cublas.json" ) > "$OUT/bench_all_cublas.txt" 2>&1
  tail -3 "$OUT/bench_all_cublas.txt"
  $PY -m ninfer.bench ncu --qtype q4 --n 4096 --k 5120 --t 1 2>&1 | tee "$OUT/ncu_q4.txt"
fi

# The GPU suite on 4 xdist workers (one GPU: the kernels' compiles and the oracle's host
# work overlap), then the timing tests alone: they must not share the GPU.
echo "== conformance"
NINFER_CONFORMANCE_JSON="$OUT/conformance_worst.json" timeout 480 $PY -m pytest tests -m "gpu and not timing" \
  -q -x -n "${WORKERS:-4}" -p no:cacheprovider ${1:+-k "$1"} 2>&1 | tee "$OUT/conformance.log" | tail -40
timeout 120 $PY -m pytest tests -m "gpu and timing" -q -p no:cacheprovider ${1:+-k "$1"} 2>&1 \
  | tee "$OUT/conformance_timing.log" | tail -8

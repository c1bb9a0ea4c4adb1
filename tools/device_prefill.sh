#!/usr/bin/env bash
# Issue 6 (prefill speed) on a GPU box: conformance, the dq_gemm band sweep, the prefill
# tables of docs/perf/prefill_h200/ (each one `ninfer-bench` run, cold, graph, beside
# cuBLAS), the T = 64..1024 sweeps and the Q4 [6144,5120] per-shape report. Logs and
# JSON under $OUT, archived in $OUT/prefill_artifacts.tar.gz.
#
# Usage (repo root): bash tools/device_prefill.sh [steps]
#   steps: any of conformance tune tables sweeps report (default: all of them)
#   BUNDLE=path/to/repo.bundle: run in a clone of the bundle's HEAD (records carry the
#   real commit and dirty=false); BASELINE=1 also refreshes baselines/h200 there
#   (tools/device_regress.sh conformance baseline) first.
set -uo pipefail
OUT=${OUT:-runs/device}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
if [ -n "${BUNDLE:-}" ] && [ -z "${NINFER_IN_CLONE:-}" ]; then
  clone=/tmp/ninfer-prefill-clone
  rm -rf "$clone" && git clone -q "$BUNDLE" "$clone" || exit 1
  git -C "$clone" checkout -q --detach "$(git bundle list-heads "$BUNDLE" | awk '$2=="HEAD"{print $1}')" || exit 1
  cp -r .whl "$clone/" 2>/dev/null
  cd "$clone" || exit 1
  if [ -n "${BASELINE:-}" ]; then
    NINFER_IN_CLONE=1 OUT="$OUT" bash tools/device_regress.sh conformance baseline
  fi
  NINFER_IN_CLONE=1 OUT="$OUT" exec bash tools/device_prefill.sh "$@"
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
STEPS=${*:-conformance tune tables sweeps report}
has() { [[ " $STEPS " == *" $1 "* ]]; }
D=docs/perf/prefill_h200
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  echo "commit=$(git rev-parse HEAD 2>/dev/null || echo "${NINFER_GIT_COMMIT:-?}") steps=$STEPS"
} 2>&1 | tee -a "$OUT/device.log"

if has conformance; then
  echo "== conformance" | tee -a "$OUT/device.log"
  NINFER_CONFORMANCE_JSON="$OUT/conformance_worst.json" timeout 400 $PY -m pytest tests -m "gpu and not timing" \
    -q -x -n 4 -p no:cacheprovider 2>&1 | tail -25 | tee "$OUT/conformance.log" | tail -6 | tee -a "$OUT/device.log"
  timeout 120 $PY -m pytest tests -m "gpu and timing" -q -p no:cacheprovider 2>&1 | tail -8 \
    | tee "$OUT/conformance_timing.log" | tail -3 | tee -a "$OUT/device.log"
fi
if has tune; then
  echo "== tune" | tee -a "$OUT/device.log"
  timeout 300 $PY tools/tune_dq_gemm.py --json "$OUT/tune_dq_gemm.json" > "$OUT/tune_dq_gemm.txt" 2>&1
  tail -3 "$OUT/tune_dq_gemm.txt" | tee -a "$OUT/device.log"
fi
B="$PY -m ninfer.bench --no-progress"
if has tables; then
  echo "== tables" | tee -a "$OUT/device.log"
  $B --suite-file $D/prefill_surface.yaml --peer cublas --json-out "$OUT/prefill_surface.json" > "$OUT/prefill_surface.txt" 2>&1
  $B --suite all --peer cublas --json-out "$OUT/suite_all.json" > "$OUT/suite_all.txt" 2>&1
  for f in prefill_surface suite_all; do
    grep -v "^gpu=\|^dram\|^sustained\|^cache\|^execution" "$OUT/$f.txt" | cut -c1-200 | tee -a "$OUT/device.log"
  done
fi
if has sweeps; then
  echo "== sweeps" | tee -a "$OUT/device.log"
  for q in q4 q5 q6 w8 nvfp4 bf16; do
    $B --qtype $q --n 14336 --k 5120 --sweep 64:1024:32 --json-out "$OUT/sweep_$q.json" > "$OUT/sweep_$q.txt" 2>&1
  done
  $PY - "$OUT" <<'PY' 2>&1 | tee -a "$OUT/device.log"
import json, sys, pathlib
for f in sorted(pathlib.Path(sys.argv[1]).glob("sweep_*.json")):
    pts = json.loads(f.read_text())["points"]
    med = [p["median_us"] for p in pts]
    ts = [p["t"] for p in pts]
    steps = [(med[i + 1] / med[i] - 1) * 100 for i in range(len(med) - 1)]
    worst = max(range(len(steps)), key=lambda i: steps[i])
    print(f"{f.stem}: T{ts[0]} {med[0]:.1f} T{ts[-1]} {med[-1]:.1f} us; "
          f"largest step {steps[worst]:+.1f}% at T {ts[worst]}->{ts[worst + 1]}")
PY
fi
if has report; then
  echo "== report (Q4 [6144,5120], T = 1..128, 512, 1024)" | tee -a "$OUT/device.log"
  $B --qtype q4 --n 6144 --k 5120 --sweep 1:128 --peer cublas --json-out "$OUT/report_q4_6144_a.json" > "$OUT/report_a.txt" 2>&1
  for t in 512 1024; do
    $B --qtype q4 --n 6144 --k 5120 --t $t --peer cublas --json-out "$OUT/report_q4_6144_t$t.json" > "$OUT/report_t$t.txt" 2>&1
  done
  tail -n 3 "$OUT"/report_*.txt | tee -a "$OUT/device.log"
fi
tar -czf "$OUT/prefill_artifacts.tar.gz" -C "$OUT" --exclude prefill_artifacts.tar.gz . 2>/dev/null

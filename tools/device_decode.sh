#!/usr/bin/env bash
# Issue 5 (decode speed) on a GPU box: conformance, the dec_q tile sweep, the decode
# tables of docs/perf/decode_h200/ (each one `ninfer-bench` run, cold, graph, with its
# peers), the T = 1..64 sweeps and the host dispatch cost. Logs and JSON under $OUT.
#
# Usage (repo root): bash tools/device_decode.sh [steps]
#   steps: any of conformance tune floor ncu tables sweeps host (default: all of them)
#   BUNDLE=path/to/repo.bundle: run in a clone of the bundle's HEAD (records carry the
#   real commit and dirty=false); BASELINE=1 also refreshes baselines/h200 there
#   (tools/device_regress.sh conformance baseline) before the decode steps.
set -uo pipefail
OUT=${OUT:-runs/device}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
if [ -n "${BUNDLE:-}" ] && [ -z "${NINFER_IN_CLONE:-}" ]; then
  clone=/tmp/ninfer-decode-clone
  rm -rf "$clone" && git clone -q "$BUNDLE" "$clone" || exit 1
  git -C "$clone" checkout -q --detach "$(git bundle list-heads "$BUNDLE" | awk '$2=="HEAD"{print $1}')" || exit 1
  cp -r .whl "$clone/" 2>/dev/null
  cd "$clone" || exit 1
  if [ -n "${BASELINE:-}" ]; then
    NINFER_IN_CLONE=1 OUT="$OUT" bash tools/device_regress.sh conformance baseline
  fi
  NINFER_IN_CLONE=1 OUT="$OUT" exec bash tools/device_decode.sh "$@"
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
STEPS=${*:-conformance tune floor ncu tables sweeps host}
has() { [[ " $STEPS " == *" $1 "* ]]; }
D=docs/perf/decode_h200
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
  timeout 420 $PY tools/tune_dec_q.py --json "$OUT/tune.json" > "$OUT/tune.txt" 2>&1
  tail -3 "$OUT/tune.txt" | tee -a "$OUT/device.log"
fi
if has floor; then
  echo "== floor (plain read under the cold timer)" | tee -a "$OUT/device.log"
  $PY tools/read_floor.py --json "$OUT/read_floor.json" 2>&1 | tee -a "$OUT/device.log"
fi
if has ncu; then
  echo "== ncu" | tee -a "$OUT/device.log"
  IFS=, read -r -a points <<< "${NCU_POINTS:-q4 14336 5120 1,q4 6144 5120 1,q4 14336 5120 64}"
  for pt in "${points[@]}"; do
    set -- $pt
    $PY -m ninfer.bench ncu --qtype "$1" --n "$2" --k "$3" --t "$4" 2>&1 | sed "s/^/[$1 $2x$3 T=$4] /" | tee -a "$OUT/device.log"
    timeout 120 ncu --set full --profile-from-start off --clock-control none --page details \
      "$PY" -m ninfer.bench --qtype "$1" --n "$2" --k "$3" --t "$4" --profile > "$OUT/ncu_full_$1_$2_T$4.txt" 2>&1
  done
  grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|No Eligible|One or More|Compute \(SM\) Throughput" \
    "$OUT"/ncu_full_*.txt | tee -a "$OUT/device.log"
fi
B="$PY -m ninfer.bench --no-progress"
if has tables; then
  echo "== tables" | tee -a "$OUT/device.log"
  $B --suite-file $D/decode_heads.yaml --peer cublas --json-out "$OUT/decode_heads.json" > "$OUT/decode_heads.txt" 2>&1
  $B --suite-file $D/decode_14336.yaml --peer cublas --json-out "$OUT/decode_14336.json" > "$OUT/decode_14336.txt" 2>&1
  $B --suite-file $D/decode_q4_6144.yaml --peer tinygemm --peer cublas --json-out "$OUT/decode_q4_6144.json" \
    > "$OUT/decode_q4_6144.txt" 2>&1
  for f in decode_heads decode_14336 decode_q4_6144; do grep -v "^gpu=\|^dram\|^sustained\|^cache\|^execution" "$OUT/$f.txt"; done \
    | cut -c1-200 | tee -a "$OUT/device.log"
fi
if has sweeps; then
  echo "== sweeps" | tee -a "$OUT/device.log"
  for q in q4 q5 q6 w8 nvfp4 bf16; do
    $B --qtype $q --n 6144 --k 5120 --sweep 1:64 --json-out "$OUT/sweep_$q.json" > "$OUT/sweep_$q.txt" 2>&1
  done
  $PY - "$OUT" <<'PY' 2>&1 | tee -a "$OUT/device.log"
import json, sys, pathlib
for f in sorted(pathlib.Path(sys.argv[1]).glob("sweep_*.json")):
    pts = json.loads(f.read_text())["points"]
    med = [p["median_us"] for p in pts]
    steps = [(med[i + 1] / med[i] - 1) * 100 for i in range(len(med) - 1)]
    worst = max(range(len(steps)), key=lambda i: steps[i])
    print(f"{f.stem}: T1 {med[0]:.2f} T16 {med[15]:.2f} T64 {med[-1]:.2f} us; "
          f"largest step {steps[worst]:+.1f}% at T {worst + 1}->{worst + 2}")
PY
fi
if has host; then
  echo "== host" | tee -a "$OUT/device.log"
  $PY tools/host_overhead.py > "$OUT/host.txt" 2>&1
  head -4 "$OUT/host.txt" | tee -a "$OUT/device.log"
fi
# The device tool returns few files: everything else travels in one archive.
tar -czf "$OUT/decode_artifacts.tar.gz" -C "$OUT" --exclude decode_artifacts.tar.gz . 2>/dev/null

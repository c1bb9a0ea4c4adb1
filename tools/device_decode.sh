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
SCRIPT=tools/device_decode.sh CLONE=/tmp/ninfer-decode-clone
# shellcheck source=tools/device_lib.sh
source "$(dirname "$0")/device_lib.sh"
device_setup "$@"
STEPS=${*:-conformance tune floor ncu tables sweeps host}
D=docs/perf/decode_h200
device_header
if has conformance; then device_conformance; fi
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
  $PY tools/sweep_steps.py "$OUT" 2>&1 | tee -a "$OUT/device.log"
fi
if has host; then
  echo "== host" | tee -a "$OUT/device.log"
  $PY tools/host_overhead.py > "$OUT/host.txt" 2>&1
  head -4 "$OUT/host.txt" | tee -a "$OUT/device.log"
fi
# The device tool returns few files: everything else travels in one archive.
tar -czf "$OUT/decode_artifacts.tar.gz" -C "$OUT" --exclude decode_artifacts.tar.gz . 2>/dev/null

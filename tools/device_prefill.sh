#!/usr/bin/env bash
# Issue 6 (prefill speed) on a GPU box: conformance, the dq_gemm band sweep, the prefill
# tables of docs/perf/prefill_h200/ (each one `ninfer-bench` run, cold, graph, beside
# cuBLAS), the T = 64..1024 sweeps and the Q4 [6144,5120] per-shape report. Logs and
# JSON under $OUT, archived in $OUT/prefill_artifacts.tar.gz.
#
# Usage (repo root): bash tools/device_prefill.sh [steps]
#   steps: any of conformance rstest tune tables sweeps report ncu gap heads long tiles xover
#   ablate ncuabl
#   (default: conformance tune tables sweeps report)
#   rstest: tests/gpu/test_dq_rs.py alone (a kernel change's first check);
#   tiles: tools/dq_rs_tiles.py (each dq_rs tile against the table's route; TILE_QTYPES,
#   TILE_SHAPES, TILE_TS override its defaults);
#   xover: tools/prefill_crossover.py on XO_QTYPES, XO_SHAPES, XO_TS;
#   ablate: tools/dq_rs_ablate.py (dq_rs with its decode, MMAs or copies taken out;
#   ABL_POINTS, ABL_VARIANTS override its defaults; ABL_REF=file times an assembled
#   dq_rs source beside them, e.g. an earlier commit's, with ABL_REF_BAND / ABL_REF_STAGES
#   (tools/dq_rs_ablate.py --ref-band / --ref-stages) where its BAND or ring depths differ);
#   ncu: Nsight Compute sections + stall reasons of dq_rs points (what bounds each miss);
#   ncuabl: Nsight Compute on dq_rs_ablate variants (NCU_VARIANTS at NCU_POINT): warp
#   states, per-SASS-instruction stall samples and pipe counters, in $OUT/ncu_abl.tar.gz;
#   gap: dq_rs vs dq_gemm on N between the suites' 10240 and 14336 (tools/prefill_crossover.py)
#   heads: the same on the suites' K = 2048 heads ([131072,2048], [248320,2048]), T >= 512
#   (HEADS_QTYPES, HEADS_TS override the formats and T values)
#   long: the same past T = 256: the big weights at T = 768 ... 2048, the mid weights at
#   T = 384 ... 1024, the 27B output head [248320,5120] at T = 1024 and 2048
#   BUNDLE=path/to/repo.bundle: run in a clone of the bundle's HEAD (records carry the
#   real commit and dirty=false); BASELINE=1 also refreshes baselines/h200 there
#   (tools/device_regress.sh conformance baseline) first.
set -uo pipefail
SCRIPT=tools/device_prefill.sh CLONE=/tmp/ninfer-prefill-clone
# A relative ABL_REF names a file of this tree; BUNDLE mode runs in a clone elsewhere.
if [ -n "${ABL_REF:-}" ]; then ABL_REF=$(realpath "$ABL_REF") && export ABL_REF; fi
# shellcheck source=tools/device_lib.sh
source "$(dirname "$0")/device_lib.sh"
device_setup "$@"
STEPS=${*:-conformance tune tables sweeps report}
D=docs/perf/prefill_h200
device_header
if has conformance; then device_conformance; fi
if has rstest; then
  echo "== rstest (tests/gpu/test_dq_rs.py)" | tee -a "$OUT/device.log"
  timeout 400 $PY -m pytest tests/gpu/test_dq_rs.py -q -x -n 4 -p no:cacheprovider 2>&1 | tail -25 \
    | tee "$OUT/rstest.log" | tail -6 | tee -a "$OUT/device.log"
fi
if has tiles; then
  echo "== tiles (dq_rs tiles vs the table's route)" | tee -a "$OUT/device.log"
  timeout 300 $PY tools/dq_rs_tiles.py --qtypes "${TILE_QTYPES:-q4,q5,q6,w8,nvfp4,bf16}" \
    ${TILE_SHAPES:+--shapes "$TILE_SHAPES"} ${TILE_TS:+--ts "$TILE_TS"} --json "$OUT/dq_rs_tiles.json" \
    > "$OUT/dq_rs_tiles.txt" 2>&1
  tail -3 "$OUT/dq_rs_tiles.txt" | tee -a "$OUT/device.log"
fi
if has xover; then
  echo "== xover (dq_rs vs dq_gemm)" | tee -a "$OUT/device.log"
  timeout 300 $PY tools/prefill_crossover.py --qtypes "${XO_QTYPES:-bf16}" ${XO_SHAPES:+--shapes "$XO_SHAPES"} \
    --ts "${XO_TS:-128,256,512,1024}" --json "$OUT/crossover.json" > "$OUT/crossover.txt" 2>&1
  tail -3 "$OUT/crossover.txt" | tee -a "$OUT/device.log"
fi
if has ablate; then
  echo "== ablate (dq_rs without decode / MMA / copies)" | tee -a "$OUT/device.log"
  timeout 400 $PY tools/dq_rs_ablate.py ${ABL_POINTS:+--points "$ABL_POINTS"} ${ABL_VARIANTS:+--variants "$ABL_VARIANTS"} ${ABL_REF:+--ref "$ABL_REF"} ${ABL_REF_BAND:+--ref-band "$ABL_REF_BAND"} ${ABL_REF_STAGES:+--ref-stages "$ABL_REF_STAGES"} --json "$OUT/dq_rs_ablate.json" \
    > "$OUT/dq_rs_ablate.txt" 2>&1
  cat "$OUT/dq_rs_ablate.txt" | tee -a "$OUT/device.log"
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
  $PY tools/sweep_steps.py "$OUT" 2>&1 | tee -a "$OUT/device.log"
fi
if has report; then
  echo "== report (Q4 [6144,5120], T = 1..128, 512, 1024)" | tee -a "$OUT/device.log"
  $B --qtype q4 --n 6144 --k 5120 --sweep 1:128 --peer cublas --json-out "$OUT/report_q4_6144_a.json" > "$OUT/report_a.txt" 2>&1
  for t in 512 1024; do
    $B --qtype q4 --n 6144 --k 5120 --t $t --peer cublas --json-out "$OUT/report_q4_6144_t$t.json" > "$OUT/report_t$t.txt" 2>&1
  done
  tail -n 3 "$OUT"/report_*.txt | tee -a "$OUT/device.log"
fi
if has ncu; then
  echo "== ncu (dq_rs points)" | tee -a "$OUT/device.log"
  for pt in "q4 14336 5120 128" "q4 14336 5120 256" "nvfp4 14336 5120 128" "bf16 14336 5120 128" "q4 5120 17408 128"; do
    read -r q n k t <<< "$pt"
    f="$OUT/ncu_${q}_${n}x${k}_T$t.txt"
    timeout 150 ncu --profile-from-start off --clock-control none --section SpeedOfLight \
      --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats \
      --section InstructionStats --section Occupancy \
      --metrics 'regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$' \
      $PY -m ninfer.bench --qtype "$q" --n "$n" --k "$k" --t "$t" --profile > "$f" 2>&1
    echo "-- $q [$n,$k] T=$t" | tee -a "$OUT/device.log"
    grep -E "^  [a-z_]+<|Duration|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Executed Ipc A|Compute \(SM\) Th|Memory Throughput" "$f" \
      | head -12 | tee -a "$OUT/device.log"
  done
fi
if has ncuabl; then
  echo "== ncuabl (ncu on dq_rs_ablate variants)" | tee -a "$OUT/device.log"
  A="$OUT/ncu_abl" && mkdir -p "$A"
  ncu --query-metrics --chip gh100 > "$A/metrics_gh100.txt" 2>&1
  # Pipe counters, those of them this ncu knows (an unknown name fails the whole run).
  MET=""
  for m in $(grep -oE "^(sm|smsp)__(pipe|inst_executed_pipe)_[a-z0-9_]+" "$A/metrics_gh100.txt" | sort -u); do
    case $m in *_pred_on*|*_op_*dmma*|*_fp64*) continue ;; esac
    if [[ $m == *cycles_active* ]]; then MET+="$m.avg.pct_of_peak_sustained_active,"; else MET+="$m.sum,"; fi
  done
  MET=${MET%,}
  echo "pipe metrics: $MET" > "$A/pipe_metrics.txt"
  # One variant under ncu; $1: the extra metrics ("" for the sections alone).
  ncu_variant() {
    timeout 200 ncu --profile-from-start off --clock-control none --kernel-name regex:dq_rs \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      --section InstructionStats --section SchedulerStats --section SourceCounters \
      ${1:+--metrics "$1"} \
      -f -o "$A/$v" $PY tools/dq_rs_ablate.py --points "${NCU_POINT:-q4:14336x5120:128}" --variants "$v" --profile
  }
  for v in ${NCU_VARIANTS:-full nocopy mma_only decode_only}; do
    if ! ncu_variant "$MET" > "$A/${v}_run.txt" 2>&1; then
      # Once more without the pipe counters (an unknown name fails the whole run); the
      # variant's files then lack them, which its log says.
      echo "ncu failed on $v (${v}_run.txt); ${MET:+again without the pipe counters}" | tee -a "$OUT/device.log"
      if [ -n "$MET" ]; then ncu_variant "" > "$A/${v}_run_nomet.txt" 2>&1 || echo "ncu failed again on $v" | tee -a "$OUT/device.log"; fi
    fi
    [ -f "$A/$v.ncu-rep" ] || continue
    ncu -i "$A/$v.ncu-rep" --page details --print-details all > "$A/${v}_details.txt" 2>&1
    ncu -i "$A/$v.ncu-rep" --page raw --csv > "$A/${v}_raw.csv" 2>&1
    ncu -i "$A/$v.ncu-rep" --page source --csv --print-source sass > "$A/${v}_sass.csv" 2>&1
    echo "-- $v" | tee -a "$OUT/device.log"
    grep -E "Duration|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|gmma|pipe_shared|pipe_fma|pipe_alu|pipe_fp16" \
      "$A/${v}_details.txt" | head -12 | tee -a "$OUT/device.log"
  done
  tar -czf "$OUT/ncu_abl.tar.gz" -C "$OUT" ncu_abl && rm -rf "$A"
fi
if has gap; then
  echo "== gap (N between 10240 and 14336)" | tee -a "$OUT/device.log"
  timeout 200 $PY tools/prefill_crossover.py --qtypes q4,q6,w8,nvfp4 --shapes 8448x5120,11264x5120,12288x5120 \
    --ts 65,128,192,256 --json "$OUT/crossover_gap.json" 2>&1 | tee "$OUT/crossover_gap.txt" | tail -3 | tee -a "$OUT/device.log"
fi
if has heads; then
  echo "== heads (the suites' K = 2048 output / draft heads, T >= 512)" | tee -a "$OUT/device.log"
  timeout 200 $PY tools/prefill_crossover.py --qtypes "${HEADS_QTYPES:-q4,nvfp4,q6,w8}" \
    --shapes 131072x2048,248320x2048 --ts "${HEADS_TS:-512,768,1024}" --json "$OUT/crossover_heads.json" 2>&1 | tee "$OUT/crossover_heads.txt" | tail -3 | tee -a "$OUT/device.log"
fi
if has long; then
  echo "== long (dq_rs vs dq_gemm past T = 256)" | tee -a "$OUT/device.log"
  X="$PY tools/prefill_crossover.py --repeat 10"
  timeout 290 $X --qtypes q5,q6,w8,q4,nvfp4,bf16 --shapes 14336x5120,16384x5120,34816x5120,5120x17408,5120x10240 \
    --ts 768,1024,1536,2048 --json "$OUT/crossover_long_big.json" > "$OUT/crossover_long_big.txt" 2>&1
  timeout 120 $X --qtypes q4,q5,q6,w8 --shapes 4608x4608,5120x6144,6144x5120 \
    --ts 384,512,768,1024 --json "$OUT/crossover_long_mid.json" > "$OUT/crossover_long_mid.txt" 2>&1
  timeout 100 $X --qtypes q6,q4 --shapes 248320x5120 --ts 1024,2048 \
    --json "$OUT/crossover_long_head.json" > "$OUT/crossover_long_head.txt" 2>&1
  tail -n 4 "$OUT"/crossover_long_*.txt | tee -a "$OUT/device.log"
fi
tar -czf "$OUT/prefill_artifacts.tar.gz" -C "$OUT" --exclude prefill_artifacts.tar.gz . 2>/dev/null

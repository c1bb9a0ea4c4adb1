#!/usr/bin/env bash
# Every device step of the project on a GPU box without network (the lent H200): facts,
# the README example, the conformance suite, the gate's A/A and planted runs, A/Bs, asv,
# the tune command. Steps run in the order given (a step may repeat); each has its own
# time limit, and its output lands in $OUT/device.log plus $OUT/artifacts.tar.gz (the
# run folders without their round files, baselines/, the route tables and their page),
# rewritten after every step so a call cut short still brings back what finished.
# $OUT: runs/device.
#
# Usage (repo root): [BUNDLE=.whl/repo.bundle] [DEADLINE_S=N] bash tools/device.sh STEPS
#   env          the GPU, driver, clocks; Python, CuPy; a bf16 array
#   readme       the README's Python example, run as written
#   conformance  the GPU suite on 4 xdist workers of the one GPU, then the timing tests alone
#                (NINFER_CONFORMANCE_TABLE=path: under that route table, docs/testing.md)
#   gputest      the GPU tests GPU_TESTS names (pytest paths or nodes), on 4 xdist workers
#   host         host time of one linear() call per route, with a cProfile each
#   bench        the suite's points alone and beside cuBLAS, and one ncu report
#   smoke        one Q5 point, two allocations (the record, the arena, NVML)
#   startup      import times and a profile of one round's process
#   noise        ninfer-regress noise, arena and pool layouts (NOISE_P processes)
#   baseline     ninfer-regress baseline --suite all (BASE_SUITES adds the model suites)
#   gate         python -m ninfer.regress bench --no-plots (what nox -s bench runs), CI
#                defaults; the PR comment and step summary rendered into $OUT
#   noxbench     the README's main job itself: nox --no-venv --no-install -s bench
#   planted      the gate with tests/fixtures/planted_w8_dec_q.patch applied
#   ab           --ab HEAD on the planted tree (AB_ROUNDS a side; AB_QTYPE: one format)
#   planted5 ab5 the same with the 5 % fixture
#   abref        --ab "$AB_REF" on the unchanged tree (HEAD against an earlier commit;
#                AB_DISPATCH=file: both sides under that dispatch override; AB_SUITE_FILE=file:
#                that suite file's points instead of the suite's; AB_QTYPE: one format)
#   fallback     the no-baseline path (--fallback-ab HEAD) on the planted tree, rendered
#   asvplanted   asv continuous main -> planted (the bundle's branch) on ASV_BENCH
#   tests        tests/gpu/test_bench_timer.py and test_gate.py (NINFER_GATE_POWER=1: more)
#   shape        the Q4 [6144,5120] sweep and its per-shape report
#   ir           ninfer-bench ir (PTX and SASS of every routed kernel instance)
#   tune         ninfer-regress tune (TUNE_ARGS): the table, its record and docs/routes.md
#   abtable      nox -s bench -- --ab HEAD: the tuned table (working tree) against HEAD's
#   peertests    tests/gpu/test_peers.py, then test_dq_rs.py and the linear() contract tests
#   sweep        ninfer-bench sweep-plan on SWEEP_SUITE (default all), that suite file's
#                points until DEADLINE_S, then ninfer-bench cliffs on them (issue 26, Deliver 4)
#   ncufull      Nsight Compute --set full and the stall reasons (ninfer/bench/ncu_page.py's
#                STALL_METRICS) of one linear() call per NCU_POINTS entry (q:n:k:t ...), the
#                details page into $OUT/ncu_<q>_<n>x<k>_T<t>.txt, their ninfer-bench
#                ncu-table into $OUT/ncu_table.md; NCU_DISPATCH=file: under that dispatch
#                override (ninfer-bench --dispatch)
#   exp          tools/experiment.py "$EXP_FILE" (EXP_ROUNDS rounds; a file under .whl/
#                travels with the clone)
#   peers        the peer table (issue 26): Q4 and W8 on four weights, T = 1 ... 1024, beside
#                cublas, tinygemm, fbgemm and gemlite (PEER_T: the T values), until DEADLINE_S
#   targets      --suite all and experiments/issue26/targets.yaml beside cublas and a plain
#                read, then ninfer-bench targets on both (runs/targets_<n>.md)
# BUNDLE: run in a clone of the bundle's HEAD (records then carry the real commit and a
# clean tree; the A/B's worktrees need its history); tools/device_wheels.sh makes it.
# BUNDLE_REV: a branch of the bundle to run instead of its HEAD (tools/device_bundle.sh's
# extra branches: one bundle for several branches' calls).
# DEADLINE_S: start no step that would, by its usual length, end past this many seconds.
set -uo pipefail
OUT=${OUT:-runs/device}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
if [ -n "${BUNDLE_REV:-}" ] && [ -z "${BUNDLE:-}" ]; then
  echo "tools/device.sh: BUNDLE_REV=$BUNDLE_REV names a branch of a bundle, and BUNDLE is not set" >&2
  exit 2
fi
if [ -n "${BUNDLE:-}" ] && [ -z "${NINFER_IN_CLONE:-}" ]; then
  clone=/tmp/ninfer-device
  rm -rf "$clone" && git clone -q "$BUNDLE" "$clone" || exit 1
  rev=$(git bundle list-heads "$BUNDLE" | awk '$2=="HEAD"{print $1}')
  [ -z "${BUNDLE_REV:-}" ] || rev="origin/$BUNDLE_REV"
  if ! git -C "$clone" rev-parse -q --verify "$rev^{commit}" >/dev/null; then
    echo "tools/device.sh: BUNDLE_REV=$BUNDLE_REV is not a branch of $BUNDLE; it has:" >&2
    git bundle list-heads "$BUNDLE" >&2
    exit 2
  fi
  git -C "$clone" checkout -q --detach "$rev" || exit 1
  cp -r .whl "$clone/" 2>/dev/null
  cd "$clone" && NINFER_IN_CLONE=1 OUT="$OUT" exec bash tools/device.sh "$@"
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
git config user.email device@ninfer.invalid 2>/dev/null && git config user.name device 2>/dev/null
STEPS=${*:-env readme conformance}
mkdir -p runs
log() { tee -a "$OUT/device.log"; }
# The PR comment and step summary from the newest run folder matching $1, as gpu-pr.yml
# renders them, into $OUT/$2_{comment,summary}.md.
render() {
  local run
  run=$(find runs -mindepth 1 -maxdepth 1 -type d -name "$1" -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
  [ -n "$run" ] && $PY ninfer/regress/verdict.py "$run" --artifact-url "https://example.invalid/artifact" \
    --comment "$OUT/$2_comment.md" --summary "$OUT/$2_summary.md" 2>&1 | log
}
plant() { [[ $1 == *5 ]] && echo tests/fixtures/planted_w8_dec_q_5pct.patch || echo tests/fixtures/planted_w8_dec_q.patch; }
verdicts() { echo "rc=$1" | log; grep -E "^(PASS|FAIL|UNDECIDED)|confirming|->|slower|faster|^nox >" "$2" | tail -"${3:-30}" | log; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  echo "commit=$(git rev-parse HEAD 2>/dev/null || echo '?') machine=$(hostname):$(head -c 8 /proc/sys/kernel/random/boot_id) steps=$STEPS"
} 2>&1 | log
# asv's regex ends in the quote of asv's parameter string: T1' is T=1, not T=16 or 128.
[ -n "${ASV_BENCH:-}" ] || ASV_BENCH="Qwen3_6_27b.*(mtp_gate_up|mtp_down|gdn_output_gate)/.*/T(1|16|128)'"
# Usual lengths on an H200 (seconds), for DEADLINE_S.
usual() {
  case $1 in
    env | readme | smoke) echo 40 ;; host) echo 100 ;; conformance) echo 200 ;; gputest) echo 150 ;; gate) echo 150 ;;
    noxbench | planted*) echo 170 ;; abref) echo 150 ;; ab*) echo 120 ;; fallback) echo 200 ;;
    asvplanted) echo 330 ;; tests) echo 200 ;; peertests) echo 150 ;; peers) echo 120 ;; sweep) echo 300 ;; targets) echo 400 ;; ncufull) echo 240 ;; exp) echo 200 ;; noise) echo 420 ;; tune) echo 540 ;; *) echo 60 ;;
  esac
}
n=0
for step in $STEPS; do
  n=$((n + 1))
  t0=$(date +%s)
  if [ -n "${DEADLINE_S:-}" ] && [ $((SECONDS + $(usual "$step"))) -gt "$DEADLINE_S" ]; then
    echo "== $n $step: skipped, would pass DEADLINE_S=$DEADLINE_S (at ${SECONDS} s)" | log
    continue
  fi
  echo "== $n $step" | log
  case $step in
    env)
      $PY -c "import cupy, numpy, ml_dtypes, sys; a = cupy.zeros(4, dtype=ml_dtypes.bfloat16); print('python', sys.version.split()[0], 'cupy', cupy.__version__, 'numpy', numpy.__version__, 'cc', cupy.cuda.Device().compute_capability, 'runtime', cupy.cuda.runtime.runtimeGetVersion(), 'bf16', a.dtype)" 2>&1 | log
      # The compiler of every kernel: `nox -s ir` pins the same one for SASS read off-device.
      $PY -c "from ninfer.bench.env import nvrtc_version; print('nvrtc', nvrtc_version())" 2>&1 | log
      $PY -m pip list 2>/dev/null | grep -Ei "^(nvidia-cuda-nvrtc|cupy)" | log ;;
    readme)
      $PY -c 'import re, pathlib; exec(compile(re.search(r"```python\n(.*?)```", pathlib.Path("README.md").read_text(), re.S).group(1), "README.md", "exec"), {})' 2>&1 | log ;;
    conformance)
      NINFER_CONFORMANCE_JSON="$OUT/conformance_worst.json" timeout 400 $PY -m pytest tests -m "gpu and not timing" \
        -q -x -n 4 -p no:cacheprovider > "runs/conformance_$n.log" 2>&1
      tail -6 "runs/conformance_$n.log" | log
      timeout 120 $PY -m pytest tests -m "gpu and timing" -q -p no:cacheprovider 2>&1 | tail -3 | log ;;
    gputest)
      timeout 400 $PY -m pytest ${GPU_TESTS:?GPU_TESTS=tests/gpu/test_x.py} -q -rfE -n 4 -p no:cacheprovider \
        > "runs/gputest_$n.log" 2>&1
      grep -E "^(FAILED|ERROR)" "runs/gputest_$n.log" | head -20 | log
      tail -3 "runs/gputest_$n.log" | log ;;
    host)
      timeout 120 $PY tools/experiment.py --profile 14 --host q4:6144:5120:1 --host q4:3456:1152:128 \
        --host q4:4000:10208:512 --host q4:14336:5120:128 > "runs/host_$n.txt" 2>&1
      grep -E " us$" "runs/host_$n.txt" | log
      # The bench's host_us (median of 20 enqueues a point) over the suite, by route.
      timeout 150 $PY -m ninfer.bench --suite all --repeat 5 --no-progress \
        --json-out "runs/host_suite_$n.json" > /dev/null 2>&1
      $PY -c 'import json, sys, statistics as st, collections as c
d = json.load(open(sys.argv[1])); by = c.defaultdict(list)
for p in d["points"]:
    by[p["route"]].append(st.median(h for r in p["rounds"] for h in r["host_dispatch_us"]))
for r, v in sorted(by.items()):
    print(f"host_us {r}: median {st.median(v):.1f} us over {len(v)} points (min {min(v):.1f}, max {max(v):.1f})")' \
        "runs/host_suite_$n.json" 2>&1 | log ;;
    bench)
      timeout 200 $PY -m ninfer.bench --suite all --peer cublas --json-out "runs/bench_cublas_$n.json" \
        > "runs/bench_cublas_$n.txt" 2>&1
      tail -3 "runs/bench_cublas_$n.txt" | log
      timeout 120 $PY -m ninfer.bench ncu --qtype q4 --n 4096 --k 5120 --t 1 2>&1 | tail -8 | log ;;
    smoke)
      timeout 240 $PY -m ninfer.bench --qtype q5 --n 6144 --k 5120 --t 16 --repeat 10 --allocs 2 \
        --order-seed 1 --json-out "runs/smoke_$n.json" 2>&1 | tail -6 | log ;;
    startup)
      timeout 120 $PY -X importtime -c "import ninfer.bench.run" 2>&1 | sort -t'|' -k2 -n | tail -5 | log
      timeout 200 $PY -m cProfile -s cumtime -m ninfer.bench --suite all --no-progress --order-seed 1 \
        > "runs/startup_$n.txt" 2>&1
      grep -A28 "Ordered by" "runs/startup_$n.txt" | cut -c1-150 | log ;;
    noise)
      timeout 420 $PY -m ninfer.regress noise --suite all --rounds "${NOISE_P:-3}" --allocs 2 \
        --memory "${NOISE_MEMORY:-both}" --markdown "runs/noise_$n.md" > "runs/noise_$n.log" 2>&1
      echo "rc=$?" | log; head -12 "runs/noise_$n.md" 2>/dev/null | log ;;
    baseline)
      for s in ${BASE_SUITES:-all}; do
        timeout 300 $PY -m ninfer.regress baseline --suite "$s" --rounds "${BASE_ROUNDS:-10}" \
          --reason "${REASON:-re-measured on the device at $(git rev-parse --short HEAD)}" 2>&1 | tail -3 | log
      done ;;
    gate)
      timeout 400 $PY -m ninfer.regress bench --no-plots > "runs/gate_$n.log" 2>&1
      verdicts $? "runs/gate_$n.log" 20; render "all_*" "gate_$n" ;;
    noxbench)
      timeout 400 $PY -m nox --no-venv --no-install -s bench > "runs/noxbench_$n.log" 2>&1
      verdicts $? "runs/noxbench_$n.log" 20; render "all_*" "noxbench_$n" ;;
    planted | planted5)
      git apply "$(plant "$step")" || { echo "patch does not apply" | log; continue; }
      timeout 480 $PY -m ninfer.regress bench --no-plots > "runs/planted_$n.log" 2>&1
      verdicts $? "runs/planted_$n.log"; render "all_*" "${step}_$n"
      git checkout -q -- kernels ninfer ;;
    ab | ab5)
      git apply "$(plant "$step")" || { echo "patch does not apply" | log; continue; }
      timeout 480 $PY -m ninfer.regress bench --no-plots --ab HEAD --ab-rounds "${AB_ROUNDS:-8}" \
        ${AB_QTYPE:+--qtype "$AB_QTYPE"} > "runs/ab_$n.log" 2>&1
      verdicts $? "runs/ab_$n.log"
      git checkout -q -- kernels ninfer ;;
    abref)
      # A branch of the bundle is origin/<name> in its clone (AB_REF=main failed there).
      ref=$(git rev-parse -q --verify "${AB_REF:?AB_REF=commit}^{commit}" \
        || git rev-parse -q --verify "origin/$AB_REF^{commit}" || echo "$AB_REF")
      timeout 480 $PY -m ninfer.regress bench --no-plots --ab "$ref" \
        --ab-rounds "${AB_ROUNDS:-8}" ${AB_DISPATCH:+--dispatch "$AB_DISPATCH"} \
        ${AB_SUITE_FILE:+--suite-file "$AB_SUITE_FILE"} ${AB_QTYPE:+--qtype "$AB_QTYPE"} > "runs/abref_$n.log" 2>&1
      verdicts $? "runs/abref_$n.log" ;;
    fallback)
      git apply "$(plant planted)" || { echo "patch does not apply" | log; continue; }
      mkdir -p /tmp/no-baselines
      timeout 400 $PY -m ninfer.regress bench --no-plots --baselines /tmp/no-baselines \
        --fallback-ab HEAD --ab-rounds "${AB_ROUNDS:-4}" > "runs/fallback_$n.log" 2>&1
      verdicts $? "runs/fallback_$n.log" 20; render "ab_all_*" "fallback_$n"
      git checkout -q -- kernels ninfer ;;
    asvplanted)
      ASV_HEAD=planted timeout 420 bash tools/asv_device.sh .whl/repo.bundle "$OUT/asv_planted" \
        -b "$ASV_BENCH" -f 1.05 > "runs/asv_$n.log" 2>&1
      echo "rc=$?" | log; grep -E "SIGNIFICANTLY|^\s*[+-]|ratio|Change" "runs/asv_$n.log" | tail -20 | log ;;
    tests)
      timeout 300 $PY -m pytest tests/gpu/test_bench_timer.py tests/gpu/test_gate.py -q -p no:cacheprovider 2>&1 \
        | tail -8 | log ;;
    shape)
      d=runs/q4_6144x5120
      mkdir -p "$d"
      $PY -m ninfer.bench --qtype q4 --n 6144 --k 5120 --sweep 1:128 --repeat 50 --warmup 5 \
        --json-out "$d/sweep_1_128.json" > "$d/sweep_1_128.txt" 2>&1
      $PY -m ninfer.bench --qtype q4 --n 6144 --k 5120 --sweep 512:1024:512 --repeat 50 --warmup 5 \
        --json-out "$d/sweep_512_1024.json" > "$d/sweep_512_1024.txt" 2>&1
      (cd "$d" && $PY -m ninfer.regress shape-report sweep_1_128.json sweep_512_1024.json \
        --qtype q4 --n 6144 --k 5120 --out .) 2>&1 | log ;;
    ir)
      $PY -m ninfer.bench ir --out runs/ir 2>&1 | tail -5 | log ;;
    tune)
      # shellcheck disable=SC2086  # TUNE_ARGS is a list of options
      timeout 590 $PY -m ninfer.regress tune ${TUNE_ARGS:-} > "runs/tune_$n.log" 2>&1
      echo "rc=$?" | log; grep -E "^round|wrote|re-generated|error" "runs/tune_$n.log" | tail -20 | log ;;
    abtable)
      timeout 480 $PY -m nox --no-venv --no-install -s bench -- --no-plots --ab HEAD \
        --ab-rounds "${AB_ROUNDS:-8}" > "runs/abtable_$n.log" 2>&1
      verdicts $? "runs/abtable_$n.log" ;;
    peertests)
      timeout 300 $PY -m pytest tests/gpu/test_peers.py -q -s -p no:cacheprovider > "runs/peertests_$n.log" 2>&1
      tail -15 "runs/peertests_$n.log" | log
      timeout 200 $PY -m pytest tests/gpu/test_dq_rs.py tests/gpu/test_linear_errors.py \
        tests/gpu/test_linear_contract.py -q -n 4 -p no:cacheprovider 2>&1 | tail -3 | log ;;
    ncufull)
      # The stall reasons beside the full set (ninfer-bench ncu-table's top stalls). If ncu
      # fails with them (not a timeout: that would cost the point twice), the full set
      # alone, the first attempt's page kept as <page>.metrics_failed.
      stalls=$($PY -c 'from ninfer.bench.ncu_page import STALL_METRICS as m; print(m)' 2>/dev/null)
      for p in ${NCU_POINTS:-q4:131072:5120:1}; do
        IFS=: read -r q pn pk pt <<< "$p"
        f="$OUT/ncu_${q}_${pn}x${pk}_T${pt}.txt"
        for extra in ${stalls:+"--metrics $stalls"} ""; do
          # shellcheck disable=SC2086  # extra is an option and its value, or nothing
          timeout 150 ncu --set full $extra --profile-from-start off --clock-control none \
            --page details $PY -m ninfer.bench --qtype "$q" --n "$pn" --k "$pk" --t "$pt" \
            --profile ${NCU_DISPATCH:+--dispatch "$NCU_DISPATCH"} > "$f" 2>&1
          rc=$?
          echo "$p rc=$rc${extra:+ (with the stall metrics)}" | log
          { [ "$rc" = 0 ] || [ "$rc" = 124 ] || [ "$rc" = 137 ] || [ -z "$extra" ]; } && break
          mv "$f" "$f.metrics_failed"
        done
        grep -E "^  [a-z_]+<|Duration|DRAM Throughput|Issue Slots Busy|Executed Ipc A|Achieved Occupancy|Registers Per|Executed Instructions  " "$f" | head -12 | log
      done
      $PY -m ninfer.bench ncu-table --keep-going "$OUT"/ncu_*.txt > "$OUT/ncu_table.md" 2>&1
      echo "ncu-table rc=$?" | log
      log < "$OUT/ncu_table.md" ;;
    exp)
      timeout 560 $PY tools/experiment.py "${EXP_FILE:?EXP_FILE=path}" ${EXP_ROUNDS:+--rounds "$EXP_ROUNDS"} \
        > "runs/exp_$n.log" 2>&1
      echo "rc=$?" | log; grep -vE "^\s*$" "runs/exp_$n.log" | tail -60 | cut -c1-200 | log ;;
    peers)
      $PY - "${PEER_T:-1,16,64,256,1024}" > runs/peer_table.yaml <<'PY'
import json, sys
ts = [int(t) for t in sys.argv[1].split(",")]
shapes = [(6144, 5120), (14336, 5120), (5120, 17408), (131072, 5120)]
entries = [{"label": f"{q}.{n}x{k}", "qtype": q, "n": n, "k": k, "t_class": "peer"}
           for q in ("q4", "w8") for n, k in shapes]
print(json.dumps({"suite": "peer_table", "policy": "a16", "t_classes": {"peer": ts}, "entries": entries}))
PY
      left=$(( ${DEADLINE_S:-900} - SECONDS - 10 ))
      timeout "$left" $PY -m ninfer.bench --suite-file runs/peer_table.yaml --peer cublas --peer tinygemm \
        --peer fbgemm --peer gemlite --no-progress --json-out "runs/peers_$n.json" > "runs/peers_$n.txt" 2>&1
      echo "rc=$? (limit ${left} s)" | log; grep -vE "^\s*$" "runs/peers_$n.txt" | tail -45 | cut -c1-220 | log ;;
    sweep)
      # Deliver 4: the bounded sweep of SWEEP_SUITE's shapes (sweep-plan: every T to 64, the
      # dispatch's seams, token-tile edges, a grid of 32), then the cliffs in it.
      cc=$($PY -c "import cupy; print(cupy.cuda.Device().compute_capability)")  # this GPU's table
      $PY -m ninfer.bench sweep-plan --suite "${SWEEP_SUITE:-all}" --cc "$cc" --out "runs/sweep_$n.yaml" | log
      left=$(( ${DEADLINE_S:-900} - SECONDS - 20 ))
      timeout "$left" $PY -m ninfer.bench --suite-file "runs/sweep_$n.yaml" --no-progress \
        --json-out "runs/sweep_$n.json" > "runs/sweep_$n.txt" 2>&1
      echo "rc=$? (limit ${left} s)" | log
      $PY -m ninfer.bench cliffs "runs/sweep_$n.json" > "runs/cliffs_$n.txt" 2>&1
      echo "cliffs rc=$?" | log; tail -40 "runs/cliffs_$n.txt" | cut -c1-200 | log ;;
    targets)
      # Issue 26's targets in one run: the suite and experiments/issue26/targets.yaml beside
      # cuBLAS and a plain read of each point's bytes, then `ninfer-bench targets` on both.
      # Until DEADLINE_S: the first run takes half of what is left (68 and 53 points).
      for f in all targets; do
        sel="--suite all"; [ $f = targets ] && sel="--suite-file experiments/issue26/targets.yaml"
        left=$(( ${DEADLINE_S:-900} - SECONDS - 15 )); [ $f = all ] && left=$(( left / 2 ))
        # shellcheck disable=SC2086  # sel is two words
        timeout "$left" $PY -m ninfer.bench $sel --peer cublas --peer read --no-progress \
          --json-out "runs/targets_${f}_$n.json" > "runs/targets_${f}_$n.txt" 2>&1
        echo "$f rc=$? (limit ${left} s)" | log
      done
      # shellcheck disable=SC2046  # the records that were written, one word each
      $PY -m ninfer.bench targets $(ls runs/targets_{all,targets}_"$n".json 2>/dev/null) \
        > "runs/targets_$n.md" 2>&1
      echo "targets rc=$?" | log; grep -E "^[0-9]\.[0-9] |^note" "runs/targets_$n.md" | log ;;
    *) echo "unknown step $step" | log ;;
  esac
  echo "   ($(($(date +%s) - t0)) s)" | log
  tar czf "$OUT/artifacts.tar.gz" --exclude="*/rounds/*" runs baselines ninfer/routes/tables docs/routes.md 2>/dev/null
done
ls -la "$OUT" | log

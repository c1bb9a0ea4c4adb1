#!/usr/bin/env bash
# The regression gate's noise and verdicts on a GPU box without network (issue 7): the
# noise decomposition, a baseline refresh, A/A gate runs, the planted regression and an
# asv A/A. Every step has its own time limit; logs and records go to $OUT/device.log
# and $OUT/gate_artifacts.tar.gz ($OUT defaults to runs/device).
#
# Usage (repo root): BUNDLE=.whl/repo.bundle bash tools/device_gate.sh [steps]
#   steps (in the order given; a step may repeat): smoke startup noise baseline gate noxbench
#     planted planted5 ab ab5 tests
#   smoke: one Q5 point, two allocations (the record, the arena, NVML);
#   startup: import times and a profile of one round's process (suite all);
#   noise: ninfer-regress noise, arena and pool layouts (NOISE_P processes, 2 allocs);
#   baseline: ninfer-regress baseline --suite all (BASE_SUITES to add the model suites);
#   gate: python -m ninfer.regress bench (what nox -s bench runs), CI defaults; the PR
#     comment and step summary rendered from its verdict.json into $OUT (also planted*);
#   noxbench: the README's main job itself, nox -s bench (--no-venv --no-install: no
#     network here; nox comes from .whl), plots included;
#   planted: the same with tests/fixtures/planted_w8_dec_q.patch applied (the A/B
#     confirmation measures it against the baseline's commit);
#   ab: --ab HEAD on the planted tree (the long A/B that sizes each point's planted
#     slowdown; AB_ROUNDS rounds a side; AB_QTYPE, e.g. w8, for one format's points only);
#   planted5, ab5: the same with the 5 % fixture (planted_w8_dec_q_5pct.patch);
#   abref: --ab "$AB_REF" on the unchanged tree (HEAD against an earlier commit, every
#     point: a refactor that must not slow anything);
#   tests: the GPU tests of the pipeline (tests/gpu/test_bench_timer.py, test_gate.py;
#     NINFER_GATE_POWER=1 adds the planted-regression test);
#   fallback: the no-baseline path (a GPU with no baselines/<gpu>/) on the planted tree:
#     bench --fallback-ab HEAD with AB_ROUNDS (default 4) rounds a side, and the PR
#     comment and step summary rendered from its verdict.json into $OUT;
#   asvplanted: asv continuous main -> planted (the bundle's branch `planted`, main plus
#     the 10 % fixture as a commit) on ASV_BENCH (default: 9 W8 dec_q Qwen3_6_27b points).
# DEADLINE_S: start no step that would, by its usual length, end after this many seconds
# of the script (one device call has a fixed limit; a step cut short wastes its time).
# BUNDLE: measure in a clone of the bundle's HEAD (real commit, clean tree, the history
# the A/B's worktree needs). BASELINES=dir: use these baselines/h200 files instead of
# the clone's (a baseline measured on another machine).
set -uo pipefail
SCRIPT=tools/device_gate.sh CLONE=/tmp/ninfer-gate
# A relative BASELINES names a folder of this tree; BUNDLE mode runs in a clone elsewhere.
if [ -n "${BASELINES:-}" ]; then BASELINES=$(realpath "$BASELINES") && export BASELINES; fi
# shellcheck source=tools/device_lib.sh
source "$(dirname "$0")/device_lib.sh"
device_setup "$@"
if [ -n "${BASELINES:-}" ]; then cp "$BASELINES"/*.json "$BASELINES"/*.md baselines/h200/; fi
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
git config user.email gate@ninfer.invalid && git config user.name gate
STEPS=${*:-smoke noise baseline gate gate}
mkdir -p runs
log() { tee -a "$OUT/device.log"; }
# The planted fixture a step applies: the 10 % one, or the 5 % one for steps ending in 5.
# The PR comment and step summary from the newest run folder matching $1 (what gpu-pr.yml
# renders), into $OUT/<step>_<n>_{comment,summary}.md.
render() {
  local run
  run=$(find runs -mindepth 1 -maxdepth 1 -type d -name "$1" -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
  [ -n "$run" ] && $PY ninfer/regress/verdict.py "$run" --artifact-url "https://example.invalid/artifact" \
    --comment "$OUT/$2_comment.md" --summary "$OUT/$2_summary.md" 2>&1 | log
}
plant() { [[ $1 == *5 ]] && echo tests/fixtures/planted_w8_dec_q_5pct.patch || echo tests/fixtures/planted_w8_dec_q.patch; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  echo "commit=$(git rev-parse HEAD) machine=$(hostname):$(head -c 8 /proc/sys/kernel/random/boot_id) steps=$STEPS"
} 2>&1 | log
# asv's regex ends in the quote of asv's parameter string: T1' is T=1, not T=16 or 128.
[ -n "${ASV_BENCH:-}" ] || ASV_BENCH="Qwen3_6_27b.*(mtp_gate_up|mtp_down|gdn_output_gate)/.*/T(1|16|128)'"
# Usual lengths on an H200 (docs/regress.md, docs/asv.md), for DEADLINE_S.
usual() {
  case $1 in
    gate) echo 150 ;; noxbench) echo 170 ;; planted*) echo 170 ;; abref) echo 150 ;; ab*) echo 120 ;; fallback) echo 200 ;;
    asvplanted) echo 330 ;; tests) echo 200 ;; noise) echo 420 ;; *) echo 60 ;;
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
    smoke)
      timeout 240 $PY -m ninfer.bench --qtype q5 --n 6144 --k 5120 --t 16 --repeat 10 --allocs 2 \
        --order-seed 1 --json-out "$OUT/smoke.json" 2>&1 | tail -6 | log ;;
    startup)
      # Where a round's fresh process spends the seconds outside its measured points.
      timeout 120 $PY -X importtime -c "import ninfer.bench.run" 2>&1 | sort -t'|' -k2 -n | tail -5 | log
      timeout 200 $PY -m cProfile -s cumtime -m ninfer.bench --suite all --repeat 20 --warmup 3 \
        --no-progress --order-seed 1 > "runs/startup_$n.txt" 2>&1
      grep -E "points=|function calls" "runs/startup_$n.txt" | log
      grep -A28 "Ordered by" "runs/startup_$n.txt" | cut -c1-150 | log ;;
    noise)
      timeout 420 $PY -m ninfer.regress noise --suite all --rounds "${NOISE_P:-3}" --allocs 2 \
        --memory "${NOISE_MEMORY:-both}" --markdown "runs/noise_$n.md" > "runs/noise_$n.log" 2>&1
      echo "rc=$?" | log; head -12 "runs/noise_$n.md" 2>/dev/null | log; tail -12 "runs/noise_$n.md" 2>/dev/null | log ;;
    baseline)
      for s in ${BASE_SUITES:-all}; do
        timeout 300 $PY -m ninfer.regress baseline --suite "$s" --rounds "${BASE_ROUNDS:-10}" \
          --reason "re-measured with round records (issue 7) at $(git rev-parse --short HEAD)" 2>&1 | tail -3 | log
      done ;;
    gate)
      timeout 400 $PY -m ninfer.regress bench --no-plots > "runs/gate_$n.log" 2>&1
      echo "rc=$?" | log; grep -E "^(PASS|FAIL|UNDECIDED)|confirming|not confirmed|->" "runs/gate_$n.log" | tail -20 | log
      render "all_*" "gate_$n" ;;
    noxbench)
      timeout 400 $PY -m nox --no-venv --no-install -s bench > "runs/noxbench_$n.log" 2>&1
      echo "rc=$?" | log; grep -E "^(PASS|FAIL|UNDECIDED)|confirming|->|^nox >" "runs/noxbench_$n.log" | tail -20 | log
      run=$(find runs -mindepth 1 -maxdepth 1 -type d -name "all_*" -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
      ls "$run" "$run/plots" 2>&1 | head -20 | log
      render "all_*" "noxbench_$n" ;;
    planted | planted5)
      git apply "$(plant "$step")" || { echo "patch does not apply" | log; continue; }
      timeout 480 $PY -m ninfer.regress bench --no-plots > "runs/planted_$n.log" 2>&1
      echo "rc=$?" | log; grep -E "^(PASS|FAIL|UNDECIDED)|confirming|->" "runs/planted_$n.log" | tail -30 | log
      render "all_*" "${step}_$n"
      git checkout -q -- kernels ninfer ;;
    ab | ab5)
      git apply "$(plant "$step")" || { echo "patch does not apply" | log; continue; }
      timeout 480 $PY -m ninfer.regress bench --no-plots --ab HEAD --ab-rounds "${AB_ROUNDS:-8}" \
        ${AB_QTYPE:+--qtype "$AB_QTYPE"} > "runs/ab_$n.log" 2>&1
      echo "rc=$?" | log; grep -E "^(PASS|FAIL|UNDECIDED)|slower|faster" "runs/ab_$n.log" | tail -30 | log
      git checkout -q -- kernels ninfer ;;
    abref)
      timeout 480 $PY -m ninfer.regress bench --no-plots --ab "${AB_REF:?AB_REF=commit}" \
        --ab-rounds "${AB_ROUNDS:-8}" > "runs/abref_$n.log" 2>&1
      echo "rc=$?" | log; grep -E "^(PASS|FAIL|UNDECIDED)|slower|faster" "runs/abref_$n.log" | tail -30 | log ;;
    fallback)
      git apply "$(plant planted)" || { echo "patch does not apply" | log; continue; }
      mkdir -p /tmp/no-baselines
      timeout 400 $PY -m ninfer.regress bench --no-plots --baselines /tmp/no-baselines \
        --fallback-ab HEAD --ab-rounds "${AB_ROUNDS:-4}" > "runs/fallback_$n.log" 2>&1
      echo "rc=$?" | log; grep -E "^(PASS|FAIL|UNDECIDED)|no baseline|slower" "runs/fallback_$n.log" | tail -20 | log
      render "ab_all_*" "fallback_$n"
      git checkout -q -- kernels ninfer ;;
    asvplanted)
      ASV_HEAD=planted timeout 420 bash tools/asv_device.sh .whl/repo.bundle "$OUT/asv_planted" \
        -b "$ASV_BENCH" \
        -f 1.05 > "runs/asv_$n.log" 2>&1
      echo "rc=$?" | log; grep -E "SIGNIFICANTLY|^\s*[+-]|ratio|Change" "runs/asv_$n.log" | tail -20 | log ;;
    tests)
      timeout 300 $PY -m pytest tests/gpu/test_bench_timer.py tests/gpu/test_gate.py -q -p no:cacheprovider 2>&1 \
        | tail -8 | log ;;
    *) echo "unknown step $step" | log ;;
  esac
  echo "   ($(( $(date +%s) - t0 )) s)" | log
  # After every step: a call cut short still brings back what finished.
  tar czf "$OUT/gate_artifacts.tar.gz" --exclude="*/rounds/*" runs baselines/h200 2>/dev/null
done
ls -la "$OUT" | log

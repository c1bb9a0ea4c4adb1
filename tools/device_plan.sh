#!/usr/bin/env bash
# One device call made of several tools/device.sh runs, each with its own settings (a
# branch of the bundle, an A/B suite, the GPU tests), within one time budget: the call's
# command stays short and the plan is kept in the repository beside its experiments.
#
# Usage (repo root): [BUDGET_S=560] bash tools/device_plan.sh PLAN
# PLAN: one run a line, `name: VAR=value ... -- step ...` (blank lines and # comments
# skipped); values are shell words (quote those with spaces). Each run's logs go to
# $OUT/<name>/ (device.sh's $OUT), and it gets DEADLINE_S = what is left of BUDGET_S, so a
# step that would end past the budget is skipped and said so; a run after the budget is
# spent is skipped whole.
# e.g. a line: cand: BUNDLE=.whl/repo.bundle BUNDLE_REV=issue26-candidate AB_REF=main -- abref
set -uo pipefail
plan=${1:?usage: bash tools/device_plan.sh PLAN}
[ -r "$plan" ] || { echo "no plan file $plan" >&2; exit 2; }
budget=${BUDGET_S:-560}
out=$(realpath -m "${OUT:-runs/device}")
mkdir -p "$out"
names=() settings=() stepss=()
while IFS= read -r line || [ -n "$line" ]; do  # every line checked before any run
  line=${line%%#*}
  [ -n "${line//[[:space:]]/}" ] || continue
  rest=${line#*:}
  if [ "$rest" = "$line" ] || [ "${rest%%--*}" = "$rest" ]; then
    echo "device_plan: $plan: expected 'name: VAR=value ... -- step ...', got: $line" >&2
    exit 2
  fi
  names+=("${line%%:*}") settings+=("${rest%%--*}") stepss+=("${rest#*--}")
done < "$plan"
for i in "${!names[@]}"; do
  name=${names[$i]// /}
  left=$((budget - SECONDS))
  if [ "$left" -le 0 ]; then
    echo "== plan $name: skipped, the budget of $budget s is spent" | tee -a "$out/plan.log"
    continue
  fi
  echo "== plan $name (at ${SECONDS} s, $left s left):${settings[$i]}--${stepss[$i]}" \
    | tee -a "$out/plan.log"
  # The line's words as device.sh's environment: eval, since a plan is the repository's
  # own file (its values may be quoted).
  eval "env OUT=\"$out/$name\" DEADLINE_S=$left ${settings[$i]} bash tools/device.sh ${stepss[$i]}" \
    2>&1 | tail -40 >> "$out/plan.log"
done
echo "== plan done at ${SECONDS} s" | tee -a "$out/plan.log"

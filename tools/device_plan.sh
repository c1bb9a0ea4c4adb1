#!/usr/bin/env bash
# One device call made of several tools/device.sh runs, each with its own settings (a
# branch of the bundle, an A/B suite, the GPU tests), within one time budget: the call's
# command stays short and the plan is kept in the repository beside its experiments.
#
# Usage (repo root): [BUDGET_S=560] bash tools/device_plan.sh PLAN
# PLAN: one run a line, `name: VAR=value ... -- step ...`; blank lines and lines that start
# with # are skipped. After the name the line is shell words (quote a value with spaces;
# a quoted value may hold -- or #): settings up to the first word that is -- alone, then
# device.sh's steps. Each run's logs go to $OUT/<name>/ (device.sh's $OUT), and it gets
# DEADLINE_S = what is left of BUDGET_S (device.sh then starts no step that would end past
# it) under a `timeout` of the same (a started step is stopped there too); a run after the
# budget is spent is skipped. Every line is checked before the first run: a name of
# [A-Za-z0-9_.-], settings VAR=value, at least one step and each one device.sh has.
# e.g. a line: cand: BUNDLE=.whl/repo.bundle BUNDLE_REV=issue26-candidate AB_REF=main -- abref
set -uo pipefail
plan=${1:?usage: bash tools/device_plan.sh PLAN}
[ -r "$plan" ] || { echo "no plan file $plan" >&2; exit 2; }
budget=${BUDGET_S:-560}
out=$(realpath -m "${OUT:-runs/device}")
here=$(dirname "$0")
known=" $(sed -n '/^  case \$step in/,/^  esac/p' "$here/device.sh" | grep -oE '^    [a-z0-9 |]+\)' \
  | tr -d ' )' | tr '|' ' ' | tr '\n' ' ') "
bad() { echo "device_plan: $plan: $1, got: $2" >&2; exit 2; }
names=() settings=() stepss=()
while IFS= read -r line || [ -n "$line" ]; do  # every line checked before any run
  line=${line%$'\r'}
  [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
  name=${line%%:*}
  [[ "$line" == *:* && "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || bad "expected a name of [A-Za-z0-9_.-] and ':'" "$line"
  # The rest as shell words (eval: a plan is the repository's own file, its values may be
  # quoted); the first word that is -- alone ends the settings.
  eval "words=( ${line#*:} )" 2>/dev/null || bad "shell words after the name" "$line"
  sets=() steps=() sep=0
  for w in "${words[@]}"; do
    if [ "$sep" = 0 ] && [ "$w" = "--" ]; then sep=1
    elif [ "$sep" = 0 ]; then sets+=("$w")
    else steps+=("$w"); fi
  done
  [ "$sep" = 1 ] || bad "expected 'name: VAR=value ... -- step ...'" "$line"
  for w in "${sets[@]}"; do [[ "$w" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || bad "settings as VAR=value" "$w"; done
  [ "${#steps[@]}" -gt 0 ] || bad "at least one step (none runs device.sh's defaults)" "$line"
  for w in "${steps[@]}"; do [[ "$known" == *" $w "* ]] || bad "steps of tools/device.sh" "$w"; done
  q=""; for w in "${sets[@]}"; do q+=" $(printf %q "$w")"; done
  names+=("$name") settings+=("$q") stepss+=("$(printf ' %q' "${steps[@]}")")
done < "$plan"
mkdir -p "$out"
for i in "${!names[@]}"; do
  name=${names[$i]}
  left=$((budget - SECONDS))
  if [ "$left" -le 10 ]; then
    echo "== plan $name: skipped, the budget of $budget s is spent" | tee -a "$out/plan.log"
    continue
  fi
  echo "== plan $name (at ${SECONDS} s, $left s left):${settings[$i]} --${stepss[$i]}" \
    | tee -a "$out/plan.log"
  # The settings (quoted again by printf %q above) as device.sh's environment.
  eval "timeout -k 10 $left env OUT=$(printf %q "$out/$name") DEADLINE_S=$left ${settings[$i]} \
    bash $(printf %q "$here/device.sh") ${stepss[$i]}" 2>&1 | tail -40 >> "$out/plan.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || echo "== plan $name: stopped at the budget" | tee -a "$out/plan.log"
done
echo "== plan done at ${SECONDS} s" | tee -a "$out/plan.log"

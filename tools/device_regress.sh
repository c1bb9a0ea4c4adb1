#!/usr/bin/env bash
# The regression pipeline end to end on a GPU box without network (issue 4): conformance,
# committed-baseline measurement, two `nox -s bench` runs (a real A/A against the
# baselines and against each other), the Q4 [6144,5120] per-shape report and the IR dump.
# Everything lands in $OUT/artifacts.tar.gz plus one log; $OUT defaults to runs/device.
#
# Usage (repo root): [BUNDLE=.whl/repo.bundle] bash tools/device_regress.sh [steps]
#   steps: any of conformance baseline aa shape ir (default: all of them)
# Wheels for the missing packages (jsonschema, nox, ...) travel in .whl/ (docs/regress.md).
set -uo pipefail
OUT=${OUT:-runs/device}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
# BUNDLE=path/to/repo.bundle: measure in a clone of that bundle's HEAD, so the records
# carry the real commit and a clean (not dirty) tree; the wheels come along.
if [ -n "${BUNDLE:-}" ] && [ -z "${NINFER_IN_CLONE:-}" ]; then
  clone=/tmp/ninfer-clone
  rm -rf "$clone" && git clone -q "$BUNDLE" "$clone" || exit 1
  git -C "$clone" checkout -q --detach "$(git bundle list-heads "$BUNDLE" | awk '$2=="HEAD"{print $1}')" || exit 1
  cp -r .whl "$clone/" 2>/dev/null
  cd "$clone" && NINFER_IN_CLONE=1 OUT="$OUT" exec bash tools/device_regress.sh "$@"
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
STEPS=${*:-conformance baseline aa shape ir}
NOX="$PY -m nox --no-venv --no-install"
REASON=${REASON:-"measured by tools/device_regress.sh at $(git rev-parse --short HEAD 2>/dev/null || echo '?')"}
has() { [[ " $STEPS " == *" $1 "* ]]; }
{
  nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.mem --format=csv
  git --version 2>&1 | head -1
  echo "commit=$(git rev-parse HEAD 2>/dev/null || echo "${NINFER_GIT_COMMIT:-?}") steps=$STEPS"
} 2>&1 | tee "$OUT/device.log"

if has conformance; then
  echo "== conformance (nox)" | tee -a "$OUT/device.log"
  ( time $NOX -s conformance -- -q -p no:cacheprovider ) 2>&1 | tail -25 | tee -a "$OUT/device.log"
fi
if has baseline; then
  for suite in all qwen3_6_27b qwen3_6_35b_a3b; do
    echo "== baseline $suite" | tee -a "$OUT/device.log"
    $NOX -s baseline -- --suite "$suite" --reason "$REASON" 2>&1 | tail -4 | tee -a "$OUT/device.log"
  done
fi
if has aa; then
  for i in 1 2; do
    echo "== nox -s bench, A/A run $i against baselines/" | tee -a "$OUT/device.log"
    ( time $NOX -s bench ) 2>&1 | tail -12 | tee -a "$OUT/device.log"
  done
  mapfile -t runs < <(ls -d runs/all_* 2>/dev/null | sort | tail -2)
  if [ "${#runs[@]}" -eq 2 ]; then
    echo "== A/A: ${runs[0]} vs ${runs[1]}" | tee -a "$OUT/device.log"
    $PY -m ninfer.regress compare "${runs[0]}/results.json" "${runs[1]}/results.json" 2>&1 | tail -8 | tee -a "$OUT/device.log"
  else
    echo "== A/A: fewer than two runs/all_* folders; nothing to compare" | tee -a "$OUT/device.log"
  fi
fi
if has shape; then
  echo "== Q4 [6144,5120] sweep for the per-shape report" | tee -a "$OUT/device.log"
  d=docs/perf/q4_6144x5120_h200
  mkdir -p "$d"
  $PY -m ninfer.bench --qtype q4 --n 6144 --k 5120 --sweep 1:128 --repeat 50 --warmup 5 --no-progress \
    --json-out "$d/sweep_1_128.json" > "$d/sweep_1_128.txt" 2>&1
  $PY -m ninfer.bench --qtype q4 --n 6144 --k 5120 --sweep 512:1024:512 --repeat 50 --warmup 5 --no-progress \
    --json-out "$d/sweep_512_1024.json" > "$d/sweep_512_1024.txt" 2>&1
  tail -2 "$d/sweep_1_128.txt" | tee -a "$OUT/device.log"
  (cd "$d" && $PY -m ninfer.regress shape-report sweep_1_128.json sweep_512_1024.json \
    --qtype q4 --n 6144 --k 5120 --out .) 2>&1 | tee -a "$OUT/device.log"
fi
if has ir; then
  echo "== ninfer-bench ir" | tee -a "$OUT/device.log"
  $PY -m ninfer.bench ir --out ir_h200 2>&1 | tail -5 | tee -a "$OUT/device.log"
fi
tar czf "$OUT/artifacts.tar.gz" baselines runs/all_* docs/perf/q4_6144x5120_h200 ir_h200 2>/dev/null
git status --porcelain --untracked-files=no | head -20 | tee -a "$OUT/device.log"
ls -la "$OUT" | tee -a "$OUT/device.log"

# shellcheck shell=bash
# Shared by the device scripts (sourced, not run): the
# output folder, the re-run inside a clone of a git bundle, the log header and the GPU
# conformance step. Callers set SCRIPT (their path in the repo) and CLONE (a scratch
# folder) before sourcing, then call device_setup "$@".

# OUT (default runs/device) as an absolute path; in BUNDLE mode, re-run SCRIPT inside a
# fresh clone of the bundle's HEAD (records then carry the real commit and dirty=false),
# after tools/device_regress.sh conformance baseline when BASELINE is set. Returns only
# when running in the final tree.
device_setup() {
  OUT=${OUT:-runs/device}
  mkdir -p "$OUT"
  OUT=$(realpath "$OUT")
  # Both scripts write sweep_<q>.{json,txt}, their tables and device.log: the second one run
  # into the same OUT (one device call running both) writes into a subfolder of its own,
  # instead of overwriting the first one's files.
  if [ -f "$OUT/.device_script" ] && [ "$(cat "$OUT/.device_script")" != "$SCRIPT" ]; then
    OUT="$OUT/$(basename "$SCRIPT" .sh)"
    mkdir -p "$OUT"
    echo "$SCRIPT: $OUT/.. holds another script's output; writing to $OUT" >&2
  fi
  echo "$SCRIPT" > "$OUT/.device_script"
  if [ -n "${BUNDLE:-}" ] && [ -z "${NINFER_IN_CLONE:-}" ]; then
    rm -rf "$CLONE" && git clone -q "$BUNDLE" "$CLONE" || exit 1
    git -C "$CLONE" checkout -q --detach "$(git bundle list-heads "$BUNDLE" | awk '$2=="HEAD"{print $1}')" || exit 1
    cp -r .whl "$CLONE/" 2>/dev/null
    cd "$CLONE" || exit 1
    if [ -n "${BASELINE:-}" ]; then
      NINFER_IN_CLONE=1 OUT="$OUT" bash tools/device_regress.sh conformance baseline
    fi
    NINFER_IN_CLONE=1 OUT="$OUT" exec bash "$SCRIPT" "$@"
  fi
  export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
  PY=${PYTHON:-python3}
}

has() { [[ " $STEPS " == *" $1 "* ]]; }

# GPU, driver, clocks, commit and steps, appended to $OUT/device.log.
device_header() {
  {
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
    echo "commit=$(git rev-parse HEAD 2>/dev/null || echo "${NINFER_GIT_COMMIT:-?}") steps=$STEPS"
  } 2>&1 | tee -a "$OUT/device.log"
}

# The GPU suite (xdist, worst error per format to $OUT/conformance_worst.json), then the
# timing tests alone (they must not share the GPU).
device_conformance() {
  echo "== conformance" | tee -a "$OUT/device.log"
  NINFER_CONFORMANCE_JSON="$OUT/conformance_worst.json" timeout 400 $PY -m pytest tests -m "gpu and not timing" \
    -q -x -n 4 -p no:cacheprovider 2>&1 | tail -25 | tee "$OUT/conformance.log" | tail -6 | tee -a "$OUT/device.log"
  timeout 120 $PY -m pytest tests -m "gpu and timing" -q -p no:cacheprovider 2>&1 | tail -8 \
    | tee "$OUT/conformance_timing.log" | tail -3 | tee -a "$OUT/device.log"
}

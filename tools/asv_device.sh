#!/usr/bin/env bash
# `asv continuous main HEAD` on a machine without network (the device H200), from a git
# bundle: the device gets the working tree without .git, and asv needs the history.
#
# Usage: bash tools/asv_device.sh <bundle> <outdir> [more `asv continuous` arguments]
#   e.g. bash tools/asv_device.sh .whl/repo.bundle "$OUT" -b Qwen3_6_27b
# The bundle holds main and the commit under test (git bundle create repo.bundle main HEAD).
#
# Before: asv and virtualenv with their dependencies importable by $PYTHON, e.g. the
# wheels of .whl installed with `pip install --no-deps --target /tmp/site` (ASV_SITE,
# put first on PYTHONPATH here). asv strips PYTHONPATH from what it runs inside its
# environments, so those get their own packages from wheels instead: ASV_WHEELS (default:
# the bundle's folder) must also hold asv_runner, pympler, hatchling and their
# dependencies (docs/asv.md lists them). Everything else (numpy, scipy, pyyaml,
# ml_dtypes, cupy) comes from the system site-packages.
#
# Writes <outdir>/asv_continuous.txt (also printed), asv_compare.txt (every point, not
# only the changed ones) and asv_results/ (the result JSON, samples included).
# Exit status: asv continuous's (1 when a benchmark got slower or failed).
set -uo pipefail

if [ $# -lt 2 ]; then
  echo "usage: bash tools/asv_device.sh <bundle> <outdir> [asv continuous args...]" >&2
  exit 2
fi
bundle=$(realpath "$1")
mkdir -p "$2"
out=$(realpath "$2")
shift 2
PY=${PYTHON:-python3}
site=${ASV_SITE:-/tmp/site}
wheels=$(realpath "${ASV_WHEELS:-$(dirname "$bundle")}")
machine=${ASV_MACHINE:-device}
base=${ASV_BASE:-main}
head=${ASV_HEAD:-HEAD}

if [ -d "$site" ]; then
  # First, so the carried packaging/filelock win over older system copies.
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1

# A fresh clone: the branches of the bundle, and its HEAD checked out when it has one
# (that working tree supplies asv.conf.json and the benchmark suite for both commits).
work=$(mktemp -d "${TMPDIR:-/tmp}/ninfer-asv.XXXXXX")
repo="$work/repo"
git init -q "$repo" || exit 1
git -C "$repo" fetch -q --update-head-ok "$bundle" '+refs/heads/*:refs/heads/*' || exit 1
if git bundle list-heads "$bundle" | grep -q ' HEAD$'; then
  git -C "$repo" fetch -q "$bundle" HEAD && git -C "$repo" checkout -q --detach FETCH_HEAD
else
  git -C "$repo" checkout -q "$base"
fi || exit 1
cd "$repo" || exit 1
echo "asv: $(git log -1 --format='%h %s' "$base") <- base"
echo "asv: $(git log -1 --format='%h %s' "$head") <- head"

# Offline: asv's virtualenvs see the system site-packages (cupy, numpy, scipy, ...);
# their pip takes nothing from an index, only the wheels in $wheels (asv_runner,
# pympler, hatchling and its dependencies: asv's base requirements).
export VIRTUALENV_SYSTEM_SITE_PACKAGES=1
# The device's python3 is itself a venv (/opt/torch/.venv) and a virtualenv made from it
# sees the *base* interpreter's site-packages, not the venv's cupy/numpy. asv replaces
# PYTHONPATH inside its environments with ASV_PYTHONPATH: point it at a sitecustomize
# that APPENDS the interpreter's site-packages, so the environment's own packages
# (ninfer, packaging, hatchling) still come first.
syspath="$work/syspath"
mkdir -p "$syspath"
"$PY" - "$syspath/sitecustomize.py" <<'PY' || exit 1
import site, sys
paths = [p for p in site.getsitepackages() if "/tmp/site" not in p]
open(sys.argv[1], "w").write(
    "import sys\n"
    f"for p in {paths!r}:\n"
    "    if p not in sys.path:\n"
    "        sys.path.append(p)\n"
)
PY
export ASV_PYTHONPATH="$syspath"
export PIP_NO_INDEX=1 PIP_FIND_LINKS="$wheels" PIP_DISABLE_PIP_VERSION_CHECK=1
# The one change to asv.conf.json: install the built wheel without dependencies, since
# the system provides them and pip could not fetch a missing or older one anyway (the
# benchmarks then fail loudly in setup instead of the install failing halfway).
"$PY" - <<'PY' || exit 1
import json
conf = json.load(open("asv.conf.json"))
conf["install_command"] = ["in-dir={env_dir} python -m pip install --no-deps {wheel_file}"]
json.dump(conf, open("asv-offline.conf.json", "w"), indent=4)
PY
asv=("$PY" -m asv --config asv-offline.conf.json)

"${asv[@]}" machine --yes --machine "$machine" >/dev/null || exit 1
"${asv[@]}" continuous --machine "$machine" --show-stderr "$@" "$base" "$head" 2>&1 \
  | tee "$out/asv_continuous.txt"
rc=${PIPESTATUS[0]}
"${asv[@]}" compare --machine "$machine" "$base" "$head" >"$out/asv_compare.txt" 2>&1
if [ -d .asv/results ]; then
  rm -rf "$out/asv_results" && cp -r .asv/results "$out/asv_results"
fi
echo "asv: exit $rc; outputs in $out; clone in $repo"
exit "$rc"

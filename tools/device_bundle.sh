#!/usr/bin/env bash
# A git bundle for device calls (tools/device.sh's BUNDLE): HEAD at REV (default: this
# checkout's HEAD; a branch, to run a branch's A/B from a checkout of another), main (the
# A/B's usual base), and the two branches the gate checks use: `planted` (main plus
# tests/fixtures/planted_w8_dec_q.patch as a commit) and `aa` (main plus a docs-only
# commit), built in a scratch clone; the checkout itself is not touched.
#
# Usage (repo root): bash tools/device_bundle.sh [REV] [OUT] [BRANCH...]
#   (OUT: .whl/repo.bundle; each BRANCH is bundled too, under its name)
#   e.g. bash tools/device_bundle.sh dec-q-split .whl/split.bundle, then in the device
#   call BUNDLE=.whl/split.bundle bash tools/device.sh abref (with carry [".whl"]);
#   or bash tools/device_bundle.sh HEAD .whl/repo.bundle br1 br2 and BUNDLE_REV=br1 in the
#   call: one bundle (the history once) for several branches' steps.
set -euo pipefail
rev=$(git rev-parse --verify "${1:-HEAD}^{commit}")
out=${2:-.whl/repo.bundle}
extra=("${@:3}")
for b in "${extra[@]}"; do git rev-parse -q --verify "refs/heads/$b" >/dev/null || { echo "no branch $b" >&2; exit 2; }; done
mkdir -p "$(dirname "$out")"
out=$(realpath "$out")
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git clone -q . "$scratch/repo"
(
  cd "$scratch/repo"
  # The clone has a local main only when main was checked out here: take origin's.
  git checkout -q --detach && git branch -qf main origin/main
  git -c user.email=bundle@ninfer.invalid -c user.name=bundle checkout -qb planted main
  git apply tests/fixtures/planted_w8_dec_q.patch
  git -c user.email=bundle@ninfer.invalid -c user.name=bundle commit -qam "planted 10 % (device checks only)"
  git checkout -qb aa main
  echo >> docs/asv.md
  git -c user.email=bundle@ninfer.invalid -c user.name=bundle commit -qam "docs-only (asv A/A)"
  for b in "${extra[@]}"; do git branch -qf "$b" "origin/$b"; done
  git checkout -q --detach "$rev"
  git bundle create "$out" HEAD main planted aa "${extra[@]}" 2>/dev/null
)
echo "$out: HEAD $(git rev-parse --short "$rev"), main $(git rev-parse --short main)${extra:+, ${extra[*]}}"

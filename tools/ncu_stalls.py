"""Stall samples per SASS opcode from Nsight Compute's source page.

Input: ``ncu -i REPORT --page source --csv --print-source sass > X_sass.csv`` (what
``tools/device_prefill.sh ncuabl`` writes for each variant). Prints, per file, the total
of every stall reason, then the opcodes with the most samples and their reasons: where
the warps of a kernel wait, by instruction kind (docs/perf/prefill_h200.md, "Why the
decode and the MMAs do not overlap").

    python tools/ncu_stalls.py full_sass.csv decode_only_sass.csv [--top 14]
"""

from __future__ import annotations

import argparse
import collections
import csv
import sys


def summary(path: str, top: int) -> list[str]:
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    hdr = next(r for r in rows if "Source" in r and "Address" in r)
    data = [
        dict(zip(hdr, r, strict=True)) for r in rows[rows.index(hdr) + 1 :] if len(r) == len(hdr)
    ]
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    total: collections.Counter[str] = collections.Counter()
    by_op: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for d in data:
        words = d["Source"].split()
        if not words:
            continue
        op = (words[1] if words[0].startswith("@") and len(words) > 1 else words[0]).split(".")[0]
        for r in reasons:
            n = int(d[r] or 0)
            if n:
                by_op[op][r[6:]] += n
                total[r[6:]] += n
        by_op[op]["#samples"] += int(d["Warp Stall Sampling (All Samples)"] or 0)
        by_op[op]["#executed"] += int(float(d["Instructions Executed"] or 0))
    out = [
        f"== {path}: {sum(total.values())} samples; "
        + ", ".join(f"{k}={n}" for k, n in total.most_common())
    ]
    for op, c in sorted(by_op.items(), key=lambda kv: -kv[1]["#samples"])[:top]:
        why = ", ".join(f"{k}={n}" for k, n in c.most_common() if not k.startswith("#"))
        out.append(f"  {op:10s} samples={c['#samples']:6d} executed={c['#executed']:9d}  {why}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--top", type=int, default=14)
    args = ap.parse_args()
    for p in args.csv:
        print("\n".join(summary(p, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``ninfer-bench ir-diff A B``: what a change did to the compiled kernels, from two
``ninfer-bench ir`` outputs (their ``index.tsv``): the instances whose SASS differs, with
registers, stack, spill instructions (LDL/STL) and the main loop's length before and after;
new spills first, since a spill is what an A/B on the GPU then has to explain. No GPU.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from .args import HelpFormatter

KEY = ("arch", "kernel")
# The columns compared (index.tsv's names) and how the table heads them.
FIELDS = (("regs", "regs"), ("stack", "stack"), ("ldl_stl", "LDL/STL"), ("loop_instrs", "loop"),
          ("sass_instrs", "instrs"))  # fmt: skip
# The index.tsv columns read here: names of ir.py's COLUMNS (tests/cpu/test_ir_diff.py).
NEED = frozenset({*KEY, "route", "sass_sha256", *(c for c, _ in FIELDS)})


Index = dict[tuple[str, str], dict[str, str]]  # (arch, kernel) -> an index.tsv row


class IrDiffError(ValueError):
    """An input that is not an ``ir`` output: which path, what was expected."""


def read_index(path: Path) -> Index:
    """(arch, kernel) -> the row of ``path`` (an ``ir --out`` folder or its index.tsv)."""
    f = path / "index.tsv" if path.is_dir() else path
    try:
        with f.open(newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
    except OSError as e:
        raise IrDiffError(f"{path}: expected an `ninfer-bench ir --out` folder, got {e}") from None
    if not rows or NEED - set(rows[0]):
        raise IrDiffError(
            f"{f}: expected index.tsv rows with columns {sorted(NEED)}, "
            f"got {sorted(rows[0]) if rows else 'no rows'}"
        )
    return {(r["arch"], r["kernel"]): r for r in rows}


def _spills(r: dict[str, str]) -> bool:
    # ir writes "-" where cuobjdump reported nothing (no stack figure): unknown, not a spill.
    return any(r[c].isdigit() and int(r[c]) > 0 for c in ("ldl_stl", "stack"))


def diff(a: Index, b: Index) -> dict[str, list[dict[str, str]]]:
    """The instances only in A, only in B, and in both with different SASS (each row:
    arch, route, kernel and "before -> after" per FIELDS, new spills first)."""
    changed = []
    for k in sorted(a.keys() & b.keys()):
        ra, rb = a[k], b[k]
        if ra["sass_sha256"] == rb["sass_sha256"]:
            continue
        row = {"arch": k[0], "route": rb["route"], "kernel": k[1]}
        for col, head in FIELDS:
            row[head] = ra[col] if ra[col] == rb[col] else f"{ra[col]} -> {rb[col]}"
        row["new spill"] = "yes" if _spills(rb) and not _spills(ra) else ""
        changed.append(row)
    changed.sort(key=lambda r: r["new spill"] != "yes")  # stable: by (arch, kernel) otherwise
    only = [{"arch": k[0], "kernel": k[1]} for k in sorted(a.keys() - b.keys())]
    new = [{"arch": k[0], "kernel": k[1]} for k in sorted(b.keys() - a.keys())]
    return {"changed": changed, "only_a": only, "only_b": new}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="ninfer-bench ir-diff",
        description="The kernel instances whose SASS differs between two `ninfer-bench ir`\n"
        "outputs, with registers, stack, spills and loop length before -> after (no GPU).",
        formatter_class=HelpFormatter,
    )
    ap.add_argument("a", type=Path, help="the earlier ir --out folder (or its index.tsv)")
    ap.add_argument("b", type=Path, help="the later one")
    args = ap.parse_args(argv)
    try:
        a, b = read_index(args.a), read_index(args.b)
    except IrDiffError as e:
        print(f"ninfer-bench ir-diff: error: {e}", file=sys.stderr)
        return 2
    d = diff(a, b)
    from tabulate import tabulate

    spills = sum(r["new spill"] == "yes" for r in d["changed"])
    print(f"{len(d['changed'])} of {len(a.keys() & b.keys())} instances in both differ in SASS; "
          f"{spills} with a new spill")  # fmt: skip
    if d["changed"]:
        print(tabulate(d["changed"], headers="keys", tablefmt="github"))
    for name, rows in (("only in A", d["only_a"]), ("only in B", d["only_b"])):
        if rows:
            print(f"\n{name}: " + ", ".join(f"{r['arch']} {r['kernel']}" for r in rows))
    return 0

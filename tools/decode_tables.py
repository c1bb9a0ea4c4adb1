"""The issue-5 target tables of docs/perf/decode_h200.md, from the committed JSON.

    python tools/decode_tables.py [docs/perf/decode_h200]

Reads decode_heads.json, decode_14336.json, decode_q4_6144.json, sweep_<q>.json and
read_floor.json (all written by tools/device_decode.sh on the H200) and prints
markdown: every number below comes from those files.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from sweep_steps import largest_step  # tools/ is the script's sys.path[0]

QTYPES = ("q4", "q5", "q6", "w8", "nvfp4", "bf16")
VS_CUBLAS = {"q4": 2.8, "nvfp4": 2.8, "q5": 2.3, "q6": 2.0, "w8": 1.6, "bf16": 1.0}


def _load(d: Path, name: str) -> Any:
    return json.loads((d / name).read_text())


def _ok(flag: bool) -> str:
    return "met" if flag else "**missed**"


HEADS = ("27b.output_head", "27b.draft_head", "35b.output_head", "35b.draft_head")


def _target1(p: Any) -> str:
    if p["labels"][0] not in HEADS:
        return "extra (another format, same geometry)"
    if p["bytes"]["weight_bytes"] < 256e6:
        return "named, but < 256 MB"
    return _ok(p["metrics"]["READ_pct"] >= 88)


def main(argv: list[str]) -> int:
    d = Path(argv[0] if argv else "docs/perf/decode_h200")
    heads = _load(d, "decode_heads.json")
    mid = _load(d, "decode_14336.json")
    q4 = _load(d, "decode_q4_6144.json")
    env = heads["environment"]
    print(f"Measured on {env['gpu_name']} (cc {env['cc']}, {env['sms']} SMs), commit "
          f"`{env['commit'][:10]}` (dirty: {env['dirty']}), kernels `{env['kernel_fingerprint']}`; "
          f"cold L2 (256 MiB flush), graph replay, warmup 3, repeat 20, medians.\n")  # fmt: skip

    print("### Target 1 — T=1 on the heads: READ_% >= 88\n")
    print(
        "| point | format | [N,K] | weight MB | median us | READ_% | plain read of the same bytes | cuBLAS us | target |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    floor = {r["label"]: r for r in _load(d, "read_floor.json")}
    floor_by = {
        "q6 248320x5120": floor.get("q6 248320x5120"),
        "q4 131072x5120": floor.get("q4 131072x5120"),
    }
    for p in heads["points"]:
        key = f"{p['qtype']} {p['n']}x{p['k']}"
        fl = floor_by.get(key)
        fl_txt = f"{fl['bytes'] / fl['cold_us'] / 1e3 / 4550 * 100:.0f} %" if fl else "-"
        print(f"| {'+'.join(p['labels'])} | {p['qtype']} | [{p['n']},{p['k']}] | "
              f"{p['bytes']['weight_bytes'] / 1e6:.0f} | {p['median_us']:.1f} | {p['metrics']['READ_pct']:.1f} | "
              f"{fl_txt} | {p['peers']['cublas']['median_us']:.1f} | "
              f"{_target1(p)} |")  # fmt: skip

    by = {(p["labels"][0], p["t"]): p for p in mid["points"]}
    print("\n### Targets 2, 4, 5 — [14336,5120]\n")
    print(
        "| format | T=1 us | READ_% (>= 75) | cuBLAS T=1 | x vs cuBLAS T=1 | T=16 us | x T=16 | T=64 us | x T=64 (>= 1.3) | T16/T1 (<= 1.3) | T64/T1 (<= 2.0) |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for q in (*QTYPES, "nvfp4_a4"):
        lab = f"{q}.14336x5120"
        p1, p16, p64 = by[(lab, 1)], by[(lab, 16)], by[(lab, 64)]

        def sp(p: Any) -> float:
            return float(p["peers"]["cublas"]["median_us"] / p["median_us"])

        want = VS_CUBLAS[q.split("_")[0]]
        r16, r64 = p16["median_us"] / p1["median_us"], p64["median_us"] / p1["median_us"]
        quant = q != "bf16"
        print(f"| {q} | {p1['median_us']:.1f} | {p1['metrics']['READ_pct']:.1f} ({_ok(p1['metrics']['READ_pct'] >= 75)}) | "
              f"{p1['peers']['cublas']['median_us']:.1f} | {sp(p1):.2f} ({_ok(sp(p1) >= want)}, >= {want}) | "
              f"{p16['median_us']:.1f} | {sp(p16):.2f} ({_ok(sp(p16) >= want)}) | {p64['median_us']:.1f} | "
              f"{sp(p64):.2f} ({_ok(sp(p64) >= 1.3) if quant else 'n/a'}) | {r16:.2f} ({_ok(r16 <= 1.3)}) | "
              f"{r64:.2f} ({_ok(r64 <= 2.0)}) |")  # fmt: skip

    print("\n### Target 3 — Q4 [6144,5120] against tinygemm (int4, group 64)\n")
    print("| T | ninfer us | tinygemm us | x vs tinygemm (>= 1.5) | cuBLAS BF16 us |")
    print("| --- | --- | --- | --- | --- |")
    for p in q4["points"]:
        tg = p["peers"]["tinygemm"]["median_us"]
        note = f" (T=1 target <= 7.0 us: {_ok(p['median_us'] <= 7.0)})" if p["t"] == 1 else ""
        print(f"| {p['t']} | {p['median_us']:.2f}{note} | {tg:.2f} | {tg / p['median_us']:.2f} "
              f"({_ok(tg / p['median_us'] >= 1.5)}) | {p['peers']['cublas']['median_us']:.2f} |")  # fmt: skip

    print("\n### Target 6 — `--sweep 1:64` on [6144,5120]: largest adjacent step (<= 20 %)\n")
    print(
        "| format | T=1 us | T=16 us | T=32 us | T=33 us | T=64 us | largest step | at T | target |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for q in QTYPES:
        pts = _load(d, f"sweep_{q}.json")["points"]
        med = {p["t"]: p["median_us"] for p in pts}
        worst, at, to = largest_step(pts)
        print(f"| {q} | {med[1]:.1f} | {med[16]:.1f} | {med[32]:.1f} | {med[33]:.1f} | {med[64]:.1f} | "
              f"{worst * 100:+.1f} % | {at}→{to} | {_ok(worst <= 0.20)} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The issue-6 target tables of docs/perf/prefill_h200.md, from the committed JSON.

    python tools/prefill_tables.py [docs/perf/prefill_h200]

Reads prefill_surface.json, suite_all.json and sweep_<q>.json (written by
tools/device_prefill.sh on the H200, each point beside cuBLAS BF16 in the same run) and
prints markdown: every number below comes from those files.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from sweep_steps import largest_step  # tools/ is the script's sys.path[0]

QTYPES = ("q4", "q5", "q6", "w8", "nvfp4", "bf16")
SHAPES = ((14336, 5120), (16384, 5120), (34816, 5120), (5120, 6144), (5120, 17408))


def _load(d: Path, name: str) -> Any:
    return json.loads((d / name).read_text())


def _ok(flag: bool) -> str:
    return "met" if flag else "**missed**"


def _ratio(p: Any) -> float:
    """cuBLAS time / ours: the speed relative to cuBLAS BF16 on the same shape (> 1: faster)."""
    return float(statistics.median(p["peers"]["cublas"]["samples_us"]) / p["median_us"])


def main(argv: list[str]) -> int:
    d = Path(argv[0] if argv else "docs/perf/prefill_h200")
    surf = _load(d, "prefill_surface.json")
    suite = _load(d, "suite_all.json")
    env = surf["environment"]
    print(f"Measured on {env['gpu_name']} (cc {env['cc']}, {env['sms']} SMs), commit "
          f"`{env['commit'][:10]}` (dirty: {env['dirty']}), kernels `{env['kernel_fingerprint']}`; "
          f"cold L2 (256 MiB flush), graph replay, warmup 3, repeat 20, medians; "
          f"x = cuBLAS BF16 time / ours, same shape, same run.\n")  # fmt: skip
    pts = {(p["qtype"], p["n"], p["k"], p["t"]): p for p in surf["points"]}

    print("### Targets 1-3 — the permanent surface (x vs cuBLAS BF16)\n")
    print(
        "| format | [N,K] | T=128 us | x | T=256 us | x | T=512 us | x | T=1024 us | x | TFLOP/s at 1024 | cuBLAS TFLOP/s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")  # fmt: skip
    for q in QTYPES:
        for n, k in SHAPES:
            row = [q, f"[{n},{k}]"]
            for t in (128, 256, 512, 1024):
                p = pts[(q, n, k, t)]
                row += [f"{p['median_us']:.1f}", f"{_ratio(p):.2f}"]
            p = pts[(q, n, k, 1024)]
            cub = 2 * n * k * 1024 / statistics.median(p["peers"]["cublas"]["samples_us"]) / 1e6
            row += [f"{p['metrics']['useful_TFLOPs']:.0f}", f"{cub:.0f}"]
            print("| " + " | ".join(row) + " |")

    print("\nTarget 1 (T=1024, quantized, x >= 0.85), target 2 (T = 128 / 256 / 512, x >= 1.0), "
          "target 3 (BF16 at T >= 128, x >= 0.95):\n")  # fmt: skip
    print("| target | points | met | worst x | best x |")
    print("| --- | --- | --- | --- | --- |")
    groups = {
        "1: T=1024, Q4/Q5/Q6/W8/NVFP4, x >= 0.85": [
            (p, 0.85) for (q, _, _, t), p in pts.items() if t == 1024 and q != "bf16"
        ],
        "2: T=128/256/512, Q4/Q5/Q6/W8/NVFP4, x >= 1.0": [
            (p, 1.0) for (q, _, _, t), p in pts.items() if t < 1024 and q != "bf16"
        ],
        "3: BF16, T >= 128, x >= 0.95": [(p, 0.95) for (q, *_), p in pts.items() if q == "bf16"],
    }
    for name, items in groups.items():
        xs = [_ratio(p) for p, _ in items]
        met = sum(_ratio(p) >= goal for p, goal in items)
        print(f"| {name} | {len(items)} | {met} | {min(xs):.2f} | {max(xs):.2f} |")

    print("\n### Target 4 — the suites' Vision points and 27b.output_head at T=1024 (x >= 0.9)\n")
    print("| point | format | [N,K] | T | median us | cuBLAS us | x | target |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for p in suite["points"]:
        label = p["labels"][0]
        vision = "vision" in label and p["t"] in (128, 1024)
        head = label == "27b.output_head" and p["t"] == 1024
        if not (vision or head):
            continue
        cub = statistics.median(p["peers"]["cublas"]["samples_us"])
        print(f"| {'+'.join(p['labels'])} | {p['qtype']} | [{p['n']},{p['k']}] | {p['t']} | "
              f"{p['median_us']:.1f} | {cub:.1f} | {_ratio(p):.2f} | {_ok(_ratio(p) >= 0.9)} |")  # fmt: skip

    print(
        "\n### Target 5 — `--sweep 64:1024:32` on [14336,5120]: largest adjacent step (<= 20 %)\n"
    )
    print(
        "| format | T=64 us (route) | T=96 us | T=512 us | T=1024 us | largest step | at T | target |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for q in QTYPES:
        sw = _load(d, f"sweep_{q}.json")["points"]
        med = {p["t"]: p["median_us"] for p in sw}
        route64 = next(p["route"] for p in sw if p["t"] == 64)
        worst = largest_step(sw)
        print(f"| {q} | {med[64]:.1f} ({route64}) | {med[96]:.1f} | {med[512]:.1f} | {med[1024]:.1f} | "
              f"{100 * worst[0]:+.1f} % | {worst[1]}→{worst[2]} | {_ok(worst[0] <= 0.20)} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

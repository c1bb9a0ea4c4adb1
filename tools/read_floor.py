"""The time a plain read of N bytes takes under the benchmark's timing contract.

The decode targets are READ_% = model bytes / time / sustained read (the probe's 4 GiB
uint4 read). For small weights the cold-L2 contract itself costs time: the 256 MiB
flush leaves the L2 full of dirty lines that must be written back while the kernel
reads, and a launch ramps up. This tool times the probe's read kernel under the same
ColdTimer (flush 256 MiB, graph replay) at the byte counts of the decode points, so
each point's READ_% can be set against what a pure read achieves under the same rules.

    python tools/read_floor.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys

from ninfer.bench.timer import ColdTimer
from ninfer.gpus.probe import read_buffer, read_call

# (label, bytes): model bytes of the decode points at T=1 (weight + x + out).
SIZES = [
    ("q4 6144x5120", 16_711_680 + 2 * 5120 + 2 * 6144),
    ("q4 14336x5120", 38_993_920 + 2 * 5120 + 2 * 14336),
    ("w8 14336x5120", 77_987_840),
    ("bf16 14336x5120", 146_800_640),
    ("q4 131072x5120", 356_515_840),
    ("q6 248320x5120", 993_280_000),
    ("probe 4 GiB", 4 << 30),
]


def main() -> int:
    import cupy as cp

    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    print("label bytes cold_us cold_GBps hot_us hot_GBps (grid = SMs x 16 x 512 threads)")
    for label, nbytes in SIZES:
        nbytes -= nbytes % 16
        buf = read_buffer(nbytes, seed=3)
        call = read_call(buf, 16)
        cp.cuda.Device().synchronize()
        cold = ColdTimer(3, 20, 256, "graph").time(call).median_us
        hot = ColdTimer(3, 20, 0, "graph").time(call).median_us
        rows.append({"label": label, "bytes": nbytes, "cold_us": cold, "hot_us": hot})
        print(
            f"{label:<16} {nbytes:>11} {cold:9.2f} {nbytes / cold / 1e3:8.1f} "
            f"{hot:9.2f} {nbytes / hot / 1e3:8.1f}",
            flush=True,
        )
        del buf
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

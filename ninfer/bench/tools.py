"""Subcommands: ``probe`` (measure and cache ceilings) and ``ncu`` (DRAM bytes of one point)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

from ..formats.qtype import QType
from ..metrics import byte_breakdown
from ..policy import Policy
from .args import HelpFormatter, build_parser, count_arg
from .memory import check_cap
from .points import INT32_MAX, BenchPoint


def main(argv: list[str]) -> int:
    cmd, rest = argv[0], argv[1:]
    if cmd == "probe":
        return probe(rest)
    return ncu(rest)


def probe(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="ninfer-bench probe",
        description="Measure this GPU's sustained read bandwidth (a 4 GiB read) and cache it\n"
        "per GPU model; the metrics' READ_pct divides by it. Prints the cached figures.",
        formatter_class=HelpFormatter,
    )
    ap.add_argument("--force", action="store_true", help="re-measure even if a cached value exists")
    args = ap.parse_args(argv)
    from ..runtime.cupy_env import NoGPUError, require_cupy

    try:
        cp = require_cupy()
    except NoGPUError as e:
        print(f"ninfer-bench: error: {e}", file=sys.stderr)
        return 2
    from ..gpus import gpu_key
    from ..gpus.probe import cache_path, cached_probe, probe_and_cache
    from ..runtime.cupy_env import device_name

    key = gpu_key(device_name(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)))
    res = None if args.force else cached_probe(key)
    res = res or probe_and_cache(key)
    print(json.dumps(res, indent=1))
    print(f"cached at {cache_path(key)}")
    return 0


_METRICS = "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"


def ncu(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="ninfer-bench ncu",
        description="Nsight Compute on one --profile point",
        formatter_class=HelpFormatter,
    )
    ap.add_argument(
        "--qtype", required=True, choices=[q.value for q in QType], help="weight format"
    )
    ap.add_argument("--policy", default="a16", choices=[p.value for p in Policy],
                    help="activation policy")  # fmt: skip
    ap.add_argument("--n", type=count_arg(1, INT32_MAX), required=True, help="output features")
    ap.add_argument("--k", type=count_arg(1, INT32_MAX), required=True, help="input features")
    ap.add_argument("--t", type=count_arg(1, INT32_MAX), required=True, help="tokens")
    ap.add_argument("--ncu", default=os.environ.get("NCU", "ncu"),
                    help="the ncu binary ($NCU where set)")  # fmt: skip
    args = ap.parse_args(argv)
    # The point is refused here, as the main CLI would, not after Nsight Compute starts.
    try:
        pt = BenchPoint(QType.parse(args.qtype), Policy.parse(args.policy), args.n, args.k, args.t)
        check_cap([pt], build_parser().get_default("flush_mib"))
    except ValueError as e:
        ap.error(str(e))
    exe = shutil.which(args.ncu)
    if exe is None:
        print(f"ninfer-bench: error: Nsight Compute not found ({args.ncu})", file=sys.stderr)
        return 2
    point = [
        "--qtype",
        args.qtype,
        "--policy",
        args.policy,
        "--n",
        str(args.n),
        "--k",
        str(args.k),
        "--t",
        str(args.t),
    ]
    cmd = [
        exe,
        "--profile-from-start",
        "off",
        "--clock-control",
        "none",
        "--metrics",
        _METRICS,
        "--csv",
        "--page",
        "raw",
        sys.executable,
        "-m",
        "ninfer.bench",
        *point,
        "--profile",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        print(res.stdout[-4000:], res.stderr[-4000:], file=sys.stderr)
        return 2
    read = write = dur = 0.0
    kernels = []
    header: list[str] | None = None
    for line in res.stdout.splitlines():
        if not line.startswith('"'):
            continue
        cells = [c.strip('"') for c in re.findall(r'"[^"]*"', line)]
        if header is None and "Kernel Name" in cells:
            header = cells
            continue
        if header is None or len(cells) != len(header) or not cells[0].isdigit():
            continue
        row = dict(zip(header, cells, strict=True))
        kernels.append(row.get("Kernel Name", "?"))
        read += _num(row.get("dram__bytes_read.sum", "0"))
        write += _num(row.get("dram__bytes_write.sum", "0"))
        dur += _num(row.get("gpu__time_duration.sum", "0"))
    bb = byte_breakdown(QType.parse(args.qtype), args.n, args.k, args.t)
    print(f"kernels: {len(kernels)} ({', '.join(sorted(set(kernels)))})")
    print(f"dram_read_bytes={read:.0f} dram_write_bytes={write:.0f} gpu_time_ns={dur:.0f}")
    print(
        f"model_bytes={bb['model_bytes']} (weight {bb['weight_bytes']}, x {bb['x_bytes']}, out {bb['out_bytes']})"
    )
    logical_read = bb["weight_bytes"] + bb["x_bytes"]
    print(f"read_amplification={read / logical_read:.4f} (DRAM read / (weight + x))")
    print(
        f"total_amplification={(read + write) / bb['model_bytes']:.4f} (DRAM read+write / model_bytes)"
    )
    return 0 if kernels else 2


def _num(s: str) -> float:
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0

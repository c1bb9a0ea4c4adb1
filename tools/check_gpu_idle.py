#!/usr/bin/env python3
"""Refuse to benchmark on a busy GPU.

Asks nvidia-smi for the compute processes on the GPU and for its utilization. Exit 0:
no compute process and utilization at most --max-util percent. Exit 1: busy (the
processes are listed); with --wait, only once the GPU stayed busy for that long.
Exit 2: nvidia-smi is missing or fails (no driver, unknown --gpu).

The GPU is --gpu N (an index or UUID as nvidia-smi --id takes it), else the first entry
of CUDA_VISIBLE_DEVICES, else every GPU of the machine. CUDA numbers devices fastest
first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, nvidia-smi by PCI bus: on a machine with
several GPUs set that variable or pass a UUID. Stdlib only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field

PROG = "check_gpu_idle"


class SmiError(Exception):
    """nvidia-smi is missing or did not answer."""


@dataclass
class GpuState:
    processes: list[str] = field(default_factory=list)  # "pid 123  python  900 MiB"
    utilization: list[int] = field(default_factory=list)  # percent, one per GPU
    unknown_util: bool = False  # nvidia-smi printed [N/A] (some vGPU / MIG setups)

    def busy(self, max_util: int) -> bool:
        return bool(self.processes) or any(u > max_util for u in self.utilization)

    def describe(self, max_util: int) -> str:
        util = ", ".join(f"{u} %" for u in self.utilization) or "n/a"
        lines = [f"  utilization: {util} (limit {max_util} %)"]
        if self.unknown_util:
            lines.append("  (nvidia-smi reports no utilization here; not counted)")
        if self.processes:
            lines.append("  compute processes:")
            lines.extend(f"    {p}" for p in self.processes)
        else:
            lines.append("  compute processes: none")
        return "\n".join(lines)


def default_gpu() -> str | None:
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return first if first and first not in ("-1", "NoDevFiles") else None


def smi(query: list[str], gpu: str | None) -> list[str]:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        raise SmiError("nvidia-smi not found on PATH (no NVIDIA driver on this machine?)")
    cmd = [exe, *query] + ([f"--id={gpu}"] if gpu is not None else [])
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SmiError(f"{' '.join(cmd)} failed: {exc}") from exc
    if done.returncode != 0:
        msg = (done.stdout + done.stderr).strip() or f"exit status {done.returncode}"
        raise SmiError(f"{' '.join(cmd)} failed: {msg}")
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def read_state(gpu: str | None) -> GpuState:
    state = GpuState()
    apps = ["--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"]
    for line in smi(apps, gpu):
        if line.lower().startswith("no running"):
            continue
        pid, _, rest = line.partition(",")
        name, _, mem = rest.rpartition(",")
        state.processes.append(f"pid {pid.strip()}  {name.strip()}  {mem.strip()}")
    util = ["--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
    for line in smi(util, gpu):
        value = line.rstrip("%").strip()
        if value.isdigit():
            state.utilization.append(int(value))
        else:
            state.unknown_util = True
    return state


def annotate(title: str, message: str) -> None:
    """One GitHub Actions error annotation (shown on the check's summary page)."""
    if os.environ.get("GITHUB_ACTIONS") == "true":
        flat = message.replace("%", "%25").replace("\r", "").replace("\n", "%0A")
        print(f"::error title={title}::{flat}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--gpu", help="GPU index or UUID (default: CUDA_VISIBLE_DEVICES[0])")
    parser.add_argument(
        "--max-util", type=int, default=10, metavar="PCT", help="idle: utilization <= PCT (10)"
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="poll up to this long for idle (0)",
    )
    parser.add_argument(
        "--interval", type=float, default=10.0, metavar="SECONDS", help="between polls (10)"
    )
    args = parser.parse_args(argv)

    gpu = args.gpu if args.gpu is not None else default_gpu()
    where = f"GPU {gpu}" if gpu is not None else "all GPUs"
    deadline = time.monotonic() + max(args.wait, 0.0)
    while True:
        try:
            state = read_state(gpu)
        except SmiError as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            annotate("nvidia-smi", str(exc))
            return 2
        if not state.busy(args.max_util):
            print(f"{PROG}: idle ({where})\n{state.describe(args.max_util)}")
            return 0
        left = deadline - time.monotonic()
        if left <= 0:
            break
        print(f"{PROG}: busy ({where}), polling again; giving up in {left:.0f} s", flush=True)
        time.sleep(min(max(args.interval, 0.1), left))
    message = (
        f"busy ({where}): another process is using the GPU; refusing to measure, "
        f"timings taken now would be wrong.\n{state.describe(args.max_util)}"
    )
    print(f"{PROG}: {message}", file=sys.stderr)
    annotate("GPU busy", message)
    return 1


if __name__ == "__main__":
    sys.exit(main())

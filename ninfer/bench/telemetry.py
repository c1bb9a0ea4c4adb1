"""GPU telemetry through NVML (nvidia-ml-py): clocks, temperature, power, throttling.

Read before and after every point of every round and stored with the round, so a
verdict can be traced to the card's state. A round during which the card slowed itself
(thermal or hardware slowdown, power brake: nvbench's "throttled" rule, here from the
driver's own clock-event reasons and violation counters) is re-measured, and excluded
from the statistics if it stays throttled. The benchmark never changes a clock or power
setting; it only reads them. Without NVML (no driver, a wheel missing) every field is
None and nothing is marked.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path
from typing import Any

# nvmlClocksEventReason* bits (nvml.h). The first group slows the card below what the
# workload asked for; the second is recorded but is normal operation.
THROTTLE_REASONS = {
    0x8: "hw_slowdown",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}
INFO_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x10: "sync_boost",
    0x100: "display_clock_setting",
}
# A sample run below this fraction of the card's maximum SM clock is clock-limited.
# Measured on the H200 (docs/regress.md, "Where the noise lives"): point-rounds whose SM
# clock read >= 1900 of 1980 MHz sat within the noise (2.5-3.1 % of them > 3 % slow); at
# 1800-1900 MHz 19 %, below 1600 MHz 63 % were > 3 % slow. nvbench's default is 0.75,
# far below the dips that moved these points by 5-20 %.
CLOCK_FLOOR = 0.95
_NVML_PERF_POLICY_THERMAL = 1


def reason_names(bits: int | None) -> list[str]:
    if not bits:
        return []
    names = {**THROTTLE_REASONS, **INFO_REASONS}
    return [name for bit, name in sorted(names.items()) if bits & bit]


def machine_id() -> str:
    """This boot of this host: rounds with the same id ran on one machine, one boot."""
    boot = ""
    with contextlib.suppress(OSError):
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    return f"{socket.gethostname()}:{boot}" if boot else socket.gethostname()


def clocks_locked_declared() -> bool | None:
    """What the runner's owner declares (docs/ci.md): NINFER_CLOCKS_LOCKED=1 or 0."""
    v = os.environ.get("NINFER_CLOCKS_LOCKED")
    return None if v is None else v.strip() in ("1", "true", "yes")


class Telemetry:
    """NVML handle of one CUDA device; ``read()`` never raises."""

    def __init__(self, pci_bus_id: str | None = None, index: int | None = None) -> None:
        self.nvml: Any = None
        self.handle: Any = None
        self.error = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            if pci_bus_id is not None:
                try:  # nvidia-ml-py takes str in recent releases, bytes in older ones
                    self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
                except (TypeError, AttributeError):
                    self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode())
            else:
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(nvml_index(index or 0))
            self.nvml = pynvml
        except Exception as e:  # ImportError, NVMLError (no driver, a vGPU without NVML)
            self.error = f"{type(e).__name__}: {e}"

    @property
    def available(self) -> bool:
        return self.handle is not None

    def _q(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self.nvml, fn)(self.handle, *args)
        except Exception:
            return None

    def read(self) -> dict[str, Any]:
        if not self.available:
            return {"sm_mhz": None, "mem_mhz": None, "temp_c": None, "power_w": None,
                    "reasons": None, "reason_names": []}  # fmt: skip
        n = self.nvml
        reasons = self._q("nvmlDeviceGetCurrentClocksEventReasons")
        if reasons is None:
            reasons = self._q("nvmlDeviceGetCurrentClocksThrottleReasons")
        power = self._q("nvmlDeviceGetPowerUsage")
        thermal = self._q("nvmlDeviceGetViolationStatus", _NVML_PERF_POLICY_THERMAL)
        return {
            "sm_mhz": self.sm_mhz(),
            "mem_mhz": self._q("nvmlDeviceGetClockInfo", n.NVML_CLOCK_MEM),
            "temp_c": self._q("nvmlDeviceGetTemperature", n.NVML_TEMPERATURE_GPU),
            "power_w": None if power is None else power / 1000.0,
            "reasons": None if reasons is None else int(reasons),
            "reason_names": reason_names(reasons),
            # Cumulative ns the card spent held back by temperature: any growth across a
            # point means it slowed down while the point was measured.
            "thermal_violation_ns": None if thermal is None else int(thermal.violationTime),
        }

    def max_sm_mhz(self) -> int | None:
        return self._q("nvmlDeviceGetMaxClockInfo", self.nvml.NVML_CLOCK_SM) if self.nvml else None

    def sm_mhz(self) -> int | None:
        """The SM clock now: read after every sample (ColdTimer.time's probe)."""
        return self._q("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_SM) if self.nvml else None

    def power_limit_w(self) -> float | None:
        v = self._q("nvmlDeviceGetEnforcedPowerLimit")
        return None if v is None else v / 1000.0

    def other_processes(self, own_pid: int | None = None) -> list[str]:
        procs = self._q("nvmlDeviceGetComputeRunningProcesses") or []
        out = []
        for p in procs:
            if own_pid is not None and p.pid == own_pid:
                continue
            mem = getattr(p, "usedGpuMemory", None)
            out.append(f"pid {p.pid}" + (f" ({mem >> 20} MiB)" if mem else ""))
        return out

    def utilization(self) -> int | None:
        u = self._q("nvmlDeviceGetUtilizationRates")
        return None if u is None else int(u.gpu)


def throttled(
    before: dict[str, Any],
    after: dict[str, Any],
    clocks: list[Any] | None = None,
    max_mhz: int | None = None,
) -> list[str]:
    """Why a point's round counts as throttled (empty: it does not): the driver's slowdown
    reasons, thermal violation time, or an SM clock during the samples (median of the
    reads after each sample) under CLOCK_FLOOR of the maximum."""
    why = [n for b, n in THROTTLE_REASONS.items() if (after.get("reasons") or 0) & b]
    reads = [c for c in (clocks or []) if c]
    if reads and max_mhz:
        med = sorted(reads)[len(reads) // 2]
        if med < CLOCK_FLOOR * max_mhz:
            why.append(f"SM clock {med} MHz < {CLOCK_FLOOR:.0%} of {max_mhz} MHz")
    t0, t1 = before.get("thermal_violation_ns"), after.get("thermal_violation_ns")
    if t0 is not None and t1 is not None and t1 > t0:
        why.append(f"thermal violation {(t1 - t0) / 1e6:.1f} ms")
    return why


def nvml_index(cuda_index: int) -> int:
    """NVML counts every GPU of the host by PCI bus; CUDA counts the visible ones."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
    if vis and vis[0].strip() and cuda_index < len(vis) and vis[cuda_index].strip().isdigit():
        return int(vis[cuda_index].strip())
    return cuda_index


def busy_reason(index: int = 0, max_util: int = 10) -> str | None:
    """Why the GPU is not idle (another compute process, utilization), or None.

    Read through NVML, which creates no CUDA context. Unknown (no NVML) is not busy:
    the caller says so in its log instead of refusing.
    """
    tel = Telemetry(index=index)
    if not tel.available:
        return None
    others = tel.other_processes(os.getpid())
    if others:
        return "another process is using the GPU: " + ", ".join(others)
    util = tel.utilization()
    if util is not None and util > max_util:
        return f"GPU utilization {util} % (idle means <= {max_util} %)"
    return None

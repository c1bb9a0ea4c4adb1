"""Import CuPy lazily, with one clear error when it (or a GPU) is missing."""

from __future__ import annotations

from types import ModuleType


class NoGPUError(RuntimeError):
    """CuPy is not installed or no CUDA device is visible."""


def _driver_loads() -> bool:
    """Whether the NVIDIA driver's user-space library (libcuda) is on this machine."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


def require_cupy() -> ModuleType:
    try:
        import cupy
    except ImportError as e:
        if e.name == "cupy" and not _driver_loads():
            # nox installs CuPy only where nvidia-smi lists a GPU: the missing driver is
            # the reason here, not the missing package.
            raise NoGPUError(
                "no NVIDIA driver on this machine (libcuda cannot be loaded), and CuPy is "
                "not installed: no GPU to run on"
            ) from e
        if e.name == "cupy":
            raise NoGPUError(
                "CuPy is not installed, and ninfer needs it for GPU work: "
                "pip install 'ninfer[cuda13]' (or [cuda12])"
            ) from e
        # CuPy is there but one of its own imports failed: say which, not "install CuPy".
        raise NoGPUError(f"CuPy is installed but does not import: {e}") from e
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError: no driver, an old driver, no device
        if not _driver_loads():
            # CUDA reports a missing driver as "insufficient driver", which reads as
            # "update your driver" on a machine that has none at all.
            raise NoGPUError(
                "no NVIDIA driver on this machine (libcuda cannot be loaded), so no GPU to run on"
            ) from e
        raise NoGPUError(f"the NVIDIA driver is present but CUDA cannot use a GPU ({e})") from e
    if count < 1:
        raise NoGPUError("the NVIDIA driver is present but sees no CUDA device")
    return cupy


def require_device(device: int) -> ModuleType:
    """``require_cupy()``, and ``device`` one of the visible CUDA devices."""
    cupy = require_cupy()
    count = cupy.cuda.runtime.getDeviceCount()
    if device >= count:
        raise NoGPUError(
            f"--device {device}: expected < {count}, the number of visible CUDA devices"
        )
    return cupy


def device_name(props: dict[str, object]) -> str:
    """The device name from ``cupy.cuda.runtime.getDeviceProperties`` (bytes in CuPy)."""
    raw = props["name"]
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def gpu_available() -> tuple[bool, str]:
    """(available, reason) — for tests and CLIs that skip or exit cleanly without a GPU."""
    try:
        require_cupy()
    except NoGPUError as e:
        return False, str(e)
    return True, ""

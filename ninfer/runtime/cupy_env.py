"""Import CuPy lazily, with one clear error when it (or a GPU) is missing."""

from __future__ import annotations

from types import ModuleType


class NoGPUError(RuntimeError):
    """CuPy is not installed or no CUDA device is visible."""


def require_cupy() -> ModuleType:
    try:
        import cupy
    except ImportError as e:
        raise NoGPUError(
            "ninfer needs CuPy for GPU work: pip install 'ninfer[cuda13]' (or [cuda12])"
        ) from e
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CUDARuntimeError without a driver
        raise NoGPUError(f"no CUDA device is available ({e})") from e
    if count < 1:
        raise NoGPUError("no CUDA device is available")
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

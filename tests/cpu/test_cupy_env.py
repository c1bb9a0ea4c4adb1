"""The no-GPU messages say what is actually missing (ninfer/runtime/cupy_env.py)."""

from __future__ import annotations

import re
import sys
import types

import pytest

from ninfer.runtime import cupy_env


def _fake_cupy(count: int | Exception) -> types.ModuleType:
    def get_device_count() -> int:
        if isinstance(count, Exception):
            raise count
        return count

    cp = types.ModuleType("cupy")
    cp.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_device_count))  # type: ignore[attr-defined]
    return cp


@pytest.mark.parametrize(
    "cupy,driver,says",
    [
        (None, False, "no NVIDIA driver on this machine"),
        (None, True, "CuPy is not installed"),
        (
            "broken",
            True,
            "CuPy is installed but does not import: No module named 'cuda.pathfinder'",
        ),
        (RuntimeError("cudaErrorInsufficientDriver"), False, "no NVIDIA driver on this machine"),
        (RuntimeError("cudaErrorInsufficientDriver"), True, "driver is present but CUDA cannot"),
        (0, True, "sees no CUDA device"),
    ],
)
def test_the_no_gpu_error_names_the_missing_piece(
    monkeypatch: pytest.MonkeyPatch, cupy: object, driver: bool, says: str
) -> None:
    monkeypatch.setattr(cupy_env, "_driver_loads", lambda: driver)
    if cupy is None:
        monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError(name="cupy")
    elif cupy == "broken":  # CuPy installed, one of its own dependencies missing

        def find_spec(name: str, *a: object) -> None:
            if name == "cupy":
                raise ImportError("No module named 'cuda.pathfinder'", name="cuda.pathfinder")

        monkeypatch.delitem(sys.modules, "cupy", raising=False)
        monkeypatch.setattr(
            sys, "meta_path", [types.SimpleNamespace(find_spec=find_spec), *sys.meta_path]
        )
    else:
        monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(cupy))  # type: ignore[arg-type]
    with pytest.raises(cupy_env.NoGPUError, match=re.escape(says)):
        cupy_env.require_cupy()

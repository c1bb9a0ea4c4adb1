"""routes/launcher.py's launch on the CPU: what reaches cuLaunchKernel (a stand-in driver)."""

from __future__ import annotations

import ctypes
from types import SimpleNamespace
from typing import Any

import pytest

from ninfer.routes import launcher
from ninfer.routes.launcher import KernelLaunch, _Params


def test_enqueue_hands_the_driver_the_head_stream_and_parameter_pointers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[Any, ...]] = []
    driver = SimpleNamespace(launchKernel=lambda *a: calls.append(a))
    runtime = SimpleNamespace(getDevice=lambda: 3)
    monkeypatch.setattr(launcher, "cuda_api", lambda: (driver, runtime))
    prm = _Params(0x10, 0x20, 0x30, 1.5, 4096, 5120, 5120, 0x40, 0x50, 7, 1)
    k = KernelLaunch(0xF00, (2, 3, 1), (128, 1, 1), 4096, prm, 3)
    k.launch(0x99)
    assert len(calls) == 1
    *head, stream, argv, extra = calls[0]
    assert head == [0xF00, 2, 3, 1, 128, 1, 1, 4096] and stream == 0x99 and extra == 0
    # kernelParams: one pointer a parameter, each at its field of the block, in order.
    ptrs = (ctypes.c_void_p * len(_Params._fields_)).from_address(argv)
    base = ctypes.addressof(prm)
    assert [p - base for p in ptrs] == [getattr(_Params, f[0]).offset for f in _Params._fields_]
    assert ctypes.c_uint64.from_address(ptrs[7]).value == 0x40  # x
    assert ctypes.c_int32.from_address(ptrs[9]).value == 7  # T

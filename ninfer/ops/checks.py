"""linear()'s input checks: each raises TypeError / ValueError with expected vs got, and
all of them run before anything is launched (DESIGN §3)."""

from __future__ import annotations

from typing import Any

from ..formats.packed import INT32_MAX, PackedWeight
from ..formats.qtype import QType
from ..policy import Policy
from ..runtime.interop import DevArray


def check_weight(w: Any) -> PackedWeight:
    if not isinstance(w, PackedWeight):
        raise TypeError(f"w: expected a ninfer.PackedWeight, got {type(w).__name__}")
    if not w.is_device:
        raise TypeError("w: expected a device PackedWeight, got a host one (call w.to_device())")
    return w


def check_policy(policy: Any, w: PackedWeight) -> Policy:
    pol = policy if policy is Policy.A16 else Policy.parse(policy)
    if pol is Policy.A4 and w.qtype is not QType.NVFP4:
        raise ValueError(f"policy A4: expected an NVFP4 weight, got {w.qtype.name}")
    return pol


def check_t(t: Any) -> int:
    if isinstance(t, bool) or not isinstance(t, int):
        raise TypeError(f"T: expected an int, got {type(t).__name__}")
    if t < 1:
        raise ValueError(f"T: expected T >= 1, got {t}")
    if t > INT32_MAX:
        raise ValueError(f"T: expected T <= {INT32_MAX} (the kernels take int32), got {t}")
    return t


def check_activation(a: DevArray, what: str, rows: int | None, cols: int, w: PackedWeight) -> int:
    if a.dtype != "bfloat16":
        raise TypeError(f"{what}: expected dtype bfloat16, got {a.dtype}")
    if len(a.shape) != 2:
        raise ValueError(
            f"{what}: expected a 2-D (T, {'K' if what == 'x' else 'N'}) array, got shape {a.shape}"
        )
    t = a.shape[0]
    if rows is None and t < 1:
        raise ValueError(f"{what}: expected T >= 1 rows, got shape {a.shape}")
    if rows is None and t > INT32_MAX:
        # Before the layout checks: a stride-0 view is how a T this large gets here at all.
        raise ValueError(
            f"{what}: expected T <= {INT32_MAX} rows (the kernels take int32), got shape {a.shape}"
        )
    want = (t if rows is None else rows, cols)
    if a.shape != want:
        raise ValueError(f"{what}: expected shape {want}, got {a.shape}")
    if t * cols > INT32_MAX:
        # dec_q indexes an activation row as (t * K + k) in int32.
        raise ValueError(
            f"{what}: expected at most {INT32_MAX} elements (the kernels index it in int32), "
            f"got shape {a.shape}"
        )
    if not a.c_contiguous:
        raise ValueError(f"{what}: expected a row-major contiguous array, got strides {a.strides}")
    if a.device != w.device_id:
        raise ValueError(
            f"{what}: expected device {w.device_id} (the weight's), got device {a.device}"
        )
    return t


def overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def check_off_weight(span: tuple[int, int], what: str, w: PackedWeight) -> None:
    # Kernels read the planes while they write out / the workspace: any shared byte races.
    for name, plo, phi in w.plane_spans:
        if overlap(span, (plo, phi)):
            raise ValueError(
                f"{what}: expected memory disjoint from the weight, got overlap with plane {name!r}"
            )

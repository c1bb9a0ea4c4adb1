"""``--peer fbgemm``: FBGEMM GenAI's CUTLASS mixed-input int4 GEMMs, the peer of Q4.

fbgemm-gpu-genai 1.6.0 registers (fbgemm_gpu/experimental/gen_ai/src/quantize/
quantize.cpp, schemas in the wheel's .so)::

    bf16i4bf16_rowwise(Tensor X, Tensor W, Tensor w_scale_group, Tensor w_zero_group) -> Tensor
    bf16i4bf16_shuffled(Tensor X, Tensor W, Tensor w_scale_group, Tensor w_zero_group) -> Tensor
    preshuffle_i4(Tensor WQ, Tensor w_scale) -> (Tensor, Tensor)

X is BF16 [T,K]; W int8 [N,K/2], two int4 per byte; scales and zeros [K/group, N], the
group read as K / rows (cutlass_extensions/bf16i4bf16.cu). ``shuffled`` takes W
reordered by ``preshuffle_i4`` (mixed_dtype_utils.cu) so each thread's nibbles sit
together for the BF16 MMA (the Machete-style layout); both ops share one shape
heuristic of tiles. They are built for sm_90a only (CUTLASS Sm90 TMA + WGMMA): on
another architecture the peer is unavailable.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from .peers_common import PeerCall, PeerUnavailable, import_error, need_torch

GROUP = 64
WANTED = "fbgemm-gpu-genai==1.6.0"


def fbgemm_call(n: int, k: int, t: int, stream_handle: int, seed: int = 0) -> dict[str, PeerCall]:
    """``bf16i4bf16_rowwise`` and ``bf16i4bf16_shuffled`` (group 64) on a random int4 W.

    W is random bytes (random nibble pairs: timing needs no quantization step), scales
    and zeros random BF16. Returned by kernel name; the bench times both and keeps the
    faster. The ops allocate their output and a CUTLASS workspace per call, so a graph
    capture may be refused: the timer then falls back to direct launches and marks the
    row. A kernel that refuses the shape at its first call is left out; both refusing:
    PeerUnavailable.
    """
    torch = need_torch("fbgemm")
    try:
        import fbgemm_gpu.experimental.gen_ai  # noqa: F401  (loads the .so: torch.ops.fbgemm.*)
    except Exception as e:  # ImportError, or an OSError of a .so built for another torch
        raise import_error("fbgemm", WANTED, e) from e
    cc = tuple(torch.cuda.get_device_capability())
    if cc != (9, 0):
        raise PeerUnavailable(
            f"--peer fbgemm: its bf16i4bf16 kernels are CUTLASS sm_90a (TMA + WGMMA) only; "
            f"expected compute capability 9.0, got {cc[0]}.{cc[1]}"
        )
    if k % GROUP:
        raise PeerUnavailable(
            f"--peer fbgemm: expected K a multiple of the group {GROUP}, got K={k}"
        )
    # The output's rows and the scales' rows are TMA-loaded/stored: 16-byte aligned, N % 8.
    if n % 8:
        raise PeerUnavailable(f"--peer fbgemm: expected N a multiple of 8 (TMA rows), got N={n}")
    try:
        ops = torch.ops.fbgemm
        rowwise, shuffled, preshuffle = (
            ops.bf16i4bf16_rowwise, ops.bf16i4bf16_shuffled, ops.preshuffle_i4
        )  # fmt: skip
    except (AttributeError, RuntimeError) as e:
        raise PeerUnavailable(f"--peer fbgemm: {WANTED} loaded without its int4 ops: {e}") from e
    g = torch.Generator(device="cuda").manual_seed(seed)
    wq = torch.randint(-128, 128, (n, k // 2), device="cuda", generator=g, dtype=torch.int8)
    scale = (torch.rand((k // GROUP, n), device="cuda", generator=g) * 0.02 + 0.01).to(
        torch.bfloat16
    )
    zero = ((torch.rand((k // GROUP, n), device="cuda", generator=g) - 0.5) * 0.1).to(
        torch.bfloat16
    )
    x = torch.randn((t, k), device="cuda", generator=g).to(torch.bfloat16)
    ext = torch.cuda.ExternalStream(stream_handle)
    cands: dict[str, tuple[Callable[..., Any], Any, Any]] = {
        "bf16i4bf16_rowwise": (rowwise, wq, scale)
    }
    refused: list[str] = []
    # preshuffle_i4 reorders W in place (cutlass::reorder_tensor on the legacy stream, then
    # a device sync) and tiles N by 16 rows: copy W, and only where N allows.
    if n % 16 == 0:
        torch.cuda.synchronize()
        try:
            ws, ss = preshuffle(wq.clone(), scale)
            cands["bf16i4bf16_shuffled"] = (shuffled, ws, ss)
        except RuntimeError as e:
            refused.append(f"preshuffle_i4: {e}")
    made: dict[str, PeerCall] = {}
    for name, (op, w, s) in cands.items():
        call = _bind(torch, ext, op, x, w, s, zero)
        try:
            call()  # CUTLASS initialize + first launch, outside any timing or capture
            torch.cuda.synchronize()
        except RuntimeError as e:  # "cutlass cannot initialize/run", a TORCH_CHECK
            refused.append(f"{name}: {e}")
            continue
        made[name] = call
    if made and refused:  # the record then holds one kernel: say which one was refused
        warnings.warn(
            f"--peer fbgemm: N={n}, K={k}, T={t}: timing {', '.join(made)} only; "
            + "; ".join(refused),
            RuntimeWarning,
            stacklevel=2,
        )
    if not made:
        raise PeerUnavailable(
            f"--peer fbgemm: no kernel ran N={n}, K={k}, T={t}: " + "; ".join(refused)
        )
    return made


def _bind(torch: Any, ext: Any, op: Callable[..., Any], x: Any, w: Any, s: Any, z: Any) -> PeerCall:
    def call() -> None:
        with torch.cuda.stream(ext):
            op(x, w, s, z)

    return call

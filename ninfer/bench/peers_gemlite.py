"""``--peer gemlite``: gemlite 0.6.0.post2's Triton weight-only GEMMs.

Two configurations, chosen by the point's format (bench/peers.py's table):

- Q4 points: A16W4 group 64, ``gemlite.helper.A16W4_HQQ_INT(...).from_weights(W_q,
  scales, zeros)`` (uint8 W_q [N,K] of values 0..15, scales and zeros [N, K/64]; the
  group is W_q.numel() / scales.numel()), packed 8 nibbles per int32 by gemlite.
- W8 points: A16W8 per-channel, ``gemlite.helper.A16W8_INT8(...).from_weights(W_q,
  scales=...)`` (int8 W_q [N,K], scales [N,1]). Per channel, not per 32 like W8, as
  gemlite ships it.

The kernel (GEMV_REVSPLITK / GEMV_SPLITK / GEMM_SPLITK / GEMM) follows from T and the
bits (gemlite.core.get_matmul_type); its Triton config is autotuned on the first call
unless gemlite's config cache holds the signature. gemlite loads configs/<gpu>.json at
import when the device name contains one of its tags; none ships for the H200, so on an
sm_90 device without one the H100 file is loaded (same SM 9.0, same shared memory per
block); signatures it lacks are autotuned as usual.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from .peers_common import PeerCall, PeerUnavailable, import_error, need_torch

GROUP = 64
WANTED = "gemlite==0.6.0.post2"
# gemlite refuses in_features not a multiple of 32 or of the group (GemLiteLinearTriton).
K_MULTIPLE = {4: GROUP, 8: 32}


def gemlite_w4_call(
    n: int, k: int, t: int, stream_handle: int, seed: int = 0
) -> dict[str, PeerCall]:
    """A16W4 group 64 on a random int4 W (random BF16 scales and zero points)."""
    return _gemlite_call(4, n, k, t, stream_handle, seed)


def gemlite_w8_call(
    n: int, k: int, t: int, stream_handle: int, seed: int = 0
) -> dict[str, PeerCall]:
    """A16W8 per-channel on a random int8 W (random BF16 scale per row)."""
    return _gemlite_call(8, n, k, t, stream_handle, seed)


def _gemlite_call(
    bits: int, n: int, k: int, t: int, stream_handle: int, seed: int
) -> dict[str, PeerCall]:
    """Returned under the name of the kernel that ran (``kernel`` in the record).

    gemlite's forward allocates its output (zeroed for the split-K kernels) per call, so
    a graph capture may be refused: the timer then falls back to direct launches and
    marks the row.
    """
    torch = need_torch("gemlite")
    try:
        import gemlite
    except Exception as e:  # ImportError, or gemlite's import-time device queries failing
        raise import_error("gemlite", WANTED, e) from e
    if k % K_MULTIPLE[bits]:
        raise PeerUnavailable(
            f"--peer gemlite (A16W{bits}): expected K a multiple of {K_MULTIPLE[bits]}, got K={k}"
        )
    seeded = _seed(torch, gemlite)
    g = torch.Generator(device="cuda").manual_seed(seed)
    bf16 = torch.bfloat16
    if bits == 4:
        wq = torch.randint(0, 16, (n, k), device="cuda", generator=g, dtype=torch.uint8)
        scales = (torch.rand((n, k // GROUP), device="cuda", generator=g) * 0.02 + 0.01).to(bf16)
        zeros = (torch.rand((n, k // GROUP), device="cuda", generator=g) * 15).to(bf16)
    else:
        wq = torch.randint(-128, 128, (n, k), device="cuda", generator=g, dtype=torch.int8)
        scales = (torch.rand((n, 1), device="cuda", generator=g) * 0.002 + 0.001).to(bf16)
    try:  # gemlite refuses with asserts and NotImplementedError: the bench must go on
        if bits == 4:
            proc = gemlite.helper.A16W4_HQQ_INT(device="cuda", dtype=bf16)
            layer = proc.from_weights(wq, scales, zeros)
        else:
            proc = gemlite.helper.A16W8_INT8(device="cuda", dtype=bf16)
            layer = proc.from_weights(wq, scales=scales)
    except Exception as e:
        raise PeerUnavailable(
            f"--peer gemlite (A16W{bits}): packing N={n}, K={k} failed: {type(e).__name__}: {e}"
        ) from e
    del wq
    x = torch.randn((t, k), device="cuda", generator=g).to(bf16)
    ext = torch.cuda.ExternalStream(stream_handle)

    def call() -> None:
        with torch.cuda.stream(ext):
            layer(x)

    try:
        call()  # Triton compiles and autotunes here: gemlite's own warmup is a first call
        torch.cuda.synchronize()
    except Exception as e:  # a Triton compile or launch error
        raise PeerUnavailable(
            f"--peer gemlite (A16W{bits}): N={n}, K={k}, T={t} failed: {type(e).__name__}: {e}"
        ) from e
    return {_kernel(gemlite, bits, n, k, t, seeded): call}


@functools.cache
def _seed(torch: Any, gemlite: Any) -> str:
    """The config file gemlite's autotune cache was seeded from ("none": autotune only)."""
    own = gemlite.core.get_default_cache_config()
    if own:
        return os.path.basename(own)
    if tuple(torch.cuda.get_device_capability()) != (9, 0):
        return "none"
    path = os.path.join(os.path.dirname(gemlite.__file__), "configs", "h100.json")
    if not gemlite.load_config(path, print_error=False):
        raise PeerUnavailable(f"--peer gemlite: its H100 config {path} did not load")
    return "h100.json"


def _kernel(gemlite: Any, bits: int, n: int, k: int, t: int, seeded: str) -> str:
    """``A16W4 GEMM_SPLITK [BLOCK_SIZE_M=16, ...] (h100.json)``, or ``(autotuned)``."""
    core = gemlite.core
    kind = core.get_matmul_type(t, bits, False)
    try:
        # The signature of gemlite's config cache (triton_kernels/*_kernels.py pruners):
        # (M rounded up, N, K, group, values per packed word, input dtype * 100 + bits),
        # BF16 counting as FP16 (1).
        group, per_word = (GROUP, 32 // bits) if bits == 4 else (k, 1)
        sig = str((core.utils.get_closest_m(t), n, k, group, per_word, 100 + bits))
        src = seeded if sig in core.GEMLITE_TRITON_CONFIG_CACHE.get(kind, {}) else "autotuned"
        best = core.GEMLITE_TRITON_MAPPING[kind].kernel[0].best_config
        tune = ", ".join(f"{a}={v}" for a, v in best.all_kwargs().items() if v is not None)
    except Exception:  # a best guess only: the timing does not depend on it
        return f"A16W{bits} {kind}"
    return f"A16W{bits} {kind} [{tune}] ({src})"

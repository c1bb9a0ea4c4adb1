"""The band-tiled byte order of every plane (docs/formats.md, "Storage order").

Rows are grouped in bands of 16 (N is padded to a multiple of 16 in storage), K in
stages of 128. A band's bytes are stored stage after stage, and inside a stage in the
order the decode kernel's shared-memory stage holds them (kernels/dec_q.cu), so one
stage of one band is one contiguous block: a kernel streams a band front to back with
16-byte copies. Row-major order put 16 rows x 64 bytes per stage 2.5 KB apart, and
HBM ran those scattered pieces at half the bandwidth of a contiguous read (H200,
docs/perf/decode_h200.md).

``tile`` maps a row-major ``[Np, cols]`` plane to storage order (same shape and dtype:
the array is a flat buffer in that order); ``untile`` inverts it. Both take NumPy or
CuPy arrays. The axes below name the fragment coordinates of the kernel: ``i`` = row
half (rows gid, gid + 8), ``gid`` = row mod 8, ``j`` = 64-k slab of the stage, ``tig``
= the lane's quarter of a slab row, ``h`` = W8's 32-k group of the slab, ``c`` =
BF16's 8-value half of a lane's 16 values, ``b`` = bytes.
"""

from __future__ import annotations

from typing import Any

ROWS = 16  # rows per band
STAGE_K = 128  # k per stage


def n_stored(n: int) -> int:
    """Rows a plane stores: N padded to a whole band."""
    return -(-n // ROWS) * ROWS


# Per tiling kind: (row-major split of [bands, 16 rows, stage bytes] into named axes,
# storage order of those axes). Row axes come first (i, gid), then the column axes.
_KINDS: dict[str, tuple[tuple[tuple[str, int], ...], tuple[str, ...]]] = {
    # 4-bit codes (Q4, Q5/Q6 low nibbles, NVFP4): 64 bytes per row per stage.
    "codes4": (
        (("i", 2), ("gid", 8), ("j", 2), ("tig", 4), ("b", 8)),
        ("j", "gid", "tig", "i", "b"),
    ),
    # W8 int8 codes: 128 bytes per row per stage.
    "codes8": (
        (("i", 2), ("gid", 8), ("j", 2), ("h", 2), ("tig", 4), ("b", 8)),
        ("j", "h", "gid", "tig", "i", "b"),
    ),
    # BF16 values: 256 bytes per row per stage.
    "bf16": (
        (("i", 2), ("gid", 8), ("j", 2), ("tig", 4), ("c", 2), ("b", 16)),
        ("j", "i", "c", "gid", "tig", "b"),
    ),
    # High bits and scales: each row's bytes of a stage, row after row.
    "rows": ((("r", 16), ("b", -1)), ("r", "b")),
}


def _axes(kind: str, stage_bytes: int, nst: int) -> tuple[list[str], list[int], list[str]]:
    """Row-major axes (names, sizes) of one band, and the storage order of those axes."""
    axes, order = _KINDS[kind]
    names = [a for a, _ in axes]
    sizes = [stage_bytes if s < 0 else s for _, s in axes]
    n_row = 1 if kind == "rows" else 2  # row axes first, then the stage, then columns
    return (
        [*names[:n_row], "stage", *names[n_row:]],
        [*sizes[:n_row], nst, *sizes[n_row:]],
        ["stage", *order],
    )


def tile(a: Any, kind: str, k_pad: int) -> Any:
    """Row-major ``[Np, cols]`` (Np a multiple of 16) -> storage order, same shape/dtype."""
    b = a.view("uint8")
    np_, width = b.shape
    nst = k_pad // STAGE_K
    names, sizes, order = _axes(kind, width // nst, nst)
    t = b.reshape([np_ // ROWS, *sizes])
    perm = [0] + [1 + names.index(x) for x in order]
    return t.transpose(perm).reshape(np_, width).copy().view(a.dtype)


def untile(a: Any, kind: str, k_pad: int) -> Any:
    """Storage order -> row-major ``[Np, cols]``, same shape and dtype."""
    b = a.view("uint8")
    np_, width = b.shape
    nst = k_pad // STAGE_K
    names, sizes, order = _axes(kind, width // nst, nst)
    t = b.reshape([np_ // ROWS, *[sizes[names.index(x)] for x in order]])
    perm = [0] + [1 + order.index(x) for x in names]
    return t.transpose(perm).reshape(np_, width).copy().view(a.dtype)

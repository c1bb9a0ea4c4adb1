"""The band-tiled byte order of every plane (docs/formats.md, "Storage order").

Rows are grouped in bands of 16 (N is padded to a multiple of 16 in storage), K in
stages of 128. A band's bytes are stored stage after stage, and inside a stage in the
order the decode kernel's shared-memory stage holds them (kernels/dec_q.cu), so one
stage of one band is one contiguous block: a kernel streams a band front to back with
16-byte copies. Row-major order put 16 rows x 64 bytes per stage 2.5 KB apart, and
HBM ran those scattered pieces at half the bandwidth of a contiguous read (H200,
docs/perf/decode_h200.md@8fe804d, "Versions": BF16 [14336,5120] T=1 86.5 vs 47.5 us).

``tile`` maps a row-major ``[Np, cols]`` plane to storage order (same shape and dtype:
the array is a flat buffer in that order); ``untile`` inverts it. Both take NumPy or
CuPy arrays. The axes below name the fragment coordinates of the kernel: ``i`` = row
half (rows gid, gid + 8), ``gid`` = row mod 8, ``j`` = 64-k slab of the stage, ``tig``
= the lane's quarter of a slab row (4-bit codes: the lane's k pair 2 tig, 2 tig + 1 of
each 8 k), ``ks`` = the MMA's 16-k step of a slab, ``e`` = the 8-k half of a step,
``p`` = a code's place in its k pair, ``kh``, ``kl`` = W8's 32-k group of the slab and
its k step in the group (Q6's high bits: the same split of ``ks``), ``c`` =
BF16's 8-value half of a lane's 16 values, ``b`` = bytes.

The 4-bit code plane is ordered by nibble, not by byte: lane (gid, tig)'s 16 bytes of a
slab are one 32-bit word per k step ks whose nibbles r and r + 4 are the two codes of
the MMA's A register r (rows gid + 8 (r & 1), k 16 ks + 8 (r >> 1) + 2 tig, + 1), so
that a thread loads its own codes with one 16-byte load and spreads a register's pair
with a shift and one mask (kernels/dq_rs.cu, kernels/dec_q.cu). The Q5 / Q6 high-bit
planes follow the same lanes by bit and by 2-bit field (``high1``, ``high2``).
"""

from __future__ import annotations

from typing import Any

ROWS = 16  # rows per band
STAGE_K = 128  # k per stage


def n_stored(n: int) -> int:
    """Rows a plane stores: N padded to a whole band."""
    return -(-n // ROWS) * ROWS


# Per tiling kind: (row-major split of [bands, 16 rows, stage units] into named axes,
# storage order of those axes). Row axes come first (i, gid), then the column axes. The
# unit is a byte, or the bit field of _UNIT_BITS (a byte's fields lowest bits first).
#
# The code and high-bit planes hold one unit per k, so their row-major split is the MMA
# fragment's coordinates of k = 64 j + 16 ks + 8 e + 2 tig + p (ks = 2 kh + kl where a
# kind groups two k steps); only their storage orders differ.
_FRAG = (("i", 2), ("gid", 8), ("j", 2), ("ks", 4), ("e", 2), ("tig", 4), ("p", 2))
_FRAG_KH = (("i", 2), ("gid", 8), ("j", 2), ("kh", 2), ("kl", 2), ("e", 2), ("tig", 4), ("p", 2))
_KINDS: dict[str, tuple[tuple[tuple[str, int], ...], tuple[str, ...]]] = {
    # 4-bit codes (Q4, Q5/Q6 low nibbles, NVFP4): 128 nibbles (k) per row per stage.
    "codes4": (_FRAG, ("j", "gid", "tig", "ks", "p", "e", "i")),
    # W8 int8 codes: 128 bytes per row per stage. Lane (gid, tig)'s 16 bytes of group kh
    # (32 k) of a slab hold its A registers' code pairs of k steps 2 kh + kl: bytes
    # 8 kl + 2 r, + 1 for register r = i + 2 e.
    "codes8": (_FRAG_KH, ("j", "kh", "gid", "tig", "kl", "e", "i", "p")),
    # BF16 values: 256 bytes per row per stage.
    "bf16": (
        (("i", 2), ("gid", 8), ("j", 2), ("tig", 4), ("c", 2), ("b", 16)),
        ("j", "i", "c", "gid", "tig", "b"),
    ),
    # Q5 high bits (1 bit per k): 128 bits per row per stage; lane (gid, tig)'s 32-bit word
    # of a slab holds bit 4 ks + r for A register r's lower k, bit 16 + 4 ks + r for its
    # higher k (r = i + 2 e), so a register's pair is one shift and a mask away.
    "high1": (_FRAG, ("j", "gid", "tig", "p", "ks", "e", "i")),
    # Q6 high bits (2 bits per k): 128 fields per row per stage; lane (gid, tig)'s two
    # 32-bit words of a slab hold k steps 2 kh, 2 kh + 1 each: field 4 kl + r for
    # register r's lower k, 8 + 4 kl + r for its higher k (ks = 2 kh + kl).
    "high2": (_FRAG_KH, ("j", "gid", "tig", "kh", "p", "kl", "e", "i")),
    # Scales: each row's bytes of a stage, row after row.
    "rows": ((("r", 16), ("b", -1)), ("r", "b")),
}
_UNIT_BITS = {"codes4": 4, "high1": 1, "high2": 2}


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


def _units(b: Any, kind: str) -> Any:
    """``[Np, bytes]`` uint8 -> ``[Np, units]``: the bytes, or their bit fields (lowest first)."""
    bits = _UNIT_BITS.get(kind, 8)
    if bits == 8:
        return b
    u = b.reshape(b.shape[0], -1, 1).repeat(8 // bits, axis=2)
    for t in range(8 // bits):
        u[..., t] >>= bits * t
    u &= (1 << bits) - 1
    return u.reshape(b.shape[0], -1)


def _bytes(u: Any, kind: str) -> Any:
    """Inverse of ``_units``."""
    bits = _UNIT_BITS.get(kind, 8)
    if bits == 8:
        return u
    v = u.reshape(u.shape[0], -1, 8 // bits)
    out = v[..., 0].copy()
    for t in range(1, 8 // bits):
        out |= v[..., t] << (bits * t)
    return out


def tile(a: Any, kind: str, k_pad: int) -> Any:
    """Row-major ``[Np, cols]`` (Np a multiple of 16) -> storage order, same shape/dtype."""
    u = _units(a.view("uint8"), kind)
    np_, width = u.shape
    nst = k_pad // STAGE_K
    names, sizes, order = _axes(kind, width // nst, nst)
    t = u.reshape([np_ // ROWS, *sizes])
    perm = [0] + [1 + names.index(x) for x in order]
    t = t.transpose(perm).reshape(np_, width)
    return _bytes(t, kind).copy().view(a.dtype)


def untile(a: Any, kind: str, k_pad: int) -> Any:
    """Storage order -> row-major ``[Np, cols]``, same shape and dtype."""
    u = _units(a.view("uint8"), kind)
    np_, width = u.shape
    nst = k_pad // STAGE_K
    names, sizes, order = _axes(kind, width // nst, nst)
    t = u.reshape([np_ // ROWS, *[sizes[names.index(x)] for x in order]])
    perm = [0] + [1 + order.index(x) for x in names]
    t = t.transpose(perm).reshape(np_, width)
    return _bytes(t, kind).copy().view(a.dtype)

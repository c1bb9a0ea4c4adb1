"""Formats: byte formulas, pack/decode round trip, an independent naive decoder, NVFP4 minifloats."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ninfer import QType, pack, weight_bytes
from ninfer.formats import FORMATS, PLANES, k_padded
from ninfer.formats.decode import row_major
from ninfer.formats.fp import E2M1_MAG, E4M3_MAG, decode_e2m1, decode_e4m3, encode_e2m1, encode_e4m3

BYTES_PER_GROUP = {QType.Q4: 34, QType.Q5: 42, QType.Q6: 50, QType.W8: 34, QType.NVFP4: 9}
GROUP = {QType.Q4: 64, QType.Q5: 64, QType.Q6: 64, QType.W8: 32, QType.NVFP4: 16}


def test_seed_byte_checks() -> None:
    assert weight_bytes(QType.Q4, 4096, 5120) == 11_141_120
    assert weight_bytes(QType.Q4, 6144, 5120) == 16_711_680


@pytest.mark.parametrize("qtype", list(QType), ids=lambda q: q.name)
@pytest.mark.parametrize(("n", "k"), [(4096, 5120), (1152, 4304), (3, 1)])
def test_byte_formula(qtype: QType, n: int, k: int) -> None:
    if qtype is QType.BF16:
        assert weight_bytes(qtype, n, k) == 2 * n * k
    else:
        groups = n * k_padded(k) // GROUP[qtype]
        assert weight_bytes(qtype, n, k) == groups * BYTES_PER_GROUP[qtype]


def test_padded_k() -> None:
    assert k_padded(4304) == 4352
    assert weight_bytes(QType.Q4, 1152, 4304) == 1152 * 4352 // 64 * 34


@pytest.mark.parametrize("qtype", [q for q in QType if q is not QType.BF16], ids=lambda q: q.name)
def test_plane_bytes_equal_formula(qtype: QType) -> None:
    w = pack(np.random.default_rng(1).standard_normal((64, 4304)), qtype)
    assert w.storage_bytes == w.nbytes == weight_bytes(qtype, 64, 4304)


def test_bytes_reject_bad_shape() -> None:
    with pytest.raises(ValueError, match="expected N >= 1"):
        weight_bytes(QType.Q4, 0, 128)


def _weights(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    # Non-uniform magnitudes across groups so scales differ; never zeros.
    mag = np.exp(rng.standard_normal((n, (k + 15) // 16)))
    return rng.standard_normal((n, k)) * np.repeat(mag, 16, axis=1)[:, :k]


@pytest.mark.parametrize("qtype", list(QType), ids=lambda q: q.name)
def test_round_trip_within_half_step(qtype: QType) -> None:
    rng = np.random.default_rng(2)
    n, k = 48, 4304
    w = _weights(rng, n, k)
    p = pack(w, qtype)
    d = p.decode()
    assert d.shape == (n, k) and d.dtype == np.float64
    if qtype is QType.BF16:
        step = np.abs(w) * 2.0**-8
    elif qtype is QType.NVFP4:
        # Half the gap between neighbouring E2M1 values (widest gap 2, between 4 and 6),
        # in units of the group's decoded scale.
        s = p.tensor_scale * E4M3_MAG[row_major(qtype, p.planes, n, p.k_pad)["scales"]]
        step = np.repeat(s, 16, axis=1)[:, :k] * 1.0
    else:
        s = row_major(qtype, p.planes, n, p.k_pad)["scales"].astype(np.float64)
        step = np.repeat(s, GROUP[qtype], axis=1)[:, :k] * 0.5
    err = np.abs(d - w)
    assert np.all(err <= step * (1 + 1e-6) + 1e-12), (
        f"worst {err.max()} at {np.unravel_index(err.argmax(), err.shape)}"
    )


@pytest.mark.parametrize("qtype", list(QType), ids=lambda q: q.name)
def test_padding_decodes_to_zero(qtype: QType) -> None:
    p = pack(_weights(np.random.default_rng(3), 8, 4304), qtype)
    full = p.decode(full=True)
    assert full.shape == (8, 4352)
    assert np.all(full[:, 4304:] == 0)


@pytest.mark.parametrize("qtype", list(QType), ids=lambda q: q.name)
def test_pack_is_deterministic(qtype: QType) -> None:
    w = _weights(np.random.default_rng(4), 16, 256)
    a, b = pack(w, qtype), pack(w.copy(), qtype)
    for name in a.planes:
        assert np.array_equal(
            np.asarray(a.planes[name]).view(np.uint8), np.asarray(b.planes[name]).view(np.uint8)
        )
    assert a.tensor_scale == b.tensor_scale


def stored_byte(plane: np.ndarray, kind: str, r: int, c: int, k_pad: int) -> int:
    """Byte ``c`` of row ``r`` of a plane in row-major terms, read at its storage address.

    Written from docs/formats.md ("Storage order"), independent of ninfer.formats.tiling.
    """
    flat = np.ascontiguousarray(plane).view(np.uint8).reshape(-1)
    width = flat.size // plane.shape[0]  # bytes per stored row
    sb = width // (k_pad // 128)  # bytes per row per 128-k stage
    band, rr = divmod(r, 16)
    i, gid = divmod(rr, 8)
    st, cc = divmod(c, sb)
    if kind == "codes8":
        j, kh, kl, e = cc // 64, (cc % 64) // 32, (cc % 32) // 16, (cc % 16) // 8
        tig, p = (cc % 8) // 2, cc % 2
        off = (2 * j + kh) * 512 + (gid * 4 + tig) * 16 + kl * 8 + e * 4 + i * 2 + p
    elif kind == "bf16":
        j, tig, half = cc // 128, (cc % 128) // 32, (cc % 32) // 16
        off = ((2 * j + i) * 2 + half) * 512 + (gid * 4 + tig) * 16 + cc % 16
    elif kind == "rows":
        off = rr * sb + cc
    else:
        raise ValueError(f"stored_byte: no byte formula for kind {kind!r}")
    return int(flat[band * 16 * width + st * 16 * sb + off])


def stored_code4(plane: np.ndarray, r: int, k: int) -> int:
    """Row ``r``'s 4-bit code at column ``k``, read at its storage nibble.

    Written from docs/formats.md ("Storage order", 4-bit codes), independent of
    ninfer.formats.tiling.
    """
    flat = np.ascontiguousarray(plane).view(np.uint8).reshape(-1)
    row_bytes = flat.size // plane.shape[0]
    band, rr = divmod(r, 16)
    i, gid = divmod(rr, 8)
    st, kk = divmod(k, 128)
    j, ks, e, tig, p = kk // 64, (kk % 64) // 16, (kk % 16) // 8, (kk % 8) // 2, k % 2
    f = 2 * (band * 16 * row_bytes + st * 16 * 64)
    f += j * 1024 + (gid * 4 + tig) * 32 + ks * 8 + p * 4 + e * 2 + i
    byte = int(flat[f // 2])
    return (byte >> 4) if f % 2 else (byte & 15)


def stored_high(plane: np.ndarray, bits: int, r: int, k: int) -> int:
    """Row ``r``'s high bits (Q5: ``bits`` = 1, Q6: 2) at column ``k``, at their storage field.

    Written from docs/formats.md ("Storage order", high bits), independent of
    ninfer.formats.tiling.
    """
    flat = np.ascontiguousarray(plane).view(np.uint8).reshape(-1)
    row_bytes = flat.size // plane.shape[0]
    per_byte = 8 // bits
    band, rr = divmod(r, 16)
    i, gid = divmod(rr, 8)
    st, kk = divmod(k, 128)
    j, ks, e, tig, p = kk // 64, (kk % 64) // 16, (kk % 16) // 8, (kk % 8) // 2, k % 2
    f = per_byte * (band * 16 * row_bytes + st * 16 * (128 // per_byte))
    f += j * 1024 + (gid * 4 + tig) * 32
    if bits == 1:
        f += p * 16 + ks * 4 + e * 2 + i
    else:
        f += (ks // 2) * 16 + p * 8 + (ks % 2) * 4 + e * 2 + i
    byte = int(flat[f // per_byte])
    return (byte >> (bits * (f % per_byte))) & ((1 << bits) - 1)


def naive_decode(p) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Element-by-element decoder written from docs/formats.md, independent of ninfer's."""
    n, kp = p.n, p.k_pad
    out = np.zeros((n, kp))
    pl = {k: np.asarray(v) for k, v in p.planes.items()}

    def u8(name: str, kind: str, r: int, c: int) -> int:
        return stored_byte(pl[name], kind, r, c, kp)

    def f16(name: str, r: int, g: int) -> float:
        raw = bytes([u8(name, "rows", r, 2 * g), u8(name, "rows", r, 2 * g + 1)])
        return float(np.frombuffer(raw, np.float16)[0])

    for r in range(n):
        for k in range(kp):
            if p.qtype is QType.BF16:
                raw = bytes([u8("w", "bf16", r, 2 * k), u8("w", "bf16", r, 2 * k + 1)])
                out[r, k] = float(np.frombuffer(raw, ml_dtypes.bfloat16)[0])
                continue
            if p.qtype is QType.W8:
                q = u8("qs", "codes8", r, k)
                out[r, k] = f16("scales", r, k // 32) * (q - 256 if q > 127 else q)
                continue
            nib = stored_code4(pl["qs"], r, k)
            if p.qtype is QType.NVFP4:
                sign = -1.0 if nib & 8 else 1.0
                e, m = (nib >> 1) & 3, nib & 1
                v = m * 0.5 if e == 0 else (1 + m / 2) * 2.0 ** (e - 1)
                sb = u8("scales", "rows", r, k // 16)
                se, sm = sb >> 3, sb & 7
                s = sm / 8 * 2.0**-6 if se == 0 else (1 + sm / 8) * 2.0 ** (se - 7)
                out[r, k] = sign * v * s * float(np.float32(p.tensor_scale))
                continue
            code = nib
            if p.qtype is QType.Q5:
                code |= stored_high(pl["qh"], 1, r, k) << 4
            if p.qtype is QType.Q6:
                code |= stored_high(pl["qh"], 2, r, k) << 4
            off = {QType.Q4: 8, QType.Q5: 16, QType.Q6: 32}[p.qtype]
            out[r, k] = f16("scales", r, k // 64) * (code - off)
    return out


@pytest.mark.parametrize("qtype", list(QType), ids=lambda q: q.name)
def test_naive_decoder_agrees_bit_exactly(qtype: QType) -> None:
    # 21 rows: two bands, the second one padded; K = 300 pads to 384 (three stages).
    p = pack(_weights(np.random.default_rng(5), 21, 300), qtype)
    a, b = p.decode(full=True), naive_decode(p)
    assert np.array_equal(a.view(np.uint64), b.view(np.uint64))


def test_plane_table_matches_formats() -> None:
    assert set(PLANES) == set(FORMATS) == set(QType)


def test_e2m1_agrees_with_ml_dtypes() -> None:
    codes = np.arange(16, dtype=np.uint8)
    ref = (
        codes.view(ml_dtypes.float4_e2m1fn).astype(np.float64)
        if hasattr(ml_dtypes, "float4_e2m1fn")
        else None
    )
    ours = decode_e2m1(codes)
    assert ref is not None, "ml_dtypes lacks float4_e2m1fn"
    assert np.array_equal(ours, ref)
    # Encoding: every value on a fine grid, against ml_dtypes' RNE saturating cast.
    x = np.linspace(-7, 7, 4001)
    assert np.array_equal(
        decode_e2m1(encode_e2m1(x)), x.astype(ml_dtypes.float4_e2m1fn).astype(np.float64)
    )
    assert np.array_equal(np.sort(E2M1_MAG), E2M1_MAG)


def test_e4m3_agrees_with_ml_dtypes() -> None:
    codes = np.arange(0x7F, dtype=np.uint8)  # every non-negative finite code
    assert np.array_equal(
        decode_e4m3(codes), codes.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    )
    x = np.concatenate([np.linspace(0, 460, 20001), np.geomspace(1e-4, 1, 5000)])
    ours = decode_e4m3(encode_e4m3(x))
    ref = np.minimum(x, 448.0).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    assert np.array_equal(ours, ref)


def test_e4m3_nan_code_rejected() -> None:
    with pytest.raises(ValueError, match="NaN"):
        decode_e4m3(np.array([0x7F], np.uint8))


@pytest.mark.parametrize(
    ("w", "exc", "msg"),
    [
        ([[1.0, 2.0]], TypeError, "numpy.ndarray"),
        (np.ones(4), ValueError, "2-D"),
        (np.array([[np.nan, 1.0]]), ValueError, "NaN"),
        (np.array([["a"]]), TypeError, "dtype"),
    ],
)
def test_pack_rejects_bad_input(w: object, exc: type, msg: str) -> None:
    with pytest.raises(exc, match=msg):
        pack(w, QType.Q4)


def test_qtype_parse() -> None:
    assert QType.parse("Q4") is QType.Q4
    with pytest.raises(ValueError, match="expected one of"):
        QType.parse("q3")

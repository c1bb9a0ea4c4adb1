"""Where a dq_rs stage goes: the kernel timed with parts of it taken out (docs/perf/prefill_h200.md).

A measurement aid, not a route: each variant is kernels/dq_rs.cu with text patches
(below) compiled in place of the real source for this process, then one public
``linear()`` call is timed under the cold timer of ``ninfer-bench`` (graph replay, 256
MiB flush). The variants compute garbage on purpose (no output is checked):

- ``full``: the kernel as it is;
- ``nodecode``: the consumers skip the decode (the fragments keep stale register values;
  the MMAs, the ring and the copies stay);
- ``nomma``: no ``wgmma`` is issued (decode, ring and copies stay; the fragments are
  summed into a sink, below, or ptxas drops the decode);
- ``nocopy``: the copy thread issues no TMA and arrives on each stage's barrier at once
  (the consumers decode and multiply stale shared memory);
- ``mma_only`` (``nodecode`` + ``nocopy``), ``decode_only`` (``nomma`` + ``nocopy``)
  and ``skeleton`` (none of the three: the ring's barriers alone);
- ``ss``: the MMAs with A from shared memory (x's stage stands in), the decode kept;
- ``nofence``, ``wait2`` (and with ``mma_only``): no ``wgmma.fence`` per stage, or two
  stages' MMAs in flight (both unsafe for the numbers, timing only);
- ``offset``: the second consumer warpgroup starts ~300 cycles late (the numbers stay
  right);
- ``noscale`` (Q4, Q5, Q6 only): the codes unscaled (which also drops the scales' loads
  and conversion; timing only);
- ``nopart``, ``nosum``, ``nostore``, ``noepi`` (all three), ``skeleton_noepi``: a run's
  tile hand-offs taken apart (no FP32 partial stored, none read and added, no output
  stored; timing only); ``nostg``: the output staged in shared memory but not stored;
  ``nootma``: the output stored by the consumers' 16-byte stores instead of the TMA
  store (the numbers stay right);

(``lds1`` and ``ldsT``, the code plane's orders measured before the 4-bit codes' nibble
order landed, patched the byte order's kernel: the JSONs of that time hold their patch
texts.)

    python tools/dq_rs_ablate.py [--points q4:14336x5120:128,...] [--variants full,nodecode]
        [--blocks 132]
        [--ref earlier_dq_rs_assembled.cu [--ref-band q6:512:512:64,...] [--ref-stages 8,4]]

``--ref-band``: the per-stage band bytes (codes, high bits, scales: routes/dq_rs.py's
BAND, which also sets the ring depth) the earlier source was built for, where they
differ from today's; the launcher's boxes and byte counts must match the kernel's.
``--ref-stages``: the ring depths (routes/dq_rs.py's STAGE_DEPTHS) to run the --ref source
with, e.g. the same source at an earlier ring rule. The --ref source must take today's
kernel parameters (257fb0c's, with the output map `omap`): the tool refuses an older one.
``--blocks``: force the persistent grid's block count on every point (recorded in the
output and the JSON rows).

``--profile``: no timing; each variant's call on each point runs once more between
cudaProfilerStart/Stop (for ``ncu --profile-from-start off``: one profiled dq_rs
launch per variant and point, in the order given).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from route_swap import time_under  # tools/ is the script's sys.path[0]

from ninfer import Policy, QType
from ninfer.bench.env import environment
from ninfer.bench.fixture import random_activations, random_device_weight
from ninfer.bench.run import prepared_call, profile_one
from ninfer.bench.timer import ColdTimer
from ninfer.routes import Problem, dq_rs, launch, select, table
from ninfer.runtime import compile as rt_compile
from ninfer.runtime.sources import assembled_source

# (the text as in kernels/dq_rs.cu, its replacement): each must occur exactly once.
_DECODE = (
    "    rs_frag<QT>(RsSmem<QT>(wr + s * WST, lane_codes, s * WST, band, s & 1, gid, tig), nib, a);",
    "    (void)lane_codes, (void)nib;",
)
# Without the MMAs nothing reads the fragments in PTX (the fence's operands are NVVM's
# only), and ptxas drops the decode: a sum of them, stored on a condition that never
# holds (T < 0), keeps it.
_SINK = [
    ("  u32 a0[4][4], a1[4][4];", "  u32 a0[4][4], a1[4][4];\n  u32 sink = 0;"),
    (
        "      // (rs_store opens with a barrier: the last half's reads of cs are done.)",
        "      if (sink == 0x9E3779B9u && T < 0) out[0] = (bf16_t)sink;",
    ),
]
_WGMMA = (
    "for (int h = 0; h < NB; ++h) wgmma_rs(acc[h], a[ks], rs_desc(xb + h * RS_X_HALF + 32 * ks));"
)
_SUM = "sink += a[ks][0] + a[ks][1] + a[ks][2] + a[ks][3];"
# (Each replacement stays one loop over h: the k-step loop around it has no braces.)
_MMA = [*_SINK, (_WGMMA, f"for (int h = 0; h < NB; ++h) {{ if (h == 0) {_SUM} (void)xb; }}")]
_COPY = [
    ("          mbar_expect_tx(full(s), xbytes + WST);", "          mbar_arrive(full(s));"),
    ("          tma_2d(xs0 + s * XT, xm, g * RS_BK, t0, full(s));", ""),
    (
        "          tma_2d(dst, &wcodes, (sst * 2 * B::CODES + half * B::CODES) / 8, n0 / 16, full(s));",
        "",
    ),
    (
        "          if constexpr (B::QH > 0)\n"
        "            tma_2d(dst + 8 * B::CODES, &whigh, (sst * 2 * B::QH + half * B::QH) / 8, n0 / 16, full(s));",
        "",
    ),
    (
        "          if constexpr (B::SC > 0) tma_2d(dst + 8 * (B::CODES + B::QH), &wscale, sst * B::SC / 8, n0 / 16, full(s));",
        "",
    ),
]
# The MMAs in the SS form, A from shared memory (the stage's x tile stands in for it),
# the decoded fragments summed into the sink: whether the register-sourced A is what
# keeps the decode and the MMAs from overlapping. wgmma_ss is the kernel's own wgmma_rs
# with the A operand turned into a descriptor, so it follows the kernel's instruction.
_SS_EDITS = [
    (
        "void wgmma_rs(float d[64], const u32 a[4], u64 db)",
        "void wgmma_ss(float d[64], u64 da, u64 db)",
    ),
    ("{%64,%65,%66,%67}, %68, p, 1, 1, 0;", "%64, %65, p, 1, 1, 0, 0;"),
    ('"r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db)', '"l"(da), "l"(db)'),
]


def _ss_fn() -> str:
    text = assembled_source("dq_rs")
    start = text.index("__device__ __forceinline__ void wgmma_rs(")
    fn = text[start : text.index("\n}\n", start) + 3]
    for old, new in _SS_EDITS:
        if fn.count(old) != 1:
            raise SystemExit(f"dq_rs_ablate: wgmma_rs no longer holds {old!r} once")
        fn = fn.replace(old, new)
    return fn + "\n"


_SS = [
    (
        "// Two values times FP32 s as one BF16 pair",
        _ss_fn() + "// Two values times FP32 s as one BF16 pair",
    ),
    *_SINK,
    (
        _WGMMA,
        f"for (int h = 0; h < NB; ++h) {{ if (h == 0) {_SUM} "
        "wgmma_ss(acc[h], rs_desc(xb + 32 * ks), rs_desc(xb + h * RS_X_HALF + 32 * ks)); }",
    ),
]
# Per-stage ordering: no wgmma.fence before each stage's MMAs (the fragments' writes are
# then unordered with the MMAs' reads: timing only), and wait_group 2 instead of 1 (two
# stages' MMAs in flight; with two fragment sets the decode then overwrites a set still
# being read: timing only).
_NOFENCE = [('asm volatile("wgmma.fence.sync.aligned;"', 'asm volatile(""')]
_WAIT2 = [
    (
        'asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");',
        'asm volatile("wgmma.wait_group.sync.aligned 2;" ::: "memory");',
    )
]
# The second consumer warpgroup starts ~300 cycles (about half a stage of its decode)
# after the first: whether the two stay in step (both decoding, then both multiplying) or
# drift apart once started apart (timing only: the numbers are the kernel's).
_OFFSET = [
    (
        "  int lap = 0;  // ring laps begun, as the copy thread fills them",
        "  int lap = 0;  // ring laps begun, as the copy thread fills them\n"
        "  if (c == 1) { const long long c0 = clock64(); while (clock64() - c0 < 300) {} }",
    )
]
# The integer formats' codes into the MMA unscaled (timing only): what the two BF16
# scale operations per fragment register cost.
_NOSCALE = [
    (
        "          a[ks][k] = bf2_fma(v, sc.hi, bf2_fma(v, sc.lo, BF2_NEG_ZERO));",
        "          a[ks][k] = v; (void)sc;",
    )
]
# A run's tile hand-offs, taken apart (timing only: the numbers are wrong): no FP32
# partial stored by the blocks that finish a cut tile first (`nopart`), no partials read
# and added by the last (`nosum`), no output stored (`nostore`); with `skeleton`, the
# ring's barriers alone without them (`skeleton_noepi`). (T < 0 never holds: the branch
# stays in the code, its work does not run.)
_NOPART = [
    (
        "            mine[(16 * h + e) * 256] = make_float4(",
        "            if (T < 0) mine[(16 * h + e) * 256] = make_float4(",
    )
]
_NOSUM = [
    ("        if (z > 0) {", "        if (z > 0 && T < 0) {"),
    ("for (int zz = z + 1; zz < nz; ++zz) {", "for (int zz = z + 1; zz < nz && T < 0; ++zz) {"),
]
_NOSTORE = [("      rs_store(acc[h], cs, c, tid,", "      if (T < 0) rs_store(acc[h], cs, c, tid,")]
# The output staged in shared memory as always, its global stores skipped (`nostg`):
# what of `nostore`'s time is the stores to global memory.
_NOSTG = [
    (
        "      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);",
        "      if (T < 0) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);",
    ),
    ("    if (wt == 0) tma_store_2d(", "    if (wt == 0 && T < 0) tma_store_2d("),
]
# The output stored by the consumers' 16-byte stores, as before the TMA store (`nootma`;
# the results are right): what the TMA store takes off.
_NOOTMA = [("&omap, otma != 0,", "&omap, false,")]
VARIANTS: dict[str, list[tuple[str, str]]] = {
    "full": [],
    "nodecode": [_DECODE],
    "nomma": _MMA,
    "nocopy": _COPY,
    "mma_only": [_DECODE, *_COPY],
    "decode_only": [*_MMA, *_COPY],
    "skeleton": [_DECODE, *_MMA, *_COPY],
    "ss": _SS,
    "nofence": _NOFENCE,
    "wait2": _WAIT2,
    "mma_only_nofence": [_DECODE, *_COPY, *_NOFENCE],
    "mma_only_wait2": [_DECODE, *_COPY, *_WAIT2],
    "offset": _OFFSET,
    "noscale": _NOSCALE,
    "nopart": _NOPART,
    "nosum": _NOSUM,
    "nostore": _NOSTORE,
    "nostg": _NOSTG,
    "nootma": _NOOTMA,
    "noepi": [*_NOPART, *_NOSUM, *_NOSTORE],
    "skeleton_noepi": [_DECODE, *_MMA, *_COPY, *_NOPART, *_NOSUM, *_NOSTORE],
}
POINTS = "q4:14336x5120:128,q4:14336x5120:256,q4:14336x5120:1024,q6:14336x5120:128,nvfp4:14336x5120:128,bf16:14336x5120:128"


def patched(patches: list[tuple[str, str]]) -> Callable[[str], str]:
    text = assembled_source("dq_rs")
    for old, new in patches:
        if text.count(old) != 1:
            raise SystemExit(f"dq_rs_ablate: patch target not found once in dq_rs.cu: {old!r}")
        text = text.replace(old, new)

    return _with_dq_rs(text)


def _with_dq_rs(text: str) -> Callable[[str], str]:
    def source(name: str) -> str:
        return text if name == "dq_rs" else assembled_source(name)

    return source


def _check(p: Problem) -> None:
    if select(p).name != "dq_rs":
        raise SystemExit(f"dq_rs_ablate: {p} is not a dq_rs call")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", default=POINTS, help="qtype:NxK:T,...")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--json")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument(
        "--profile", action="store_true", help="one profiled call per variant, no timing"
    )
    ap.add_argument(
        "--ref",
        help="an assembled dq_rs source (e.g. an earlier commit's): timed as variant 'ref' beside the others",
    )
    ap.add_argument(
        "--ref-band",
        default="",
        help="qtype:codes:high:scales,... dq_rs.BAND entries for the --ref source",
    )
    ap.add_argument(
        "--ref-stages", default="", help="S,S,... dq_rs.STAGE_DEPTHS for the --ref source"
    )
    ap.add_argument(
        "--blocks",
        type=int,
        help="force the persistent grid's block count (routes/dq_rs.py's BLOCKS_FORCE) on every point",
    )
    args = ap.parse_args()
    if args.blocks is not None:
        dq_rs.BLOCKS_FORCE = args.blocks
    if (args.ref_band or args.ref_stages) and not args.ref:
        raise SystemExit("dq_rs_ablate: --ref-band / --ref-stages describe the --ref source")
    ref_depths = tuple(int(v) for v in args.ref_stages.split(",")) if args.ref_stages else None
    ref_band = {}
    for spec in filter(None, args.ref_band.split(",")):
        q, *b = spec.split(":")
        codes, high, scales = (int(v) for v in b)
        ref_band[QType(q)] = (codes, high, scales)
    ref_text = ""
    if args.ref:  # read and checked before any device work
        with open(args.ref) as f:
            ref_text = f.read()
        # The launcher passes today's parameter list (routes/dq_rs.py's _Params): a source
        # from before 257fb0c's output map would read its parameters shifted.
        if "const __grid_constant__ RsTensorMap omap" not in ref_text:
            raise SystemExit(
                "dq_rs_ablate: --ref source has no `omap` parameter (before 257fb0c): "
                "today's launcher cannot run it; time it from its own commit's tree"
            )
    points = []
    for spec in args.points.split(","):
        q, nk, t = spec.split(":")
        n, k = (int(v) for v in nk.split("x"))
        points.append((QType(q), n, k, int(t)))
    env = environment(0)
    timer = ColdTimer(3, args.repeat, 256, "graph")
    weights = {(q, n, k): random_device_weight(q, n, k, seed=7) for q, n, k, _ in points}
    rows: list[dict[str, object]] = []
    variants = args.variants.split(",")
    if args.ref:
        variants.append("ref")
    if args.blocks is not None:
        print(f"blocks={args.blocks} (BLOCKS_FORCE on every point)")
    print("qtype N K T " + " ".join(f"{v}_us" for v in variants))
    results: dict[tuple[QType, int, int, int], dict[str, float]] = {p: {} for p in points}
    import cupy as cp

    cc = int(cp.cuda.Device().compute_capability)
    for q, n, k, t in points:
        _check(Problem(q, Policy.A16, n, k, t, cc))
    for v in variants:
        band, instances, depths = dict(dq_rs.BAND), dq_rs.INSTANCES, dq_rs.STAGE_DEPTHS
        try:
            if v == "ref":
                rt_compile.assembled_source = _with_dq_rs(ref_text)  # type: ignore[assignment]
                dq_rs.BAND.update(ref_band)
                dq_rs.STAGE_DEPTHS = ref_depths or depths
                # BAND and STAGE_DEPTHS set the ring depth, a template argument: the ref's
                # instances by name.
                ref_names = (
                    dq_rs.instance(Problem(q, Policy.A16, n, k, t, cc)) for q, n, k, t in points
                )
                dq_rs.INSTANCES = tuple(dict.fromkeys((*instances, *ref_names)))
            else:
                rt_compile.assembled_source = patched(VARIANTS[v])  # type: ignore[assignment]
            rt_compile._cache.clear()
            launch._kernels.clear()
            for q, n, k, t in points:
                w = weights[(q, n, k)]
                w.dispatch_cache.clear()  # plans hold the kernel they were built with
                x = random_activations(t, k)
                out = cp.empty((t, n), dtype=x.dtype)
                if args.profile:
                    with timer.stream:  # as the timed runs
                        profile_one(timer, prepared_call(x, w, out))
                    results[(q, n, k, t)][v] = float("nan")
                else:
                    results[(q, n, k, t)][v] = time_under(table.ROUTE_TABLES, timer, x, w, out)
        finally:
            dq_rs.BAND.clear()
            dq_rs.BAND.update(band)
            dq_rs.INSTANCES = instances
            dq_rs.STAGE_DEPTHS = depths
            rt_compile.assembled_source = assembled_source
            rt_compile._cache.clear()
            launch._kernels.clear()
            for w in weights.values():
                w.dispatch_cache.clear()
    for (q, n, k, t), us in results.items():
        rows.append({"qtype": q.value, "n": n, "k": k, "t": t, "blocks": args.blocks, **us})
        cols = " ".join(f"{us[v]:8.2f}" for v in variants)
        print(f"{q.value:<5} {n} {k} {t:>4} {cols}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

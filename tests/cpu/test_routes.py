"""The selector tables: coverage of every T, seams, fingerprint, policy resolution."""

from __future__ import annotations

import pytest

from ninfer import Policy, QType, UnsupportedProblem
from ninfer.routes import ROUTE_TABLES, Problem, fingerprint, seams, select, table_for


@pytest.mark.parametrize("cc", [80, 86, 89, 90, 100, 120])
@pytest.mark.parametrize("qtype", list(QType), ids=lambda q: q.name)
def test_every_t_has_exactly_one_route(cc: int, qtype: QType) -> None:
    table = table_for(cc)

    # Both sides of every N, K and T bound of the table.
    def sides(lo: int, hi: int | None) -> set[int]:
        return {lo - 1, lo} | ({hi, hi + 1} if hi is not None else set())

    nk = set().union(*(sides(r.n_min, r.n_max) | sides(r.k_min, r.k_max) for r in table))
    sizes = sorted({1, 640, 4096, 5120, 8192, 8193, 16384, 248320} | {b for b in nk if b >= 1})
    t_bounds = set().union(*(sides(r.t_min, r.t_max) for r in table))
    ts = sorted(
        {*range(1, 300), 1023, 1024, 1025, 2048, 65536, 10**6} | {t for t in t_bounds if t >= 1}
    )
    for n in sizes:
        for k in sizes:
            for t in ts:
                p = Problem(qtype, Policy.A16, n, k, t, cc)
                owners = [r.name for r in table if r.supports(p)]
                assert len(owners) == 1, f"N={n} K={k} T={t}: routes {owners}"
                assert select(p).name == owners[0]


def test_conformance_shapes_straddle_every_n_and_k_bound() -> None:
    # A route entry bounded in N or K is only tested if some conformance shape falls on
    # each side of the bound (tests/gpu/cases.py::SHAPES, read as text: no GPU imports here).
    import ast
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "gpu" / "cases.py").read_text()
    node = next(
        n
        for n in ast.parse(text).body
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "SHAPES" for t in n.targets)
    )
    shapes = ast.literal_eval(node.value)
    for table in ROUTE_TABLES.values():
        for r in table:
            for axis, lo, hi in ((0, r.n_min, r.n_max), (1, r.k_min, r.k_max)):
                vals = [s[axis] for s in shapes]
                if lo > 1:
                    assert any(v < lo for v in vals) and any(v >= lo for v in vals), (r, axis)
                if hi is not None:
                    assert any(v <= hi for v in vals) and any(v > hi for v in vals), (r, axis)


@pytest.mark.parametrize("cc", [80, 86, 89, 90, 100, 103, 110, 120, 121])
def test_every_route_compiles_for_the_devices_it_serves(cc: int) -> None:
    # A route with its own ARCHS (dq_rs: sm_90a, arch-specific code that no other GPU
    # runs) must not be reachable from another architecture's table.
    for r in table_for(cc):
        archs = r.launcher.archs
        if archs is not None:
            assert f"sm_{cc}a" in archs or f"sm_{cc}" in archs, (cc, r.name, archs)


def test_a4_resolves_to_a16_route_on_sm90() -> None:
    p = Problem(QType.NVFP4, Policy.A4, 14336, 5120, 1024, 90)
    assert p.compute is Policy.A16
    assert select(p).compute is Policy.A16


def test_old_gpu_is_unsupported() -> None:
    with pytest.raises(UnsupportedProblem, match="below the oldest"):
        select(Problem(QType.Q4, Policy.A16, 64, 128, 1, 75))


def test_seams_include_neighbours() -> None:
    s = seams(90)
    for r in table_for(90):
        if r.t_min > 1:
            assert {r.t_min - 1, r.t_min} <= set(s)
        if r.t_max is not None:
            assert {r.t_max, r.t_max + 1} <= set(s)
        for edge in r.launcher.t_edges():
            assert {edge, edge + 1} <= set(s)


def test_launchers_exist_for_every_route() -> None:
    for table in ROUTE_TABLES.values():
        for r in table:
            mod = r.launcher
            assert r.name == mod.name
            assert mod.instances()


def test_every_route_has_its_kernel_launcher_and_conformance_module() -> None:
    # One name per thing: kernels/<name>.cu <-> ninfer/routes/<name>.py <->
    # tests/gpu/test_<name>.py (the module that runs the route's owned T on every format).
    from pathlib import Path

    from ninfer.routes import LAUNCHERS

    root = Path(__file__).resolve().parents[2]
    for name in {r.name for table in ROUTE_TABLES.values() for r in table}:
        assert name in LAUNCHERS, name
        for path in (f"kernels/{name}.cu", f"ninfer/routes/{name}.py", f"tests/gpu/test_{name}.py"):
            assert (root / path).is_file(), f"route {name}: {path} is missing"
        assert f'owned_t("{name}")' in (root / f"tests/gpu/test_{name}.py").read_text(), name


def test_fingerprint_is_stable_hex() -> None:
    a, b = fingerprint(), fingerprint()
    assert a == b and len(a) == 16
    int(a, 16)


def test_fingerprint_is_the_same_in_every_process() -> None:
    """Baselines compare fingerprints across runs: no hash-seed dependence allowed."""
    import os
    import subprocess
    import sys

    code = "from ninfer.routes import fingerprint; print(fingerprint())"
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "3")
    }
    assert len(seen) == 1, seen


def test_dec_q_tiles_fit_the_smallest_shared_memory() -> None:
    # sm_86/89/120 allow 99 KiB of dynamic shared memory per block (sm_80: 163, sm_90:
    # 227): every tile the table can pick must launch on the users' RTX 5090 too.
    from ninfer.routes import dec_q

    for q in QType:
        bounds = {b for tl in dec_q.TILES[q] for b in (tl.n_min, tl.n_max, tl.n_max + 1) if b}
        for n in sorted({1, 1 << 20, *bounds}):
            for t in range(1, dec_q.T_MAX + 1):
                tl = dec_q.tile(q, t, n)
                need = dec_q.tile_shared_bytes(q, t, tl)
                assert need <= 99 * 1024, (q, t, tl, need)
                assert tl.nt * 8 >= t and tl.serves(t, n), (q, t, n, tl)
    # one set of seams for the conformance suite: every format's tile changes (the Q4 and
    # W8 rows at T = 1 and 4 add seams the others run through too)
    assert set(dec_q.LAUNCHER.t_edges()) == {
        tl.t_max for ts in dec_q.TILES.values() for tl in ts[:-1]
    }


def test_dec_q_tile_rows_by_n() -> None:
    # A row with n_min serves N >= n_min only, one with n_max N <= n_max; past the bound
    # the next row of its T range.
    from ninfer.routes import dec_q

    for q in QType:
        for tl in dec_q.TILES[q]:
            for inside, outside in ((tl.n_min, tl.n_min - 1), (tl.n_max, tl.n_max + 1)):
                if inside:
                    assert dec_q.tile(q, tl.t_max, inside) == tl
                    other = dec_q.tile(q, tl.t_max, outside)
                    assert other != tl and other.t_max >= tl.t_max, (q, tl, other)


def test_every_dec_q_tile_row_is_selected_somewhere() -> None:
    # A row the rows before it shadow at every T and N is dead data; the conformance suite
    # runs each row at the T and N row_points gives, where tile() must pick that row.
    from ninfer.routes import dec_q

    for q in QType:
        for tl, points in dec_q.DEFAULT.row_points(q).items():
            assert points, (q, tl)
            for t, n in points:
                assert dec_q.tile(q, t, n) == tl and tl.serves(t, n), (q, tl, t, n)
    # a shadowed row is reported as such
    shadowed = dec_q.DecQTuning(
        {QType.Q4: (dec_q.Tile(8, 1, 1, 1, 4, 3), dec_q.Tile(4, 1, 1, 1, 8, 3))}
    )
    assert shadowed.row_points(QType.Q4)[dec_q.Tile(4, 1, 1, 1, 8, 3)] == []

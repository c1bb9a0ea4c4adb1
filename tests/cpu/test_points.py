"""Bench points: the suite files against the seed tables, 'all' merging, sweeps, grouping."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ninfer import Policy, QType
from ninfer.bench import points
from ninfer.bench.points import (
    SUITE_NAMES,
    BenchPoint,
    SuiteError,
    group_points,
    load_suite,
    parse_sweep,
)

CONTINUOUS = (1, 16, 128, 1024)
VISION_STEP4 = (4, 128, 1024)

# Seed 000 §2.2 / §2.3, copied by hand: (label, qtype, N, K, T values).
SEED_27B = [
    ("27b.output_head", "q6", 248320, 5120, CONTINUOUS),
    ("27b.draft_head", "q4", 131072, 5120, CONTINUOUS),
    ("27b.gdn_output_gate", "q5", 6144, 5120, CONTINUOUS),
    ("27b.mtp_input", "w8", 5120, 10240, CONTINUOUS),
    ("27b.mtp_attention", "w8", 14336, 5120, CONTINUOUS),
    ("27b.mtp_gate_up", "w8", 34816, 5120, CONTINUOUS),
    ("27b.mtp_down", "w8", 5120, 17408, CONTINUOUS),
    ("27b.vision_patch", "q6", 1152, 1536, VISION_STEP4),
    ("27b.vision_qkv", "q4", 3456, 1152, VISION_STEP4),
    ("27b.vision_attn_out", "q5", 1152, 1152, VISION_STEP4),
    ("27b.vision_fc1", "q4", 4304, 1152, VISION_STEP4),
    ("27b.vision_fc2", "q5", 1152, 4304, VISION_STEP4),
    ("27b.vision_merger_fc1", "w8", 4608, 4608, VISION_STEP4),
    ("27b.vision_merger_fc2", "w8", 5120, 4608, VISION_STEP4),
]
SEED_35B = [
    ("35b.output_head", "q6", 248320, 2048, CONTINUOUS),
    ("35b.draft_head", "q4", 131072, 2048, CONTINUOUS),
    ("35b.mtp_projection", "w8", 2048, 4096, CONTINUOUS),
    ("35b.dflash_feature", "w8", 2048, 16384, CONTINUOUS),
    ("35b.vision_patch", "q6", 1152, 1536, VISION_STEP4),
    ("35b.vision_qkv", "q4", 3456, 1152, VISION_STEP4),
    ("35b.vision_attn_out", "q5", 1152, 1152, VISION_STEP4),
    ("35b.vision_fc1", "q4", 4304, 1152, VISION_STEP4),
    ("35b.vision_fc2", "q5", 1152, 4304, VISION_STEP4),
    ("35b.vision_merger_fc1", "w8", 4608, 4608, VISION_STEP4),
    ("35b.vision_merger_fc2", "w8", 2048, 4608, VISION_STEP4),
]
SEED = {"qwen3_6_27b": SEED_27B, "qwen3_6_35b_a3b": SEED_35B}


def _expand(table: list[tuple[str, str, int, int, tuple[int, ...]]]) -> list[BenchPoint]:
    return [
        BenchPoint(QType.parse(q), Policy.A16, n, k, t, (label,))
        for label, q, n, k, ts in table
        for t in ts
    ]


@pytest.mark.parametrize(
    ("name", "count"), [("qwen3_6_27b", 49), ("qwen3_6_35b_a3b", 37), ("all", 68)]
)
def test_suite_counts(name: str, count: int) -> None:
    pts = load_suite(name)
    assert len(pts) == count
    assert len({p.key for p in pts}) == count  # every timing row unique


@pytest.mark.parametrize("name", ["qwen3_6_27b", "qwen3_6_35b_a3b"])
def test_suite_matches_seed_table(name: str) -> None:
    assert load_suite(name) == _expand(SEED[name])


def test_every_t_from_its_class() -> None:
    classes = {(QType.parse(q), n, k): ts for table in SEED.values() for _, q, n, k, ts in table}
    for p in load_suite("all"):
        assert p.t in classes[(p.qtype, p.n, p.k)]
        assert p.policy is Policy.A16


def test_all_merges_shared_vision_points() -> None:
    pts = load_suite("all")
    by_key = {p.key: p for p in pts}
    for t in VISION_STEP4:
        p = by_key[("q4", "a16", 3456, 1152, t)]
        assert p.labels == ("27b.vision_qkv", "35b.vision_qkv")
        assert p.label == "27b.vision_qkv+35b.vision_qkv"
    shared = [p for p in pts if len(p.labels) == 2]
    assert len(shared) == 6 * 3  # six shared vision geometries at T 4, 128, 1024
    # The merger outputs differ (5120 vs 2048 hidden) and stay single-labelled.
    assert by_key[("w8", "a16", 2048, 4608, 4)].labels == ("35b.vision_merger_fc2",)
    # First appearance order: the 27B suite first, then the new 35B points.
    assert [p.key for p in pts[:49]] == [p.key for p in load_suite("qwen3_6_27b")]
    assert pts[49].labels == ("35b.output_head",)


def test_group_points_orders_and_groups() -> None:
    groups = group_points(load_suite("all"))
    assert len(groups) == 14 + 11 - 6
    first = next(iter(groups))
    assert first == (QType.Q6, Policy.A16, 248320, 5120)
    for g, pts in groups.items():
        assert all(p.group == g for p in pts)
        assert [p.t for p in pts] == sorted(p.t for p in pts)
    # T ascending even when the input is not; duplicates merge into one row.
    a = BenchPoint(QType.Q4, Policy.A16, 64, 128, 8, ("a",))
    b = BenchPoint(QType.Q4, Policy.A16, 64, 128, 2, ("b",))
    c = BenchPoint(QType.Q4, Policy.A16, 64, 128, 8, ("c",))
    (only,) = group_points([a, b, c]).values()
    assert [(p.t, p.labels) for p in only] == [(2, ("b",)), (8, ("a", "c"))]


def test_point_properties() -> None:
    p = BenchPoint(QType.W8, Policy.A16, 5120, 4608, 4)
    assert p.key == ("w8", "a16", 5120, 4608, 4)
    assert p.group == (QType.W8, Policy.A16, 5120, 4608)
    assert p.label == "-"
    with pytest.raises(ValueError, match="expected an int >= 1, got 0"):
        BenchPoint(QType.W8, Policy.A16, 5120, 4608, 0)


def test_unknown_suite_name() -> None:
    with pytest.raises(ValueError, match=r"expected one of .*qwen3_6_27b.*got 'qwen9'"):
        load_suite("qwen9")
    assert SUITE_NAMES[-1] == "all"


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ("1:3", [1, 2, 3]),
        ("1:32:1", list(range(1, 33))),
        ("4:512:4", list(range(4, 513, 4))),
        ("5:5", [5]),
        ("1:10:4", [1, 5, 9]),
        (" 2:4:2 ", [2, 4]),
    ],
)
def test_sweep_good(spec: str, want: list[int]) -> None:
    assert parse_sweep(spec) == want


@pytest.mark.parametrize(
    ("spec", "msg"),
    [
        ("", "expected 'LO:HI' or 'LO:HI:STEP'"),
        ("8", "expected 'LO:HI' or 'LO:HI:STEP'"),
        ("1:2:3:4", "expected 'LO:HI' or 'LO:HI:STEP'"),
        ("-1:4", "expected 'LO:HI' or 'LO:HI:STEP'"),
        ("1.5:4", "expected 'LO:HI' or 'LO:HI:STEP'"),
        ("a:b", "expected 'LO:HI' or 'LO:HI:STEP'"),
        ("0:4", "expected LO >= 1, got LO=0"),
        ("8:4", "expected LO <= HI, got LO=8 > HI=4"),
        ("1:4:0", "expected STEP >= 1, got STEP=0"),
    ],
)
def test_sweep_bad(spec: str, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        parse_sweep(spec)


# --- schema errors, on suite files written to tmp_path ---------------------------------

GOOD = {
    "suite": "qwen3_6_27b",
    "policy": "a16",
    "t_classes": {"continuous": [1, 16], "vision_step4": [4, 128]},
    "entries": [
        {"label": "x.a", "qtype": "q4", "n": 64, "k": 128, "t_class": "continuous"},
        {"label": "x.b", "qtype": "w8", "n": 32, "k": 256, "t_class": "vision_step4"},
    ],
}


def _write(root: Path, doc: object, name: str = "qwen3_6_27b") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    return root


def _with(**changes: object) -> dict[str, object]:
    doc = yaml.safe_load(yaml.safe_dump(GOOD))  # deep copy
    doc.update(changes)
    return doc  # type: ignore[no-any-return]


def _with_entry(i: int, **changes: object) -> dict[str, object]:
    doc = _with()
    doc["entries"][i].update(changes)  # type: ignore[index]
    return doc


def test_load_from_monkeypatched_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(points, "suites_dir", lambda: _write(tmp_path, GOOD))
    pts = load_suite("qwen3_6_27b")
    assert [(p.label, p.t) for p in pts] == [("x.a", 1), ("x.a", 16), ("x.b", 4), ("x.b", 128)]


def test_entry_policy_override(tmp_path: Path) -> None:
    root = _write(tmp_path, _with_entry(0, qtype="nvfp4", policy="a4"))
    pts = load_suite("qwen3_6_27b", root=root)
    assert {p.policy for p in pts if p.qtype is QType.NVFP4} == {Policy.A4}
    assert {p.policy for p in pts if p.qtype is QType.W8} == {Policy.A16}


def _del(key: str) -> dict[str, object]:
    doc = _with()
    del doc[key]
    return doc


def _del_entry(key: str) -> dict[str, object]:
    doc = _with()
    del doc["entries"][0][key]  # type: ignore[index]
    return doc


@pytest.mark.parametrize(
    ("doc", "msg"),
    [
        (
            _with_entry(0, qtype="q7"),
            r"entries\[0\]\.qtype: unknown qtype: expected one of .*got 'q7'",
        ),
        (
            _with_entry(1, t_class="step8"),
            r"entries\[1\]\.t_class: expected one of \['continuous', 'vision_step4'\], got 'step8'",
        ),
        (
            _with_entry(1, label="x.a"),
            r"entries\[1\]\.label: expected unique labels, got 'x.a' again \(first at entries\[0\]\)",
        ),
        (_with_entry(0, label="a b"), r"entries\[0\]\.label: expected one token"),
        (_with_entry(0, n=0), r"entries\[0\]\.n: expected an int >= 1, got 0"),
        (_with_entry(0, k="5120"), r"entries\[0\]\.k: expected an int >= 1, got '5120'"),
        (_with_entry(0, n=True), r"entries\[0\]\.n: expected an int >= 1, got True"),
        (_with_entry(0, tile=128), r"entries\[0\]: unknown keys: .*got \['tile'\]"),
        (_with_entry(0, policy="a8"), r"entries\[0\]\.policy: unknown policy"),
        (_del_entry("k"), r"entries\[0\]: missing keys: expected .*\(missing \['k'\]\)"),
        (_del("t_classes"), r"missing keys: expected .*\(missing \['t_classes'\]\)"),
        (_with(policy="fp8"), r"policy: unknown policy: expected one of .*got 'fp8'"),
        (_with(suite="other"), r"suite: expected 'qwen3_6_27b' \(the file name\), got 'other'"),
        (_with(entries=[]), r"entries: expected a non-empty list"),
        (
            _with(t_classes={"continuous": [16, 1]}),
            r"t_classes\.continuous: expected a non-empty, strictly ascending list",
        ),
        (_with(t_classes={"continuous": [0, 1]}), r"t_classes\.continuous: expected"),
        (["not", "a", "mapping"], r"expected a mapping, got list"),
    ],
)
def test_bad_suite_rejected(tmp_path: Path, doc: object, msg: str) -> None:
    root = _write(tmp_path, doc)
    with pytest.raises(SuiteError, match=msg):
        load_suite("qwen3_6_27b", root=root)


def test_bad_yaml_syntax(tmp_path: Path) -> None:
    (tmp_path / "qwen3_6_27b.yaml").write_text("suite: [unclosed\n")
    with pytest.raises(SuiteError, match="expected valid YAML"):
        load_suite("qwen3_6_27b", root=tmp_path)


def test_suite_error_is_value_error() -> None:
    assert issubclass(SuiteError, ValueError)


# --- limits that keep a bad point away from the GPU --------------------------------------


@pytest.mark.parametrize(
    ("doc", "msg"),
    [
        (_with_entry(0, n=2**31), r"entries\[0\]\.n: expected an int <= 2147483647 \(int32\)"),
        (_with_entry(1, k=3_000_000_000), r"entries\[1\]\.k: expected an int <= 2147483647"),
        (
            _with(t_classes={"continuous": [1, 2**31], "vision_step4": [4]}),
            r"t_classes\.continuous: expected T <= 2147483647 \(int32\), got 2147483648",
        ),
        (
            _with_entry(0, policy="a4"),
            r"entries\[0\]: policy a4: expected qtype nvfp4, got q4",
        ),
        (_with(policy="a4"), r"entries\[0\]: policy a4: expected qtype nvfp4, got q4"),
    ],
)
def test_suite_limits(tmp_path: Path, doc: object, msg: str) -> None:
    with pytest.raises(SuiteError, match=msg):
        load_suite("qwen3_6_27b", root=_write(tmp_path, doc))


def test_int32_edge_is_accepted(tmp_path: Path) -> None:
    assert BenchPoint(QType.Q4, Policy.A16, 2**31 - 1, 128, 1).n == 2**31 - 1
    # The suite's largest T is 1024: out's T × N elements must fit int32 too.
    edge = (2**31 - 1) // 1024
    root = _write(tmp_path, _with_entry(0, n=edge))
    assert max(p.n for p in load_suite("qwen3_6_27b", root=root)) == edge
    with pytest.raises(ValueError, match=r"T × N <= 2147483647 elements"):
        BenchPoint(QType.Q4, Policy.A16, edge + 1, 128, 1024)


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        ((QType.Q4, Policy.A16, 2**31, 128, 1), r"N: expected an int <= 2147483647 \(int32\)"),
        ((QType.Q4, Policy.A16, 64, 2**31, 1), r"K: expected an int <= 2147483647"),
        ((QType.Q4, Policy.A16, 64, 128, 2**31), r"T: expected an int <= 2147483647"),
        ((QType.Q4, Policy.A4, 64, 128, 1), "policy a4: expected qtype nvfp4, got q4"),
        ((QType.BF16, Policy.A4, 64, 128, 1), "policy a4: expected qtype nvfp4, got bf16"),
    ],
)
def test_point_limits(args: tuple[QType, Policy, int, int, int], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        BenchPoint(*args)


def test_a4_on_nvfp4_is_a_point() -> None:
    assert BenchPoint(QType.NVFP4, Policy.A4, 64, 128, 1).policy is Policy.A4


@pytest.mark.parametrize(
    ("spec", "msg"),
    [
        ("1:3000000000", r"expected HI <= 2147483647 \(int32\), got HI=3000000000"),
        ("1:2000000000", "expected at most 65536 T values, got 2000000000"),
        ("1:65537", "expected at most 65536 T values, got 65537"),
    ],
)
def test_sweep_limits(spec: str, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        parse_sweep(spec)
    assert len(parse_sweep("1:131072:2")) == 65536


_DUP_TOP = """suite: qwen3_6_27b
policy: a16
policy: a4
t_classes: {continuous: [1]}
entries:
  - {label: a, qtype: q4, n: 64, k: 128, t_class: continuous}
"""
_DUP_ENTRY = """suite: qwen3_6_27b
policy: a16
t_classes: {continuous: [1]}
entries:
  - label: a
    qtype: q4
    n: 64
    k: 128
    n: 128
    t_class: continuous
"""
_DUP_FLOW = _DUP_TOP.replace("policy: a4\n", "").replace("k: 128,", "k: 128, k: 256,")


@pytest.mark.parametrize(
    ("text", "msg"),
    [
        (_DUP_TOP, r"line 3: expected unique mapping keys, got 'policy' again \(first at line 2\)"),
        (_DUP_ENTRY, r"line 9: expected unique mapping keys, got 'n' again \(first at line 7\)"),
        (_DUP_FLOW, r"line 5: expected unique mapping keys, got 'k' again \(first at line 5\)"),
    ],
)
def test_duplicate_yaml_keys(tmp_path: Path, text: str, msg: str) -> None:
    (tmp_path / "qwen3_6_27b.yaml").write_text(text)
    with pytest.raises(SuiteError, match=msg) as e:
        load_suite("qwen3_6_27b", root=tmp_path)
    assert "\n" not in str(e.value)


def test_yaml_merge_key_may_be_overridden(tmp_path: Path) -> None:
    # '<<' merges are not duplicates: YAML lets the mapping override what it merged in.
    text = (
        _DUP_TOP.replace("policy: a4\n", "").replace("  - {label: a,", "  - &e {label: a,")
        + "  - <<: *e\n    label: b\n    n: 128\n"
    )
    (tmp_path / "qwen3_6_27b.yaml").write_text(text)
    pts = load_suite("qwen3_6_27b", root=tmp_path)
    assert [(p.label, p.n, p.k) for p in pts] == [("a", 64, 128), ("b", 128, 128)]


def test_yaml_syntax_error_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "qwen3_6_27b.yaml").write_text("suite: [unclosed\n")
    with pytest.raises(SuiteError, match=r"line 2: expected valid YAML, got") as e:
        load_suite("qwen3_6_27b", root=tmp_path)
    assert "\n" not in str(e.value)


def test_missing_suite_file(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"qwen3_6_27b\.yaml: no such file$"):
        load_suite("qwen3_6_27b", root=tmp_path)

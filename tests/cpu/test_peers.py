"""The peer table and the peers' refusals, without a GPU.

A peer that cannot run a point raises ``PeerUnavailable`` and the bench records why.
Each refusal here is reached with the package made unimportable
(``sys.modules[name] = None``) or replaced by a stand-in that answers only what the peer
asks before it would touch a device, so every case proves the peer stops before GPU work.
"""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from ninfer import Policy, QType
from ninfer.bench import peers, run
from ninfer.bench.peers import MAKERS, PEER_QTYPES, PEERS, PeerUnavailable, applies, maker
from ninfer.bench.peers_fbgemm import fbgemm_call
from ninfer.bench.peers_gemlite import gemlite_w4_call, gemlite_w8_call
from ninfer.bench.points import BenchPoint
from ninfer.bench.timer import Samples

FORMATS = [q.value for q in QType]


def _forbidden(*_: object, **__: object) -> Any:
    pytest.fail("the peer reached GPU work")


def _fake_torch(monkeypatch: pytest.MonkeyPatch, cc: tuple[int, int] = (9, 0)) -> None:
    """A torch that reports compute capability ``cc`` and refuses any allocation."""
    torch = ModuleType("torch")
    torch.cuda = SimpleNamespace(  # type: ignore[attr-defined]
        get_device_capability=lambda *_: cc, synchronize=_forbidden, ExternalStream=_forbidden
    )
    torch.Generator = _forbidden  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)


def _fake_fbgemm(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("fbgemm_gpu", "fbgemm_gpu.experimental", "fbgemm_gpu.experimental.gen_ai"):
        monkeypatch.setitem(sys.modules, name, ModuleType(name))


def test_table_is_the_cli_choices() -> None:
    from ninfer.bench.cli import build_parser

    assert PEERS == ("cublas", "tinygemm", "fbgemm", "gemlite", "read")
    args = build_parser().parse_args(["--peer", "fbgemm", "--peer", "gemlite"])
    assert args.peer == ["fbgemm", "gemlite"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--peer", "marlin"])


def test_applies_per_format() -> None:
    assert dict(PEER_QTYPES) == {
        "tinygemm": frozenset({"q4"}),
        "fbgemm": frozenset({"q4"}),
        "gemlite": frozenset({"q4", "w8"}),
    }
    assert [q for q in FORMATS if applies("fbgemm", q)] == ["q4"]
    assert [q for q in FORMATS if applies("gemlite", q)] == ["q4", "w8"]
    assert [q for q in FORMATS if applies("cublas", q)] == FORMATS
    assert [q for q in FORMATS if applies("read", q)] == FORMATS


def test_read_peer_reads_the_points_model_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The plain-read floor of a point is a read of its weight, x and out bytes (rounded
    # down to the read kernel's 16), on the stream the timer gave.
    import ninfer.gpus.probe as probe
    import ninfer.runtime.cupy_env as cupy_env
    from ninfer.metrics import byte_breakdown

    seen: dict[str, Any] = {}
    launches: list[Any] = []

    class Stream:
        def __init__(self, handle: int) -> None:
            seen["stream"] = handle

        def __enter__(self) -> None:
            seen["entered"] = seen.get("entered", 0) + 1

        def __exit__(self, *_: object) -> None:
            pass

    class OutOfMemory(Exception):
        pass

    def device() -> Any:  # the whole device waits: the fill ran on another stream
        return SimpleNamespace(synchronize=lambda: launches.append("device sync"))

    cuda = SimpleNamespace(
        ExternalStream=Stream, Device=device, memory=SimpleNamespace(OutOfMemoryError=OutOfMemory)
    )
    monkeypatch.setattr(cupy_env, "require_cupy", lambda: SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(probe, "read_buffer", lambda nbytes, seed: ("buf", nbytes))
    monkeypatch.setattr(
        probe, "read_call", lambda buf, per_sm: lambda: launches.append((buf, per_sm))
    )
    for q in ("q4", "q6", "w8", "bf16"):
        launches.clear()
        call = maker("read", q)(4100, 1152, 3, 77)
        call()
        want = byte_breakdown(q, 4100, 1152, 3)["model_bytes"] // 16 * 16
        # the warm-up, the device-wide wait, then the timed call
        assert launches == [(("buf", want), 16), "device sync", (("buf", want), 16)]
        assert seen["stream"] == 77
    assert byte_breakdown("q6", 4100, 1152, 3)["model_bytes"] % 16  # the rounding is exercised

    def no_room(nbytes: int, seed: int) -> Any:
        raise OutOfMemory("out of memory allocating 1,000,000,000 bytes")

    monkeypatch.setattr(probe, "read_buffer", no_room)
    with pytest.raises(PeerUnavailable, match=r"--peer read: \d+ bytes do not fit beside the run"):
        maker("read", "bf16")(248320, 5120, 1, 77)


def test_gemlite_configuration_follows_the_format() -> None:
    assert maker("gemlite", "q4") is gemlite_w4_call
    assert maker("gemlite", "w8") is gemlite_w8_call
    assert maker("fbgemm", "q4") is fbgemm_call
    assert maker("cublas", "nvfp4") is MAKERS["cublas"]["*"]
    with pytest.raises(ValueError, match=r"expected a point of format q4, w8, got 'q5'"):
        maker("gemlite", "q5")
    with pytest.raises(ValueError, match=r"expected one of cublas, .*got 'marlin'"):
        maker("marlin", "q4")


@pytest.mark.parametrize("make", [fbgemm_call, gemlite_w4_call, gemlite_w8_call])
def test_no_torch_is_unavailable(make: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(PeerUnavailable, match=r"needs torch \(pip install 'ninfer\[torch\]'\)"):
        make(4096, 5120, 1, 0)


@pytest.mark.parametrize(
    ("make", "module", "wanted"),
    [
        (fbgemm_call, "fbgemm_gpu", "fbgemm-gpu-genai==1.6.0"),
        (gemlite_w4_call, "gemlite", "gemlite==0.6.0.post2"),
        (gemlite_w8_call, "gemlite", "gemlite==0.6.0.post2"),
    ],
)
def test_missing_package_is_unavailable(
    make: Any, module: str, wanted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_torch(monkeypatch)
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(PeerUnavailable) as e:
        make(4096, 5120, 1, 0)
    msg = str(e.value)
    assert f"needs {wanted}" in msg and "import failed: ModuleNotFoundError" in msg
    assert "tools/device_wheels.sh" in msg


def test_fbgemm_needs_sm90(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_torch(monkeypatch, cc=(10, 0))
    _fake_fbgemm(monkeypatch)
    with pytest.raises(PeerUnavailable, match=r"expected compute capability 9\.0, got 10\.0"):
        fbgemm_call(4096, 5120, 1, 0)


def test_fbgemm_without_its_ops_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_torch(monkeypatch)
    _fake_fbgemm(monkeypatch)
    sys.modules["torch"].ops = SimpleNamespace(fbgemm=SimpleNamespace())  # type: ignore[attr-defined]
    with pytest.raises(PeerUnavailable, match=r"loaded without its int4 ops: .*bf16i4bf16_rowwise"):
        fbgemm_call(4096, 5120, 1, 0)


@pytest.mark.parametrize(
    ("n", "k", "why"),
    [
        (4096, 4304, "expected K a multiple of the group 64, got K=4304"),
        (4100, 5120, r"expected N a multiple of 8 \(TMA rows\), got N=4100"),
    ],
)
def test_fbgemm_refuses_shapes_before_gpu_work(
    n: int, k: int, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_torch(monkeypatch)
    _fake_fbgemm(monkeypatch)
    with pytest.raises(PeerUnavailable, match=why):
        fbgemm_call(n, k, 1, 0)


@pytest.mark.parametrize(
    ("make", "k", "why"),
    [
        (gemlite_w4_call, 4304, r"\(A16W4\): expected K a multiple of 64, got K=4304"),
        (gemlite_w8_call, 4112, r"\(A16W8\): expected K a multiple of 32, got K=4112"),
    ],
)
def test_gemlite_refuses_shapes_before_gpu_work(
    make: Any, k: int, why: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_torch(monkeypatch)
    monkeypatch.setitem(sys.modules, "gemlite", ModuleType("gemlite"))
    with pytest.raises(PeerUnavailable, match=why):
        make(4096, k, 1, 0)


class _Timer:
    """The two things ``_peer`` asks of a ColdTimer; ``time`` answers given medians."""

    def __init__(self, medians: dict[Any, float] | None = None) -> None:
        self.stream = SimpleNamespace(ptr=1234)
        self.medians = medians or {}

    def time(self, call: Any) -> Samples:
        m = self.medians[call]
        return Samples([m, m, m])


def _run_peer(peer: str, qtype: QType, timer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    p = BenchPoint(qtype, Policy.A16, 4096, 5120, 1)
    row: dict[str, Any] = {}
    static: dict[str, Any] = {"peers": {}}
    run._peer(peer, p, timer, SimpleNamespace(median_us=10.0), row, static)
    return row, static


@pytest.mark.parametrize("peer", ["fbgemm", "gemlite"])
def test_peer_row_records_why_unavailable(peer: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    row, static = _run_peer(peer, QType.Q4, _Timer())
    assert row == {f"{peer}_us": None, f"speedup_vs_{peer}": None}
    assert static["peers"] == {
        peer: {"unavailable": f"--peer {peer} needs torch (pip install 'ninfer[torch]')"}
    }


def test_peer_not_applying_leaves_no_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(MAKERS["fbgemm"], "q4", _forbidden)
    row, static = _run_peer("fbgemm", QType.W8, _Timer())
    assert row == {"fbgemm_us": None, "speedup_vs_fbgemm": None}
    assert static["peers"] == {}


def test_peer_variants_keep_the_fastest(monkeypatch: pytest.MonkeyPatch) -> None:
    def rowwise() -> None: ...

    def shuffled() -> None: ...

    def make(n: int, k: int, t: int, stream_handle: int) -> dict[str, Any]:
        assert (n, k, t, stream_handle) == (4096, 5120, 1, 1234)
        return {"bf16i4bf16_rowwise": rowwise, "bf16i4bf16_shuffled": shuffled}

    monkeypatch.setitem(peers.MAKERS["fbgemm"], "q4", make)
    row, static = _run_peer("fbgemm", QType.Q4, _Timer({rowwise: 20.0, shuffled: 15.0}))
    assert row == {"fbgemm_us": 15.0, "speedup_vs_fbgemm": 1.5}
    entry = static["peers"]["fbgemm"]
    assert entry["kernel"] == "bf16i4bf16_shuffled" and entry["median_us"] == 15.0
    assert entry["kernels_median_us"] == {"bf16i4bf16_rowwise": 20.0, "bf16i4bf16_shuffled": 15.0}


def test_single_call_peer_has_no_kernel_note(monkeypatch: pytest.MonkeyPatch) -> None:
    def call() -> None: ...

    monkeypatch.setitem(peers.MAKERS["cublas"], "*", lambda *_: call)
    row, static = _run_peer("cublas", QType.BF16, _Timer({call: 5.0}))
    assert row == {"cublas_us": 5.0, "speedup_vs_cublas": 0.5}
    assert "kernel" not in static["peers"]["cublas"]
    assert "kernels_median_us" not in static["peers"]["cublas"]

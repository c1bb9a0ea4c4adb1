"""Bad input to ninfer-bench: exit 2 with one error line, before any GPU work.

``no_gpu`` makes every way into CUDA fail the test: the CuPy requirement, the runner and
``import cupy`` itself (``sys.modules['cupy'] = None``), so each case below proves that
its error comes from parsing alone. The device-memory cases run the real ``run_points``
and ``arena`` against a fake CuPy that answers only ``memGetInfo`` and the device count.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ninfer import Policy, QType
from ninfer.bench import memory
from ninfer.bench.cli import main
from ninfer.bench.memory import HARD_CAP_BYTES, DeviceMemoryError, arena, run_bytes
from ninfer.bench.points import BenchPoint

MIB = 1 << 20
GIB = 1 << 30
POINT = ["--qtype", "q4", "--n", "64", "--k", "128", "--t", "1"]


def _forbidden(*_: object, **__: object) -> Any:
    pytest.fail("bad input reached GPU work")


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import ninfer.bench.run
    import ninfer.runtime.cupy_env

    monkeypatch.setattr(ninfer.runtime.cupy_env, "require_cupy", _forbidden)
    monkeypatch.setattr(ninfer.bench.run, "run_points", _forbidden)
    monkeypatch.setitem(sys.modules, "cupy", None)


def _exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI, expect status 2 (returned or argparse's SystemExit); the error line."""
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code  # type: ignore[assignment]
    assert rc == 2
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if "error:" in ln]
    assert len(errors) == 1, err
    assert errors[0].startswith(("ninfer-bench: error: ", "ninfer-bench ncu: error: "))
    assert "Traceback" not in err
    return errors[0]


def _suite(tmp_path: Path, body: str, name: str = "mine") -> Path:
    f = tmp_path / f"{name}.yaml"
    f.write_text(f"suite: {name}\npolicy: a16\nt_classes: {{d: [1]}}\nentries:\n{body}")
    return f


# --- 1. N, K, T past int32 --------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--n", "3000000000", "--k", "128", "--t", "1"], "argument --n: expected an integer <= 2147483647, got 3000000000"),
        (["--n", "64", "--k", "2147483648", "--t", "1"], "argument --k: expected an integer <= 2147483647"),
        (["--n", "64", "--k", "128", "--t", "2147483648"], "argument --t: expected an integer <= 2147483647"),
        (["--n", "0", "--k", "128", "--t", "1"], "argument --n: expected an integer >= 1, got 0"),
        (["--n", "64", "--k", "128", "--sweep", "1:3000000000"], "expected HI <= 2147483647 (int32)"),
        (["--n", "64", "--k", "128", "--sweep", "1:2000000000"], "expected at most 65536 T values"),
    ],
)  # fmt: skip
@pytest.mark.usefixtures("no_gpu")
def test_int32_flags(argv: list[str], msg: str, capsys: pytest.CaptureFixture[str]) -> None:
    for extra in ([], ["--list"]):
        assert msg in _exit_2(["--qtype", "q4", *argv, *extra], capsys)


@pytest.mark.usefixtures("no_gpu")
def test_int32_suite_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = _suite(tmp_path, "  - {label: a, qtype: q4, n: 3000000000, k: 128, t_class: d}\n")
    line = _exit_2(["--suite-file", str(f), "--list"], capsys)
    assert "entries[0].n: expected an int <= 2147483647 (int32), got 3000000000" in line


def test_int32_subprocess() -> None:
    # The installed entry point's path, as a user sees it (seed: `--n 3000000000 --list`).
    res = subprocess.run(
        [sys.executable, "-m", "ninfer.bench", "--qtype", "q4", "--n", "3000000000",
         "--k", "128", "--t", "1", "--list"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.strip().splitlines()[-1] == (
        "ninfer-bench: error: argument --n: expected an integer <= 2147483647, got 3000000000"
    )


# --- 2. policy a4 on a non-NVFP4 point ---------------------------------------------------


@pytest.mark.usefixtures("no_gpu")
def test_a4_flag_on_q4(capsys: pytest.CaptureFixture[str]) -> None:
    line = _exit_2([*POINT, "--policy", "a4"], capsys)
    assert line == "ninfer-bench: error: policy a4: expected qtype nvfp4, got q4"


@pytest.mark.usefixtures("no_gpu")
def test_a4_on_nvfp4_lists(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--qtype", "nvfp4", "--policy", "a4", "--n", "64", "--k", "128", "--t", "1"]
    assert main([*argv, "--list"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "1"


@pytest.mark.parametrize(
    "body",
    [
        "  - {label: a, qtype: q4, policy: a4, n: 64, k: 128, t_class: d}\n",
        "  - {label: a, qtype: nvfp4, policy: a4, n: 64, k: 128, t_class: d}\n"
        "  - {label: b, qtype: w8, policy: a4, n: 64, k: 128, t_class: d}\n",
    ],
)
@pytest.mark.usefixtures("no_gpu")
def test_a4_suite_entry(tmp_path: Path, body: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = _exit_2(["--suite-file", str(_suite(tmp_path, body)), "--list"], capsys)
    assert "policy a4: expected qtype nvfp4, got" in line


# --- 3. weights too large: the hard cap at parse time, the device's free memory before ---


def test_run_bytes_counts_the_arena_layout() -> None:
    a = BenchPoint(QType.Q4, Policy.A16, 4096, 5120, 8)
    b = BenchPoint(QType.Q4, Policy.A16, 4096, 5120, 1)  # same group: x, out sized for T=8
    # flush 256 MiB; qs 4096x2560 B = 10 MiB; scales 4096x80x2 B, x, out: 2 MiB pages each.
    assert run_bytes([a, b], 256) == (256 + 10 + 2 + 2 + 2) * MIB
    c = BenchPoint(QType.BF16, Policy.A16, 1024, 1024, 1)  # 2 MiB weight, 2 + 2 MiB x/out
    assert run_bytes([a, c], 256) == (256 + 16 + 6) * MIB
    assert run_bytes([a, c], 256, "pool") == (256 + 16) * MIB  # one group at a time


@pytest.mark.usefixtures("no_gpu")
def test_hard_cap(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--qtype", "bf16", "--n", "2000000000", "--k", "2000000000", "--t", "1"]
    for extra in ([], ["--list"]):
        line = _exit_2([*argv, *extra], capsys)
        assert "the run needs 7,450,580,604.6 GiB of device memory" in line
        assert "expected at most 4,096.0 GiB, more than any GPU has" in line


def test_hard_cap_counts_the_flush(capsys: pytest.CaptureFixture[str]) -> None:
    flush = str(HARD_CAP_BYTES // MIB + 1)
    assert "expected at most" in _exit_2([*POINT, "--flush-mib", flush, "--list"], capsys)


class _OOM(MemoryError):
    pass


class _RuntimeError(RuntimeError):
    def __init__(self, status: int) -> None:
        super().__init__(f"status {status}")
        self.status = status


def _fake_cupy(free: int, malloc: Callable[[int], Any] = _forbidden) -> SimpleNamespace:
    runtime = SimpleNamespace(
        memGetInfo=lambda: (free, 141 * GIB),
        getDeviceCount=lambda: 1,
        CUDARuntimeError=_RuntimeError,
    )
    cuda = SimpleNamespace(
        runtime=runtime,
        memory=SimpleNamespace(OutOfMemoryError=_OOM),
        Memory=malloc,
        Device=lambda *_: SimpleNamespace(use=lambda: None),
    )
    # check_fits empties CuPy's pool of cached blocks before it asks for free memory.
    pool = SimpleNamespace(free_all_blocks=lambda: None)
    return SimpleNamespace(cuda=cuda, get_default_memory_pool=lambda: pool)


def test_device_too_small_before_any_allocation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import ninfer.bench.run
    import ninfer.runtime.cupy_env

    fake = _fake_cupy(free=100 * GIB)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(ninfer.runtime.cupy_env, "require_cupy", lambda: fake)
    # Nothing after the check may run: not the environment, the probe nor the arena.
    monkeypatch.setattr(ninfer.bench.run, "environment", _forbidden)
    monkeypatch.setattr(ninfer.bench.run, "arena", _forbidden)
    argv = ["--qtype", "bf16", "--n", "1000000", "--k", "1000000", "--t", "1"]
    line = _exit_2(argv, capsys)
    assert line == "ninfer-bench: error: needs 1,863.0 GiB, the GPU has 100.0 GiB free"
    assert main([*argv, "--list"]) == 0  # --list cannot know the device: no GPU is asked


@pytest.mark.parametrize("error", [_OOM("Out of memory allocating 4 bytes"), _RuntimeError(2)])
def test_arena_oom_is_one_line(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def malloc(size: int) -> Any:
        raise error

    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(free=100 * GIB, malloc=malloc))
    with pytest.raises(
        DeviceMemoryError, match=r"^needs 0\.3 GiB and the fixture.s temporaries"
    ) as e:
        arena([BenchPoint(QType.Q4, Policy.A16, 4096, 5120, 8)], 256)
    assert "the GPU had 100.0 GiB free" in str(e.value) and "\n" not in str(e.value)


def test_arena_other_errors_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    def malloc(size: int) -> Any:
        raise _RuntimeError(700)  # an illegal address is not an OOM: keep its traceback

    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(free=100 * GIB, malloc=malloc))
    with pytest.raises(_RuntimeError):
        arena([BenchPoint(QType.Q4, Policy.A16, 64, 128, 1)], 256)


def test_arena_and_pool_check_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy(free=200 * MIB))  # malloc forbidden
    pts = [BenchPoint(QType.Q4, Policy.A16, 64, 128, 1)]
    with pytest.raises(DeviceMemoryError, match=r"^needs 0\.3 GiB, the GPU has 0\.2 GiB free$"):
        arena(pts, 256)
    with pytest.raises(DeviceMemoryError, match=r"^needs 0\.3 GiB, the GPU has 0\.2 GiB free$"):
        next(memory.pool_groups(pts, 256))


# --- 4. duplicate keys in suite YAML -----------------------------------------------------


@pytest.mark.usefixtures("no_gpu")
def test_duplicate_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text(
        "suite: mine\npolicy: a16\nt_classes: {d: [1]}\nentries:\n"
        "  - label: a\n    qtype: q4\n    n: 64\n    n: 128\n    k: 128\n    t_class: d\n"
    )
    line = _exit_2(["--suite-file", str(f), "--list"], capsys)
    assert line == (
        f"ninfer-bench: error: {f}: line 8: expected unique mapping keys, got 'n' again "
        "(first at line 7)"
    )


# --- 5. output paths ---------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--json-out", "--csv-out"])
@pytest.mark.usefixtures("no_gpu")
def test_output_paths(
    tmp_path: Path, flag: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("")
    before = sorted(tmp_path.rglob("*"))
    cases = [
        (tmp_path, "expected a file path, got a directory"),
        (tmp_path / "no" / "r.json", f"no such directory {tmp_path / 'no'}"),
        (tmp_path / "file" / "r.json", f"expected a directory {tmp_path / 'file'}, got a file"),
    ]
    for path, msg in cases:
        assert f"{flag} {path}: {msg}" in _exit_2([*POINT, flag, str(path)], capsys)
    # As root, os.access says yes to everything; a read-only folder is simulated.
    monkeypatch.setattr("ninfer.bench.args.os.access", lambda *_: False)
    line = _exit_2([*POINT, flag, str(tmp_path / "r.json")], capsys)
    assert f"directory {tmp_path} is not writable" in line
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, no folder made


@pytest.mark.usefixtures("no_gpu")
def test_output_paths_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "r")
    line = _exit_2([*POINT, "--json-out", out, "--csv-out", out], capsys)
    assert "--json-out and --csv-out: expected two paths, got" in line


# --- 6. input files ----------------------------------------------------------------------


@pytest.mark.usefixtures("no_gpu")
def test_missing_suite_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _exit_2(["--suite-file", "/x.yaml", "--list"], capsys)
    assert line == "ninfer-bench: error: --suite-file /x.yaml: no such file"
    line = _exit_2(["--suite-file", str(tmp_path), "--list"], capsys)
    assert line.endswith(f"--suite-file {tmp_path}: expected a file, got a directory")
    line = _exit_2(["--suite", "all", "--only-file", "/x.txt", "--list"], capsys)
    assert line == "ninfer-bench: error: --only-file /x.txt: no such file"


# --- 7. the ncu subcommand ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--n", "-1", "--k", "1", "--t", "1"], "argument --n: expected an integer >= 1, got -1"),
        (["--n", "1", "--k", "x", "--t", "1"], "argument --k: expected an integer, got 'x'"),
        (["--n", "1", "--k", "1", "--t", "3000000000"], "argument --t: expected an integer <="),
        (["--n", "1", "--k", "1", "--t", "1", "--policy", "a4"], "policy a4: expected qtype nvfp4"),
        (["--n", "2000000000", "--k", "2000000000", "--t", "1"], "expected at most 4,096.0 GiB"),
    ],
)
@pytest.mark.usefixtures("no_gpu")
def test_ncu_args(
    argv: list[str], msg: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(subprocess, "run", _forbidden)
    line = _exit_2(["ncu", "--qtype", "q4", *argv, "--ncu", "/bin/true"], capsys)
    assert msg in line


@pytest.mark.usefixtures("no_gpu")
def test_ncu_qtype_choices(capsys: pytest.CaptureFixture[str]) -> None:
    line = _exit_2(["ncu", "--qtype", "q7", "--n", "1", "--k", "1", "--t", "1"], capsys)
    assert "argument --qtype: invalid choice: 'q7'" in line


def test_a_device_past_the_visible_ones(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ninfer.runtime import cupy_env

    monkeypatch.setattr(cupy_env, "require_cupy", lambda: _fake_cupy(100 * GIB))
    rc = main([*POINT, "--device", "3"])
    assert rc == 2
    assert "--device 3: expected < 1, the number of visible CUDA devices" in capsys.readouterr().err


def test_a_command_word_after_options_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--suite", "all", "ir"])
    assert e.value.code == 2
    assert "the command 'ir' must come first" in capsys.readouterr().err


def test_activation_element_counts_past_int32(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--qtype", "q4", "--n", "4096", "--k", "5120", "--t", "1000000", "--list"]) == 2
    assert "expected T × K <= 2147483647 elements (int32), got 1000000 × 5120" in (
        capsys.readouterr().err
    )

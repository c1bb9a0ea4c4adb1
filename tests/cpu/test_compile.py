"""Every kernel instance the route tables can launch compiles for sm_80, sm_90, sm_120.

Runs on the CPU machine with nvcc (CuPy's own compile path needs a driver). The
source is the same assembled text NVRTC gets at run time; explicit instantiation
from host code makes nvcc emit each template instance, and the test then finds each
instance's mangled name in the cubin.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ninfer.routes import LAUNCHERS
from ninfer.routes.abi import checks
from ninfer.runtime.sources import assembled_source

NVCC = shutil.which("nvcc") or (
    "/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None
)
pytestmark = pytest.mark.skipif(
    NVCC is None, reason="nvcc not found: cannot compile kernels without a GPU"
)

ARCHS = ("sm_80", "sm_90", "sm_120")
_EXPR = re.compile(r"^(\w+)<([\d,\s]+)>$")


def mangled(expr: str) -> str:
    m = _EXPR.match(expr)
    assert m, expr
    name, args = m.group(1), [int(a) for a in m.group(2).split(",")]
    return f"_Z{len(name)}{name}I" + "".join(f"Li{a}E" for a in args) + "E"


# A route may name the archs it compiles for (dq_rs: sm_90a only, it uses wgmma and TMA;
# the sm_90 table alone lists it, and the portable routes serve sm_80 and sm_120).
CASES = [(r, a) for r in sorted(LAUNCHERS) for a in (LAUNCHERS[r].archs or ARCHS)]


@pytest.mark.parametrize(("route", "arch"), CASES)
def test_kernels_compile(route: str, arch: str, tmp_path: Path) -> None:
    mod = LAUNCHERS[route]
    refs = ", ".join(f"(void*)&{e}" for e in mod.instances())
    # The host's statement of the interface, as static_asserts (ninfer/routes/abi.py).
    abi = checks(mod.abi, mod.instances()[0])
    src = assembled_source(mod.name) + f"\nvoid* ninfer_instances[] = {{{refs}}};\n" + abi
    cu = tmp_path / f"{route}.cu"
    cu.write_text(src)
    cubin = tmp_path / f"{route}.{arch}.cubin"
    res = subprocess.run(
        [
            str(NVCC),
            "-cubin",
            f"-arch={arch}",
            "-std=c++17",
            "-Xptxas",
            "-v",
            str(cu),
            "-o",
            str(cubin),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, f"nvcc failed for {route} {arch}:\n{res.stderr}"
    blob = cubin.read_bytes()
    missing = [e for e in mod.instances() if mangled(e).encode() not in blob]
    assert not missing, f"instances not in the {arch} cubin: {missing}"
    # Local-memory use in a kernel usually means a run-time-indexed register array.
    assert "error" not in res.stderr.lower()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        # Two parameters of different types swapped (the same sizes here would be: the
        # signature fixes the order of the types, not of the names).
        (lambda a: replace(a, params=(*a.params[:2], a.params[3], a.params[2], *a.params[4:])),
         "its parameters are not the host's"),
        (lambda a: replace(a, params=(*a.params[:3], ("kpad", "int", ctypes.c_int64),
                                      *a.params[4:])), "kpad (int) is not the host's 8 bytes"),
        (lambda a: replace(a, constants={"DQ_CH": 8}), "DQ_CH is not the host's 8"),
        (lambda a: a, ""),  # the statement as shipped compiles: the three above fail for cause
    ],
)  # fmt: skip
def test_a_host_statement_that_drifts_from_the_kernel_does_not_compile(
    change: Any, says: str, tmp_path: Path
) -> None:
    mod = LAUNCHERS["dq_gemm"]  # the smallest kernel source: the checks are the same code
    cu = tmp_path / "drift.cu"
    cu.write_text(assembled_source(mod.name) + checks(change(mod.abi), mod.instances()[0]))
    res = subprocess.run([str(NVCC), "-cubin", "-arch=sm_80", "-std=c++17", str(cu), "-o",
                          str(tmp_path / "drift.cubin")], capture_output=True, text=True,
                         check=False)  # fmt: skip
    if not says:
        assert res.returncode == 0, res.stderr
        return
    assert res.returncode != 0
    assert says in res.stderr, res.stderr

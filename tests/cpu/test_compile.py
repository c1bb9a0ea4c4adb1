"""Every kernel instance the route tables can launch compiles for sm_80, sm_90, sm_120.

Runs on the CPU machine with nvcc (CuPy's own compile path needs a driver). The
source is the same assembled text NVRTC gets at run time; explicit instantiation
from host code makes nvcc emit each template instance, and the test then finds each
instance's mangled name in the cubin.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ninfer.routes import LAUNCHERS
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
    src = assembled_source(mod.name) + f"\nvoid* ninfer_instances[] = {{{refs}}};\n"
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

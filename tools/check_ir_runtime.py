"""On a GPU: does `ninfer-bench ir` reproduce the runtime's own NVRTC compile?

Usage: python tools/check_ir_runtime.py IR_DIR   (after `ninfer-bench ir --out IR_DIR`)
Spies on CuPy's NVRTC call while the real ``get_kernel`` compiles each route with an
empty kernel cache, disassembles the runtime's cubin and counts the instances whose SASS
equals ir's file. Exit 0 when every instance matches, 1 otherwise.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp()  # force a real NVRTC compile

import cupy.cuda.compiler as cc

from ninfer.bench import ir
from ninfer.routes import LAUNCHERS
from ninfer.runtime.compile import get_kernel

seen: list[tuple[Any, str, bytes]] = []
_orig = cc._NVRTCProgram.compile


def _spy(self: Any, options: Any = (), log_stream: Any = None) -> Any:
    r = _orig(self, options, log_stream)
    seen.append((options, self.method, r[0]))
    return r


def main(out: Path) -> int:
    cc._NVRTCProgram.compile = _spy
    rows = [r.split("\t") for r in (out / "index.tsv").read_text().splitlines()[1:]]
    bad = 0
    for name, mod in LAUNCHERS.items():
        if not any(r[1] == name for r in rows):  # not in this GPU's table (dq_rs off sm_90)
            continue
        get_kernel(0, name, mod.INSTANCES[0], mod.INSTANCES, getattr(mod, "NVRTC_OPTIONS", ()))
        opts, method, cubin = seen[-1]
        d = Path(tempfile.mkdtemp())
        (d / "m.cubin").write_bytes(ir._whole_elf(cubin))
        nvdisasm = ir.tool("nvdisasm") or "nvdisasm"
        dis = subprocess.run([nvdisasm, "-c", str(d / "m.cubin")], capture_output=True, text=True)
        sass = ir.split_sass(dis.stdout)
        mine = [r for r in rows if r[1] == name]
        same = sum("\n".join(sass.get(r[5], [])) + "\n" == (out / r[10]).read_text() for r in mine)
        bad += len(mine) - same
        print(f"{name}: runtime {method} {' '.join(opts)}")
        print(f"  ir options: {mine[0][-1]}\n  identical SASS {same}/{len(mine)}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1])))

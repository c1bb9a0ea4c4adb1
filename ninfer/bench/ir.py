"""``ninfer-bench ir``: the PTX and SASS of every kernel instance a route table can launch.

For A/B explainability: two commits' outputs diff file by file (``diff -r irA irB``).
Each route's module is compiled as ``get_kernel`` compiles it (the assembled source,
every ``instances()`` name expression, OPTIONS plus what CuPy adds) through CuPy's NVRTC,
which needs no GPU. nvcc is a fallback only, named in the index: its code can differ.
Exit status: 0 ok, 1 a compile or disassembly failed, 2 usage or environment error.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import UnsupportedProblem
from ..formats.qtype import QType
from ..ops.dispatch import DEFAULT, Dispatcher
from ..policy import Policy
from ..progress import Steps
from ..record import write_text_atomic
from ..routes import LAUNCHERS, QTYPE_ID, Problem, table_for
from ..runtime.compile import OPTIONS
from ..runtime.sources import assembled_source, kernels_digest, source_hash
from . import env
from .args import HelpFormatter
from .env import git

QNAME = {v: q.name for q, v in QTYPE_ID.items()}
T_SCAN = 4096  # past every route edge and tile step; a T range reaching it prints as "N+"
COLUMNS = [
    *("arch", "route", "kernel", "expr", "template_args", "mangled", "qtypes", "policies", "t"),
    *("ptx", "sass", "ptx_sha256", "sass_sha256", "regs", "stack", "local", "shared"),
    *("ldl_stl", "sass_instrs", "loop_instrs", "compiler", "options"),
]
Compiled = tuple[str, bytes, dict[str, str], str, tuple[str, ...]]  # ptx cubin names by opts


class IRError(Exception):
    def __init__(self, msg: str, code: int = 2) -> None:
        super().__init__(msg)
        self.code = code


def tool(name: str) -> str | None:
    """A CUDA binary: PATH, CUDA_HOME/CUDA_PATH, /usr/local/cuda, or pip's nvidia-* wheels."""
    cands = [shutil.which(name)]
    for base in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        cands.append(str(Path(base, "bin", name)) if base else None)
    cands += sorted(map(str, Path(sysconfig.get_paths()["purelib"]).glob(f"nvidia/*/bin/{name}")))
    return next((c for c in cands if c and os.access(c, os.X_OK)), None)


def nvrtc_version() -> str | None:
    v = env.nvrtc_version()  # loads libnvrtc: the check that matters
    if v is None:
        return None
    import cupy

    return f"nvrtc {v} (cupy {cupy.__version__})"


def target(name: str, cc: int) -> str:
    """The -arch a route's kernels are compiled for on sm_<cc>: sm_90a where the route
    needs the arch-specific features (dq_rs: wgmma, TMA), else sm_<cc>."""
    return f"sm_{cc}a" if f"sm_{cc}a" in (LAUNCHERS[name].archs or ()) else f"sm_{cc}"


def _nvrtc(src: str, name: str, exprs: tuple[str, ...], cc: int) -> Compiled:
    from cupy.cuda import nvrtc

    # CuPy's RawModule path adds -ftz=true, -arch=sm_XX (its cubin method) and
    # --device-as-default-execution-space to OPTIONS and the route's own options (dq_rs:
    # -arch=sm_90a, which NVRTC honours beside CuPy's -arch=sm_90). Its -I paths are left
    # out: the assembled source includes nothing, so they cannot change code.
    route_opts = LAUNCHERS[name].nvrtc_options
    opts = (
        *OPTIONS,
        *route_opts,
        "-ftz=true",
        f"-arch=sm_{cc}",
        "--device-as-default-execution-space",
    )
    prog = nvrtc.createProgram(src, f"{name}.cu", (), ())
    try:
        for e in exprs:
            nvrtc.addNameExpression(prog, e)
        try:
            nvrtc.compileProgram(prog, opts)
        except nvrtc.NVRTCError as err:
            log = nvrtc.getProgramLog(prog)
            raise IRError(f"NVRTC failed on {name} sm_{cc}:\n{log}", 1) from err
        ptx, cubin = nvrtc.getPTX(prog), nvrtc.getCUBIN(prog)
        names = {e: nvrtc.getLoweredName(prog, e) for e in exprs}
    finally:
        nvrtc.destroyProgram(prog)
    ptx = (ptx.decode() if isinstance(ptx, bytes) else ptx).rstrip("\0")
    return ptx, _whole_elf(cubin), names, str(nvrtc_version()), opts


def _whole_elf(b: bytes) -> bytes:
    """CuPy's getCUBIN drops the last byte (a zero of the last program header; the driver
    tolerates that, nvdisasm does not): pad back to the size the ELF header gives."""
    phoff, shoff = struct.unpack_from("<QQ", b, 0x20)
    phent, phnum, shent, shnum = struct.unpack_from("<HHHH", b, 0x36)
    return b.ljust(max(phoff + phent * phnum, shoff + shent * shnum), b"\0")


def _nvcc(nvcc: str, src: str, name: str, exprs: tuple[str, ...], cc: int) -> Compiled:
    # No name expressions in nvcc: host-side references instantiate the templates, and
    # --keep leaves the PTX that ptxas turned into this cubin.
    refs = ", ".join(f"(void*)&{e}" for e in exprs)
    opts = (*OPTIONS, "-ftz=true", f"-arch={target(name, cc)}")
    with tempfile.TemporaryDirectory() as d:
        Path(d, "k.cu").write_text(f"{src}\nvoid* ninfer_ir_refs[] = {{{refs}}};\n")
        cmd = [nvcc, "-cubin", *opts, "--keep", "k.cu", "-o", "k.cubin"]
        res = subprocess.run(cmd, cwd=d, capture_output=True, text=True, check=False)
        if res.returncode:
            raise IRError(f"nvcc failed on {name} sm_{cc}:\n{res.stderr}", 1)
        ptx, cubin = Path(d, "k.ptx").read_text(), Path(d, "k.cubin").read_bytes()
    entries = re.findall(r"^\S*\s*\.entry\s+(\w+)", ptx, re.MULTILINE)
    names = {}
    for e in exprs:  # Itanium mangling of int template arguments, matched as a prefix
        fn, args = e.split("<")[0], re.findall(r"-?\d+", e.split("<", 1)[1])
        pre = f"_Z{len(fn)}{fn}I" + "".join(f"Li{a.replace('-', 'n')}E" for a in args) + "E"
        names[e] = next((n for n in entries if n.startswith(pre)), "?")
    ver = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    return ptx, cubin, names, "nvcc " + " ".join(re.findall(r"V\d[\d.]+", ver)), opts


def split_ptx(ptx: str) -> tuple[list[str], dict[str, list[str]]]:
    """(module-scope lines every entry needs, {entry: lines}). Banners and comments
    naming the module's other entries are dropped; labels lose the per-module function
    index, so adding an instance does not rename the others' labels."""
    common: list[str] = []
    entries: dict[str, list[str]] = {}
    cur: list[str] | None = None
    depth = 0
    for ln in ptx.splitlines():
        if cur is None and depth == 0:
            if not ln.strip() or ln.lstrip().startswith("//"):
                continue
            if m := re.match(r"(?:\.visible\s+|\.weak\s+)?\.entry\s+(\w+)", ln):
                cur = entries.setdefault(m.group(1), [])
        ln = re.sub(r"(\$L__BB|__local_depot)\d+", r"\1", ln)
        (common if cur is None else cur).append(ln)
        depth += ln.count("{") - ln.count("}")
        if cur is not None and depth == 0 and "}" in ln:
            cur = None
    return common, entries


def _renumber(lines: list[str]) -> list[str]:
    ids: dict[str, str] = {}

    def label(m: re.Match[str]) -> str:
        return ids.setdefault(m.group(0), f".L_x_{len(ids)}")

    return [re.sub(r"\.L_x_\d+", label, ln) for ln in lines]


def split_sass(text: str) -> dict[str, list[str]]:
    """``nvdisasm -c`` per function, without addresses, labels numbered per function (the
    disassembler numbers them across the module, so one kernel's change would renumber
    the next ones)."""
    out: dict[str, list[str]] = {}
    cur: list[str] = []
    for ln in text.splitlines():
        if m := re.match(r"//-+ (\.text\.)?(\S+) -+$", ln):  # a section ends a function
            cur = out.setdefault(m.group(2), []) if m.group(1) else []
        cur.append(re.sub(r"^\s*/\*[0-9a-f]+\*/", "        ", ln).rstrip())
    return {n: _renumber("\n".join(ls).strip("\n").splitlines()) for n, ls in out.items()}


def loop_instrs(sass: str) -> int:
    """SASS instructions of the longest loop: from a label to a later branch back to it.
    The main loop's static length, its rarely taken paths included (a kernel's hot loop is
    its longest; the counts quoted in docs/perf come from here)."""
    at: dict[str, int] = {}
    n = best = 0
    for ln in sass.splitlines():
        if m := re.fullmatch(r"\s*(\.L_x_\d+):\s*", ln):
            at[m.group(1)] = n
        elif ln.rstrip().endswith(";"):
            n += 1
            if (m := re.search(r"\bBRA\b[^;]*\((\.L_x_\d+)\)", ln)) and m.group(1) in at:
                best = max(best, n - at[m.group(1)])
    return best


def res_usage(cuobjdump: str | None, cubin: Path) -> dict[str, dict[str, str]]:
    if cuobjdump is None:  # optional: the columns read "-"
        return {}
    res = subprocess.run([cuobjdump, "-res-usage", str(cubin)], capture_output=True)
    usage, fn = {}, ""
    for ln in res.stdout.decode(errors="replace").splitlines():
        if m := re.match(r"\s*Function (\S+):", ln):
            fn = m.group(1)
        elif fn and "REG:" in ln:
            usage[fn] = dict(kv.split(":", 1) for kv in ln.split())
    return usage


@functools.cache
def uses(
    cc: int, disp: Dispatcher = DEFAULT
) -> dict[tuple[str, str], list[tuple[QType, Policy, int]]]:
    """(route, instance) -> the problems ``select`` (the runtime's rule) sends to it, under
    ``disp``'s tables and tuning."""
    out: dict[tuple[str, str], list[tuple[QType, Policy, int]]] = {}
    for q, pol, t in ((q, p, t) for q in QType for p in Policy for t in range(1, T_SCAN + 1)):
        prob = Problem(q, pol, 128, 128, t, cc)
        try:
            r = disp.select(prob)
        except UnsupportedProblem:
            continue
        inst = r.launcher.instance(prob, disp.tuning[r.name])
        out.setdefault((r.name, inst), []).append((q, pol, t))
    return out


def _use_columns(u: list[tuple[QType, Policy, int]]) -> list[str]:
    spans: list[list[int]] = []
    for t in sorted({t for _, _, t in u}):
        if spans and t == spans[-1][1] + 1:
            spans[-1][1] = t
        else:
            spans.append([t, t])
    ts = [f"{a}+" if b == T_SCAN else f"{a}-{b}" if b > a else f"{a}" for a, b in spans]
    cols = [dict.fromkeys(q.name for q, _, _ in u), dict.fromkeys(p.value for _, p, _ in u), ts]
    return [",".join(c) or "-" for c in cols]


def kernel_name(src: str, expr: str) -> tuple[str, str]:
    """(readable name, template args): QT as its QType name, others as <param><value>."""
    fn, args = expr.split("<")[0], [a.strip() for a in expr[:-1].split("<", 1)[1].split(",")]
    m = re.search(rf"template\s*<([^>]*)>\s*__global__[^;{{]*?\b{fn}\s*\(", src)
    params = [p.split()[-1] for p in m.group(1).split(",")] if m else []
    params = params if len(params) == len(args) else [f"A{i}" for i in range(len(args))]
    pairs = list(zip(params, args, strict=True))
    parts = [QNAME[int(a)] if p == "QT" else f"{p}{a}" for p, a in pairs]
    return "__".join([fn, *parts]), " ".join(f"{p}={a}" for p, a in pairs)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="ninfer-bench ir",
        description="The PTX and SASS of every kernel instance the route tables can launch,\n"
        "one file each plus an index.tsv, so two commits diff file by file (diff -r irA irB).\n"
        "Needs nvdisasm and cuobjdump (the dev extra); no GPU with --arch.",
        formatter_class=HelpFormatter,
    )
    ap.add_argument("--out", type=Path, required=True,
                    help="output folder: new, empty, or an earlier ir output")  # fmt: skip
    ap.add_argument("--arch", action="append",
                    help="sm_XX, repeatable (default: this GPU's architecture)")  # fmt: skip
    ap.add_argument("--compiler", choices=["auto", "nvrtc", "nvcc"], default="auto",
                    help="auto: NVRTC as linear() compiles, nvcc only as a fallback")  # fmt: skip
    ap.add_argument("--dispatch", type=Path, metavar="FILE",
                    help="a dispatch override (ninfer-bench --dispatch's JSON: force, table, "
                         "tuning): the instances an experiment's variant launches")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        disp = DEFAULT
        if args.dispatch is not None:
            from .override import OverrideError, load

            try:
                disp = load(args.dispatch)[1]
            except OverrideError as e:
                raise IRError(f"--dispatch: {e}") from e
        return run(args.out, args.arch, args.compiler, disp, args.dispatch)
    except IRError as e:
        print(f"ninfer-bench: error: {e}", file=sys.stderr)
        return e.code


def _archs(given: list[str] | None) -> list[int]:
    if not given:
        from ..runtime.compile import device_arch
        from ..runtime.cupy_env import NoGPUError, require_cupy

        try:
            return [int(device_arch(require_cupy().cuda.Device().id))]
        except NoGPUError as e:
            raise IRError(f"no --arch and no usable GPU ({e}); give --arch sm_XX") from e
    ccs = []
    for a in given:
        if not (m := re.fullmatch(r"(?:sm_?)?(\d{2,3})", a.strip().lower())):
            raise IRError(f"--arch: expected sm_XX or XX (e.g. sm_90), got {a!r}")
        try:
            table_for(int(m.group(1)))
        except UnsupportedProblem as e:
            raise IRError(str(e)) from e
        ccs.append(int(m.group(1)))
    return sorted(set(ccs))


def run(
    out: Path,
    arch: list[str] | None,
    compiler: str,
    disp: Dispatcher = DEFAULT,
    dispatch_file: Path | None = None,
) -> int:
    ccs = _archs(arch)
    nvcc = tool("nvcc") if compiler != "nvrtc" else None
    use_nvrtc = compiler != "nvcc" and nvrtc_version() is not None
    if not use_nvrtc and nvcc is None:
        raise IRError(f"no compiler (--compiler {compiler}): CuPy's NVRTC did not load, no nvcc")
    if (nvdisasm := tool("nvdisasm")) is None:
        raise IRError("nvdisasm not found: pip install nvidia-cuda-nvdisasm or add CUDA's bin")
    idx = out / "index.tsv"
    if out.exists() and any(out.iterdir()):
        # An earlier version's index (fewer columns) is ours too: its columns lead the same.
        if not idx.is_file() or not idx.read_text().startswith("\t".join(COLUMNS[:3]) + "\t"):
            raise IRError(f"--out {out} is neither empty nor an earlier ir output")
        shutil.rmtree(out)  # ours: rewritten whole, so no stale file survives into a diff

    def build(job: tuple[int, str]) -> Compiled:
        cc, name = job
        src, exprs = assembled_source(name), LAUNCHERS[name].instances(disp.tuning[name])
        return _nvrtc(src, name, exprs, cc) if use_nvrtc else _nvcc(str(nvcc), src, name, exprs, cc)

    jobs = [(cc, n) for cc in ccs for n in dict.fromkeys(r.name for r in disp.table_for(cc))]
    # Each build is an nvcc run of several seconds: ~50 s in all on two cores.
    with ThreadPoolExecutor(max_workers=2) as pool, Steps(len(jobs), "ir builds") as steps:
        built = []
        for (cc, name), b in zip(jobs, pool.map(build, jobs), strict=True):
            built.append(b)
            steps.done(f"sm_{cc} {name}")
    rows, compilers = [], {}
    for (cc, name), (ptx, cubin, names, comp, opts) in zip(jobs, built, strict=True):
        compilers[f"sm_{cc}"] = f"{comp}: {' '.join(opts)}"
        common, ptx_by = split_ptx(ptx)
        with tempfile.TemporaryDirectory() as d:
            Path(d, "m.cubin").write_bytes(cubin)
            dis = subprocess.run([nvdisasm, "-c", "m.cubin"], cwd=d, capture_output=True, text=True)
            if dis.returncode:
                raise IRError(f"nvdisasm failed on {name} sm_{cc}: {dis.stderr.strip()}", 1)
            usage = res_usage(tool("cuobjdump"), Path(d, "m.cubin"))
        sass_by = split_sass(dis.stdout)
        for expr in LAUNCHERS[name].instances(disp.tuning[name]):
            kname, targs = kernel_name(assembled_source(name), expr)
            mangled, rel = names[expr], f"sm_{cc}/{name}/{kname}"
            if mangled not in ptx_by or mangled not in sass_by:
                raise IRError(f"{expr} ({mangled}) is missing from the sm_{cc} PTX or SASS", 1)
            ptx_t = "\n".join(common + ptx_by[mangled]) + "\n"
            sass_t = "\n".join(sass_by[mangled]) + "\n"
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(Path(out, f"{rel}.ptx"), ptx_t)
            write_text_atomic(Path(out, f"{rel}.sass"), sass_t)
            ident = [f"sm_{cc}", name, kname, expr, targs, mangled]
            sha = [hashlib.sha256(t.encode()).hexdigest() for t in (ptx_t, sass_t)]
            res = [usage.get(mangled, {}).get(k, "-") for k in ("REG", "STACK", "LOCAL", "SHARED")]
            counts = [
                len(re.findall(r"\b(?:LDL|STL)\b", sass_t)),
                sass_t.count(";\n"),
                loop_instrs(sass_t),
            ]
            uses_ = _use_columns(uses(cc, disp).get((name, expr), []))
            files = [f"{rel}.ptx", f"{rel}.sass", *sha, *res, *map(str, counts)]
            rows.append([*ident, *uses_, *files, comp, " ".join(opts)])
    write_text_atomic(idx, "".join("\t".join(r) + "\n" for r in [COLUMNS, *rows]))
    write_text_atomic(out / "README.md", readme(compilers, dispatch_file))
    print(f"{len(rows)} kernel instances ({', '.join(compilers)}) -> {out}")
    return 0


def readme(compilers: dict[str, str], dispatch_file: Path | None = None) -> str:
    dirty = " (dirty)" if git("status", "--porcelain", "--", "kernels", "ninfer") else ""
    # A copied tree without .git (the device machine): the caller may name the commit.
    commit = git("rev-parse", "HEAD") or os.environ.get("NINFER_GIT_COMMIT") or "?"
    comp = "".join(f"- {a}: {c}\n" for a, c in compilers.items())
    return f"""# ninfer-bench ir

PTX and SASS of every kernel instance the route table of each arch can launch.

- commit: {commit}{dirty}
- kernels digest: {kernels_digest()}
- source hashes: {", ".join(f"{n} {source_hash(n)}" for n in sorted(LAUNCHERS))}
- dispatch: {f"the override {dispatch_file}" if dispatch_file else "the shipped tables and tuning"}
{comp}
`<arch>/<route>/<kernel>.ptx|.sass`. `<kernel>`: the route, then one `__` field per
template argument: `QT` as the QType name (Q4 Q5 Q6 W8 NVFP4 BF16), any other as its
parameter name in the .cu and value (`TT4`: token tile 4). `index.tsv`: one row per
instance with the formats, policies and T the route table sends to it, sha256 of both
files, REG/STACK/LOCAL/SHARED (`cuobjdump -res-usage`), LDL/STL and instruction counts
(`loop_instrs`: the longest loop's, the main loop with its edge paths), compiler and
options. Normalised for diffs: no compiler banners, labels numbered per kernel, SASS
without addresses or encodings.

A/B: `ninfer-bench ir --arch sm_90 --out irA` at each commit, then `diff -r irA irB`.
"""

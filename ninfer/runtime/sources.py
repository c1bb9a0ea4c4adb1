"""Locate and assemble kernel sources (kernels/ in a checkout, ninfer/_kernels in a wheel)."""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)


@functools.cache
def kernel_dir() -> Path:
    pkg = Path(__file__).resolve().parent.parent
    for cand in (pkg / "_kernels", pkg.parent / "kernels"):
        if cand.is_dir() and any(cand.glob("*.cu")):
            return cand
    raise FileNotFoundError(f"kernel sources not found next to {pkg} (_kernels/ or ../kernels/)")


@functools.cache
def assembled_source(name: str) -> str:
    """``kernels/<name>.cu`` with its local ``#include "x.cuh"`` inlined (once each).

    Inlining keeps NVRTC free of include paths and makes the source hash cover every
    header the kernel uses.
    """
    root = kernel_dir()
    seen: set[str] = set()

    def expand(text: str) -> str:
        def sub(m: re.Match[str]) -> str:
            inc = m.group(1)
            if inc in seen:
                return f"// {inc} (already included)"
            seen.add(inc)
            return expand((root / inc).read_text())

        return _INCLUDE.sub(sub, text)

    return expand((root / f"{name}.cu").read_text())


@functools.cache
def source_hash(name: str) -> str:
    return hashlib.sha256(assembled_source(name).encode()).hexdigest()[:16]


def kernels_digest() -> str:
    """Hash of every file under kernels/ (names and bytes)."""
    h = hashlib.sha256()
    for p in sorted(kernel_dir().glob("*.cu*")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()

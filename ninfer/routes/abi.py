"""The host <-> kernel interface, stated once on the host and checked by the compiler.

A route declares its kernel's parameters as rows of (name, C type, ctypes type):
``fields`` turns them into the ctypes parameter block that cuLaunchKernel reads, and
``checks`` into C++ ``static_assert``s that the kernel's signature is those C types in
that order, that each C type has its ctypes type's size, and that every constant the
host computes with (``Abi.constants``: a C expression of the kernel source and the value
the host uses) is what the kernel says. tests/cpu/test_compile.py compiles each route's
source with its checks appended for every architecture, so a kernel and its launcher
cannot drift apart without a compile error that names the difference. (A signature is
a list of types: two parameters of one type swapped by name are beyond the compiler;
the GPU conformance suite is what catches those.)
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..formats.qtype import QType
from .problem import QTYPE_ID

# (parameter name, its C type in the kernel's signature, the ctypes type the host packs)
Param = tuple[str, str, Any]

# The format ids the kernels are instantiated on (kernels/common.cuh).
QTYPE_CONSTANTS: Mapping[str, int] = MappingProxyType({f"QT_{q.name}": QTYPE_ID[q] for q in QType})


@dataclass(frozen=True)
class Abi:
    kernel: str  # the __global__ template's name
    params: Sequence[Param]
    constants: Mapping[str, int] = field(default_factory=dict)


def fields(params: Sequence[Param]) -> list[tuple[str, Any]]:
    """A ctypes Structure's ``_fields_``: the values cuLaunchKernel copies, in order."""
    return [(name, ctype) for name, _, ctype in params]


def checks(abi: Abi, instance: str) -> str:
    """C++ that compiles only if ``instance`` (one of the kernel's template instances,
    defined above it in the same source) matches ``abi``."""
    ctypes_list = ", ".join(c for _, c, _ in abi.params)
    lines = [
        f"// The host's statement of {abi.kernel}'s interface (ninfer/routes/abi.py).",
        "template <class A, class B> struct ninfer_abi_same { static constexpr bool value = false; };",
        "template <class A> struct ninfer_abi_same<A, A> { static constexpr bool value = true; };",
        f"static_assert(ninfer_abi_same<decltype(&{instance}), void (*)({ctypes_list})>::value,",
        f'              "{abi.kernel}: its parameters are not the host\'s ({ctypes_list})");',
    ]
    for name, c, ct in abi.params:
        size = ctypes.sizeof(ct)
        lines.append(
            f'static_assert(sizeof({c}) == {size}, "{abi.kernel}: {name} ({c}) is not the '
            f"host's {size} bytes\");"
        )
    for expr, value in {**QTYPE_CONSTANTS, **abi.constants}.items():
        lines.append(
            f'static_assert(({expr}) == {value}, "{abi.kernel}: {expr} is not the host\'s {value}");'
        )
    return "\n".join(lines) + "\n"

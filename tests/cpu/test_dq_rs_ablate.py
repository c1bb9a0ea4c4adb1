"""tools/dq_rs_ablate.py's variants are text patches of kernels/dq_rs.cu: each must still
find its targets once, or the tool stops on the GPU box (costing a device run) instead of
here."""

from __future__ import annotations

import pathlib
import sys

import pytest

from ninfer.runtime.sources import assembled_source

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))

import dq_rs_ablate  # tools/ is not a package


@pytest.mark.parametrize("variant", sorted(dq_rs_ablate.VARIANTS))
def test_variant_patches_apply_to_the_kernel(variant: str) -> None:
    patches = dq_rs_ablate.VARIANTS[variant]
    # patched() exits when a target is not in the source exactly once.
    text = dq_rs_ablate.patched(patches)("dq_rs")
    assert (text == assembled_source("dq_rs")) == (not patches)

"""kernels/ ships in the wheel and is found from an installed (non-editable) package."""

from __future__ import annotations

import os
from pathlib import Path

import ninfer
from ninfer.routes import LAUNCHERS
from ninfer.runtime.sources import assembled_source, kernel_dir


def test_kernel_sources_found() -> None:
    d = kernel_dir()
    for name in LAUNCHERS:
        assert (d / f"{name}.cu").is_file()
        assert '#include "' not in assembled_source(name)  # every local header inlined


def test_installed_wheel_carries_kernels() -> None:
    if not os.environ.get("NINFER_EXPECT_INSTALLED"):
        import pytest

        pytest.skip("source checkout run; nox -s tests checks the installed wheel")
    d = kernel_dir()
    assert d.name == "_kernels" and str(d.parent) == os.path.dirname(ninfer.__file__)
    assert "site-packages" in str(d)


def test_results_schema_ships_with_the_package() -> None:
    from ninfer.record import SCHEMA_FILE, json_schema

    assert SCHEMA_FILE.parent == Path(ninfer.__file__).parent
    assert json_schema()["properties"]["schema_version"] == {"const": 2}

"""Atomic file writers: a reader sees the old file or the new one, never a torn one.

Every writer of the project goes through here (results, reports, baselines' pairs, the
probe cache, the route tables and their page); a crash leaves at most a stray temporary
file beside the target, never a half-written target.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def staged(path: Path, text: str) -> Iterator[Path]:
    """A fully written, fsynced temporary file beside ``path``; removed unless renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600; the renamed result gets what open() would give it
        # (0666 less the umask), so a CI artifact or a shared results folder stays readable.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        yield Path(tmp)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_text_atomic(path: Path, text: str) -> None:
    with staged(path, text) as tmp:
        os.replace(tmp, path)

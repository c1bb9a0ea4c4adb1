"""Progress of the long operations (a run's rounds, an A/B's rounds, ``ir``'s builds).

On a terminal, a tqdm bar on stderr. Elsewhere (nox, CI logs, a pipe) a bar's carriage
returns pile up into one unreadable line, so each step prints one plain line instead:
what finished, how many of how many, and the time so far.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any, TextIO


class Steps:
    """``with Steps(total, "rounds") as s: ... s.done("A1")`` after each step."""

    def __init__(self, total: int, what: str, stream: TextIO | None = None) -> None:
        self.total, self.what, self.n = total, what, 0
        self.stream = stream if stream is not None else sys.stderr
        self.t0 = time.monotonic()
        self._bar: Any = None
        if self.stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=what, unit="step", file=self.stream,
                             dynamic_ncols=True, leave=True)  # fmt: skip

    def done(self, note: str = "") -> None:
        self.n += 1
        if self._bar is not None:
            self._bar.set_postfix_str(note, refresh=False)
            self._bar.update(1)
        else:
            dt = time.monotonic() - self.t0
            tail = f": {note}" if note else ""
            print(f"{self.what} {self.n}/{self.total} ({dt:.0f} s){tail}", file=self.stream,
                  flush=True)  # fmt: skip

    def __enter__(self) -> Steps:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.close()

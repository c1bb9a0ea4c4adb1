"""Progress lines (ninfer/progress.py): a bar on a terminal, one plain line a step elsewhere."""

from __future__ import annotations

import io

from ninfer.progress import Steps


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    with Steps(2, "rounds", out) as s:
        s.done("round 1")
        s.done("round 2 exited 1")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in out.getvalue()
    assert lines[0].startswith("rounds 1/2 (") and lines[1].endswith("round 2 exited 1")


def test_a_bar_on_a_terminal() -> None:
    out = _Tty()
    with Steps(3, "A/B rounds", out) as s:
        for name in ("A1", "B1", "A2"):
            s.done(name)
    text = out.getvalue()
    assert "A/B rounds" in text and "3/3" in text and "\r" in text  # tqdm redraws in place

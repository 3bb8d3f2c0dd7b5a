"""Plain-text tables for the terminal (no colour codes, so they survive logs and CI output). A
cell may hold text from outside: what a terminal would act on is shown escaped."""

from __future__ import annotations

from collections.abc import Sequence

from duplexsim.core.shown import for_terminal

__all__ = ["render_table"]


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], *, align: str = ""
) -> str:
    """Columns padded to their widest cell; ``align`` is 'l' or 'r' per column (default l, then r)."""
    cells = [[for_terminal(str(h)) for h in headers], *[[_fmt(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    aligns = align or "l" + "r" * (len(headers) - 1)

    def line(row: list[str]) -> str:
        parts = [
            c.ljust(w) if a == "l" else c.rjust(w)
            for c, w, a in zip(row, widths, aligns, strict=False)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return for_terminal(str(value))

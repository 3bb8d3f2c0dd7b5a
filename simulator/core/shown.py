"""Text from outside (a server's error, a run folder's fields) made safe to show (pure).

A terminal acts on the control characters it prints: ``ESC ]0;`` retitles the window, ``ESC [``
recolours or moves the cursor, a carriage return overwrites the line. So text from outside is
shown with every character Python does not call printable (``str.isprintable``: controls,
format characters such as bidirectional overrides, separators other than the space) written as
an escape (``\\x1b``, ``\\u202e``), never sent. Printable text is left as it is.

A spreadsheet runs a cell that starts with ``=``, ``+``, ``-`` or ``@`` (tab and carriage
return too) as a formula. So a CSV cell of text is escaped as for the terminal and, when it
starts so, prefixed with a single quote, as OWASP recommends for CSV injection.
"""

from __future__ import annotations

__all__ = ["FORMULA_STARTS", "csv_cell", "for_terminal", "terminal_lines"]

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def for_terminal(text: str) -> str:
    """``text`` as one line with nothing a terminal acts on: what is not printable escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def terminal_lines(text: str) -> str:
    """``text`` of several lines, each shown as ``for_terminal`` shows one."""
    return "\n".join(for_terminal(line) for line in text.split("\n"))


def csv_cell(value: object) -> object:
    """A CSV cell: text escaped and, if a spreadsheet would take it for a formula, quoted;
    anything else (numbers, booleans, empty) as it is."""
    if not isinstance(value, str):
        return value
    text = for_terminal(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def _escape(char: str) -> str:
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"

"""Text from outside, shown: escaped for the terminal, neutralised for a spreadsheet."""

from __future__ import annotations

import csv
import io
import re

from hypothesis import given
from hypothesis import strategies as st

from duplexsim.core.shown import FORMULA_STARTS, csv_cell, for_terminal, terminal_lines

ESCAPE = re.compile(r"\\(?:x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8}|[nrt])")
# any text, weighted towards what a terminal acts on
TEXT = st.text(
    st.one_of(
        st.characters(),
        st.sampled_from(["\x1b", "\x07", "\r", "\n", "\t", "\x9b", "\u202e", "\u2028", "\x00"]),
    )
)


def test_escape_sequences_are_shown_not_sent() -> None:
    said = "\x1b]0;PWNED\x07\x1b[31mred\r\nnext\u202eevil\U000e0001"
    assert for_terminal(said) == ("\\x1b]0;PWNED\\x07\\x1b[31mred\\r\\nnext\\u202eevil\\U000e0001")
    assert terminal_lines("a\x1b[2K\nb\tc") == "a\\x1b[2K\nb\\tc"
    assert for_terminal("naïve café 東京 \\x1b") == "naïve café 東京 \\x1b"


@given(TEXT)
def test_what_is_shown_holds_nothing_a_terminal_acts_on(text: str) -> None:
    shown = for_terminal(text)
    assert shown.isprintable()  # no C0/C1 control, ESC, format character or line separator
    assert for_terminal(shown) == shown


@given(TEXT)
def test_every_printable_character_comes_through_in_order(text: str) -> None:
    if "\\" in text:  # a backslash is printable and stays; escapes are told apart without one
        text = text.replace("\\", "/")
    assert ESCAPE.sub("", for_terminal(text)) == "".join(c for c in text if c.isprintable())


@given(st.text(st.characters(codec="utf-8")))
def test_printable_text_is_left_as_it_is(text: str) -> None:
    if text.isprintable():
        assert for_terminal(text) == text


@given(TEXT)
def test_lines_keep_their_breaks_and_nothing_else(text: str) -> None:
    shown = terminal_lines(text)
    assert shown.count("\n") == text.count("\n")
    assert all(line.isprintable() for line in shown.split("\n"))


def test_a_formula_is_quoted_as_owasp_recommends() -> None:
    assert csv_cell('=HYPERLINK("http://x","y")') == '\'=HYPERLINK("http://x","y")'
    for start in ("+1", "-1+cmd", "@SUM(A1)", "=1"):
        assert csv_cell(start) == "'" + start
    assert csv_cell("\tx") == "\\tx" and csv_cell("\r=1") == "\\r=1"  # shown, so no longer a start
    assert csv_cell("a=1") == "a=1" and csv_cell("") == ""
    assert csv_cell(-1.5) == -1.5 and csv_cell(None) is None and csv_cell(True) is True


@given(TEXT)
def test_a_cell_is_never_a_formula_and_reads_back_as_written(text: str) -> None:
    cell = csv_cell(text)
    assert isinstance(cell, str) and cell.isprintable()
    assert not cell.startswith(FORMULA_STARTS)
    if text.isprintable() and not text.startswith(FORMULA_STARTS):
        assert cell == text
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow([cell, "next"])
    assert out.getvalue().count("\n") == 1  # one record, one line
    assert next(csv.reader(io.StringIO(out.getvalue()))) == [cell, "next"]

"""The run summary: latency from sessions whose own timing can be vouched for, with its count."""

from __future__ import annotations

from duplexsim.run.store import ResultRow
from duplexsim.run.summary import render_summaries, summarise_rows


def row(i: int, latency_s: float, *, valid: bool | None, truncated: str | None = None) -> ResultRow:
    return ResultRow(
        f"s{i}", "ok", "end-of-turn", None, 1, "en", "Amusement", latency_s, 1.0, 1.0, 0.0,
        0.5, 0.1, 0.2, 0.3, 1, 1, 1.0, f"sessions/s{i}", "2026-01-01T00:00:00+00:00",
        timing_valid=valid, timing_invalid=None if valid is not False else "send max 30.0 ms > 20 ms",
        truncated=truncated,
    )  # fmt: skip


def test_latency_leaves_out_sessions_with_invalid_timing_and_says_so() -> None:
    rows = [row(0, 0.4, valid=True), row(1, 0.5, valid=True), row(2, 3.0, valid=False)]
    s = summarise_rows("r", rows)
    assert (s.replied, s.timing_valid, s.latency_n) == (3, 2, 2)
    assert s.latency_p50_ms == 450.0  # 3.0 s is not among them
    text = render_summaries([s])
    assert "2/3" in text and "r leaves out 1" in text


def test_rows_recorded_before_the_check_count_as_valid_and_truncation_is_counted() -> None:
    s = summarise_rows("r", [row(0, 0.4, valid=None, truncated="max-length")])
    assert (s.timing_valid, s.latency_n, s.truncated) == (1, 1, 1)

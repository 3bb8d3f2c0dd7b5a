"""The run summary: latency from sessions whose own timing can be vouched for, every metric from
sessions whose model heard the stream as sent, both counts shown, and the samples retried."""

from __future__ import annotations

from duplexsim.run.store import ResultRow
from duplexsim.run.summary import render_summaries, summarise_rows


def row(
    i: int,
    latency_s: float,
    *,
    valid: bool | None,
    faithful: bool | None = None,
    truncated: str | None = None,
    attempts: int = 1,
) -> ResultRow:
    return ResultRow(
        f"s{i}", "ok", "end-of-turn", None, attempts, "en", "Amusement", latency_s, 1.0, 1.0,
        0.0, 0.5, 0.1, 0.2, 0.3, 1, 1, 1.0, f"sessions/s{i}", "2026-01-01T00:00:00+00:00",
        timing_valid=valid, timing_invalid=None if valid is not False else "send max 30.0 ms > 20 ms",
        truncated=truncated, input_faithful=faithful,
        fidelity_lost="a frame 80.0 ms late > 60 ms" if faithful is False else None,
    )  # fmt: skip


def test_latency_leaves_out_imprecise_sessions_and_says_so() -> None:
    rows = [
        row(0, 0.4, valid=True, faithful=True),
        row(1, 0.5, valid=True, faithful=True),
        row(2, 3.0, valid=False, faithful=True),
    ]
    s = summarise_rows("r", rows)
    assert (s.replied, s.faithful, s.precise, s.latency_n) == (3, 3, 2, 2)
    assert s.latency_p50_ms == 450.0  # 3.0 s is not among them
    text = render_summaries([s])
    assert "3/3" in text and "2/3" in text and "r leaves out 1" in text
    assert "every metric leaves out" not in text  # nothing lost fidelity


def test_a_session_that_lost_fidelity_is_out_of_every_count_and_said_so() -> None:
    rows = [row(0, 0.4, valid=True, faithful=True), row(1, 0.4, valid=False, faithful=False)]
    s = summarise_rows("r", rows)
    assert (s.faithful, s.precise, s.latency_n) == (1, 1, 1)
    text = render_summaries([s])
    assert "input fidelity lost" in text and "r leaves out 1" in text
    assert "latency comes from" not in text  # the one left out is out of everything


def test_rows_recorded_before_the_split_read_as_they_did() -> None:
    # an invalid session recorded before fidelity was told apart counted for nothing: it still
    # does; one recorded before any check counted for everything: it still does
    old = [row(0, 0.4, valid=None, truncated="max-length"), row(1, 0.4, valid=False)]
    s = summarise_rows("r", old)
    assert (s.faithful, s.precise, s.latency_n, s.truncated) == (1, 1, 1, 1)
    assert not old[1].faithful and not old[1].precise and old[0].faithful and old[0].precise


def test_the_samples_retried_are_counted() -> None:
    rows = [
        row(0, 0.4, valid=True, faithful=True, attempts=1),
        row(1, 0.4, valid=True, faithful=True, attempts=2),
        row(2, 0.4, valid=False, faithful=True, attempts=3),
    ]
    s = summarise_rows("r", rows)
    assert s.retried == 2
    header, _, line = render_summaries([s]).splitlines()[:3]
    columns = [c.strip() for c in header.split("  ") if c.strip()]
    values = dict(zip(columns, line.split(), strict=True))
    assert (values["input fidelity"], values["precision"], values["retried"]) == ("3/3", "2/3", "2")

"""Timing in tests of real-time sessions: budgets lenient enough for a loaded machine where a test
checks something else, and what a session vouched for where a test checks its timing."""

from __future__ import annotations

from duplexsim.core.timing import TimingBudget
from duplexsim.run.store import ResultRow
from duplexsim.session.engine import SessionOutcome

# for tests of something other than the machine's pacing (retries, resume, reports): a budget no
# loaded machine breaks, so a session is not run again because six other jobs share the cores.
# Timing validity itself is tested on the virtual clock (test_session_timing.py).
LENIENT = TimingBudget(
    send_p99_ms=1000.0,
    send_max_ms=5000.0,
    loop_lag_max_ms=5000.0,
    recv_lag_max_ms=5000.0,
    latency_ms=1000.0,
)


LENIENT_ARGS = ["--timing-budget", "1000/5000"]


def vouched(timed: SessionOutcome | ResultRow) -> bool:
    """Whether a real-time session vouched for its timing figures (it kept its budget). The one
    place tests ask: a loaded machine may spoil a session's timing, and the session says so."""
    if isinstance(timed, ResultRow):
        return timed.timing_valid is True and timed.precise
    return timed.check.valid


def assert_latency(timed: SessionOutcome | ResultRow, expected_s: float, tol_s: float) -> None:
    """A real-time session's latency is ``expected_s`` within ``tol_s``, as far as the session
    vouched for it: never earlier (a loaded machine only ever delays a reply), and, where the
    session kept its budget, no later than the tolerance plus what the machine may have added
    by its own account (its latency window). Only a session on a loop that logs its stalls
    (``duplexsim.session.eventloop``) can account for them."""
    if isinstance(timed, ResultRow):
        latency, bound_ms = timed.latency_s, timed.latency_bound_ms
    else:
        latency = None if timed.timing is None else timed.timing.latency_s
        bound_ms = timed.check.latency_bound_ms
    assert latency is not None, "no reply to time"
    assert latency >= expected_s - tol_s, f"latency {latency:.4f} s < {expected_s} - {tol_s}"
    if vouched(timed):
        most = expected_s + tol_s + (bound_ms or 0.0) / 1000
        assert latency <= most, f"latency {latency:.4f} s > {most:.4f} s, though vouched for"


def within_default_budget(row: ResultRow) -> bool:
    """Whether a session run under a lenient budget kept the default one (its recorded figures):
    the sessions whose real-time figures a test may hold to the millisecond."""
    b = TimingBudget()
    figures = (
        (row.send_p99_ms, b.send_p99_ms),
        (row.send_max_ms, b.send_max_ms),
        (row.loop_lag_max_ms, b.loop_lag_max_ms),
        (row.recv_lag_max_ms, b.recv_lag_max_ms),
        (row.latency_bound_ms, b.latency_ms),
    )
    return all(got is not None and got <= limit for got, limit in figures)

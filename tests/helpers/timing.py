"""Timing budgets lenient enough for a loaded machine, where a test checks something else."""

from __future__ import annotations

from duplexsim.core.timing import TimingBudget
from duplexsim.run.store import ResultRow

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

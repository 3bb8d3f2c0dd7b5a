"""The retry policy and the pacing of starts under a provider's limits, exact (the caller gives
the time)."""

from __future__ import annotations

import math
import random

import pytest

from duplexsim.core.retry import ProviderLimit, ProviderPacing, RetryPolicy

NO_JITTER = RetryPolicy(base_s=1.0, max_s=8.0, jitter=0.0)


def test_backoff_doubles_per_failure_up_to_its_cap_and_a_retry_after_wins() -> None:
    assert [NO_JITTER.backoff(k) for k in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert NO_JITTER.backoff(3, retry_after_s=0.5) == 0.5
    assert NO_JITTER.backoff(1, retry_after_s=60.0) == 8.0
    assert NO_JITTER.delay(3, retryable=True) is None  # the third attempt was the last
    assert NO_JITTER.delay(1, retryable=False) is None
    jittered = RetryPolicy(jitter=0.25).backoff(2, rng=random.Random(1))
    assert 1.5 <= jittered <= 2.5


def test_no_limits_said_means_no_wait() -> None:
    assert ProviderPacing().wait(0.0, in_flight=50) == 0.0


def test_starts_are_spread_over_what_remains_of_the_window() -> None:
    pacing = ProviderPacing(NO_JITTER)
    pacing.said([ProviderLimit("requests", 100, 4, reset_s=8.0)], now=10.0)
    assert pacing.wait(10.0, 0) == 0.0  # nothing started yet
    pacing.started(10.0)
    # 3 requests left over the 8 s to the reset: one every 8/3 s
    assert pacing.wait(10.0, 1) == pytest.approx(8 / 3)
    # a second later, the 7 s left over 3: the next at 10 + 7/3
    assert pacing.wait(11.0, 1) == pytest.approx(10.0 + 7 / 3 - 11.0)
    for t in (13.0, 14.0, 15.0):
        pacing.started(t)
    # all four spent: wait for the reset at 18, then nothing holds back
    assert pacing.wait(15.0, 4) == pytest.approx(3.0)
    assert pacing.wait(18.0, 4) == 0.0


def test_a_new_report_counts_only_the_starts_after_it() -> None:
    pacing = ProviderPacing(NO_JITTER)
    pacing.said([ProviderLimit("requests", 10, 1, reset_s=60.0)], now=0.0)
    pacing.started(0.0)
    assert pacing.wait(1.0, 1) == pytest.approx(59.0)
    pacing.said([ProviderLimit("requests", 10, 9, reset_s=1.0)], now=1.0)
    assert pacing.wait(1.0, 1) == pytest.approx(0.0, abs=1e-9)


def test_tokens_hold_starts_only_when_a_sessions_tokens_are_known() -> None:
    limit = ProviderLimit("tokens", 10_000, 1_000, reset_s=30.0)
    unknown = ProviderPacing(NO_JITTER)
    unknown.said([limit], now=0.0)
    unknown.started(0.0)
    assert unknown.wait(0.0, 1) == 0.0
    known = ProviderPacing(NO_JITTER, tokens_per_session=600.0)
    known.said([limit], now=0.0)
    known.started(0.0)
    assert known.wait(0.0, 1) == pytest.approx(30.0)  # 400 left: not enough for one more


def test_a_limit_without_a_reset_is_taken_per_minute() -> None:
    pacing = ProviderPacing(NO_JITTER)
    pacing.said([ProviderLimit("requests", remaining=0)], now=5.0)
    assert pacing.wait(5.0, 0) == pytest.approx(60.0)


def test_refusals_back_off_and_halve_how_many_run_at_once() -> None:
    pacing = ProviderPacing(NO_JITTER)
    assert pacing.refused(now=100.0, in_flight=8) == 1.0
    assert pacing.window == 4.0
    assert pacing.wait(100.5, in_flight=0) == pytest.approx(0.5)
    assert pacing.refused(now=101.0, in_flight=4, retry_after_s=None) == 2.0  # doubles
    assert pacing.window == 2.0
    assert pacing.wait(103.0, in_flight=2) == math.inf  # full: wait for a session to end
    assert pacing.wait(103.0, in_flight=1) == 0.0
    pacing.took()
    assert pacing.refusals == 0 and pacing.window == 3.0
    assert pacing.refused(now=200.0, in_flight=3, retry_after_s=0.25) == 0.25  # the server's

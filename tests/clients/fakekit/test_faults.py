"""The one media-fault injector, as every fake uses it: the default close, a service's own way of
ending a session, one malformed message, and the end of answering."""

from __future__ import annotations

import pytest

from duplexsim.clients.fakekit.faults import Faults, MediaFaults
from duplexsim.clients.fakekit.serveractions import Close, Send, Stall


def test_close_after_s_closes_with_1011_once_enough_input_has_arrived() -> None:
    injected = MediaFaults(Faults(close_after_s=0.5))
    assert injected.stop(0.49) == [] and not injected.finished
    assert injected.stop(0.5) == [Close(1011, "injected fault: close_after_s")]
    assert injected.finished


def test_a_service_ends_a_session_its_own_way() -> None:
    goaway = Send('{"goAway": {}}')
    injected = MediaFaults(
        Faults(close_after_s=0.1, malformed_after_s=0.0, malformed_then_close=True),
        closing=[goaway, Close(1000, "")],
        broken=Close(1011, "Internal error encountered."),
    )
    assert injected.malformed(0.0, lambda: "{bad") == [
        Send("{bad"),
        Close(1011, "Internal error encountered."),
    ]
    assert injected.stop(0.2) == [goaway, Close(1000, "")]


def test_stall_after_s_stalls_and_the_malformed_message_goes_once() -> None:
    injected = MediaFaults(Faults(stall_after_s=1.0, malformed_after_s=0.5))
    made: list[int] = []

    def garbage() -> bytes:
        made.append(1)
        return b"\x00"

    assert injected.malformed(0.4, garbage) == [] and made == []  # built only when due
    assert injected.malformed(0.5, garbage) == [Send(b"\x00")] and not injected.finished
    assert injected.malformed(0.9, garbage) == []
    assert injected.stop(1.0) == [Stall()] and injected.finished


def test_a_rate_limit_accepts_n_per_window_says_what_remains_and_refuses_past_it() -> None:
    now = [100.0]
    faults = Faults(rate_limit=2, rate_window_s=10.0, clock=lambda: now[0])
    assert faults.limit_headers()["x-ratelimit-remaining-requests"] == "2"
    assert faults.admit() is None
    now[0] = 103.0
    assert faults.admit() is None
    assert faults.requests_left() == (2, 0, pytest.approx(7.0))
    refused = faults.admit()
    assert refused is not None and refused.status == 429
    assert refused.headers["Retry-After"] == "7.000"
    assert refused.headers["x-ratelimit-remaining-requests"] == "0"
    assert refused.headers["x-ratelimit-reset-requests"] == "7000ms"
    now[0] = 110.0  # the first has left the window
    assert faults.requests_left() == (2, 1, pytest.approx(3.0))
    assert faults.admit() is None
    assert Faults().requests_left() is None and Faults().limit_headers() == {}
    with pytest.raises(ValueError, match="rate_window_s"):
        Faults(rate_limit=1, rate_window_s=0)

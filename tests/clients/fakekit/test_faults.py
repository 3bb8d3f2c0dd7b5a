"""The one media-fault injector, as every fake uses it: the default close, a service's own way of
ending a session, one malformed message, and the end of answering."""

from __future__ import annotations

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

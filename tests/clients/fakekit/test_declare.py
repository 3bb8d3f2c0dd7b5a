"""Declarations: the order of a fake's handshake checks, and a connection turned away."""

from __future__ import annotations

from duplexsim.clients.fakekit.declare import Request, Session, faults_only, faults_then
from duplexsim.clients.fakekit.faults import Faults, Rejection
from duplexsim.clients.fakekit.serveractions import Close

REQUEST = Request("GET", "/x?key=k", {"Authorization": "Bearer k"})
NO_KEY = Rejection(401, {}, "no key\n")


def test_faults_then_counts_every_attempt_before_the_protocol_checks_it() -> None:
    checked: list[Request] = []

    def check(request: Request) -> Rejection | None:
        checked.append(request)
        return NO_KEY

    faults = Faults(rate_limit_first=1)
    refuse = faults_then(check)
    assert refuse(REQUEST, faults).status == 429 and checked == []  # type: ignore[union-attr]
    assert refuse(REQUEST, faults) == NO_KEY and checked == [REQUEST]
    assert faults.connections == 2


def test_faults_only_lets_every_request_through_but_the_faults() -> None:
    faults = Faults(refuse_status=503)
    assert faults_only(REQUEST, faults).status == 503  # type: ignore[union-attr]
    assert faults_only(REQUEST, Faults()) is None


def test_a_connection_turned_away_closes_at_once_and_takes_no_turn() -> None:
    session = Session.turned_away(1008, "no route")
    assert list(session.opening) == [Close(1008, "no route")] and not session.takes_turn
    assert (
        session.conversation.receive("hello", 0.0) == [] and session.conversation.wake_at() is None
    )
    session.ended()  # nothing to do, and no error

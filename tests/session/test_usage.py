"""A session keeps what its provider says it used, and measures what every session uses: on the
virtual clock, exact to the frame."""

from __future__ import annotations

import numpy as np
import pytest

from duplexsim.clients.base import ClientEvent, EndOfTurn, RateLimits, UsageReport
from duplexsim.core.errors import ConnectError, RateLimited
from duplexsim.core.retry import ProviderLimit
from duplexsim.core.usage import Usage
from duplexsim.session.engine import run_session
from tests.helpers.sessions import RATE, SETTINGS, context, echo
from tests.helpers.virtualclock import ScriptedClient, run_virtual

LIMITS = (ProviderLimit("requests", 50, 49, 1.2), ProviderLimit("tokens", 9000, 8000, 6.0))


def reporting(*, cumulative: bool = False) -> ScriptedClient:
    """The delayed echo, reporting usage twice after its end of turn (and its limits once)."""
    client = echo(0.5)
    send = client.send_audio

    async def send_audio(samples: np.ndarray) -> None:
        before = len(client._queue)
        await send(samples)
        new: list[ClientEvent] = client._queue[before:]
        if any(isinstance(e, EndOfTurn) for e in new):
            at = new[-1].arrival
            client._queue += [
                RateLimits(LIMITS, at, "rate_limits.updated"),
                UsageReport(Usage(input_audio_tokens=12, output_audio_tokens=30), at, cumulative),
                UsageReport(Usage(input_audio_tokens=20, input_text_tokens=4), at, cumulative),
            ]

    client.send_audio = send_audio  # type: ignore[method-assign]
    return client


def test_reports_add_up_and_every_session_measures_its_audio_and_connection() -> None:
    heard: list[tuple[ProviderLimit, ...]] = []
    out = run_virtual(run_session(reporting(), context(), SETTINGS, on_rate_limits=heard.append))
    assert out.status == "ok", out.error
    u = out.usage
    assert (u.input_audio_tokens, u.input_text_tokens, u.output_audio_tokens) == (32, 4, 30)
    assert u.cached_audio_tokens is None  # never reported: unknown, not 0
    assert u.audio_sent_s == pytest.approx(out.sent.size / RATE, abs=1e-3)
    assert u.audio_received_s == pytest.approx(out.output.size / RATE, abs=0.05)
    # connected from the handshake to the close: the whole session on the virtual clock
    assert u.connected_s == pytest.approx(out.wall_s, abs=1e-3)
    assert heard == [LIMITS]
    usage = [e for e in out.events if e["kind"] == "usage"]
    assert [(e["input_audio_tokens"], e["source"]) for e in usage] == [(12, ""), (20, "")]
    (limits,) = [e for e in out.events if e["kind"] == "rate_limits"]
    assert limits["limits"][0] == {"name": "requests", "limit": 50, "remaining": 49, "reset_s": 1.2}


def test_running_totals_replace_each_other() -> None:
    out = run_virtual(run_session(reporting(cumulative=True), context(), SETTINGS))
    assert out.usage.input_audio_tokens == 20 and out.usage.output_audio_tokens is None


class Refused(ScriptedClient):
    def __init__(self, error: Exception) -> None:
        super().__init__(echo().behaviour)
        self.error = error

    async def connect(self) -> None:
        raise self.error


def test_a_refused_handshake_was_never_connected_and_says_if_it_was_the_rate_limit() -> None:
    out = run_virtual(run_session(Refused(RateLimited("HTTP 429")), context(), SETTINGS))
    assert out.status == "failed" and out.rate_limited
    assert out.usage.connected_s is None and out.usage.audio_sent_s == 0.0
    out = run_virtual(run_session(Refused(ConnectError("no route")), context(), SETTINGS))
    assert not out.rate_limited

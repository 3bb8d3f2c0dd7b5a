"""The sender alone, on the virtual clock: frames go out when due on the absolute schedule, each
send timed against its due time; a slow send makes the next ones late (not later due); a send
that fails did not go out; one that never returns is recorded as late as the session's end."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from duplexsim.core.errors import Disconnected
from duplexsim.core.records import EventRecords
from duplexsim.session.sender import Sender
from tests.helpers.virtualclock import run_virtual

FRAME = np.zeros(320, np.float32)


class Peer:
    """Takes frames; frame ``slow`` takes ``slow_s`` to send, frame ``fail`` fails."""

    def __init__(self, slow: int = -1, slow_s: float = 0.0, fail: int = -1) -> None:
        self.slow, self.slow_s, self.fail = slow, slow_s, fail
        self.got: list[Any] = []

    async def send_audio(self, samples: np.ndarray) -> None:
        await self._send(samples)

    async def send_encoded(self, message: bytes | str) -> None:
        await self._send(message)

    async def _send(self, what: Any) -> None:
        n = len(self.got)
        if n == self.fail:
            raise Disconnected("closed")
        if n == self.slow:
            await asyncio.sleep(self.slow_s)
        self.got.append(what)


async def send(peer: Peer, frames: int, **kw: Any) -> tuple[Sender, list[tuple[np.ndarray, float]]]:
    tapped: list[tuple[np.ndarray, float]] = []
    loop = asyncio.get_running_loop()
    sender = Sender(peer, 0.02, loop.time, EventRecords(), lambda x, at: tapped.append((x, at)))  # type: ignore[arg-type]
    sender.start()
    for n in range(frames):
        await sender.send(n, FRAME, kw.get("message"))
    return sender, tapped


def test_frames_go_out_when_due() -> None:
    sender, tapped = run_virtual(send(Peer(), 5))
    r = sender.records
    assert list(r.send_due) == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08])
    assert list(r.send_t) == list(r.send_due)  # the virtual clock is never late
    assert sender.frames_sent == 5 and sender.media_s() == pytest.approx(0.1)
    assert [at for _, at in tapped] == pytest.approx([0.0, 0.02, 0.04, 0.06, 0.08])
    assert sender.t0 == round(sender.t0, 3)  # T0 on a whole millisecond


def test_a_slow_send_is_late_and_so_are_the_next_but_none_is_due_later() -> None:
    sender, _ = run_virtual(send(Peer(slow=1, slow_s=0.045), 4))
    errors = sender.records.send_errors()
    assert errors == pytest.approx([0.0, 0.045, 0.025, 0.005])
    assert sender.records.loop_lags() == pytest.approx([0.0, 0.0, 0.025, 0.005])


def test_an_encoded_frame_is_sent_as_its_message() -> None:
    peer = Peer()
    run_virtual(send(peer, 2, message=b"opus"))
    assert peer.got == [b"opus", b"opus"]


def test_a_failed_send_did_not_go_out() -> None:
    peer = Peer(fail=2)

    async def main() -> Sender:
        sender = Sender(peer, 0.02, asyncio.get_running_loop().time, EventRecords())  # type: ignore[arg-type]
        sender.start()
        with pytest.raises(Disconnected):
            for n in range(4):
                await sender.send(n, FRAME, None)
        sender.record_unfinished()  # nothing under way: nothing recorded
        return sender

    sender = run_virtual(main())
    assert len(peer.got) == 2 and sender.frames_sent == 2
    assert list(sender.records.send_n) == [0, 1]


def test_a_send_that_never_returns_is_recorded_as_late_as_the_end() -> None:
    async def main() -> Sender:
        loop = asyncio.get_running_loop()
        sender = Sender(Peer(slow=1, slow_s=60.0), 0.02, loop.time, EventRecords())  # type: ignore[arg-type]
        sender.start()
        await sender.send(0, FRAME, None)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0):
                await sender.send(1, FRAME, None)
        sender.record_unfinished()
        sender.record_unfinished()  # once
        return sender

    sender = run_virtual(main())
    assert list(sender.records.send_n) == [0, 1]
    assert sender.records.send_errors()[1] == pytest.approx(1.0 - 0.02)

"""The pcm-ws fake server's protocol without I/O: client frames in, ``Action``s out.

It drives a reference behaviour and applies the media-time faults, answering each client frame
with ``Action``s for the kit (``duplexsim.clients.fakekit``) to carry out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.faults import Faults, MediaFaults
from duplexsim.clients.fakekit.mediaclock import FILL_LAPSE_S, MediaClock
from duplexsim.clients.fakekit.serveractions import Action, Close, Send, Stall
from duplexsim.clients.pcm_ws import events as wire
from duplexsim.core.audio import DigitalSilence
from duplexsim.core.errors import DuplexsimError, ProtocolError

__all__ = ["Action", "Close", "Send", "ServerProtocol", "Stall"]


class ServerProtocol:
    """One fake-server connection: hello, then one output frame per input frame, plus control.

    The model runs on the session's timeline (``duplexsim.clients.fakekit.mediaclock``): when the client stops
    sending, the wall clock goes on and the server hears silence for each frame it did not get,
    answering each with an output frame as before (``tick`` at ``wake_at``), so a reply plays
    on to its end of turn.
    """

    def __init__(
        self,
        behaviour_factory: Callable[[int], Behaviour],
        faults: Faults | None = None,
        session_id: str = "pcm-ws-1",
    ) -> None:
        self._factory = behaviour_factory
        self._injected = MediaFaults(faults or Faults())
        self._session_id = session_id
        self._behaviour: Behaviour | None = None
        self._clock: MediaClock | None = None  # made at hello, at its rate
        self._frame = 0  # samples per frame, from hello
        self._now: float | None = None  # when the message being answered arrived
        self._done = False  # closed or stalled: ignore everything
        self._zeros = DigitalSilence()  # most output frames are silence: encoded once

    def receive(self, message: str | bytes, now: float | None = None) -> list[Action]:
        """The actions answering one client message that arrived at ``now`` (None: no clock;
        the model then moves with the input alone)."""
        self._now = now
        if isinstance(message, str):
            return self.receive_text(message)
        return self.receive_binary(message)

    def receive_text(self, text: str) -> list[Action]:
        if self._done:
            return []
        try:
            msg = wire.decode(text)
            if self._behaviour is not None or not isinstance(msg, wire.Hello):
                raise ProtocolError(f"unexpected '{type(msg).__name__}' message from the client")
            return self._hello(msg)
        except DuplexsimError as exc:
            return self._fail("protocol" if isinstance(exc, ProtocolError) else "config", exc)

    def receive_binary(self, data: bytes) -> list[Action]:
        if self._done:
            return []
        if self._behaviour is None:
            return self._fail("protocol", ProtocolError("audio before 'hello'"))
        try:
            samples = self._zeros.decoded(data)
            if samples is None:
                samples = wire.decode_audio(data)
        except ProtocolError as exc:
            return self._fail("protocol", exc)
        assert self._clock is not None
        self._clock.heard(samples.size, now=self._now)
        return self._media_faults_before() or self._stream(self._behaviour, samples)

    def tick(self, now: float) -> list[Action]:
        """Silence heard, and the output answering it, for every frame the timeline has passed
        without input."""
        if self._done or self._behaviour is None or self._clock is None:
            return []
        position = self._clock.position(now)
        actions: list[Action] = []
        while not self._done and self._clock.received + self._frame <= position:
            self._clock.filled(self._frame)
            silence = np.zeros(self._frame, dtype=np.float32)
            actions += self._media_faults_before() or self._stream(self._behaviour, silence)
        return actions

    def wake_at(self) -> float | None:
        """When the next frame is due if no input arrives; None for never."""
        if self._done or self._clock is None:
            return None
        return self._clock.when(self._clock.received + self._frame)

    @property
    def _received(self) -> int:
        return 0 if self._clock is None else self._clock.received

    def _hello(self, hello: wire.Hello) -> list[Action]:
        if (hello.version, hello.encoding, hello.channels) != (wire.VERSION, wire.ENCODING, 1):
            raise ProtocolError(
                f"unsupported stream: version {hello.version}, {hello.encoding}, "
                f"{hello.channels} channels (want version 1, pcm16le, 1 channel)"
            )
        if not 8000 <= hello.sample_rate <= 48000 or hello.frame_ms <= 0:
            raise ProtocolError(f"unsupported sample_rate {hello.sample_rate} or frame_ms")
        self._behaviour = self._factory(hello.sample_rate)
        self._clock = MediaClock(hello.sample_rate, FILL_LAPSE_S)
        self._frame = max(1, hello.sample_rate * hello.frame_ms // 1000)
        return [Send(wire.encode(wire.HelloAck(hello.sample_rate, self._session_id)))]

    def _media_faults_before(self) -> list[Action]:
        actions = self._injected.stop(self._received / self._rate())
        self._done |= self._injected.finished
        return actions

    def _stream(self, behaviour: Behaviour, samples: NDArray[Any]) -> list[Action]:
        step = behaviour.push(samples)
        control: list[tuple[bool, wire.Message]] = [
            (step.speech_started, wire.SpeechStarted()),
            (step.speech_stopped, wire.SpeechStopped()),
            (step.reply_started, wire.ReplyStarted()),
        ]
        actions: list[Action] = [Send(wire.encode(msg)) for on, msg in control if on]
        actions.append(
            Send(
                self._zeros.pcm16(2 * step.audio.size)
                if step.silent
                else wire.encode_audio(step.audio)
            )
        )
        if step.reply_done:
            actions.append(Send(wire.encode(wire.EndOfTurn())))
        return actions + self._malformed()

    def _malformed(self) -> list[Action]:
        actions = self._injected.malformed(
            self._received / self._rate(), lambda: '{"type": "speech_started"'
        )  # truncated JSON
        self._done |= self._injected.finished
        return actions

    def _rate(self) -> int:
        assert self._behaviour is not None
        return self._behaviour.rate

    def _fail(self, code: str, exc: DuplexsimError) -> list[Action]:
        self._done = True
        error = wire.Error(code=code, message=exc.message, retryable=False)
        return [Send(wire.encode(error)), Close(1002 if code == "protocol" else 1011, code)]

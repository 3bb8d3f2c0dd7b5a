"""The Nova Sonic fake server's stream protocol without I/O: request bytes in, ``Action``s out.

It reads the signed envelopes (checking the signature chain when it knows the secret), unwraps
each chunk and follows the event order the API requires: sessionStart, promptStart, contents
(text or one interactive USER audio), promptEnd, sessionEnd; anything else ends the stream with
a validationException. Audio drives a reference behaviour on media time (input samples
received). Each reply goes out as Nova Sonic sends one: completionStart (once), the user's
transcript (USER TEXT, FINAL), the planned text (ASSISTANT TEXT, SPECULATIVE), the AUDIO
content (audioOutput chunks, led by s - c0 of silence so its first sample lands exactly where
the behaviour put it, then faster than real time), its contentEnd END_TURN, the spoken text
(FINAL) and a usageEvent. Time is the session's timeline: the input while it flows, the wall
clock once it stops (``duplexsim.clients.fakekit.mediaclock``; the shell calls ``tick`` at ``wake_at``), so a reply
goes on to its end when the client stops sending, as the real service's does. User speech before the reply has played out interrupts it:
textOutput ``{ "interrupted" : true }`` and the audio's contentEnd INTERRUPTED.
"""

from __future__ import annotations

import base64
import datetime
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.faults import Faults, MediaFaults
from duplexsim.clients.fakekit.mediaclock import MediaClock
from duplexsim.clients.fakekit.replypacing import PacedReply, lead_in
from duplexsim.clients.fakekit.serveractions import Action, Close, Send
from duplexsim.clients.nova_sonic import events as wire
from duplexsim.clients.nova_sonic.eventstream import MessageReader
from duplexsim.clients.nova_sonic.sigv4 import amz_date, event_signature
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float, resample
from duplexsim.core.errors import ProtocolError

__all__ = ["ServerProtocol"]

RATES = (8000, 16000, 24000)
# AWS publishes no speech-token rate: the fake bills this many a second of audio, in and out
# (a stand-in for wire tests; the estimate learns a model's real rate from its own runs)
SPEECH_TOKENS_PER_S = 25


@dataclass
class _Reply:
    content_id: str
    audio: PacedReply
    said: str
    billed: bool = False  # its usage is in the running totals


class ServerProtocol:
    def __init__(
        self,
        behaviour_factory: Callable[[int], Behaviour],
        faults: Faults | None = None,
        *,
        session_id: str = "session-1",
        secret: str | None = None,
        region: str = "us-east-1",
        seed_signature: str = "",
    ) -> None:
        self._factory = behaviour_factory
        self._injected = MediaFaults(faults or Faults())
        self._session = session_id
        self._secret, self._region, self._prior = secret, region, seed_signature
        self._envelopes = MessageReader()
        self._stage = "session"  # session -> prompt -> contents -> ended
        self._prompt = ""
        self._content: tuple[str, str] | None = None  # open content: name, type
        self._out_rate = 24000
        self._behaviour: Behaviour | None = None
        self._rate = 0
        self._clock = MediaClock(16000)  # replaced at the rate the audio content names
        self._now: float | None = None  # when the bytes being answered arrived
        self._ids = 0
        self._completion: str | None = None
        self._seen: object = None
        self._pending: tuple[int, NDArray[np.float32], NDArray[np.float32]] | None = None
        self._reply: _Reply | None = None
        self._spoken_s = 0.0  # reply audio generated so far in the session
        self._said_tokens = 0  # the replies' text
        self._last_total = {"input": (0, 0), "output": (0, 0)}  # (speech, text) at the last report
        self._done = False

    def receive(self, data: str | bytes, now: float | None = None) -> list[Action]:
        """The actions answering request bytes that arrived at ``now`` (None: no clock; the
        timeline then moves with the input alone)."""
        self._now = now
        if self._done:
            return []
        actions: list[Action] = []
        data = data if isinstance(data, bytes) else data.encode()  # HTTP/2 hands over bytes
        try:
            for envelope in self._envelopes.feed(data):
                actions += self._envelope(envelope.headers, envelope.payload)
                if self._done:
                    break
        except ProtocolError as exc:
            return actions + self._fail("validationException", exc.message)
        return actions

    def _envelope(self, headers: Any, payload: bytes) -> list[Action]:
        date, signature = headers.get(":date"), headers.get(":chunk-signature")
        if not isinstance(date, datetime.datetime) or not isinstance(signature, bytes):
            raise ProtocolError("an event without its :date and :chunk-signature envelope")
        if self._secret is not None:
            want = event_signature(
                self._secret, self._region, self._prior, {":date": date}, payload, amz_date(date)
            )
            if not hmac.compare_digest(want, signature):
                return self._fail("accessDeniedException", "The event signature does not match.")
        self._prior = signature.hex()
        if not payload:
            return self._end_stream()  # the final, empty envelope
        reader = MessageReader()
        inner = reader.feed(payload)
        if len(inner) != 1 or reader.pending:
            raise ProtocolError("an envelope whose payload is not one whole message")
        name, body = wire.decode_client_chunk(inner[0])
        return self._event(name, body)

    def _event(self, name: str, body: dict[str, Any]) -> list[Action]:
        match self._stage, name:
            case "session", "sessionStart":
                self._stage = "prompt"
            case "prompt", "promptStart":
                self._prompt = _field(body, "promptName", str)
                config = body.get("audioOutputConfiguration") or {}
                self._out_rate = _rate(config.get("sampleRateHertz", 24000))
                self._stage = "contents"
            case "contents", "contentStart":
                return self._content_start(body)
            case "contents", "textInput" | "audioInput":
                return self._input(name, body)
            case "contents", "contentEnd":
                self._check_content(body, None)
                self._content = None
            case "contents", "promptEnd":
                self._stage = "session"
            case "session", "sessionEnd":
                return self._end_stream()
            case _:
                raise ProtocolError(f"'{name}' is not allowed here ({self._stage})")
        return []

    def _content_start(self, body: dict[str, Any]) -> list[Action]:
        if self._content is not None:
            raise ProtocolError("contentStart while another content is open")
        kind = _field(body, "type", str)
        self._content = (_field(body, "contentName", str), kind)
        if kind == "AUDIO":
            config = _field(body, "audioInputConfiguration", dict)
            rate = _rate(config.get("sampleRateHertz"))
            if self._behaviour is None or rate != self._rate:
                self._rate, self._behaviour = rate, self._factory(rate)
                self._clock = MediaClock(rate)
        return []

    def _input(self, name: str, body: dict[str, Any]) -> list[Action]:
        self._check_content(body, "AUDIO" if name == "audioInput" else "TEXT")
        if name == "textInput":
            return []  # a system prompt: nothing for a reference behaviour
        try:
            pcm = base64.b64decode(_field(body, "content", str), validate=True)
        except ValueError:
            raise ProtocolError("audioInput content is not valid base64") from None
        if len(pcm) % 2:
            raise ProtocolError(f"audioInput of {len(pcm)} bytes: 16-bit PCM needs an even length")
        return self._audio(pcm16_to_float(pcm))

    def _check_content(self, body: dict[str, Any], kind: str | None) -> None:
        if self._content is None or _field(body, "contentName", str) != self._content[0]:
            raise ProtocolError("an event for a content that is not open")
        if kind is not None and self._content[1] != kind:
            raise ProtocolError(f"{kind} input in a {self._content[1]} content")

    def _audio(self, samples: NDArray[np.float32]) -> list[Action]:
        assert self._behaviour is not None
        c0 = self._clock.heard(samples.size, self._now)
        faulted = self._media_faults()
        if faulted:
            return faulted
        step = self._behaviour.push(samples)
        reply = self._behaviour.scheduled_reply
        if reply is not None and reply is not self._seen:
            self._seen = at, audio = reply  # resampled now, before it is due to play
            self._pending = (at, audio, resample(audio, self._rate, self._out_rate))
        out: list[dict[str, Any]] = []
        if step.speech_started and self._reply is not None:
            out += self._interrupt()
        position = self._clock.position(self._now)
        out += self._start_reply(c0, position) + self._generate(position)
        return [Send(wire.chunk(e)) for e in out] + self._malformed()

    def tick(self, now: float) -> list[Action]:
        """What the wall clock has made due since the last bytes (a reply's start, its audio,
        its end) when the client has stopped sending."""
        self._now = now
        if self._done or self._behaviour is None:
            return []
        position = self._clock.position(now)
        out = self._start_reply(position, position) + self._generate(position)
        return [Send(wire.chunk(e)) for e in out]

    def wake_at(self) -> float | None:
        """When ``tick`` next has something to do if no input arrives; None for never."""
        r = self._reply
        if self._done or (r is None and self._pending is None):
            return None
        if r is None:
            assert self._pending is not None
            return self._clock.when(self._pending[0] + 1)
        return self._clock.when(r.audio.next_due())

    def _start_reply(self, c0: int, position: int) -> list[dict[str, Any]]:
        if self._pending is None or self._reply is not None or self._pending[0] >= position:
            return []
        assert self._behaviour is not None
        at, audio, out = self._pending
        self._pending = None
        pcm = lead_in(at, c0, self._rate, self._out_rate) + float_to_pcm16(out)
        paced = PacedReply.split(
            pcm, self._out_rate, start=at, end=at + audio.size, rate=self._rate
        )
        said = f"{self._behaviour.name} reply, {audio.size / self._rate:.2f} s"
        self._reply = _Reply(self._id("audio"), paced, said)
        events: list[dict[str, Any]] = []
        if self._completion is None:
            self._completion = self._id("completion")
            events.append(self._ev("completionStart", {}))
        events += self._text("USER", "FINAL", "", "END_TURN")
        events += self._text("ASSISTANT", "SPECULATIVE", said, "PARTIAL_TURN")
        audio_config = {"mediaType": "audio/lpcm", "sampleRateHertz": self._out_rate,
                        "sampleSizeBits": 16, "channelCount": 1, "encoding": "base64"}  # fmt: skip
        events.append(self._ev("contentStart", {
            "contentId": self._reply.content_id, "type": "AUDIO", "role": "ASSISTANT",
            "audioOutputConfiguration": audio_config,
        }))  # fmt: skip
        return events

    def _generate(self, position: int) -> list[dict[str, Any]]:
        r = self._reply
        if r is None:
            return []
        if r.audio.generated:  # all sent: playing out on the client until its end
            if position >= r.audio.end:
                self._reply = None
            return []
        events = [
            self._ev("audioOutput", {"contentId": r.content_id,
                                     "content": base64.b64encode(r.audio.chunks[i]).decode()})
            for i in r.audio.take_due(position)
        ]  # fmt: skip
        if r.audio.generated:
            events.append(self._content_end(r.content_id, "AUDIO", "END_TURN"))
            events += self._text("ASSISTANT", "FINAL", r.said, "END_TURN")
            events.append(self._usage(r))
        return events

    def _usage(self, reply: _Reply) -> dict[str, Any]:
        """The session's running totals once a reply is over: everything streamed counts as
        speech in (the silence too), the replies' audio as speech out, their text as text."""
        if not reply.billed:
            reply.billed = True
            self._spoken_s += reply.audio.bytes_sent / 2 / self._out_rate
            self._said_tokens += -(-len(reply.said) // 4)  # about 4 characters a token
        heard_s = self._clock.received / self._rate if self._rate else 0.0
        total = {
            "input": (round(SPEECH_TOKENS_PER_S * heard_s), 0),
            "output": (round(SPEECH_TOKENS_PER_S * self._spoken_s), self._said_tokens),
        }
        last, self._last_total = self._last_total, total

        def tokens(pair: tuple[int, int]) -> dict[str, int]:
            return {"speechTokens": pair[0], "textTokens": pair[1]}

        delta = {k: (total[k][0] - last[k][0], total[k][1] - last[k][1]) for k in total}
        t_in, t_out = sum(total["input"]), sum(total["output"])
        return self._ev("usageEvent", {
            "details": {
                "delta": {k: tokens(v) for k, v in delta.items()},
                "total": {k: tokens(v) for k, v in total.items()},
            },
            "totalInputTokens": t_in, "totalOutputTokens": t_out, "totalTokens": t_in + t_out,
        })  # fmt: skip

    def _interrupt(self) -> list[dict[str, Any]]:
        r, self._reply = self._reply, None
        assert r is not None and self._behaviour is not None
        self._behaviour.interrupt()
        events = self._text("ASSISTANT", "FINAL", wire.INTERRUPTED, "INTERRUPTED")
        if not r.audio.generated:
            events.append(self._content_end(r.content_id, "AUDIO", "INTERRUPTED"))
        return [*events, self._usage(r)]

    def _text(self, role: str, stage: str, text: str, stop: str) -> list[dict[str, Any]]:
        cid = self._id("text")
        extra = '{"generationStage":"' + stage + '"}'
        return [
            self._ev("contentStart", {"contentId": cid, "type": "TEXT", "role": role,
                                      "additionalModelFields": extra,
                                      "textOutputConfiguration": {"mediaType": "text/plain"}}),
            self._ev("textOutput", {"contentId": cid, "role": role, "content": text}),
            self._content_end(cid, "TEXT", stop),
        ]  # fmt: skip

    def _content_end(self, cid: str, kind: str, stop: str) -> dict[str, Any]:
        return self._ev("contentEnd", {"contentId": cid, "type": kind, "stopReason": stop})

    def _ev(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        ids = {"sessionId": self._session, "promptName": self._prompt}
        if self._completion is not None:
            ids["completionId"] = self._completion
        return wire.event(name, {**ids, **body})

    def _id(self, kind: str) -> str:
        self._ids += 1
        return f"{kind}-{self._ids}"

    def _end_stream(self) -> list[Action]:
        self._done = True
        actions: list[Action] = []
        if self._completion is not None:
            actions.append(Send(wire.chunk(self._ev("completionEnd", {"stopReason": "END_TURN"}))))
        return [*actions, Close(1000, "")]

    def _media_faults(self) -> list[Action]:
        actions = self._injected.stop(self._clock.received / self._rate)
        self._done |= self._injected.finished
        return actions

    def _malformed(self) -> list[Action]:
        actions = self._injected.malformed(self._clock.received / self._rate, self._bad_checksum)
        self._done |= self._injected.finished
        return actions

    def _bad_checksum(self) -> bytes:
        good = wire.chunk(self._ev("usageEvent", {}))
        return good[:-1] + bytes([good[-1] ^ 0xFF])

    def _fail(self, kind: str, message: str) -> list[Action]:
        self._done = True
        return [Send(wire.exception_message(kind, message)), Close(1000, "")]


def _field(body: dict[str, Any], key: str, want: type) -> Any:
    value = body.get(key)
    if not isinstance(value, want):
        raise ProtocolError(f"'{key}' must be {want.__name__}")
    return value


def _rate(value: Any) -> int:
    if value not in RATES or isinstance(value, bool):
        raise ProtocolError(f"sampleRateHertz must be one of {RATES}, not {value!r}")
    return int(value)

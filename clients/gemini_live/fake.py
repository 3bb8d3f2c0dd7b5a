"""The Gemini Live fake server's protocol without I/O: client messages in, ``Action``s out.

``ServerProtocol`` checks the upgrade's path and key, takes the setup and drives a reference
behaviour, answering each client message with ``Action``s for the kit to carry out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from urllib.parse import parse_qs, urlsplit

import numpy as np
from numpy.typing import NDArray

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.faults import Faults, MediaFaults
from duplexsim.clients.fakekit.mediaclock import MediaClock
from duplexsim.clients.fakekit.replypacing import PacedReply, lead_in
from duplexsim.clients.fakekit.serveractions import Action, Close, Send, Stall
from duplexsim.clients.gemini_live import events as wire
from duplexsim.clients.gemini_live.protocol import INPUT_RATE, OUTPUT_RATE, PATHS
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float, resample
from duplexsim.core.errors import ProtocolError

__all__ = ["Action", "Close", "Send", "ServerProtocol", "Stall"]

CHUNK_S = 0.04  # model audio per serverContent message
TURN_COMPLETE_AFTER = round(0.04 * INPUT_RATE)  # turnComplete this long after playback ends
INVALID = "Request contains an invalid argument."
BAD_KEY = "API key not valid. Please pass a valid API key."
NO_KEY = "Method doesn't allow unregistered callers. Please use API Key."
BROKEN = "Internal error encountered."
# "Gemini represents each second of audio as 32 tokens" (ai.google.dev, Understand and count
# tokens): the fake bills its audio so, in and out
TOKENS_PER_S = 32


class ServerProtocol:
    """One fake-server connection: key check, setup, then audio in and model turns out.

    Time is the session's timeline in 16 kHz input samples: the input while it flows, the wall
    clock once it stops (``duplexsim.clients.fakekit.mediaclock``; the shell calls ``tick`` at ``wake_at``), so a
    reply plays on to turnComplete when the client stops sending, as the real service's does.
    After a chunk covering [c0, c1) arrives, the client is at c0 on its timeline, so a reply that starts at s in [c0, c1) is sent now,
    led by s - c0 of silence: its first sample lands at exactly s. Reply audio then goes out
    faster than real time (``BURST_S`` at once, then ``SPEEDUP`` x), generationComplete follows
    the last chunk, and turnComplete comes once media time has passed the reply's end (by
    ``TURN_COMPLETE_AFTER``, so it never lands before the last sample plays), as a server that
    waits for real-time playback does. User speech during that time (server VAD on)
    or activityStart (VAD off) interrupts: ``interrupted``, then turnComplete.
    """

    def __init__(
        self,
        behaviour_factory: Callable[[int], Behaviour],
        faults: Faults | None = None,
        *,
        api_key: str | None = None,
        quota: bool = False,
    ) -> None:
        self._factory = behaviour_factory
        self._faults = faults or Faults()
        goaway = Send(wire.encode_server([wire.GoAway(time_left="0s")]))
        self._injected = MediaFaults(
            self._faults, closing=[goaway, Close(1000, "")], broken=Close(1011, BROKEN)
        )
        self._api_key = api_key
        self._quota = quota
        self._behaviour: Behaviour | None = None
        self._setup: wire.Setup | None = None
        self._clock = MediaClock(INPUT_RATE)
        self._now: float | None = None  # when the message being answered arrived
        self._seen: object = None  # the behaviour's last scheduled reply
        self._pending: tuple[int, int, bytes] | None = None  # start, input samples, 24 kHz PCM
        self._playing: PacedReply | None = None  # 24 kHz chunks, until turnComplete
        self._generated = False  # generationComplete sent for the reply playing
        self._gate: int | None = None  # VAD off: where the last activityEnd closed a turn
        self._done = False
        self._replied_s = 0.0  # the model's earlier replies: input to the turns after them

    def open(self, path: str, headers: Mapping[str, str]) -> list[Action]:
        """Check the upgrade request's path and key; a Close when they are refused."""
        url = urlsplit(path)
        if url.path not in PATHS:
            return self._end(1008, f"Method not found: {url.path[:60]}")
        if self._api_key is None:
            return []
        query = parse_qs(url.query)
        key = (  # an ephemeral token comes as access_token= or Authorization: Token
            headers.get("x-goog-api-key")
            or query.get("key", [""])[0]
            or query.get("access_token", [""])[0]
            or _token(headers.get("Authorization", ""))
        )
        if not key:
            return self._end(1008, NO_KEY)
        return [] if key == self._api_key else self._end(1008, BAD_KEY)

    def receive(self, data: str | bytes, now: float | None = None) -> list[Action]:
        """The actions answering one client message that arrived at ``now`` (None: no clock;
        the timeline then moves with the input alone)."""
        self._now = now
        if self._done:
            return []
        try:
            msg = wire.decode_client(data)
            if self._setup is None:
                return self._on_setup(msg)
            return self._on_message(msg)
        except ProtocolError as exc:
            return self._end(1007, f"{INVALID} ({exc.message})")

    def _on_setup(self, msg: wire.ClientMessage) -> list[Action]:
        if not isinstance(msg, wire.Setup):
            raise ProtocolError(f"the first message must be setup, not {type(msg).__name__}")
        if not msg.model.startswith("models/") or msg.model == "models/":
            raise ProtocolError(f"model '{msg.model}' must be models/<name>")
        if self._quota:
            after = f" Please retry in {self._faults.retry_after_s:g}s."
            return self._end(1011, f"RESOURCE_EXHAUSTED: quota exceeded (injected).{after}")
        self._setup = msg
        self._behaviour = self._factory(INPUT_RATE)
        return [Send(wire.encode_server([wire.SetupComplete()]))]

    def _on_message(self, msg: wire.ClientMessage) -> list[Action]:
        assert self._setup is not None
        auto = self._setup.automatic_activity_detection
        match msg:
            case wire.AudioIn(pcm=pcm, rate=rate):
                if rate != INPUT_RATE:
                    raise ProtocolError(f"this fake takes {INPUT_RATE} Hz audio, not {rate}")
                return self._audio(pcm16_to_float(pcm))
            case wire.ActivityStart() | wire.ActivityEnd() if auto:
                raise ProtocolError(f"{type(msg).__name__} needs automatic activity detection off")
            case wire.ActivityStart():
                self._gate = None  # a new user turn: nothing answers until it ends
                return self._interrupt()
            case wire.ActivityEnd():
                self._gate = self._clock.received
                return []
            case wire.Setup():
                raise ProtocolError("setup was already sent")
            case wire.AudioStreamEnd() if auto and self._behaviour is not None:
                # the microphone went off: the server's detection hears the end of speech now
                # (silence as long as the turn-end hangover, supplied at once)
                gap = round((self._behaviour.hangover_s + 0.03) * INPUT_RATE)
                return self._audio(np.zeros(gap, np.float32), filled=True)
        return []  # clientContent: nothing to do for a reference behaviour

    def _audio(self, samples: NDArray[np.float32], filled: bool = False) -> list[Action]:
        assert self._behaviour is not None and self._setup is not None
        if filled:
            c0 = self._clock.filled(samples.size)
        else:
            c0 = self._clock.heard(samples.size, self._now)
        faulted = self._media_faults()
        if faulted:
            return faulted
        step = self._behaviour.push(samples)
        reply = self._behaviour.scheduled_reply  # whole: replies go out ahead of real time
        if reply is not None and reply is not self._seen:
            at, audio = self._seen = reply
            pcm = float_to_pcm16(resample(audio, INPUT_RATE, OUTPUT_RATE))  # ready before it plays
            self._pending = (at, audio.size, pcm)
        actions: list[Action] = []
        if step.speech_started and self._setup.automatic_activity_detection:
            actions += self._interrupt()
        position = self._clock.position(self._now)
        self._start_reply(c0, position)
        actions += self._generate(position)
        return actions + self._turn_complete(c0) + self._malformed()

    def tick(self, now: float) -> list[Action]:
        """What the wall clock has made due since the last message: a reply's start, its audio,
        generationComplete, turnComplete."""
        self._now = now
        if self._done or self._setup is None:
            return []
        position = self._clock.position(now)
        self._start_reply(position, position)
        return self._generate(position) + self._turn_complete(position)

    def wake_at(self) -> float | None:
        """When ``tick`` next has something to do if no input arrives; None for never."""
        if self._done:
            return None
        p = self._playing
        if p is None:
            # with detection off, nothing starts before the client ends its turn
            if self._pending is None or not (self._auto or self._gate is not None):
                return None
            return self._clock.when(self._pending[0] + 1)
        if not self._generated:
            return self._clock.when(p.next_due())
        return self._clock.when(p.end + TURN_COMPLETE_AFTER)

    @property
    def _auto(self) -> bool:
        return self._setup is not None and self._setup.automatic_activity_detection

    def _turn_complete(self, point: int) -> list[Action]:
        """turnComplete once ``point`` (a chunk's start, or the timeline) has passed the reply's
        end: the real server holds it until real-time playback is over."""
        if self._playing is None or point < self._playing.end + TURN_COMPLETE_AFTER:
            return []
        usage = self._usage(self._playing)
        self._playing = None
        return [Send(wire.encode_server([wire.TurnComplete(), usage]))]

    def _interrupt(self) -> list[Action]:
        assert self._setup is not None
        if self._playing is None or self._setup.activity_handling == "NO_INTERRUPTION":
            return []
        usage = self._usage(self._playing)
        self._playing = None
        if self._behaviour is not None:
            self._behaviour.interrupt()
        return [
            Send(wire.encode_server([wire.Interrupted()])),
            Send(wire.encode_server([wire.TurnComplete(), usage])),
        ]

    def _usage(self, reply: PacedReply) -> wire.UsageMetadata:
        """What the turn used, sent with its turnComplete as the service sends it: the prompt is
        the conversation so far (the user's speech in every turn heard, the model's earlier
        replies) and the system instruction; the response, the reply audio generated."""
        assert self._behaviour is not None and self._setup is not None
        heard_s = sum((t.end - t.onset) / t.rate for t in self._behaviour.turns)
        out_s = reply.bytes_sent / 2 / OUTPUT_RATE
        audio_in = round(TOKENS_PER_S * (heard_s + self._replied_s))
        text_in = -(-len(self._setup.system_instruction or "") // 4)  # about 4 characters a token
        audio_out = round(TOKENS_PER_S * out_s)
        self._replied_s += out_s
        details = [{"modality": "AUDIO", "tokenCount": audio_in}]
        if text_in:
            details.append({"modality": "TEXT", "tokenCount": text_in})
        return wire.UsageMetadata(
            {
                "promptTokenCount": audio_in + text_in,
                "responseTokenCount": audio_out,
                "totalTokenCount": audio_in + text_in + audio_out,
                "promptTokensDetails": details,
                "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": audio_out}],
            }
        )

    def _start_reply(self, c0: int, position: int) -> None:
        if self._pending is None or self._playing is not None:
            return
        at, length, reply = self._pending
        if self._setup is not None and not self._setup.automatic_activity_detection:
            if self._gate is None:
                return  # VAD off: no reply before the client ends the turn
            at = max(at, self._gate)
        if at >= position:
            return  # it starts later
        self._pending = self._gate = None
        pcm = lead_in(at, c0, INPUT_RATE, OUTPUT_RATE) + reply
        self._playing = PacedReply.split(
            pcm, OUTPUT_RATE, start=at, end=at + length, rate=INPUT_RATE, chunk_s=CHUNK_S
        )
        self._generated = False

    def _generate(self, position: int) -> list[Action]:
        p = self._playing
        if p is None:
            return []
        actions: list[Action] = [
            Send(wire.encode_server([wire.ModelAudio(p.chunks[i])])) for i in p.take_due(position)
        ]
        if p.generated and not self._generated:
            self._generated = True
            actions.append(Send(wire.encode_server([wire.GenerationComplete()])))
        return actions

    def _media_faults(self) -> list[Action]:
        actions = self._injected.stop(self._clock.received / INPUT_RATE)
        self._done |= self._injected.finished
        return actions

    def _malformed(self) -> list[Action]:
        actions = self._injected.malformed(
            self._clock.received / INPUT_RATE, lambda: b'{"serverContent": {"modelTurn"'
        )  # truncated JSON
        self._done |= self._injected.finished
        return actions

    def _end(self, code: int, reason: str) -> list[Action]:
        self._done = True
        return [Close(code, _fit_reason(reason))]


def _token(authorization: str) -> str:
    """The key in ``Authorization: Token <key>`` (how python-genai sends an ephemeral token)."""
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "token" else ""


def _fit_reason(reason: str) -> str:
    """A close reason fits in 123 bytes of UTF-8."""
    data = reason.encode()
    return reason if len(data) <= 123 else data[:120].decode("utf-8", "ignore") + "..."

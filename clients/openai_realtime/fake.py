"""The fake openai-realtime server without I/O: client events in, ``Action``s out.

A reference behaviour hears every ``input_audio_buffer.append`` as it arrives (media time, at the
session's input rate). Its ``Step`` flags become ``input_audio_buffer.speech_started`` /
``speech_stopped`` when server VAD is on. When it decides on a reply, the reply is sent the way
the real API sends one, faster than real time (``fakekit.replypacing``): ``response.created``, the
first second of audio as 100 ms ``response.output_audio.delta`` events at once, the rest four
times faster than the session's timeline moves, then the ``.done`` events and ``response.done``.
The timeline is the input while it flows and the wall clock once it stops (``duplexsim.clients.fakekit.mediaclock``;
the shell calls ``tick`` at ``wake_at``): a reply goes on when the client stops sending. The first
burst goes out with the input chunk in which the reply starts in media time (not when it was
decided), led by the silence between that chunk's start and the reply's first sample, so a
listener who plays each chunk at max(arrival, end of the previous) hears the reply start exactly
where the behaviour put it: E + latency for ``delayed-echo``. A response still being generated is
cancelled by ``response.cancel`` or, with ``interrupt_response``, by the user's speech
(``response.done`` with status ``cancelled``).

With turn detection off the behaviour still tracks turns, but no VAD events are sent and a reply
goes out only after ``input_audio_buffer.commit`` and ``response.create`` (an empty response when
the behaviour has nothing to say). Media faults trigger on input media time, as in pcm-ws.

The dialect (``dialects``) decides the opening event, the session's shape and checks
(``fake_session``), GA or beta event names, VAD positions, pings and the output rate: a reply is
resampled to it where it differs from the input's (DashScope: 16 kHz in, 24 kHz out).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.behaviours.base import FloatArray
from duplexsim.clients.fakekit.declare import Request
from duplexsim.clients.fakekit.faults import Faults, MediaFaults, Rejection
from duplexsim.clients.fakekit.mediaclock import MediaClock
from duplexsim.clients.fakekit.replypacing import PacedReply
from duplexsim.clients.fakekit.serveractions import Action, Burst, Close, Send, Stall
from duplexsim.clients.openai_realtime import fake_session
from duplexsim.clients.openai_realtime.dialects import OPENAI, Dialect
from duplexsim.clients.openai_realtime.events import BETA_ALIASES
from duplexsim.core import safejson
from duplexsim.core.audio import float_to_pcm16, pcm16_to_float, resample

__all__ = ["Action", "Close", "Send", "ServerProtocol", "Stall", "check_handshake"]

_GA_TO_BETA = {ga: beta for beta, ga in BETA_ALIASES.items()}
_PING_EVERY_MS = 1000  # dialects with pings only


def check_handshake(
    d: Dialect, api_key: str | None, require_model: bool, request: Request
) -> Rejection | None:
    """The refusal of an upgrade, as the real server answers one: the path (404), the key where
    the dialect sends it (401: missing, empty, or not ``api_key`` when one is set), and, when
    ``require_model``, the model (400)."""
    url = urlsplit(request.path)
    if url.path.rstrip("/") != d.path:
        return _refuse(404, "invalid_request_error", "not_found", "Not found.")
    key = d.key_from(request.headers)
    if key is None or (api_key and key != api_key):
        message = "Incorrect or missing API key."  # never echo what was sent
        return _refuse(401, "invalid_request_error", "invalid_api_key", message)
    query = dict(parse_qsl(url.query))
    if require_model and not (query.get(d.model_param) or query.get("call_id")):
        message = f"Missing required parameter: '{d.model_param}'."
        return _refuse(400, "invalid_request_error", "missing_model", message)
    return None


def _refuse(status: int, kind: str, code: str, message: str) -> Rejection:
    body = json.dumps({"error": {"type": kind, "code": code, "message": message, "param": None}})
    return Rejection(status, {"Content-Type": "application/json"}, body + "\n")


@dataclass
class FakeResponse:
    """One response: its number within the connection names it and its item."""

    number: int
    audio: PacedReply  # PCM16 at the output rate, led by the silence up to its first sample
    said: str  # the transcript

    @property
    def rid(self) -> str:
        return f"resp_{self.number}"

    @property
    def iid(self) -> str:
        return f"item_resp_{self.number}"

    @property
    def ids(self) -> dict[str, object]:
        return {"response_id": self.rid, "item_id": self.iid, "output_index": 0, "content_index": 0}


class ServerProtocol:
    """One fake-server connection."""

    def __init__(
        self,
        behaviour_factory: Callable[[int], Behaviour],
        faults: Faults | None = None,
        *,
        dialect: Dialect = OPENAI,
        beta_names: bool = False,
        beta_header: bool = False,
        model: str | None = None,
        session_id: str = "sess_fake_1",
    ) -> None:
        self._factory = behaviour_factory
        self._faults = faults or Faults()
        self._injected = MediaFaults(self._faults)
        self._meter = FakeMeter()
        self._speech_from_ms: int | None = None  # where the user's turn under way began
        self._d = dialect
        self._beta_names = beta_names or dialect.beta_names
        self._beta_header = beta_header
        self._session = fake_session.default_session(dialect, session_id, model)
        self._behaviour: Behaviour | None = None
        self._clock: MediaClock | None = None  # made with the behaviour, at the input rate
        self._now: float | None = None  # when the message being answered arrived
        self._buffered = 0  # input samples since the last commit or clear
        self._pending: tuple[int, FloatArray] | None = None  # decided, not yet started
        self._playing: FakeResponse | None = None  # started, not yet generated whole
        self._captured = False  # the behaviour's current reply is already pending or sent
        self._armed = 0  # response.create requests not yet answered
        self._turn_open = False
        self._ids = itertools.count(1)
        self._next_ping_ms = _PING_EVERY_MS
        self._done = False  # closed or stalled: ignore everything
        self.responses = 0  # responses sent, for tests
        self._items: dict[str, FakeResponse] = {}  # assistant items, by id

    # --- entry points ----------------------------------------------------------------------

    def opening(self) -> list[Action]:
        """What the server sends as soon as the connection is open."""
        if self._beta_header:
            self._done = True
            message = (
                "The Realtime Beta API is no longer supported. "
                "Please use /v1/realtime for the GA API."
            )
            error = self._error("beta_api_shape_disabled", message, None, None)
            return [error, Close(1008, "beta_api_shape_disabled")]
        if self._d.opening == "conversation.created":
            conversation = {"id": f"conv_{self._session['id']}", "object": "realtime.conversation"}
            return [self._event("conversation.created", conversation=conversation)]
        return [self._event("session.created", session=self._session)]

    def receive(self, message: str | bytes, now: float | None = None) -> list[Action]:
        """The actions answering one client message that arrived at ``now`` (None: no clock;
        generation then moves with the input alone)."""
        self._now = now
        if isinstance(message, str):
            return self.receive_text(message)
        return self.receive_binary(message)

    def receive_binary(self, data: bytes) -> list[Action]:
        if self._done:
            return []
        return [self._error("invalid_value", "Binary frames are not supported.", None, None)]

    def receive_text(self, text: str) -> list[Action]:
        if self._done:
            return []
        try:
            obj = safejson.loads(text)
        except safejson.JsonError:
            return [self._error("invalid_json", "The event is not valid JSON.", None, None)]
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            return [self._error("missing_required_parameter", "Missing 'type'.", "type", None)]
        handler = self._handlers().get(obj["type"])
        if handler is None:
            known = ", ".join(self._handlers())
            message = f"Invalid value: '{obj['type']}'. Supported values are: {known}."
            return [self._error("invalid_value", message, "type", obj.get("event_id"))]
        return handler(obj)

    def tick(self, now: float) -> list[Action]:
        """What the wall clock has made due since the last message: a reply's start, its audio,
        its closing events (the model talks on when the client stops sending)."""
        self._now = now
        if self._done or self._clock is None:
            return []
        position = self._clock.position(now)
        pending = self._pending
        if pending is not None and self._may_start() and pending[0] < position:
            return self._respond(position)
        return self._generate()

    def wake_at(self) -> float | None:
        """When ``tick`` next has something to do if no input arrives; None for never."""
        clock = self._clock
        if self._done or clock is None:
            return None
        times: list[float | None] = []
        if self._pending is not None and self._may_start():
            times.append(clock.when(self._pending[0] + 1))
        if self._playing is not None:
            times.append(clock.when(self._playing.audio.next_due()))
        return min((t for t in times if t is not None), default=None)

    def _may_start(self) -> bool:
        """A decided reply starts on its own (server VAD creates responses) or was asked for."""
        td = fake_session.vad(self._session, self._d)
        auto = td is not None and td.get("create_response", True) is not False
        return auto or self._armed > 0

    @property
    def _received(self) -> int:
        return 0 if self._clock is None else self._clock.received

    def _handlers(self) -> dict[str, Callable[[dict[str, Any]], list[Action]]]:
        return {
            "session.update": self._session_update,
            "input_audio_buffer.append": self._append,
            "input_audio_buffer.commit": self._commit,
            "input_audio_buffer.clear": self._clear,
            "response.create": self._response_create,
            "response.cancel": self._response_cancel,
            "conversation.item.truncate": self._truncate,
        }

    # --- client events ---------------------------------------------------------------------

    def _session_update(self, obj: dict[str, Any]) -> list[Action]:
        try:
            session = fake_session.apply_update(self._session, obj.get("session"), self._d)
            rate = fake_session.input_rate(session, self._d)
            if self._behaviour is not None and rate != self._behaviour.rate:
                raise fake_session.InvalidRequest(
                    "invalid_value", "The input rate cannot change once audio has been sent."
                )
        except fake_session.InvalidRequest as exc:
            return [self._error(exc.code, exc.message, exc.param, obj.get("event_id"))]
        self._session = session
        return [self._event("session.updated", session=session)]

    def _append(self, obj: dict[str, Any]) -> list[Action]:
        audio = obj.get("audio")
        if not isinstance(audio, str):
            return [self._error("missing_required_parameter", "Missing 'audio'.", "audio", None)]
        try:
            pcm = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError):
            return [self._error("invalid_value", "Invalid base64 in 'audio'.", "audio", None)]
        if len(pcm) % 2:
            return [
                self._error("invalid_value", "PCM16 audio needs an even length.", "audio", None)
            ]
        samples = pcm16_to_float(pcm)
        behaviour = self._behaviour_now()
        assert self._clock is not None
        c0 = self._clock.heard(samples.size, self._now)
        self._buffered += samples.size
        faulted = self._media_faults()
        if faulted:
            return faulted
        actions = self._listen(behaviour, samples, c0) + self._generate()
        return actions + self._ping() + self._malformed()

    def _commit(self, obj: dict[str, Any]) -> list[Action]:
        rate = self._rate
        if self._buffered * 10 < rate:  # under 100 ms
            ms = self._buffered * 1000 // rate
            message = (
                "Error committing input audio buffer: buffer too small. Expected at least 100ms "
                f"of audio, but buffer only has {ms:.2f}ms of audio."
            )
            return [
                self._error("input_audio_buffer_commit_empty", message, None, obj.get("event_id"))
            ]
        self._meter.heard(self._ms(self._buffered))  # the whole buffer is the user's item
        self._buffered = 0
        return self._user_item()

    def _clear(self, obj: dict[str, Any]) -> list[Action]:
        self._buffered = 0
        return [self._event("input_audio_buffer.cleared")]

    def _response_create(self, obj: dict[str, Any]) -> list[Action]:
        self._armed += 1
        if self._pending is not None and self._pending[0] < self._received:
            return self._respond(self._received)  # its start has passed: now
        replying = self._behaviour is not None and self._behaviour.replying
        if self._pending is None and not self._turn_open and not replying:
            return self._respond_empty()  # nothing to say, and no turn under way
        return []  # answered when the behaviour's reply starts in media time

    def _response_cancel(self, obj: dict[str, Any]) -> list[Action]:
        if self._playing is not None:
            return self._cancel("client_cancelled")
        message = "Cancellation failed: no active response found"
        return [self._error("response_cancel_not_active", message, None, obj.get("event_id"))]

    def _truncate(self, obj: dict[str, Any]) -> list[Action]:
        """Cut an assistant item's audio where the listener stopped; past what was generated,
        or of an item that does not exist, is an error, as on the real server."""
        fields = {k: obj.get(k) for k in ("item_id", "content_index", "audio_end_ms")}
        item = self._items.get(str(fields["item_id"]))
        end = fields["audio_end_ms"]
        if item is None:
            message = f"Item with id '{fields['item_id']}' not found."
            return [self._error("invalid_value", message, "item_id", obj.get("event_id"))]
        out_rate = self._d.out_rate(self._rate)  # the deltas' PCM, not the input's rate
        generated = item.audio.bytes_sent // 2 * 1000 // out_rate  # sent as deltas
        if not isinstance(end, int) or isinstance(end, bool) or not 0 <= end <= generated:
            message = f"audio_end_ms {end!r} is past the item's {generated} ms of audio."
            return [self._error("invalid_value", message, "audio_end_ms", obj.get("event_id"))]
        return [self._event("conversation.item.truncated", **fields)]

    # --- the behaviour ---------------------------------------------------------------------

    def _behaviour_now(self) -> Behaviour:
        if self._behaviour is None:
            rate = self._rate
            self._behaviour = self._factory(rate)
            self._clock = MediaClock(rate)
        return self._behaviour

    def _listen(self, b: Behaviour, samples: FloatArray, c0: int) -> list[Action]:
        step = b.push(samples)
        td = fake_session.vad(self._session, self._d)
        actions: list[Action] = []
        if td is not None and step.speech_started:
            # the real server counts from the prefix padding before the onset; the chunk that
            # detected speech stands in for the onset, which the behaviour keeps to itself
            padding = int(td.get("prefix_padding_ms", 300))
            self._speech_from_ms = max(0, self._ms(c0) - padding)
            actions.append(self._speech("speech_started", self._speech_from_ms))
            if self._playing is not None and td.get("interrupt_response", True) is not False:
                actions += self._cancel("turn_detected")
        if td is not None and step.speech_stopped:
            end_ms = self._ms(b.turns[-1].decided)
            actions.append(self._speech("speech_stopped", end_ms))
            # the item holds the turn, from the prefix padding before its onset to its end: the
            # silence streamed between turns is not in it (nor billed)
            self._meter.heard(end_ms - (self._speech_from_ms or 0))
            self._speech_from_ms = None
            self._buffered = 0
            actions += self._user_item()
        self._turn_open = (self._turn_open or step.speech_started) and not step.speech_stopped
        self._capture(b, step.audio, step.reply_started, c0)
        pending = self._pending
        if pending is not None and self._may_start() and pending[0] < c0 + samples.size:
            actions += self._respond(c0)
        elif self._armed and step.speech_stopped and pending is None and not b.replying:
            actions += self._respond_empty()
        return actions

    def _capture(self, b: Behaviour, audio: FloatArray, started: bool, c0: int) -> None:
        if b.replying:
            if not self._captured:
                self._pending = b.scheduled_reply  # whole: replies go out ahead of real time
                self._captured = True
            return
        if started and not self._captured:  # a reply that began and ended inside this chunk
            self._pending = (c0, audio.copy())
        self._captured = False

    # --- server events ---------------------------------------------------------------------

    def _respond(self, c0: int) -> list[Action]:
        """Start the pending reply: the leading events and the first burst of audio, led by the
        silence between ``c0`` and the reply's first sample; ``_generate`` sends the rest."""
        assert self._pending is not None
        at, audio = self._pending
        self._pending = None
        self._armed = max(0, self._armed - 1)
        actions = self._finish_now()
        self.responses += 1
        rate, out = self._rate, self._d.out_rate(self._rate)
        lead = np.zeros(max(0, at - c0), dtype=np.float32)
        pcm = float_to_pcm16(resample(np.concatenate((lead, audio)), rate, out))
        said = f"({len(audio) / rate:.2f} s of reply audio)"
        end = max(at, c0) + audio.size
        paced = PacedReply.split(pcm, out, start=c0, end=end, rate=rate)
        resp = FakeResponse(self.responses, paced, said)
        item = self._item(resp, None)
        actions += [
            self._event("response.created", response=self._response(resp.rid, "in_progress", [])),
            self._event("rate_limits.updated", rate_limits=self._rate_limits()),
            self._event(
                "response.output_item.added", response_id=resp.rid, output_index=0, item=item
            ),
            self._event("conversation.item.added", item=item),
            self._event("response.content_part.added", **resp.ids, part={"type": "audio"}),
        ]
        self._playing = resp
        self._items[resp.iid] = resp
        return actions + self._generate()

    def _generate(self) -> list[Action]:
        """The audio generated since the last call; the closing events once it is all out."""
        resp = self._playing
        if resp is None:
            return []
        assert self._clock is not None
        due = resp.audio.take_due(self._clock.position(self._now))
        # encoded as they go out, so a burst's first delta does not wait for the rest
        actions: list[Action] = [Burst(self._deltas(resp, due))] if due else []
        if resp.audio.generated:
            self._playing = None
            actions.append(Burst(self._closing(resp, "completed", None)))
        return actions

    def _deltas(
        self, resp: FakeResponse, due: range, transcript: bool = True
    ) -> Iterator[str | bytes]:
        for i in due:
            delta = base64.b64encode(resp.audio.chunks[i]).decode("ascii")
            yield self._event("response.output_audio.delta", **resp.ids, delta=delta).message
            if transcript and i == 0:  # the transcript follows the first delta
                said = resp.said
                yield self._event(
                    "response.output_audio_transcript.delta", **resp.ids, delta=said
                ).message

    def _closing(
        self, resp: FakeResponse, status: str, reason: str | None
    ) -> Iterator[str | bytes]:
        item = self._item(resp, "completed" if status == "completed" else "incomplete")
        for send in (
            self._event("response.output_audio.done", **resp.ids),
            self._event("response.output_audio_transcript.done", **resp.ids, transcript=resp.said),
            self._event("response.content_part.done", **resp.ids, part={"type": "audio"}),
            self._event(
                "response.output_item.done", response_id=resp.rid, output_index=0, item=item
            ),
            self._event("conversation.item.done", item=item),
            self._response_done(resp.rid, [item], status, reason, resp),
        ):
            yield send.message

    def _cancel(self, reason: str) -> list[Action]:
        """Stop the response being generated: what was sent is all the client gets."""
        resp, self._playing = self._playing, None
        assert resp is not None
        if self._behaviour is not None:
            self._behaviour.interrupt()
        self._captured = False
        return [Burst(self._closing(resp, "cancelled", reason))]

    def _finish_now(self) -> list[Action]:
        """A new response while one is still generated (never with the reference behaviours):
        the old one goes out whole first."""
        resp, self._playing = self._playing, None
        if resp is None:
            return []
        rest = resp.audio.take_due(2**62)  # everything left
        return [
            Burst(self._deltas(resp, rest, transcript=False)),
            Burst(self._closing(resp, "completed", None)),
        ]

    @staticmethod
    def _item(resp: FakeResponse, status: str | None) -> dict[str, Any]:
        item = {
            "id": resp.iid,
            "object": "realtime.item",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_audio", "transcript": resp.said}],
        }
        return item if status is None else {**item, "status": status}

    def _respond_empty(self) -> list[Action]:
        self._armed = max(0, self._armed - 1)
        self.responses += 1
        rid = f"resp_{self.responses}"
        return [
            self._event("response.created", response=self._response(rid, "in_progress", [])),
            self._response_done(rid, []),
        ]

    def _response_done(
        self,
        rid: str,
        output: list[dict[str, Any]],
        status: str = "completed",
        reason: str | None = None,
        resp: FakeResponse | None = None,
    ) -> Send:
        out_rate = self._d.out_rate(self._rate)  # the reply's PCM is at the output rate
        out_ms = 0 if resp is None else resp.audio.bytes_sent // 2 * 1000 // out_rate
        said = "" if resp is None else resp.said
        instructions = self._session.get("instructions")
        usage = self._meter.response(
            out_ms, said, instructions if isinstance(instructions, str) else ""
        )
        response = {**self._response(rid, status, output), "usage": usage}
        if reason is not None:
            response["status_details"] = {"type": status, "reason": reason}
        extra = {"usage": usage} if self._d.shape == "xai" else {}  # xAI repeats it on top
        return self._event("response.done", response=response, **extra)

    @staticmethod
    def _response(rid: str, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": rid,
            "object": "realtime.response",
            "status": status,
            "status_details": None,
            "output": output,
        }

    def _user_item(self) -> list[Action]:
        n = next(self._ids)
        item = {
            "id": f"item_user_{n}",
            "object": "realtime.item",
            "type": "message",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        return [
            self._event("input_audio_buffer.committed", item_id=item["id"], previous_item_id=None),
            self._event("conversation.item.added", item=item),
            self._event("conversation.item.done", item={**item, "status": "completed"}),
        ]

    def _speech(self, kind: str, ms: int) -> Send:
        item_id = f"item_user_{self.responses + 1}"
        if not self._d.vad_positions:  # xAI's VAD events carry none
            return self._event(f"input_audio_buffer.{kind}", item_id=item_id)
        key = "audio_start_ms" if kind == "speech_started" else "audio_end_ms"
        return self._event(f"input_audio_buffer.{kind}", item_id=item_id, **{key: ms})

    def _event(self, kind: str, **fields: Any) -> Send:
        if self._beta_names:
            kind = _GA_TO_BETA.get(kind, kind)
        body = {"type": kind, "event_id": f"event_{next(self._ids)}", **fields}
        return Send(json.dumps(body, separators=(",", ":")))

    def _error(self, code: str, message: str, param: str | None, event_id: Any) -> Send:
        error = {
            "type": "invalid_request_error",
            "code": code,
            "message": message,
            "param": param,
            "event_id": event_id if isinstance(event_id, str) else None,
        }
        return self._event("error", error=error)

    # --- faults and extras -----------------------------------------------------------------

    def _media_faults(self) -> list[Action]:
        actions = self._injected.stop(self._received / self._rate)
        self._done |= self._injected.finished
        return actions

    def _malformed(self) -> list[Action]:
        actions = self._injected.malformed(
            self._received / self._rate, lambda: '{"type": "response.output_audio.delta"'
        )  # truncated
        self._done |= self._injected.finished
        return actions

    def _ping(self) -> list[Action]:
        if not self._d.pings or self._ms(self._received) < self._next_ping_ms:
            return []
        self._next_ping_ms += _PING_EVERY_MS
        return [self._event("ping", timestamp=self._ms(self._received))]

    @property
    def _rate(self) -> int:
        return fake_session.input_rate(self._session, self._d)

    def _ms(self, samples: int) -> int:
        return samples * 1000 // self._rate

    def _rate_limits(self) -> list[dict[str, Any]]:
        """What ``rate_limits.updated`` says: the requests left under an injected rate limit,
        else a generous allowance; a token budget that never binds."""
        left = self._faults.requests_left()
        requests = {"name": "requests", "limit": 1000, "remaining": 999, "reset_seconds": 0.06}
        if left is not None:
            limit, remaining, reset = left
            requests = {"name": "requests", "limit": limit, "remaining": remaining,
                        "reset_seconds": round(reset, 3)}  # fmt: skip
        tokens = {"name": "tokens", "limit": 100000, "remaining": 99000, "reset_seconds": 0.6}
        return [requests, tokens]


class FakeMeter:
    """What the fake bills each response, the way OpenAI's realtime costs guide counts it: audio
    in at 1 token per 100 ms, out at 1 per 50 ms; each response re-reads the whole conversation
    (the user's committed items and the model's earlier replies), the part an earlier response
    already read served from cache; instructions and the reply's transcript as text, at about
    four characters a token. The usage object has every field of openai's
    ``RealtimeResponseUsage`` and azure-ai-voicelive's ``TokenUsage``."""

    def __init__(self) -> None:
        self.conversation_ms = 0  # audio in the conversation so far, the user's and the model's
        self.read_tokens = 0  # audio tokens the last response read

    def heard(self, ms: int) -> None:
        """A user item of ``ms`` joined the conversation."""
        self.conversation_ms += max(0, ms)

    def response(self, out_ms: int, transcript: str, instructions: str) -> dict[str, Any]:
        audio_in = self.conversation_ms // 100
        cached = min(self.read_tokens, audio_in)
        text_in = math.ceil(len(instructions) / 4)
        audio_out = out_ms // 50
        text_out = math.ceil(len(transcript) / 4)
        self.read_tokens = audio_in
        self.conversation_ms += out_ms  # the reply is input to the responses after it
        return {
            "total_tokens": audio_in + text_in + audio_out + text_out,
            "input_tokens": audio_in + text_in,
            "output_tokens": audio_out + text_out,
            "input_token_details": {
                "cached_tokens": cached,
                "text_tokens": text_in,
                "audio_tokens": audio_in,
                "image_tokens": 0,
                "cached_tokens_details": {
                    "text_tokens": 0,
                    "audio_tokens": cached,
                    "image_tokens": 0,
                },
            },
            "output_token_details": {"text_tokens": text_out, "audio_tokens": audio_out},
        }

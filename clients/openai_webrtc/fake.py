"""The openai-webrtc fake server's protocol without I/O: one call's data-channel events and audio
in, ``callactions`` out.

``ServerProtocol`` drives a reference behaviour with the audio the track delivers (one output
frame per input frame), speaks the Realtime API's events on the data channel and applies the
media-time faults.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from numpy.typing import NDArray

from duplexsim.clients.fakekit import serveractions
from duplexsim.clients.fakekit.behaviours import Behaviour
from duplexsim.clients.fakekit.callactions import CallAction as Action
from duplexsim.clients.fakekit.callactions import Close, SendAudio, SendEvent, Stall
from duplexsim.clients.fakekit.declare import Offer, Request
from duplexsim.clients.fakekit.faults import Faults, MediaFaults, Rejection
from duplexsim.clients.openai_realtime import events as wire
from duplexsim.clients.openai_realtime.config import merge
from duplexsim.clients.openai_webrtc import signaling
from duplexsim.core import safejson

__all__ = [
    "Action",
    "Close",
    "SendAudio",
    "SendEvent",
    "ServerProtocol",
    "Stall",
    "read_offer",
    "refuse_call",
]

_BAD_KEY = '{"error":{"type":"invalid_request_error","code":"invalid_api_key",' + (
    '"message":"Incorrect API key provided"}}'
)
_NOT_REALTIME = (
    '{"error":{"type":"invalid_request_error","code":"missing_required_parameter",'
    + '"message":"session.type must be \'realtime\'"}}'
)


def refuse_call(api_key: str | None, request: Request, faults: Faults) -> Rejection | None:
    """The refusal of an offer, in the calls endpoint's order: the handshake faults, the key
    (401: ``Authorization: Bearer <api_key>``, when the fake has one), then the offer (400: one
    that cannot be read raises ProtocolError; a session whose type is not ``realtime``)."""
    rejection = faults.admit()
    if rejection is not None:
        return rejection
    if api_key is not None and request.headers.get("authorization") != f"Bearer {api_key}":
        return Rejection(401, {}, _BAD_KEY)
    session = read_offer(request).settings
    if session is not None and session.get("type") != "realtime":
        return Rejection(400, {}, _NOT_REALTIME)
    return None


def read_offer(request: Request) -> Offer:
    """The SDP offer, raw or in the multipart form with the session."""
    sdp, session = signaling.parse_offer(request.headers.get("content-type", ""), request.body)
    return Offer(sdp, session)


_DEFAULT_SESSION: dict[str, Any] = {
    "type": "realtime",
    "object": "realtime.session",
    "model": "gpt-realtime",
    "output_modalities": ["audio"],
    "audio": {
        "input": {
            "turn_detection": {
                "type": "server_vad",
                "threshold": 0.5,
                "prefix_padding_ms": 300,
                "silence_duration_ms": 500,
                "create_response": True,
                "interrupt_response": True,
            }
        },
        "output": {"voice": "marin"},
    },
}


class ServerProtocol:
    """One call on the fake server. The behaviour decides turns and replies from the audio alone
    (whatever ``turn_detection`` says); faults trigger on input media time."""

    def __init__(
        self,
        behaviour_factory: Callable[[int], Behaviour],
        faults: Faults | None = None,
        *,
        rate: int = 48000,
        call_id: str = "rtc_test_1",
        session: Mapping[str, Any] | None = None,
    ) -> None:
        self.behaviour = behaviour_factory(rate)
        self._injected = MediaFaults(faults or Faults())
        self.call_id = call_id
        self.session = merge(_DEFAULT_SESSION, {"id": f"sess_{call_id}", **(session or {})})
        self._ids = itertools.count(1)
        self._responses = itertools.count(1)
        self._response_id: str | None = None
        self._item = 0
        self._received = 0  # input samples
        self._done = False

    def open(self) -> list[Action]:
        """The data channel opened."""
        return [self._event("session.created", session=self.session)]

    def receive_text(self, text: str) -> list[Action]:
        if self._done:
            return []
        try:
            obj = safejson.loads(text)
        except safejson.JsonError:
            return [self._error("invalid_request_error", "invalid_json", "not valid JSON")]
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            return [self._error("invalid_request_error", "invalid_event", "no string 'type'")]
        kind, event_id = obj["type"], obj.get("event_id")
        if kind == "session.update":
            return self._session_update(obj.get("session"), event_id)
        if kind == "input_audio_buffer.commit":
            return [self._event("input_audio_buffer.committed", item_id=self._item_id())]
        if kind == "input_audio_buffer.clear":
            return [self._event("input_audio_buffer.cleared")]
        if kind in ("response.create", "response.cancel", "output_audio_buffer.clear"):
            return []  # the behaviour decides replies from the audio
        return [
            self._error(
                "invalid_request_error", "unknown_event", f"unknown type {kind!r}", event_id
            )
        ]

    def _session_update(self, session: Any, event_id: Any) -> list[Action]:
        if not isinstance(session, dict) or session.get("type") != "realtime":
            return [
                self._error(
                    "invalid_request_error",
                    "missing_required_parameter",
                    "session.type must be 'realtime'",
                    event_id,
                )
            ]
        self.session = merge(self.session, session)
        return [self._event("session.updated", session=self.session)]

    def receive_audio(self, samples: NDArray[Any]) -> list[Action]:
        """One chunk of input at the behaviour's rate -> events and the output for that interval."""
        if self._done:
            return []
        self._received += samples.size
        received_s = self._received / self.behaviour.rate
        stop = self._injected.stop(received_s)
        self._done |= self._injected.finished
        return _on_call(stop) if stop else self._stream(samples) + self._malformed(received_s)

    def _stream(self, samples: NDArray[Any]) -> list[Action]:
        step = self.behaviour.push(samples)
        ms = round(1000 * self._received / self.behaviour.rate)
        out: list[Action] = []
        if step.speech_started:
            self._item += 1
            out.append(
                self._event(
                    "input_audio_buffer.speech_started", audio_start_ms=ms, item_id=self._item_id()
                )
            )
        if step.speech_stopped:
            item = self._item_id()
            out.append(
                self._event("input_audio_buffer.speech_stopped", audio_end_ms=ms, item_id=item)
            )
            out.append(self._event("input_audio_buffer.committed", item_id=item))
        if step.reply_started:
            self._response_id = f"resp_{next(self._responses)}"
            out.append(self._event("response.created", response=self._response("in_progress")))
            out.append(self._event("output_audio_buffer.started", response_id=self._response_id))
        out.append(SendAudio(step.audio))
        if step.reply_done:
            out.append(self._event("response.done", response=self._response("completed")))
            out.append(self._event("output_audio_buffer.stopped", response_id=self._response_id))
            self._response_id = None
        return out

    def _malformed(self, received_s: float) -> list[Action]:
        actions = self._injected.malformed(received_s, lambda: '{"type": "response.done"')
        self._done |= self._injected.finished  # (truncated JSON)
        return _on_call(actions)

    def _response(self, status: str) -> dict[str, Any]:
        return {"id": self._response_id, "object": "realtime.response", "status": status}

    def _item_id(self) -> str:
        return f"item_{self.call_id}_{self._item}"

    def _event(self, kind: str, **fields: Any) -> SendEvent:
        return SendEvent(
            wire.encode({"type": kind, "event_id": f"event_{next(self._ids)}", **fields})
        )

    def _error(self, kind: str, code: str, message: str, event_id: Any = None) -> SendEvent:
        error = {"type": kind, "code": code, "message": message, "event_id": event_id}
        return self._event("error", error=error)


def _on_call(actions: list[serveractions.Action]) -> list[Action]:
    """The shared fault injector's actions, as a call carries them out: a message goes on the
    data channel, a close hangs up."""
    out: list[Action] = []
    for action in serveractions.expand(actions):
        if isinstance(action, serveractions.Send):
            text = action.message
            out.append(SendEvent(text if isinstance(text, str) else text.decode()))
        elif isinstance(action, serveractions.Close):
            out.append(Close(action.reason))
        else:
            out.append(action)
    return out

"""The kit's WebRTC transport: serves a ``WebRTCFake``, signalled as a minimal asyncio HTTP/1.1
server (``POST`` an SDP offer to the declared path: 201 with the answer and a ``Location``), one
aiortc peer per call, and the fake's protocol object between the peer's audio and its data
channel.

Each call hears the client's track through a pass-through receive buffer (a model server does not
hold its input 80 ms), feeds every received 20 ms frame to the protocol (resampled to the declared
rate when that is not 48 kHz) and pushes the protocol's output for that interval to its outgoing
track at once: one output frame per input frame, paced by the client's input. An event goes out
once the audio pushed before it has been sent, so audio and events reach the client in the order
the server produced them. When no frame has come for ``FILL_LAPSE_S`` (a muted or stopped client
track) the call hears silence for that long and goes on, as a real service runs on its own clock:
a reply plays to its end.

An answer waits off the loop too: aiortc decodes each packet in a thread of its own. The server
notes in ``held`` (``RunningServer.held``) each span from an input packet's read to the moment
the answer to its frame went out, so a run on this machine counts that wait as the server's
(answers a fault delays on purpose are the model's latency, not a wait).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import soxr
from aiortc import RTCDataChannel, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from numpy.typing import NDArray

from duplexsim.clients.fakekit.callactions import CallAction, Close, SendAudio, SendEvent, Stall
from duplexsim.clients.fakekit.declare import Request, WebRTCFake
from duplexsim.clients.fakekit.fakeserver import RunningServer
from duplexsim.clients.fakekit.faults import Faults
from duplexsim.clients.fakekit.mediaclock import FILL_LAPSE_S
from duplexsim.clients.transport.http1 import (
    MAX_BODY,
    MAX_HEAD,
    parse_request_head,
    response_bytes,
)
from duplexsim.clients.transport.rtc import (
    RATE,
    OutgoingAudioTrack,
    PassThroughJitterBuffer,
    bypass_jitter_buffer,
    frame_to_mono,
    is_loopback_host,
    loopback_ice,
    new_peer_connection,
)
from duplexsim.core.errors import ProtocolError
from duplexsim.core.stalls import StallLog

__all__ = ["CallServer", "serve_calls", "serve_webrtc_fake"]

_REASONS = {201: "Created", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found"}
_REASONS |= {405: "Method Not Allowed", 413: "Payload Too Large", 429: "Too Many Requests"}


async def serve_webrtc_fake(
    fake: WebRTCFake, *, host: str = "127.0.0.1", port: int = 0, faults: Faults
) -> RunningServer:
    """Serve ``fake``'s calls on ``host``:``port``."""
    return await serve_calls(CallServer(fake, faults, host), port=port)


async def serve_calls(server: CallServer, *, port: int = 0) -> RunningServer:
    """Listen for ``server``'s offers; closing it hangs up every call."""
    listener = await asyncio.start_server(server.handle, server.host, port, limit=MAX_HEAD)
    bound = listener.sockets[0].getsockname()
    shown = f"[{server.host}]" if ":" in server.host else server.host

    async def close() -> None:
        listener.close()
        await server.close_calls()
        await listener.wait_closed()

    url = f"http://{shown}:{bound[1]}"
    return RunningServer(server.host, int(bound[1]), url, close, held=server.held)


class CallServer:
    """The calls of one fake: signalling answered, peers made and hung up."""

    def __init__(self, fake: WebRTCFake, faults: Faults, host: str) -> None:
        self.fake = fake
        self.faults = faults
        self.host = host
        self.loopback = is_loopback_host(host)
        self.ids = itertools.count(1)
        self.calls: set[_Call] = set()
        self.closing: set[asyncio.Task[None]] = set()  # calls closing on their own
        self.held = StallLog()  # input frames held until their answers went out (loop clock)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, body, headers = await self._answer(reader)
        except (ProtocolError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            status, body, headers = 400, b"bad request\n", {}
        except ConnectionError:
            return
        with contextlib.suppress(ConnectionError):
            writer.write(response_bytes(status, _REASONS.get(status, "Error"), body, headers))
            await writer.drain()
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, bytes, dict[str, str]]:
        method, path, headers = parse_request_head(await reader.readuntil(b"\r\n\r\n"))
        length = int(headers.get("content-length", "0"))
        if length > MAX_BODY:
            return 413, b"offer too large\n", {}
        request = Request(method, path, headers, await reader.readexactly(length))
        if path.split("?")[0] != self.fake.path:
            return 404, b"not found\n", {}
        if method != "POST":
            return 405, b"POST only\n", {"Allow": "POST"}
        rejection = self.fake.refuse(request, self.faults)
        if rejection is not None:
            return rejection.status, rejection.body.encode(), rejection.headers
        offer = self.fake.offer(request)
        call = _Call(self, f"{self.fake.call_ids}_{next(self.ids)}", offer.settings)
        self.calls.add(call)
        try:
            answer = await call.answer(offer.sdp)
        except Exception:
            await call.close()
            raise ProtocolError("cannot answer this offer") from None
        location = f"{self.fake.path}/{call.call_id}"
        return 201, answer.encode(), {"Content-Type": "application/sdp", "Location": location}

    async def close_calls(self) -> None:
        await asyncio.gather(*(call.close() for call in list(self.calls)), *self.closing)


class _Call:
    """One peer connection and the fake's protocol object for it."""

    def __init__(self, server: CallServer, call_id: str, settings: dict[str, Any] | None) -> None:
        self.server = server
        self.call_id = call_id
        self.protocol = server.fake.call(call_id, settings)
        self.pc: RTCPeerConnection = new_peer_connection()
        self.track = OutgoingAudioTrack()
        self.channel: RTCDataChannel | None = None
        self.tasks: list[asyncio.Task[None]] = []
        self.delay_s = server.faults.extra_latency_s
        self.last_due = 0.0
        self.to_rate = _Resampler(RATE, server.fake.rate)
        self.from_rate = _Resampler(server.fake.rate, RATE)
        self.stalled = False
        self.closing: asyncio.Task[None] | None = None
        self.lapse_s = FILL_LAPSE_S  # no frame for this long: that much silence is heard
        self.buffer: PassThroughJitterBuffer | None = None

    async def answer(self, offer_sdp: str) -> str:
        pc = self.pc
        pc.on("datachannel", self._on_channel)
        pc.on("track", self._on_track)
        pc.on("connectionstatechange", self._on_state)
        await pc.setRemoteDescription(RTCSessionDescription(offer_sdp, "offer"))
        clock = asyncio.get_running_loop().time
        for transceiver in pc.getTransceivers():
            if transceiver.kind == "audio":
                self.buffer = bypass_jitter_buffer(transceiver.receiver, clock)
        pc.addTrack(self.track)
        with loopback_ice() if self.server.loopback else contextlib.nullcontext():
            await pc.setLocalDescription(await pc.createAnswer())
        return str(pc.localDescription.sdp)

    def _on_channel(self, channel: RTCDataChannel) -> None:
        if channel.label != self.server.fake.channel:
            return
        self.channel = channel
        channel.on("message", self._on_message)
        self._apply(self.protocol.open())

    def _on_message(self, message: str | bytes) -> None:
        if isinstance(message, str):
            self._apply(self.protocol.receive_text(message))

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio":
            self.tasks.append(asyncio.create_task(self._listen(track)))

    def _on_state(self) -> None:
        if self.pc.connectionState in ("failed", "closed"):
            self._close_soon()

    async def _listen(self, track: MediaStreamTrack) -> None:
        lapse_s = self.lapse_s
        lapse = np.zeros(round(lapse_s * self.server.fake.rate), dtype=np.float32)
        receiving: asyncio.Future[Any] | None = None
        try:
            while True:
                receiving = receiving or asyncio.ensure_future(track.recv())
                done, _ = await asyncio.wait({receiving}, timeout=lapse_s)
                if not done:  # nothing heard for a lapse: silence, on the wall clock
                    self._apply(self.protocol.receive_audio(lapse))
                    continue
                try:
                    frame = receiving.result()
                except MediaStreamError:
                    return
                receiving = None
                samples = self.to_rate(frame_to_mono(frame))
                if samples.size:
                    actions = self.protocol.receive_audio(samples)
                    self._apply(actions)
                    self._note_hold(frame.pts, actions)
        finally:
            if receiving is not None:
                receiving.cancel()

    def _note_hold(self, pts: int | None, actions: list[CallAction]) -> None:
        """Once the answer to frame ``pts`` is out, note the span since its packet was read."""
        read = None if self.buffer is None else self.buffer.read_at(pts)
        if read is None or self.delay_s > 0 or not any(isinstance(a, SendAudio) for a in actions):
            return
        held, since = self.server.held, read[0]
        clock = asyncio.get_running_loop().time
        self.track.after_sent(lambda: held.note(since, clock()))

    def _apply(self, actions: list[CallAction]) -> None:
        for action in actions:
            if self.stalled:
                return
            if isinstance(action, Stall):
                self.stalled = True
            elif isinstance(action, Close):
                self._later(self._close_soon)
            elif isinstance(action, SendEvent):
                self._later(self._send_after_audio, action.text)
            elif isinstance(action, SendAudio):
                self._later(self.track.push, self.from_rate(np.asarray(action.samples)))

    def _later(self, fn: Callable[..., Any], *args: Any) -> None:
        """Do it now, or ``extra_latency_s`` later; strictly increasing due times keep the order."""
        if self.delay_s <= 0:
            fn(*args)
            return
        loop = asyncio.get_running_loop()
        self.last_due = max(loop.time() + self.delay_s, self.last_due + 1e-6)
        loop.call_at(self.last_due, fn, *args)

    def _send_after_audio(self, text: str) -> None:
        """Send an event once the audio pushed before it is on the wire, as a server whose
        ``output_audio_buffer.stopped`` means its buffer has drained."""
        self.track.after_sent(lambda: self._send_text(text))

    def _send_text(self, text: str) -> None:
        if self.channel is not None and self.channel.readyState == "open":
            self.channel.send(text)

    def _close_soon(self) -> None:
        if self.closing is None:
            self.closing = asyncio.get_running_loop().create_task(self.close())
            self.server.closing.add(self.closing)
            self.closing.add_done_callback(self.server.closing.discard)

    async def close(self) -> None:
        self.server.calls.discard(self)
        self.track.stop()
        with contextlib.suppress(Exception):
            await self.pc.close()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()


class _Resampler:
    """Streaming mono float32 resampling (identity at equal rates). Quick cubic: its output keeps
    up with its input to a few samples, where soxr's HQ filter holds back 20-30 ms. What it holds
    back at the first chunk is made up with leading zeros, so 20 ms in gives 20 ms out at once and
    output frames are never a frame late."""

    def __init__(self, from_rate: int, to_rate: int) -> None:
        self.ratio = to_rate / from_rate
        self.stream = (
            None
            if from_rate == to_rate
            else soxr.ResampleStream(from_rate, to_rate, 1, dtype="float32", quality="QQ")
        )
        self.primed = False

    def __call__(self, samples: NDArray[Any]) -> NDArray[np.float32]:
        x = np.asarray(samples, dtype=np.float32)
        if self.stream is None:
            return x
        out: NDArray[np.float32] = self.stream.resample_chunk(x)
        if not self.primed:
            self.primed = True
            short = round(x.size * self.ratio) - out.size
            if short > 0:
                out = np.concatenate([np.zeros(short, np.float32), out])
        return out

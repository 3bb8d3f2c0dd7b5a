"""OpenAIWebRTCClient: the asyncio shell around ClientProtocol, aiortc and the SDP POST.

connect(): a peer with an outgoing audio track and the ``oai-events`` data channel, the offer
POSTed to ``{url}/v1/realtime/calls``, the answer set, then (all within ``connect_timeout_s``) the
connection, the channel, ``session.created``, ``session.update`` and ``session.updated``.

Timing: everything is stamped on arrival with ``clock()``; placing audio on the session's
timeline is the session's business (``OutputTrack``: a frame a little late still continues its
reply). ``send_audio`` pushes 48 kHz samples to the track, which aiortc encodes and sends at once,
so the server's media time is the samples sent. The receive side uses a pass-through buffer
(``rtc.bypass_jitter_buffer``; aiortc's own holds each frame until four more packets came, 80 ms):
each packet goes to the decoder as it is read, in sequence order, and its frame is stamped with
the time its packet was read (not the decoder thread's hop after it). A lost packet is a frame
that never comes.

The Opus path adds a fixed ``CODEC_DELAY_S`` (13 ms) to a measured reply latency: the encoder
lookahead, 6.5 ms on our send path (the server hears our audio that late) and 6.5 ms on the
server's, as for moshi; any WebRTC client and server have both. Stamps are not corrected for it;
``describe()`` records it.

Data-channel events are stamped on arrival. An event can arrive while frames whose packets were
read before it are still in the decoder (a thread of its own); it is queued behind them, waiting
at most one frame period, so ``output_audio_buffer.stopped`` never ends a reply before audio that
reached us ahead of it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from aiortc import RTCDataChannel, RTCPeerConnection, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.stats import RTCTransportStats
from av import AudioFrame
from numpy.typing import NDArray

from duplexsim.clients.base import (
    AudioOut,
    Capabilities,
    ClientConfig,
    ClientEvent,
    DuplexClient,
    ErrorEvent,
)
from duplexsim.clients.openai_realtime.dialects import OPENAI
from duplexsim.clients.openai_webrtc import signaling
from duplexsim.clients.openai_webrtc.protocol import ClientProtocol, WebRTCOptions
from duplexsim.clients.transport.rtc import (
    ENCODER_DELAY_S,
    FRAME_S,
    RATE,
    OutgoingAudioTrack,
    PassThroughJitterBuffer,
    bypass_jitter_buffer,
    frame_to_mono,
    is_loopback_host,
    loopback_ice,
    new_peer_connection,
)
from duplexsim.core.errors import ConnectError, Disconnected, ProtocolError, SessionError

__all__ = ["CODEC_DELAY_S", "OpenAIWebRTCClient"]

FRAME_MS = 20
CHANNEL = "oai-events"
CODEC_DELAY_S = 2 * ENCODER_DELAY_S  # 0.013: Opus lookahead, client->server and back


class OpenAIWebRTCClient(DuplexClient):
    protocol = "openai-webrtc"
    metering = OPENAI.metering  # the same models and billing as over WebSocket
    instructions_option = "instructions"

    def __init__(self, config: ClientConfig) -> None:
        super().__init__(config)
        self.options = WebRTCOptions.from_options(
            config.options, voice=config.voice, model=config.model
        )
        self._proto = ClientProtocol(self.options, secrets=(config.api_key or "",))
        self._pc: RTCPeerConnection | None = None
        self._channel: RTCDataChannel | None = None
        self._track = OutgoingAudioTrack(idle_fill_s=self.options.idle_fill_s)
        self._queue: asyncio.Queue[ClientEvent | None] = asyncio.Queue()
        self._buffer: PassThroughJitterBuffer | None = None
        self._packets_read = 0  # packets handed to the decoder whose frames have been read
        # data-channel events waiting for the audio read before them: (packets, due, event)
        self._held: deque[tuple[int, float, ClientEvent | None]] = deque()
        self._held_wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._progress = asyncio.Event()  # the handshake moved on (or failed)
        self._failure: SessionError | None = None
        self._finished = False  # no more events will be queued
        self._delivered_end = False  # the last of them is in the queue
        self._closing = False
        self._http_bytes = (0, 0)
        self._stage = "the SDP answer"
        self._started = False
        self.call_id: str | None = None

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            input_rate=RATE,
            output_rate=RATE,
            frame_ms=FRAME_MS,
            faster_than_realtime=False,  # RTP paces the output
            end_of_turn_signal=True,
            server_vad=not self.options.manual,
            manual_commit=self.options.manual,
            continuous_output=self.options.continuous_output,
            # NetEq's target delay starts at 80 ms and follows the arrivals' jitter: a frame
            # three 20 ms frames late is concealed, a gap the model hears
            input_jitter_ms=60.0,
            # consulted only for a fake this run started (its stalls known): ours answers each
            # 20 ms RTP frame with one as it arrives; a hosted server never has a stall log
            answers_each_frame=True,
        )

    # --- connect ---------------------------------------------------------------------------------

    async def connect(self) -> None:
        target = signaling.calls_target(self.config.url, self.config.model)
        try:
            async with asyncio.timeout(self.config.connect_timeout_s):
                await self._negotiate(target)
                await self._until(
                    lambda: (
                        self._pc is not None
                        and self._pc.connectionState == "connected"
                        and self._channel is not None
                        and self._channel.readyState == "open"
                    ),
                    "ICE/DTLS and the data channel",
                )
                await self._until(lambda: self._proto.ready, "session.created and session.updated")
        except TimeoutError:
            await self._teardown()
            raise ConnectError(
                f"WebRTC set-up did not finish within {self.config.connect_timeout_s:g} s "
                f"(waiting for {self._stage})"
            ) from None
        except SessionError:
            await self._teardown()
            raise
        self._tasks.append(asyncio.create_task(self._pump()))

    async def _negotiate(self, target: signaling.Target) -> None:
        self._started = True
        self._pc = pc = new_peer_connection()
        transceiver = pc.addTransceiver(self._track, direction="sendrecv")
        self._buffer = bypass_jitter_buffer(transceiver.receiver, self.clock)
        self._channel = channel = pc.createDataChannel(CHANNEL)
        channel.on("open", self._progress.set)
        channel.on("message", self._on_message)
        channel.on("close", lambda: self._lost("the server closed the data channel"))
        pc.on("track", self._on_track)
        pc.on("connectionstatechange", self._on_state)
        loopback = self.options.loopback_ice
        if loopback is None:
            loopback = is_loopback_host(target.host)
        with loopback_ice() if loopback else contextlib.nullcontext():
            await pc.setLocalDescription(await pc.createOffer())
        key = self.config.api_key
        session = self.options.session(with_model=True) if self.options.multipart(key) else None
        request = signaling.build_call_request(
            target, pc.localDescription.sdp, api_key=key, session=session
        )
        response = await signaling.post(
            request, timeout_s=self.config.connect_timeout_s, secret=key
        )
        self._http_bytes = (len(request.encode()), len(response.body))
        self.bytes_sent += self._http_bytes[0]
        self.bytes_received += self._http_bytes[1]
        if response.status not in (200, 201) or not response.body.startswith(b"v=0"):
            if response.status in (200, 201):
                raise ProtocolError(f"HTTP {response.status} answer is not SDP")
            raise signaling.call_error(response, secret=key)
        self.call_id = signaling.call_id(response.headers.get("location"))
        try:
            await pc.setRemoteDescription(RTCSessionDescription(response.text(), "answer"))
        except Exception as exc:  # aiortc raises ValueError, InvalidStateError, ...
            raise ProtocolError(f"cannot use the SDP answer: {type(exc).__name__}: {exc}") from None

    async def _until(self, condition: Any, what: str) -> None:
        self._stage = what
        while not condition():
            if self._failure is not None:
                raise self._failure
            self._progress.clear()
            await self._progress.wait()
        if self._failure is not None:
            raise self._failure

    # --- callbacks -------------------------------------------------------------------------------

    def _on_message(self, message: str | bytes) -> None:
        arrival = self.clock()
        self.bytes_received += len(message.encode() if isinstance(message, str) else message)
        if self._finished:
            return
        if not isinstance(message, str):
            self._fail_or_emit(ProtocolError("binary message on the oai-events channel"), arrival)
            return
        try:
            if not self._proto.ready:
                for reply in self._proto.receive_handshake(message):
                    self._send_text(reply)
                self._progress.set()
                return
            events = self._proto.receive_text(message, arrival)
        except SessionError as exc:
            self._fail_or_emit(exc, arrival)
            return
        for event in events:
            self._hold(event)

    def _fail_or_emit(self, error: SessionError, arrival: float) -> None:
        if not self._proto.ready:
            self._failure = self._failure or error
            self._progress.set()
        else:
            self._finish(ErrorEvent(error, arrival, fatal=True))

    def _on_track(self, track: MediaStreamTrack) -> None:
        if track.kind == "audio":
            self._tasks.append(asyncio.create_task(self._read_audio(track)))

    def _on_state(self) -> None:
        state = self._pc.connectionState if self._pc is not None else "closed"
        if state == "failed":
            self._lost("ICE/DTLS connection failed")
        elif state == "closed":
            self._lost("the server closed the peer connection")
        self._progress.set()

    def _lost(self, why: str) -> None:
        if self._closing:
            return
        if not self._proto.ready:
            self._failure = self._failure or ConnectError(f"WebRTC set-up failed: {why}")
            self._progress.set()
        else:
            self._finish(ErrorEvent(Disconnected(why), self.clock(), fatal=True))

    # --- streaming -------------------------------------------------------------------------------

    async def _read_audio(self, track: MediaStreamTrack) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            read = self._buffer.read_at(frame.pts) if self._buffer is not None else None
            if read is None:  # not known: now, and the packet is taken to be the next one
                arrival, self._packets_read = self.clock(), self._packets_read + 1
            else:
                arrival, self._packets_read = read
            if isinstance(frame, AudioFrame) and self._proto.ready and not self._finished:
                self._queue.put_nowait(AudioOut(frame_to_mono(frame), arrival))
            self._release()

    def _hold(self, item: ClientEvent | None) -> None:
        """Queue a data-channel event (None: the end) behind the frames whose packets were read
        before it: once that many frames were read, or one frame period later (a packet that
        does not decode leaves no frame)."""
        packets = self._buffer.handed if self._buffer is not None else 0
        self._held.append((packets, asyncio.get_running_loop().time() + FRAME_S, item))
        self._release()
        self._held_wake.set()

    def _release(self) -> None:
        now = asyncio.get_running_loop().time()
        while self._held:
            packets, due, item = self._held[0]
            if self._packets_read < packets and now < due:
                return
            self._held.popleft()
            self._queue.put_nowait(item)
            if item is None:
                self._delivered_end = True

    async def _pump(self) -> None:
        """Release the held events whose frames did not come within a frame period."""
        loop = asyncio.get_running_loop()
        while not self._delivered_end:
            self._held_wake.clear()
            if self._held:
                await asyncio.sleep(max(0.0, self._held[0][1] - loop.time()))
            else:
                await self._held_wake.wait()
            self._release()

    def _finish(self, last: ClientEvent | None) -> None:
        if self._finished:
            return
        self._finished = True
        if last is not None:
            self._hold(last)
        self._hold(None)

    async def send_audio(self, samples: NDArray[Any]) -> None:
        if not self._proto.ready:
            raise RuntimeError("OpenAIWebRTCClient: call connect() first")
        if self._delivered_end:
            raise Disconnected("the WebRTC call has ended")
        if not self._finished:  # else the reason is on its way through events()
            self._track.push(samples)

    async def commit_turn(self) -> None:
        for message in self._proto.commit_messages():
            self._send_text(message)

    def _send_text(self, message: str) -> None:
        if self._channel is not None and self._channel.readyState == "open":
            self._channel.send(message)
            self.bytes_sent += len(message.encode())

    async def events(self) -> AsyncIterator[ClientEvent]:
        if not self._started:
            raise RuntimeError("OpenAIWebRTCClient: call connect() first")
        while True:
            event = await self._queue.get()
            if event is None:
                return
            yield event

    async def aclose(self) -> None:
        if self._closing:
            return
        self._closing = True
        await self._count_wire_bytes()
        await self._teardown()
        self._finished = self._delivered_end = True
        self._queue.put_nowait(None)

    async def _count_wire_bytes(self) -> None:
        """Bytes on the wire: the HTTP exchange plus everything the ICE transport carried (RTP,
        RTCP, DTLS, the data channel); the running counts only cover HTTP and channel text."""
        if self._pc is None:
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(1.0):
                stats = await self._pc.getStats()
            transports = [s for s in stats.values() if isinstance(s, RTCTransportStats)]
            if transports:
                self.bytes_sent = self._http_bytes[0] + sum(t.bytesSent for t in transports)
                self.bytes_received = self._http_bytes[1] + sum(t.bytesReceived for t in transports)

    async def _teardown(self) -> None:
        self._closing = True
        self._track.stop()
        pc, self._pc = self._pc, None
        if pc is not None:
            with contextlib.suppress(Exception):
                await pc.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["url"] = _without_credentials(self.config.url)
        out["call_id"] = self.call_id
        out["codec_delay_s"] = CODEC_DELAY_S
        return out


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = host + (f":{parts.port}" if parts.port else "")
        return parts._replace(netloc=netloc).geturl()
    return url

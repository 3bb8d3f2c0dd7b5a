"""The aiortc pieces the client and the fake server share: peers without STUN, loopback ICE, the
paced outgoing audio track, frame conversion and the receive-buffer bypass.

Facts about aiortc 1.16 this module relies on (see /work/shared/reference/envcheck.md section 2):

- ``RTCPeerConnection()`` with no configuration adds a public STUN server; ``new_peer_connection``
  always passes ``RTCConfiguration(iceServers=[])``.
- aioice never offers 127.0.0.1 as a host candidate, so two peers on one machine that talk over
  loopback need ``loopback_ice()`` around candidate gathering (``setLocalDescription``).
- Opus frames arrive decoded as s16 stereo, 960 samples (20 ms) at 48 kHz.
- Every ``RTCRtpReceiver`` for audio holds received packets in ``JitterBuffer(capacity=16,
  prefetch=4)``: frame k is released when packet k+4 arrives, so a steadily paced stream reaches
  ``track.recv()`` 4 x 20 ms = 80 ms late, and a stream that stops leaves its last four frames in
  the buffer. The client and the fake server both swap it for a pass-through one
  (``bypass_jitter_buffer``): each packet goes to the decoder as it is read, so the client hears
  the model, and a model server hears its input, without that hold.
- The decoder (libopus, one 20 ms packet per frame, in a thread of its own) decodes each packet it
  is given; it conceals nothing, so a lost packet is a frame that never comes (its pts is
  skipped).
- aiortc's Opus encoder (libopus, application "voip") delays the signal by its lookahead, 312
  samples (``ENCODER_DELAY_S``, 6.5 ms), on every hop.
- ``RTCRtpSender`` hands a raw frame from its track to a worker thread to encode, and sends an
  already encoded ``av.Packet`` as it is. That hop waits for the thread pool, a core and the GIL
  (2 ms typical on an idle 2-core machine, over 20 ms with one core busy), after the frame's send
  was recorded; ``OutgoingAudioTrack`` encodes on the loop (tens of microseconds), so a frame
  leaves in the loop iteration after its push.

tests/clients/test_openai_webrtc.py measures the buffer's hold and the lookahead on loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fractions
import ipaddress
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import aioice.ice
import numpy as np
from aiortc import RTCConfiguration, RTCPeerConnection, RTCRtpReceiver
from aiortc.codecs.opus import OpusEncoder
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtp import RtpPacket
from av import AudioFrame, Packet
from numpy.typing import NDArray

__all__ = [
    "ENCODER_DELAY_S",
    "FRAME",
    "FRAME_S",
    "RATE",
    "OutgoingAudioTrack",
    "PassThroughJitterBuffer",
    "bypass_jitter_buffer",
    "frame_to_mono",
    "is_loopback_host",
    "loopback_ice",
    "new_peer_connection",
]

RATE = 48000  # the Opus clock: every WebRTC audio frame here is at 48 kHz
FRAME = 960  # samples in one 20 ms frame
FRAME_S = FRAME / RATE
ENCODER_DELAY_S = 312 / RATE  # Opus lookahead (6.5 ms) of aiortc's encoder; measured by the tests
_TIME_BASE = fractions.Fraction(1, RATE)


# --- loopback ICE ---------------------------------------------------------------------------

_loopback_only: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "duplexsim_loopback_ice", default=False
)
_original_host_addresses = aioice.ice.get_host_addresses


def _host_addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
    if _loopback_only.get():
        return ["127.0.0.1"]
    return _original_host_addresses(use_ipv4=use_ipv4, use_ipv6=use_ipv6)


@contextlib.contextmanager
def loopback_ice() -> Iterator[None]:
    """Peers that gather candidates inside this block offer only 127.0.0.1.

    aioice filters loopback out of its host candidates, so two peers on one machine would
    otherwise pair over the machine's external address (or, with only ``lo``, never connect).
    The patch of ``aioice.ice.get_host_addresses`` is installed once and consults a context
    variable, so it affects only gathering started inside this block (asyncio tasks copy the
    context), never a concurrent session that talks to a real server.
    """
    aioice.ice.get_host_addresses = _host_addresses
    token = _loopback_only.set(True)
    try:
        yield
    finally:
        _loopback_only.reset(token)


def is_loopback_host(host: str | None) -> bool:
    if not host:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def new_peer_connection() -> RTCPeerConnection:
    """A peer with no ICE servers: aiortc's default would send STUN to a public address."""
    return RTCPeerConnection(RTCConfiguration(iceServers=[]))


# --- audio frames ---------------------------------------------------------------------------


def frame_to_mono(frame: AudioFrame) -> NDArray[np.float32]:
    """A decoded frame (s16, any channel count, packed or planar) -> float32 mono."""
    data = frame.to_ndarray()
    channels = len(frame.layout.channels)
    planar = frame.format.is_planar
    samples = data.reshape(channels, -1).T if planar else data.reshape(-1, channels)
    scale = 1.0 / 32768.0 if data.dtype == np.int16 else 1.0
    mono: NDArray[np.float32] = (samples.astype(np.float32).mean(axis=1) * scale).astype(np.float32)
    return mono


def _to_pcm16(samples: NDArray[Any]) -> NDArray[np.int16]:
    data = np.nan_to_num(np.asarray(samples, dtype=np.float64).reshape(-1), nan=0.0)
    out: NDArray[np.int16] = np.clip(np.rint(data * 32768.0), -32768, 32767).astype(np.int16)
    return out


class OutgoingAudioTrack(MediaStreamTrack):
    """An audio track fed by ``push``: aiortc's sender pulls 20 ms frames with ``recv``.

    Frames go out as soon as their samples are pushed, so the caller paces the stream (the session
    sends on an absolute schedule; the fake server answers each input frame). A frame's pts counts
    the samples emitted before it, so the peer's media time is the samples pushed. Before the first
    push nothing is sent. Once the stream ran, ``idle_fill_s`` without a push starts silence frames
    paced every 20 ms (a live microphone never stops); short gaps are never filled, because a
    sender that fell behind pushes its backlog at once, and filled silence would move everything
    after it later on the peer's media clock.

    ``after_sent(fn)`` calls ``fn`` once everything pushed so far has gone out: aiortc's sender
    asks for the next frame only after it handed the last one to the transport.

    ``recv`` gives the sender each frame Opus-encoded here, on the loop (``next_frame`` gives it
    raw): the sender sends an encoded packet at once, where a raw frame would wait for a worker
    thread.
    """

    kind = "audio"
    # False: hand the sender raw frames, which it encodes in its worker thread (aiortc's own way,
    # kept to measure against: bench/webrtc_latency.py --encode both)
    encode_on_loop: ClassVar[bool] = True

    def __init__(self, *, idle_fill_s: float | None = None) -> None:
        super().__init__()
        self.idle_fill_s = idle_fill_s
        self._chunks: deque[NDArray[np.int16]] = deque()
        self._pending = 0
        self._wake = asyncio.Event()
        self._last_emit: float | None = None
        self._filling = False
        self.samples_emitted = 0
        self.silence_emitted = 0  # samples of idle fill
        self._sent = 0  # samples the sender has handed to the transport
        self._after_sent: deque[tuple[int, Callable[[], None]]] = deque()
        self._encoder: OpusEncoder | None = None
        self._encoded: deque[Packet[Any]] = deque()  # packets of a frame not handed over yet

    def push(self, samples: NDArray[Any]) -> None:
        pcm = _to_pcm16(samples)
        if pcm.size and self.readyState == "live":
            self._chunks.append(pcm)
            self._pending += pcm.size
            self._wake.set()

    def clear(self) -> None:
        """Drop everything not sent yet (a barge-in flush)."""
        self._chunks.clear()
        self._pending = 0
        self._after_sent = deque((min(at, self.samples_emitted), fn) for at, fn in self._after_sent)
        self._run_after_sent()

    def after_sent(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` once the samples pushed so far have been sent (at once if they have)."""
        self._after_sent.append((self.samples_emitted + self._pending, fn))
        self._run_after_sent()

    def _run_after_sent(self) -> None:
        while self._after_sent and (
            self._after_sent[0][0] <= self._sent or self.readyState != "live"
        ):
            self._after_sent.popleft()[1]()

    @property
    def pending(self) -> int:
        return self._pending

    def stop(self) -> None:
        super().stop()
        self._wake.set()
        self._run_after_sent()

    async def recv(self) -> Packet[Any] | AudioFrame:  # aiortc sends either
        """The next frame, encoded: the sender packs it and sends it in this iteration."""
        self._sent = self.samples_emitted  # the sender is back for more: the last frame went out
        self._run_after_sent()
        if not self.encode_on_loop:
            return await self.next_frame()
        while not self._encoded:
            frame = await self.next_frame()
            if self._encoder is None:
                self._encoder = OpusEncoder()
            payloads, timestamp = self._encoder.encode(frame)
            for payload in payloads:  # one per 20 ms frame; none while the encoder fills
                packet = Packet(payload)
                packet.pts = timestamp
                packet.time_base = _TIME_BASE
                self._encoded.append(packet)
        return self._encoded.popleft()

    async def next_frame(self) -> AudioFrame:
        """The next 20 ms frame as pushed (or filled), once there is one."""
        loop = asyncio.get_running_loop()
        while self._pending < FRAME:
            if self.readyState != "live":
                raise MediaStreamError
            deadline = self._fill_deadline()
            self._wake.clear()
            try:
                if deadline is None:
                    await self._wake.wait()
                else:
                    await asyncio.wait_for(self._wake.wait(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                if self._pending < FRAME and self.readyState == "live":
                    self._filling = True
                    self.silence_emitted += FRAME
                    return self._frame(np.zeros(FRAME, dtype=np.int16), loop.time())
        if self.readyState != "live":
            raise MediaStreamError
        self._filling = False
        return self._frame(self._take(FRAME), loop.time())

    def _fill_deadline(self) -> float | None:
        if self._last_emit is None or self.idle_fill_s is None:
            return None
        return self._last_emit + (FRAME_S if self._filling else self.idle_fill_s)

    def _take(self, n: int) -> NDArray[np.int16]:
        out = np.empty(n, dtype=np.int16)
        filled = 0
        while filled < n:
            head = self._chunks[0]
            k = min(n - filled, head.size)
            out[filled : filled + k] = head[:k]
            filled += k
            if k == head.size:
                self._chunks.popleft()
            else:
                self._chunks[0] = head[k:]
        self._pending -= n
        return out

    def _frame(self, pcm: NDArray[np.int16], now: float) -> AudioFrame:
        frame = AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = RATE
        frame.pts = self.samples_emitted
        frame.time_base = _TIME_BASE
        self.samples_emitted += pcm.size
        self._last_emit = now
        return frame


# --- the receive buffer -----------------------------------------------------------------------


class PassThroughJitterBuffer(JitterBuffer):
    """Hands every audio packet to the decoder as it is read (an Opus packet is one whole frame),
    so frames come out in sequence order as their packets come in. Drops duplicates and packets
    older than the newest one seen (reordered too late to play); a lost packet is simply missing.

    ``handed`` counts the packets given to the decoder. With a ``clock`` the buffer also notes
    when each was read, for ``read_at``: the receiver numbers a stream's frames (their pts) from
    the RTP timestamp of the first packet it decodes (aiortc's ``TimestampMapper``), and so does
    this buffer.
    """

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        super().__init__(capacity=16)
        self._clock = clock
        self._last_seq: int | None = None
        self._first_timestamp: int | None = None
        # (pts, handed, clock()) per packet whose frame was not read yet
        self._reads: deque[tuple[int, int, float]] = deque(maxlen=256)
        self.handed = 0

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        seq = packet.sequence_number
        if self._last_seq is not None and not 0 < (seq - self._last_seq) % 65536 < 32768:
            return False, None
        self._last_seq = seq
        self.handed += 1
        if self._clock is not None:
            if self._first_timestamp is None:
                self._first_timestamp = packet.timestamp
            pts = (packet.timestamp - self._first_timestamp) % (1 << 32)
            self._reads.append((pts, self.handed, self._clock()))
        data: bytes = getattr(packet, "_data", packet.payload)
        return False, JitterFrame(data=data, timestamp=packet.timestamp)

    def read_at(self, pts: int | None) -> tuple[float, int] | None:
        """(when its packet was read, packets handed up to it) for the decoded frame ``pts``, or
        None if that is not known. Packets before it that left no frame are forgotten."""
        if pts is None:
            return None
        while self._reads and self._reads[0][0] < pts:
            self._reads.popleft()
        if not self._reads or self._reads[0][0] != pts:
            return None
        _, handed, t = self._reads.popleft()
        return t, handed


_BUFFER_ATTR = "_RTCRtpReceiver__jitter_buffer"


def bypass_jitter_buffer(
    receiver: RTCRtpReceiver, clock: Callable[[], float] | None = None
) -> PassThroughJitterBuffer:
    """Replace an audio receiver's 4-packet JitterBuffer with ``PassThroughJitterBuffer(clock)``
    (and return it).

    Call it before media flows (any time before the connection is up). It sets a private aiortc
    attribute, so it checks the attribute is there and raises if aiortc changed.
    """
    current = getattr(receiver, _BUFFER_ATTR, None)
    if not isinstance(current, JitterBuffer):
        raise RuntimeError("this aiortc version has no RTCRtpReceiver jitter buffer to replace")
    if isinstance(current, PassThroughJitterBuffer):
        return current
    buffer = PassThroughJitterBuffer(clock)
    setattr(receiver, _BUFFER_ATTR, buffer)
    return buffer

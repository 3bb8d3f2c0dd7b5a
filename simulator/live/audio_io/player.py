"""Playing sessions as they run: what was sent and what the model said, on the session timeline.

A session hands its audio to a ``PlayerTap`` (one deque append per frame or chunk, nothing else on
the session's loop); the player's own thread resamples, mixes and writes it to an ``AudioOutput``
``latency_s`` behind the session's clock. The delay is a jitter buffer: model audio that arrives in
bursts is still heard where the timeline places it. Audio placed further behind than that is too
late to be heard (counted in ``late_samples``); the recording is unaffected.

One session plays at a time: ``claim()`` hands out the tap only while no other session holds it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import soxr

from duplexsim.live.audio_io.base import AudioOutput, FloatArray

__all__ = ["Player", "PlayerTap"]

log = logging.getLogger(__name__)

POLL_S = 0.005  # how often the thread looks for new audio while a session plays
IDLE_WAIT_S = 0.05
CLOSE_GRACE_S = 1.0  # close() waits this long beyond the latency for a session's tail


class _Lane:
    """One source (user or model) at its own rate, resampled to the device rate on the fly.

    Contiguous chunks go through one resampling stream; a gap starts a new one at its position.
    """

    def __init__(self, src_rate: int, dst_rate: int) -> None:
        self.src_rate = src_rate
        self.dst_rate = dst_rate
        self.stream: Any = None
        self.next_src = -1  # where the next contiguous chunk starts, in source samples
        self.pos = 0  # device-rate position of the stream's next output sample

    def push(self, samples: FloatArray, start_s: float) -> list[tuple[int, FloatArray]]:
        start = round(start_s * self.src_rate)
        if self.src_rate == self.dst_rate:
            return [(start, samples)]
        out = [] if start == self.next_src else self.flush()
        if self.stream is None:
            self.stream = soxr.ResampleStream(self.src_rate, self.dst_rate, 1, dtype="float32")
            self.pos = round(start * self.dst_rate / self.src_rate)
        y = np.asarray(self.stream.resample_chunk(samples), dtype=np.float32)
        out.append((self.pos, y))
        self.pos += y.size
        self.next_src = start + samples.size
        return out

    def flush(self) -> list[tuple[int, FloatArray]]:
        if self.stream is None:
            return []
        y = np.asarray(self.stream.resample_chunk(np.zeros(0, np.float32), last=True))
        out = [(self.pos, y.astype(np.float32))]
        self.stream = None
        self.next_src = -1
        return out


class _Timeline:
    """The mix of one session at the device rate, and how much of it has been played."""

    def __init__(self, t0: float, input_rate: int, output_rate: int, rate: int) -> None:
        self.t0 = t0
        self.lanes = {"user": _Lane(input_rate, rate), "model": _Lane(output_rate, rate)}
        self.mix = np.zeros(rate * 30, dtype=np.float32)
        self.extent = 0  # samples: end of everything mixed in
        self.played = 0  # samples written to the device
        self.ending = False
        self.late = 0

    def add(self, pos: int, y: FloatArray) -> None:
        if pos < self.played:  # its place on the timeline has been played already
            skip = min(self.played - pos, y.size)
            self.late += skip
            pos, y = pos + skip, y[skip:]
        if y.size == 0:
            return
        stop = pos + y.size
        if stop > self.mix.size:
            bigger = np.zeros(max(stop, 2 * self.mix.size), dtype=np.float32)
            bigger[: self.extent] = self.mix[: self.extent]
            self.mix = bigger
        self.mix[pos:stop] += y
        self.extent = max(self.extent, stop)

    def block(self, n: int) -> FloatArray:
        lo, hi = self.played, self.played + n
        out = np.zeros(n, dtype=np.float32)
        avail = max(0, min(hi, self.mix.size) - lo)
        out[:avail] = self.mix[lo : lo + avail]
        self.played = hi
        return np.clip(out, -1.0, 1.0, out=out)


class PlayerTap:
    """What a session calls (from the event loop): appends to the player's queue and returns."""

    __slots__ = ("_include_user", "_player", "_queue")

    def __init__(self, player: Player, include_user: bool) -> None:
        self._player = player
        self._queue = player.queue
        self._include_user = include_user

    def on_start(self, t0: float, input_rate: int, output_rate: int) -> None:
        self._queue.append(("start", t0, input_rate, output_rate))
        self._player.wake.set()

    def on_sent(self, samples: FloatArray, start_s: float) -> None:
        if self._include_user:
            self._queue.append(("user", samples, start_s))

    def on_placed(self, samples: FloatArray, start_s: float) -> None:
        self._queue.append(("model", samples, start_s))

    def on_end(self) -> None:
        self._queue.append(("end",))
        self._player.wake.set()


class Player:
    """Plays one session at a time on ``output``, ``latency_s`` behind its timeline.

    ``include_user``: mix the sent audio in (``run --monitor``); ``talk`` plays the model only,
    since the person hears their own voice already.
    """

    def __init__(
        self,
        output: AudioOutput,
        *,
        latency_s: float = 0.15,
        include_user: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.output = output
        self.rate = output.rate
        self.latency_s = latency_s
        self.include_user = include_user
        self.clock = clock
        self.queue: deque[tuple[Any, ...]] = deque()
        self.wake = threading.Event()
        self.sessions_played = 0
        self.late_samples = 0
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._busy = False
        self._closing = False
        self._idle = threading.Event()
        self._idle.set()
        self._session: _Timeline | None = None
        self._thread = threading.Thread(target=self._run, name="duplexsim-player", daemon=True)
        self._thread.start()

    def claim(self) -> PlayerTap | None:
        """The tap for one session, or None while another session is playing."""
        with self._lock:
            if self._busy or self._closing or self.error is not None:
                return None
            self._busy = True
            self._idle.clear()
        return PlayerTap(self, self.include_user)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no session is playing (its tail included); False on timeout."""
        return self._idle.wait(timeout)

    def close(self) -> None:
        """Let the session that is playing finish (its tail is at most the latency long), then
        stop the thread and close the output."""
        self._idle.wait(self.latency_s + CLOSE_GRACE_S)
        with self._lock:
            self._closing = True
        self.wake.set()
        self._thread.join(timeout=self.latency_s + CLOSE_GRACE_S)
        self.output.close()

    def __enter__(self) -> Player:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------- the player's thread

    def _run(self) -> None:
        try:
            while not (self._closing and self._session is None and not self.queue):
                self._drain()
                if self._session is None:
                    self.wake.wait(IDLE_WAIT_S)
                    self.wake.clear()
                elif not self._play(self._session):
                    time.sleep(POLL_S)
        except Exception as exc:  # the run goes on without its monitor
            self.error = exc
            log.warning("audio playback stopped: %s", exc)
            self._release()

    def _drain(self) -> None:
        while self.queue:
            item = self.queue.popleft()
            kind = item[0]
            s = self._session
            if kind == "start":
                self._session = _Timeline(item[1], item[2], item[3], self.rate)
            elif kind == "end":
                if s is None:
                    self._release()  # the session never started (it failed to connect)
                else:
                    for lane in s.lanes.values():
                        for pos, y in lane.flush():
                            s.add(pos, y)
                    s.ending = True
            elif s is not None:
                for pos, y in s.lanes[kind].push(item[1], item[2]):
                    s.add(pos, y)

    def _play(self, s: _Timeline) -> bool:
        """Write the next block if it is due; False when there is nothing to do yet."""
        block = self.output.block
        if s.ending and s.played >= s.extent:
            self._finish(s)
            return True
        due = s.t0 + self.latency_s + (s.played + block) / self.rate
        if self.clock() < due:
            return False
        self.output.write(s.block(block))
        return True

    def _finish(self, s: _Timeline) -> None:
        self.late_samples += s.late
        self.sessions_played += 1
        if s.late:
            log.info("monitor: %.3f s of model audio arrived too late to play", s.late / self.rate)
        self._session = None
        self._release()

    def _release(self) -> None:
        with self._lock:
            self._busy = False
            self._idle.set()

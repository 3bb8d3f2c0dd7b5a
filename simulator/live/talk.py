"""``duplexsim talk``: a person probes a model by voice.

The microphone streams to the model continuously (full duplex: the person can talk over the
reply), the model's audio plays through the output device on the session timeline, and every turn
is recorded like a benchmark session: ``runs/<run-id>/sessions/talk-001/`` with a results row, so
``view``, ``score`` and ``report`` work on it. A turn ends when the microphone has been quiet for
``end_of_turn_ms`` after speech (or after ``max_turn_s``, or at the end of the input); then the
usual reply detection applies, and the next turn starts with a fresh session.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import signal
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import soxr

from duplexsim import __version__
from duplexsim.clients.registry import client_class
from duplexsim.core.bundle import BundleMeta, SampleRef
from duplexsim.core.errors import ConfigError
from duplexsim.core.names import check_name
from duplexsim.core.vad import StreamingVad, VadConfig
from duplexsim.live.audio_io import AudioInput, AudioOptions, Player, open_input, open_output
from duplexsim.live.audio_io.base import FloatArray
from duplexsim.profiles.profile import ModelProfile, client_config
from duplexsim.run.recording import record_session
from duplexsim.run.rows import outcome_row
from duplexsim.run.runner import Endpoint, _check_writable, _endpoint
from duplexsim.run.store import ResultRow, RunStore, store_filename
from duplexsim.session.engine import LiveSource, SessionOutcome, SessionSettings, run_session

__all__ = ["MicTurn", "Microphone", "TalkOptions", "talk"]

log = logging.getLogger(__name__)

SOURCE = "microphone"
MIN_SPEECH_MS = 100  # voiced audio this long is speech, not a click
IDLE_WAIT_S = 2.0  # how long a turn waits for the previous reply to finish playing


@dataclass(frozen=True)
class TalkOptions:
    run_id: str
    runs_dir: Path
    settings: SessionSettings = field(default_factory=SessionSettings)
    audio: AudioOptions = field(default_factory=AudioOptions)
    turns: int | None = None  # stop after this many turns (None: until Ctrl-C or end of input)
    max_turn_s: float = 30.0  # the longest a turn of the person's can last
    end_of_turn_ms: int = 800  # microphone quiet this long after speech ends the turn

    def __post_init__(self) -> None:
        check_name(self.run_id, "run id")
        if self.turns is not None and self.turns < 1:
            raise ConfigError("--turns must be at least 1")
        if self.max_turn_s <= 0:
            raise ConfigError("--seconds must be > 0")
        if self.end_of_turn_ms < 100:
            raise ConfigError("--end-of-turn-ms must be at least 100")

    @property
    def run_dir(self) -> Path:
        return self.runs_dir / self.run_id


class Microphone:
    """An ``AudioInput`` read by its own thread from the first turn on; blocks reach the loop
    through a queue, so the loop never waits on the device."""

    def __init__(self, device: AudioInput) -> None:
        self.device = device
        self.rate = device.rate
        self.ended = False  # the input is over (a fake microphone's clip ran out)
        self._queue: asyncio.Queue[FloatArray | None] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _start(self) -> asyncio.Queue[FloatArray | None]:
        if self._queue is None:
            self._queue = asyncio.Queue()
            loop = asyncio.get_running_loop()
            self._thread = threading.Thread(
                target=self._pump, args=(loop, self._queue), name="duplexsim-mic", daemon=True
            )
            self._thread.start()
        return self._queue

    def _pump(
        self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[FloatArray | None]
    ) -> None:
        block: FloatArray | None = None
        while not self._stop.is_set():
            try:
                block = self.device.read()
            except Exception as exc:  # a device failure ends the input, it never hangs a turn
                log.warning("microphone stopped: %s", exc)
                block = None
            try:
                loop.call_soon_threadsafe(queue.put_nowait, block)
            except RuntimeError:  # the loop is closed: nobody listens any more
                return
            if block is None:
                return

    def discard(self) -> None:
        """Drop what was captured while nobody listened (between turns)."""
        queue = self._start()
        while not queue.empty():
            if queue.get_nowait() is None:
                self.ended = True

    async def read(self) -> FloatArray | None:
        if self.ended:
            return None
        block = await self._start().get()
        if block is None:
            self.ended = True
        return block

    def close(self) -> None:
        self._stop.set()
        self.device.close()  # wakes a reader waiting for the device
        if self._thread is not None:
            self._thread.join(timeout=2.0)


class MicTurn:
    """One turn's worth of microphone as a ``LiveInput``: frames at the session's rate, and the
    decision that the person's turn is over."""

    def __init__(
        self, mic: Microphone, *, end_of_turn_s: float, max_turn_s: float, vad: VadConfig
    ) -> None:
        self.mic = mic
        self.end_of_turn_s = end_of_turn_s
        self.max_turn_s = max_turn_s
        self.vad_config = VadConfig(kind=vad.kind, aggressiveness=vad.aggressiveness)
        self.turn_ended = False
        self.stop_requested = False  # Ctrl-C: end the turn now, no further turns
        self.heard_speech = False
        self._rate = 16000
        self._frame_len = 320
        self._pending = np.zeros(0, dtype=np.float32)
        self._resampler: Any = None
        self._vad: StreamingVad | None = None
        self._samples = 0
        self._voiced_run = 0
        self._quiet = 0

    @property
    def input_ended(self) -> bool:
        return self.mic.ended

    async def start(self, rate: int, frame_len: int) -> None:
        self._rate, self._frame_len = rate, frame_len
        self.mic.discard()
        if self.mic.rate != rate:
            self._resampler = soxr.ResampleStream(self.mic.rate, rate, 1, dtype="float32")
        self._vad = StreamingVad(rate, self.vad_config)
        # one frame of headroom: devices and resamplers deliver in bursts, the schedule does not
        await self._fill(2 * frame_len)

    async def read(self) -> FloatArray:
        await self._fill(self._frame_len)
        frame = self._pending[: self._frame_len]
        self._pending = self._pending[self._frame_len :]
        if not self.turn_ended:
            self._observe(frame)
        return frame

    async def _fill(self, n: int) -> None:
        while self._pending.size < n:
            block = await self.mic.read()
            if block is None:  # the input is over: silence keeps the session going
                block = np.zeros(n - self._pending.size, dtype=np.float32)
            elif self._resampler is not None:
                block = np.asarray(self._resampler.resample_chunk(block), dtype=np.float32)
            self._pending = np.concatenate((self._pending, block))

    def _observe(self, frame: FloatArray) -> None:
        assert self._vad is not None
        self._samples += frame.size
        frame_s = self.vad_config.frame_s
        for voiced in self._vad.push(frame):
            if voiced:
                self._voiced_run += 1
                self._quiet = 0
                self.heard_speech |= self._voiced_run * frame_s * 1000 >= MIN_SPEECH_MS
            else:
                self._voiced_run = 0
                self._quiet += 1
        self.turn_ended = (
            (self.heard_speech and self._quiet * frame_s >= self.end_of_turn_s)
            or self._samples >= self.max_turn_s * self._rate
            or self.mic.ended
            or self.stop_requested
        )


def _open_store(opts: TalkOptions, profile: ModelProfile) -> tuple[RunStore, int]:
    """The run's results, and the number of the next turn (a rerun of the id continues it)."""
    _check_writable(opts.run_dir)
    store = RunStore(opts.run_dir / store_filename(None))
    existing = store.meta()
    if existing and (
        existing.get("model", {}).get("name") != profile.name or existing.get("benchmark") != SOURCE
    ):
        store.close()
        raise ConfigError(
            f"run '{opts.run_id}' already holds other results; choose another --run-id"
        )
    store.set_meta(
        {
            "run_id": opts.run_id,
            "model": profile.describe(),
            "benchmark": SOURCE,
            "settings": opts.settings.describe(),
            "duplexsim": __version__,
            "created": existing.get("created", datetime.now(UTC).isoformat()),
        }
    )
    numbers = [int(r.sample_id[5:]) for r in store.rows() if r.sample_id[5:].isdigit()]
    return store, max(numbers, default=0) + 1


def turn_line(sample_id: str, outcome: SessionOutcome) -> str:
    t = outcome.timing
    if outcome.status == "failed":
        return f"{sample_id}: failed: {outcome.error}"
    if outcome.status != "ok" or t is None or t.latency_s is None:
        return f"{sample_id}: {outcome.status} ({outcome.end_reason})"
    return (
        f"{sample_id}: replied after {t.latency_s:+.2f} s, {t.duration_s or 0:.1f} s long "
        f"({outcome.end_reason})"
    )


class _Talk:
    def __init__(self, profile: ModelProfile, opts: TalkOptions, say: Callable[[str], None]):
        self.profile = profile
        self.opts = opts
        self.say = say
        self.turn: MicTurn | None = None
        self.stopping = False
        self.task: asyncio.Task[Any] | None = None

    def interrupt(self) -> None:
        """First Ctrl-C: end the person's turn now, record the reply, stop. Second: stop now."""
        if self.stopping and self.task is not None:
            self.task.cancel()
            return
        self.stopping = True
        if self.turn is not None:
            self.turn.stop_requested = True
        self.say("stopping after this turn (Ctrl-C again to stop now)")

    async def run(
        self, store: RunStore, first: int, mic: Microphone, speaker: Player
    ) -> list[ResultRow]:
        rows: list[ResultRow] = []
        async with _endpoint(self.profile, None) as endpoint:
            for number in itertools.count(first):
                if self.stopping or (self.opts.turns and len(rows) >= self.opts.turns):
                    break
                row, failed = await self._turn(f"talk-{number:03d}", endpoint, mic, speaker)
                store.put(row)
                rows.append(row)
                if failed or mic.ended:
                    break
        return rows

    async def _turn(
        self, sample_id: str, endpoint: Endpoint, mic: Microphone, speaker: Player
    ) -> tuple[ResultRow, bool]:
        opts = self.opts
        url = endpoint.url
        client = client_class(self.profile.protocol)(client_config(self.profile, url=url))
        self.turn = turn = MicTurn(
            mic,
            end_of_turn_s=opts.end_of_turn_ms / 1000,
            max_turn_s=opts.max_turn_s,
            vad=opts.settings.vad,
        )
        turn.stop_requested = self.stopping
        await asyncio.to_thread(speaker.wait_idle, IDLE_WAIT_S)
        self.say(f"{sample_id}: speak now (a pause of {opts.end_of_turn_ms} ms ends the turn)")
        outcome = await run_session(
            client,
            LiveSource(turn),
            opts.settings,
            tap=speaker.claim(),
            server_stalls=endpoint.server_stalls,
        )
        folder = opts.run_dir / "sessions" / sample_id
        meta = self._meta(sample_id, client.describe(), asdict(client.capabilities), outcome)
        row = outcome_row(sample_id, "", "", outcome, 1, folder, opts.run_dir)
        await asyncio.to_thread(record_session, folder, outcome, meta)
        self.say(turn_line(sample_id, outcome))
        return row, outcome.status == "failed"

    def _meta(
        self, sample_id: str, client: dict[str, Any], caps: dict[str, Any], out: SessionOutcome
    ) -> BundleMeta:
        opts, audio = self.opts, self.opts.audio
        # where the turn ended on the timeline (not when the session saw it: a loaded loop is late)
        context_end = next((e["end_s"] for e in out.events if e["kind"] == "context_end"), None)
        return BundleMeta(
            # live: the person's audio is input.wav and there is nothing to mirror
            sample=SampleRef(id=sample_id, kind="live", context_turn_start_s=0.0),
            run_id=opts.run_id,
            model=self.profile.describe(),
            client=client,
            capabilities=caps,
            settings=opts.settings.describe(),
            outcome={},  # filled in by record_session
            attempts=1,
            extra={
                "source": SOURCE,
                "talk": {
                    "end_of_turn_ms": opts.end_of_turn_ms,
                    "max_turn_s": opts.max_turn_s,
                    "turn_end_s": context_end,
                    "audio_backend": audio.backend,
                    "input_device": audio.input_device,
                    "output_device": audio.output_device,
                    "audio_rate": audio.rate,
                    "latency_ms": audio.latency_ms,
                },
            },
        )


async def talk(
    profile: ModelProfile, opts: TalkOptions, *, say: Callable[[str], None] = print
) -> list[ResultRow]:
    """Talk turns until ``opts.turns``, Ctrl-C or the end of the input; returns this call's rows."""
    client_class(profile.protocol)  # unknown protocol fails before anything starts
    if profile.fake_behaviour is None or profile.url is not None:
        client_config(profile)
    rate = opts.audio.rate
    cleanup = contextlib.ExitStack()  # closed in reverse: signal handler, store, mic, speaker
    try:
        speaker = Player(
            open_output(opts.audio, rate),
            latency_s=opts.audio.latency_ms / 1000,
            include_user=False,
        )
        cleanup.callback(speaker.close)
        mic = Microphone(open_input(opts.audio, rate))
        cleanup.callback(mic.close)
        store, first = _open_store(opts, profile)
        cleanup.callback(store.close)
        say(f"talking to {profile.name}; Ctrl-C ends after the current turn")  # devices are open
        session = _Talk(profile, opts, say)
        session.task = asyncio.current_task()
        if _on_sigint(session.interrupt):
            cleanup.callback(asyncio.get_running_loop().remove_signal_handler, signal.SIGINT)
        return await session.run(store, first, mic, speaker)
    finally:
        cleanup.close()


def _on_sigint(handler: Callable[[], None]) -> bool:
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        asyncio.get_running_loop().add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError):  # no signal handlers on this platform/loop
        return False
    return True

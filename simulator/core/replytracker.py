"""The model's reply as it streams in: one object that owns the output track, the streaming VAD,
the detector and the reply window, and answers whether there is a reply, where it starts and
ends, and whether it was cut (pure: the session feeds it audio, events and the time).

Audio is placed on the timeline by the track alone; the VAD hears what is placed, once it is
final (nothing is placed before the track's audible end), in batches of at least 100 ms and
always before the detector may decide; its speech frames, less those before the reply window,
are the detector's, and the same frames give the reply's timing, refined to the sample. A
re-measurement of the recording (``timing.measure_reply``) makes the same decision: the same
run and onset rules (``vad``) and the same window (``turns.ReplyWindow``).

The speech frames go to a ``Conversation``: the reply to the user's turn (turn 0, the context),
and to every turn a partner opens (``core.partner``): it reads its decisions from this tracker
(``ReplyView``: ``heard_s`` and ``reply``), the one decision of the session.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.conversation import Conversation
from duplexsim.core.partner import ReplyState
from duplexsim.core.timeline import OutputTrack, Placement
from duplexsim.core.timing import ReplyTiming, reply_timing
from duplexsim.core.turns import EndReason, ReplyDetector, ReplyWindow, TurnSettings
from duplexsim.core.vad import StreamingVad, VadConfig, refine_bounds

__all__ = ["ReplyTracker"]

FloatArray = NDArray[np.float32]


class ReplyTracker:
    """``continuous``: the model sends its silence (its own audio time paces the hangover);
    otherwise time passing is its silence."""

    def __init__(
        self,
        rate: int,
        turns: TurnSettings,
        vad: VadConfig,
        *,
        window_start_s: float = 0.0,
        bridge_s: float = 0.1,
        continuous: bool = True,
    ) -> None:
        self.turns = turns
        self.vad_cfg = vad
        self.continuous = continuous
        self.window = ReplyWindow(window_start_s)
        self.track = OutputTrack(rate, bridge_s=bridge_s)
        self.bridge_s = bridge_s
        # the user's turns and the reply to each; the context's ends where the session says
        # (``context_ended``)
        self.replies = Conversation(turns, window_start_s=window_start_s, refine=self._refine)
        # a user who listens (a partner) reads the decisions after every frame: the VAD keeps up
        self.every_frame = False
        self._vad = StreamingVad(rate, vad)
        self._heard = 0  # samples of the track the VAD has had
        self._finished = False  # the stream is over and the VAD has had all of it
        self._batch = rate // 10
        self.closed_at_s: float | None = None  # where the model's stream stopped, if it closed
        self._ended: list[tuple[int, str]] = []  # replies ended since ``ended_turns`` was asked

    @property
    def detector(self) -> ReplyDetector:
        """The reply to the context: the session's own."""
        return self.replies.first

    # what the session tells it

    def place(
        self, samples: FloatArray, arrival_s: float, offset_s: float | None, *, silent: bool
    ) -> Placement:
        return self.track.place(samples, arrival_s, offset_s, silent=silent)

    def context_ended(self, end_s: float) -> None:
        """The user's turn ended at ``end_s`` on the timeline."""
        self.replies.set_context_end(end_s)

    def end_of_turn(self, now_s: float) -> None:
        """The protocol says the reply is complete; a burst sent faster than real time is over
        only once it has played out."""
        self.advance()
        self.replies.end_of_turn(max(now_s, self.track.end_s))

    def tick(self, now_s: float) -> EndReason | None:
        """The media time sent is ``now_s``: the VAD catches up in batches, and always before an
        ending; then the detector decides (on the VAD's last speech)."""
        if (
            self.every_frame
            or self.track.end_samples - self._heard >= self._batch
            or self.replies.pending(now_s, self.model_at)
        ):
            self.advance()
        if self.every_frame:
            self.replies.heard(self.heard_s_at(now_s))
        self._ended += self.replies.tick(now_s, self.model_at)
        return self.detector.ended

    def ended_turns(self) -> list[tuple[int, str]]:
        """The replies that ended (or stopped, talked over) since the last call: (turn, why)."""
        ended, self._ended = self._ended, []
        return ended

    def closed(self, seen_s: float) -> None:
        """The model's stream closed; ``seen_s`` is when that was seen on the timeline."""
        self.finish()
        self.closed_at_s = self._stream_end_s(seen_s)

    def advance(self) -> None:
        """Feed the VAD everything placed since the last call (all of it final)."""
        end = self.track.end_samples
        if end <= self._heard or self._finished:
            return
        spans = self._vad.speech(self.track.segment(self._heard, end))
        self._heard = end
        self._voiced(spans)
        self.replies.heard(self._vad.decided_frames * self.vad_cfg.frame_s)

    def finish(self) -> None:
        """The stream is over: the VAD decides on its last audio too, which it otherwise holds
        until more comes (a partial frame, the resampler's)."""
        if not self._finished:
            self.advance()
            self._finished = True
            self._voiced(self._vad.finish())
            self.replies.heard(self._vad.decided_frames * self.vad_cfg.frame_s)

    def _voiced(self, spans: list[tuple[int, int]]) -> None:
        frame_s = self.vad_cfg.frame_s
        for span in spans:
            kept = self.window.clip(*span, frame_s)
            if kept is not None:
                self.replies.voiced(kept[0] * frame_s, kept[1] * frame_s)

    # what it answers

    @property
    def onset_s(self) -> float | None:
        """The reply's onset at the VAD's resolution (None: no reply yet)."""
        return self.detector.onset_s

    @property
    def ended(self) -> EndReason | None:
        return self.detector.ended

    def model_s(self) -> float | None:
        """How far the model's own audio has got past the context's reply."""
        return self.model_at(self.detector.last_voiced_end_s)

    def model_at(self, last: float | None) -> float | None:
        """How far the model's own audio has got past its speech ending at ``last``: a stream
        that sends its silence is heard out in its own time (its last speech and the stream after
        it, however late it came); for others time passing is their silence (None: now)."""
        if not self.continuous:
            return None
        if last is None:
            return self.track.stream_end_s
        return last + self.track.stream_after_s(last)

    def _stream_end_s(self, seen_s: float) -> float:
        """Where the model's stream stopped, as the detector counts its silence: its own audio
        time, or when the close was seen unless audio sent ahead still plays out."""
        model = self.model_s()
        return model if model is not None else max(seen_s, self.track.stream_end_s)

    @property
    def heard_s(self) -> float:
        """The model's speech is decided up to here (``ReplyView``)."""
        return self.replies.heard_s

    def heard_s_at(self, now_s: float) -> float:
        """How far the model's speech is decided at media time ``now_s``: the VAD's final
        frames, and past the audible end the silence the model has sent since (a stream that
        sends nothing: time passing, less the bridge a late chunk may still close), once the VAD
        has had all of the audible audio. A run found later may reach back over a soft onset
        (the onset rule): a pause judged here is shortened by at most that."""
        frame_s = self.vad_cfg.frame_s
        if self._heard < self.track.end_samples:
            return self._vad.decided_frames * frame_s
        silence = self.track.stream_end_s if self.continuous else now_s - self.bridge_s
        return self._vad.decided_through_silence(math.floor(silence / frame_s + 1e-9)) * frame_s

    def reply(self, turn: int) -> ReplyState:
        """The reply to user turn ``turn`` as decided so far (``ReplyView``)."""
        return self.replies.reply(turn)

    def open_turn(self, start_s: float, end_s: float, speech_end_s: float | None = None) -> int:
        """A partner's user turn from ``start_s`` to ``end_s``: the model's next speech answers
        it (a reply still open is talked over)."""
        return self.replies.open_turn(start_s, end_s, speech_end_s)

    def _refine(self, onset_s: float, end_s: float) -> float:
        """An onset on the VAD's frames, to the sample as ``timing`` refines it (the audio up to
        its first sample at the edge level is final once those frames are speech)."""
        frame_s = self.vad_cfg.frame_s
        first, end = round(onset_s / frame_s), round(end_s / frame_s)
        frame = self.track.rate * self.vad_cfg.frame_ms // 1000
        x = self.track.segment(0, (max(end, first + 1) + 2) * frame)
        return refine_bounds(x, self.track.rate, first, max(end, first + 1), self.vad_cfg)[0]

    def timing(self, speech_end_s: float | None, output: FloatArray, turn: int = 0) -> ReplyTiming:
        """The reply's timing from the detector's speech frames, refined to the sample on the
        track (``output``, the track's audio); ``turn``: the reply to that user turn."""
        d = self.replies.turns[turn].detector
        if d.onset_s is None or d.last_voiced_end_s is None:
            return ReplyTiming(speech_end_s, None, None, None, None, 0.0)
        frame_s = self.vad_cfg.frame_s
        end_s = d.last_voiced_end_s
        limits = [d.onset_s + self.turns.max_reply_s]
        if d.ended_at_s is not None:
            limits.append(d.ended_at_s)
        end_s = min(end_s, *limits)
        first, end = round(d.onset_s / frame_s), round(end_s / frame_s)
        rate = self.track.rate
        return reply_timing(output, rate, first, max(end, first + 1), speech_end_s, self.vad_cfg)

    def truncated(self, deadline: bool) -> str | None:
        """Why the reply was cut short, if it was: its maximum length, the session's deadline, or
        a server that closed while the model was still speaking (its last speech reaches the end
        of its stream, within two VAD frames: the last one may be partial). Silence the model
        sent, or let pass, before the close is not a cut."""
        d = self.detector
        if d.onset_s is None:
            return None
        if deadline and d.ended is None:
            return "deadline"
        if d.ended is EndReason.MAX_LENGTH:
            return EndReason.MAX_LENGTH.value
        closed, last = self.closed_at_s, d.last_voiced_end_s
        if closed is not None and last is not None and last >= closed - 2 * self.vad_cfg.frame_s:
            return "server-closed"
        return None

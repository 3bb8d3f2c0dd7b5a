"""The latency window's pure parts, exact: the sends that count (from the frame holding the
user's speech end to the reply's onset; for a model that answers each frame as it arrives, the
frame the onset answers), the window from its parts, and the chunk that holds the onset (when
it was stamped)."""

from __future__ import annotations

import pytest

from duplexsim.core.records import EventRecords
from duplexsim.core.timing import (
    LatencyWindow,
    ReplyTiming,
    answered_send,
    latency_window,
    window_send_s,
)

FRAME_S = 0.02


def timing(speech_end_s: float | None, onset_s: float | None) -> ReplyTiming:
    return ReplyTiming(speech_end_s, onset_s, None, None, None, 0.0)


def test_only_the_sends_from_the_speech_end_to_the_onset_count() -> None:
    due = [0.96, 0.98, 1.00, 1.02, 1.50, 1.52]
    late = [0.009, 0.001, 0.002, 0.003, 0.004, 0.008]
    sent = [d + e for d, e in zip(due, late, strict=True)]
    # speech ends at 1.0 (the frame due at 0.98 holds it), the reply starts at 1.5
    assert window_send_s(due, sent, timing(1.0, 1.5), FRAME_S) == pytest.approx(0.004)
    # a reply that talked over the user: from the frame before its onset
    assert window_send_s(due, sent, timing(1.6, 0.97), FRAME_S) == pytest.approx(0.009)
    assert window_send_s(due, sent, timing(None, 1.0), FRAME_S) == pytest.approx(0.002)
    assert window_send_s(due, sent, timing(1.0, None), FRAME_S) == 0.0
    early = [d - 0.001 for d in due]  # never negative
    assert window_send_s(due, early, timing(1.0, 1.5), FRAME_S) == 0.0
    # a reply that began after the last send (sending had stopped): no send is in its window
    assert window_send_s(due, sent, timing(1.6, 2.0), FRAME_S) == 0.0


def test_a_model_that_answers_each_frame_waited_only_on_the_frame_its_onset_answers() -> None:
    due = [0.96, 0.98, 1.00, 1.02, 1.50, 1.52]
    late = [0.009, 0.001, 0.002, 0.007, 0.004, 0.008]
    sent = [d + e for d, e in zip(due, late, strict=True)]
    # the frame due at 1.02 was 7 ms late, but the onset answers the one due at 1.50 (4 ms):
    # the frames before it left before it, so it alone says how late the model heard them
    assert window_send_s(due, sent, timing(1.0, 1.5), FRAME_S) == pytest.approx(0.007)
    assert window_send_s(due, sent, timing(1.0, 1.5), FRAME_S, 4) == pytest.approx(0.004)
    assert window_send_s(due, sent, timing(1.0, 1.5), FRAME_S, 3) == pytest.approx(0.007)
    early = [d - 0.001 for d in due]
    assert window_send_s(due, early, timing(1.0, 1.5), FRAME_S, 4) == 0.0
    assert window_send_s(due, sent, timing(1.0, None), FRAME_S, 4) == 0.0  # no reply


def test_the_frame_an_output_chunk_answers_is_the_output_before_it_in_frames() -> None:
    send_n = [0, 1, 2, 3, 4]
    send_t = [0.000, 0.021, 0.040, 0.062, 0.080]
    chunks = [320, 320, 320, 320]  # one frame each
    arrived = [0.002, 0.023, 0.042, 0.064]
    assert answered_send(send_n, send_t, chunks, arrived, 3, 320) == 3
    assert answered_send(send_n, send_t, chunks, arrived, 0, 320) == 0
    # chunks of other sizes: the output before it, in whole frames
    assert answered_send(send_n, send_t, [160, 160, 320, 320], arrived, 3, 320) == 2
    # sends from a later frame on (a resumed session): found by its number
    assert answered_send([2, 3, 4], send_t[2:], chunks, arrived, 1, 320) is None
    assert answered_send([0, 1, 3, 4], send_t[:4], chunks, arrived, 3, 320) == 2
    assert answered_send(send_n, send_t, chunks, arrived, None, 320) is None  # no chunk
    assert answered_send(send_n, send_t, chunks, arrived, 4, 320) is None  # never received
    assert answered_send(send_n, send_t, chunks * 2, arrived * 2, 6, 320) is None  # never sent


def test_an_answer_that_came_before_its_frame_was_sent_is_no_answer() -> None:
    # the model sent its fourth output frame before our fourth input frame left: it does not
    # answer frame by frame, and the whole window's sends count again
    send_n, send_t = [0, 1, 2, 3], [0.000, 0.021, 0.040, 0.065]
    arrived = [0.002, 0.023, 0.042, 0.061]
    assert answered_send(send_n, send_t, [320] * 4, arrived, 2, 320) == 2
    assert answered_send(send_n, send_t, [320] * 4, arrived, 3, 320) is None


def test_the_window_from_its_parts_in_ms() -> None:
    assert latency_window(0.0021, 0.0015, None) == LatencyWindow(2.1, 1.5, None)
    window = latency_window(0.002, 0.0, 0.00123456)
    assert window.server_stall_ms == 1.235 and window.bound_ms == pytest.approx(3.235)


def test_the_onset_is_stamped_when_its_audible_chunk_was_read() -> None:
    r = EventRecords()
    r.add_received(0.50, 320, 0.50, None, False)
    r.add_received(0.53, 320, 0.52, None, False)  # bridged: placed before its arrival
    r.add_received(0.56, 320, 0.54, None, True)  # silence holds nothing
    assert r.stamp_of(0.51, 16000) == 0.50
    assert r.stamp_of(0.52, 16000) == 0.53
    assert r.stamp_of(0.545, 16000) == 0.545  # nothing audible there: the position itself
    assert [r.chunk_of(x, 16000) for x in (0.51, 0.52, 0.545, 0.49)] == [0, 1, None, None]

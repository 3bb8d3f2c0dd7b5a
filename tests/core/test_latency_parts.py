"""The latency window's pure parts, exact: the sends that count (from the frame holding the
user's speech end to the reply's onset), the window from its parts, and the chunk that holds the
onset (when it was stamped)."""

from __future__ import annotations

import pytest

from duplexsim.core.records import EventRecords
from duplexsim.core.timing import LatencyWindow, ReplyTiming, latency_window, window_send_s

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

"""The session's event records: columns in, event dicts out, in arrival order."""

from __future__ import annotations

import pickle

import pytest

from duplexsim.core.records import EventRecords


def test_log_orders_by_time_and_keeps_arrival_order_on_ties():
    r = EventRecords()
    r.add_event(0.0, {"t": 0.0, "dir": "local", "kind": "start"})
    r.add_send(0, 0.0001, 0.0, 320)
    r.add_received(0.0213, 320, 0.0213, None, True)
    # audio and an end-of-turn read from the socket together: the same stamp, audio first
    r.add_received(0.05, 320, 0.05, 0.04, False)
    r.add_event(0.05, {"t": 0.05, "dir": "recv", "kind": "end_of_turn"})
    r.add_send(1, 0.02, 0.02, 320)
    kinds = [(e["dir"], e["kind"]) for e in r.log()]
    assert kinds == [
        ("local", "start"),
        ("send", "audio"),
        ("send", "audio"),
        ("recv", "audio"),
        ("recv", "audio"),
        ("recv", "end_of_turn"),
    ]
    first, second = (e for e in r.log() if e["dir"] == "recv" and e["kind"] == "audio")
    assert first == {"t": 0.0213, "dir": "recv", "kind": "audio", "samples": 320,
                     "placed_s": 0.0213, "offset_s": None, "silent": True}  # fmt: skip
    assert second["offset_s"] == 0.04 and second["silent"] is False
    assert r.sends == [(0, 0.0001, 0.0, 320), (1, 0.02, 0.02, 320)]


def test_records_pickle_as_columns():
    r = EventRecords()
    for n in range(750):
        r.add_send(n, n * 0.02 + 0.0005, n * 0.02, 320)
        r.add_received(n * 0.02 + 0.001, 320, n * 0.02 + 0.001, None, False)
    back = pickle.loads(pickle.dumps(r))
    assert back.log() == r.log()
    assert len(pickle.dumps(r)) < 750 * 2 * 48  # bytes per row, not objects per row


def test_send_errors_are_sent_minus_due():
    r = EventRecords()
    r.add_send(0, 0.0015, 0.0, 320)
    r.add_send(1, 0.0205, 0.02, 320)
    assert r.send_errors() == pytest.approx([0.0015, 0.0005])
    assert EventRecords().send_errors() == []

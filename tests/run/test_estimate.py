"""The estimate before a run: defaults and declared rates at first, what earlier runs of the
model used once there are some; exact arithmetic on hand-made rows."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from duplexsim.clients.base import Metering
from duplexsim.core.benchmark import Sample
from duplexsim.core.prices import PriceTable
from duplexsim.core.usage import Usage
from duplexsim.run.estimate import (
    DEFAULT_ANSWER_S,
    DEFAULT_HANDSHAKE_S,
    DEFAULT_REPLY_S,
    earlier_rows,
    estimate_run,
    learn,
)
from duplexsim.run.store import ResultRow, RunStore

OPENAI = Metering("per-response", 10.0, "context", 20.0)
PRICES = PriceTable.from_dict(
    {
        "date": "2026-10-01",
        "per_million_tokens": {"input_audio": 40.0, "output_audio": 80.0, "cached_audio": 1.0},
        "per_minute": {"connected": 0.5},
    }
)


def sample(i: int, context_s: float) -> Sample:
    return Sample(f"s{i}", "en", "Anger", Path(f"c{i}.wav"), None, i, context_duration_s=context_s)


def row(i: int, **values: object) -> ResultRow:
    base: dict = dict.fromkeys(f.name for f in dataclasses.fields(ResultRow))
    base |= {"sample_id": f"s{i}", "status": "ok", "end_reason": "end-of-turn", "attempts": 1}
    base |= {"language": "en", "emotion": "Anger", "finished_at": "2026-11-01T00:00:00"}
    return ResultRow(**(base | values))


def test_first_estimate_uses_defaults_and_the_providers_published_rates() -> None:
    e = learn([], OPENAI)
    assert (e.reply_s, e.tail_s, e.handshake_s) == (
        DEFAULT_REPLY_S,
        DEFAULT_ANSWER_S + DEFAULT_REPLY_S,
        DEFAULT_HANDSHAKE_S,
    )
    used = e.usage(10.0)
    assert used.input_audio_tokens == 100.0  # 10 s of context at 10 tokens/s
    assert used.output_audio_tokens == 20.0 * DEFAULT_REPLY_S
    assert used.input_text_tokens is None  # no rate published: not guessed
    assert used.audio_sent_s == 10.0 + e.tail_s
    assert used.connected_s == used.audio_sent_s + DEFAULT_HANDSHAKE_S


def test_earlier_sessions_teach_reply_tail_handshake_rates_and_attempts() -> None:
    rows = [
        row(0, context_s=10.0, audio_sent_s=14.0, audio_received_s=3.0, connected_s=14.5,
            input_audio_tokens=120, output_audio_tokens=70, input_text_tokens=10),
        row(1, context_s=8.0, audio_sent_s=13.0, audio_received_s=5.0, connected_s=13.3,
            input_audio_tokens=90, output_audio_tokens=110, attempts=2),
        row(2, context_s=9.0, audio_sent_s=13.0, audio_received_s=4.0, connected_s=13.7,
            input_audio_tokens=100, output_audio_tokens=90),
    ]  # fmt: skip
    e = learn(rows, OPENAI)
    assert e.learnt_from == 3
    assert e.reply_s == 4.0  # median of the audio received
    assert e.tail_s == 4.0  # median of 4, 5, 4 s streamed after the context
    assert e.handshake_s == pytest.approx(0.5)
    assert e.rates["input_audio_tokens"] == pytest.approx(310 / 27)  # per second of context
    assert e.rates["output_audio_tokens"] == pytest.approx(270 / 12)  # per second of reply
    assert e.rates["input_text_tokens"] == pytest.approx(10 / 27)  # missing from a report: 0
    assert e.attempts == pytest.approx(4 / 3)


def test_a_provider_that_bills_the_whole_stream_learns_per_second_streamed() -> None:
    stream = Metering("running-total", input_basis="stream")
    rows = [row(0, context_s=10.0, audio_sent_s=15.0, audio_received_s=3.0, connected_s=15.5,
                input_audio_tokens=450, output_audio_tokens=75)]  # fmt: skip
    e = learn(rows, stream)
    assert e.rates["input_audio_tokens"] == pytest.approx(30.0)
    assert e.usage(10.0).input_audio_tokens == pytest.approx(30.0 * (10.0 + 5.0))


def test_the_estimate_prices_each_sample_and_scales_by_trials_and_attempts() -> None:
    e = dataclasses.replace(learn([], OPENAI), attempts=1.5)
    samples = [sample(0, 10.0), sample(1, 8.0)]
    est = estimate_run(samples, e, PRICES, trials=2, max_attempts=3)
    one = PRICES.cost(dataclasses.replace(e.usage(10.0), input_text_tokens=0))
    assert est.per_sample["s0"].amount == pytest.approx(one.amount)
    both = sum(c.amount for c in est.per_sample.values())
    assert est.cost is not None and est.cost.amount == pytest.approx(both * 2 * 1.5)
    assert est.worst is not None and est.worst.amount == pytest.approx(both * 2 * 3)
    assert est.usage.input_audio_tokens == pytest.approx((100 + 80) * 2)
    assert est.tokens_per_session == pytest.approx(
        (est.usage.input_audio_tokens + est.usage.output_audio_tokens) / 4
    )
    text = "\n".join(est.lines("gpt-realtime"))
    assert "4 session(s) (2 samples x 2 trial(s))" in text
    assert "up to" in text and "as of 2026-10-01" in text


def test_a_billed_count_with_no_rate_leaves_the_cost_at_at_least() -> None:
    prices = PriceTable.from_dict({"per_million_tokens": {"input_audio": 40, "input_text": 4}})
    est = estimate_run([sample(0, 10.0)], learn([], OPENAI), prices)
    assert est.cost is not None and est.cost.amount is None
    assert est.cost.known == pytest.approx(100 * 40 / 1e6)
    assert any("input_text_tokens (no rate" in u for u in est.cost.unknown)
    assert "at least" in "\n".join(est.lines("m"))


def test_no_price_table_is_an_unknown_cost() -> None:
    est = estimate_run([sample(0, 10.0)], learn([], OPENAI), None)
    assert est.cost is None and "unknown (the profile has no price table)" in est.lines("m")[-1]


def test_earlier_rows_are_the_same_models_over_the_same_protocol(tmp_path: Path) -> None:
    def store(name: str, model: str, protocol: str, *rows: ResultRow) -> None:
        s = RunStore(tmp_path / name / "results.sqlite")
        s.set_meta({"run_id": name, "model": {"name": model, "protocol": protocol}})
        for r in rows:
            s.put(r)
        s.close()

    measured = row(0, context_s=9.0, audio_sent_s=12.0, audio_received_s=2.0, connected_s=12.4)
    store("a", "gpt-realtime", "openai-realtime", measured, row(1))  # row 1: nothing measured
    store("b", "gpt-realtime", "azure-realtime", measured)
    store("c", "other", "openai-realtime", measured)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "results.sqlite").write_text("not a database")
    found = earlier_rows(tmp_path, "gpt-realtime", "openai-realtime")
    assert [r.sample_id for r in found] == ["s0"]
    assert (
        Usage.from_mapping(json.loads(json.dumps(dataclasses.asdict(found[0])))).connected_s == 12.4
    )

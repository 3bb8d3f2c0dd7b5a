"""Usage on the wire: what each protocol's provider reports becomes ``Usage`` in the units it
bills, exactly; rate limits become ``RateLimits``. The fakes' reports are checked end to end in
tests/run/test_costs.py."""

from __future__ import annotations

import json

import pytest

from duplexsim.clients.base import EndOfTurn, RateLimits, UsageReport
from duplexsim.clients.gemini_live import events as gwire
from duplexsim.clients.gemini_live.protocol import ClientProtocol as GeminiProtocol
from duplexsim.clients.gemini_live.protocol import setup_from_options
from duplexsim.clients.nova_sonic import events as nwire
from duplexsim.clients.nova_sonic.protocol import ClientProtocol as NovaProtocol
from duplexsim.clients.nova_sonic.protocol import SonicSettings
from duplexsim.clients.openai_realtime.config import RealtimeOptions
from duplexsim.clients.openai_realtime.dialects import OPENAI, XAI, Dialect
from duplexsim.clients.openai_realtime.protocol import ClientProtocol as OpenAIProtocol
from duplexsim.core.errors import ProtocolError
from duplexsim.core.retry import ProviderLimit
from duplexsim.core.usage import Usage, UsageTally

# --- the shape everything is read into ------------------------------------------------------


def test_usage_adds_field_by_field_and_keeps_unreported_ones_unknown() -> None:
    a = Usage(input_audio_tokens=10, output_audio_tokens=None, connected_s=1.5)
    b = Usage(input_audio_tokens=5, output_audio_tokens=7)
    total = a + b
    assert total.input_audio_tokens == 15
    assert total.output_audio_tokens == 7
    assert total.connected_s == 1.5
    assert total.input_text_tokens is None  # never reported: unknown, not 0
    assert total.counts() == {
        "input_audio_tokens": 15,
        "output_audio_tokens": 7,
        "connected_s": 1.5,
    }


def test_per_response_reports_add_up_and_running_totals_replace_each_other() -> None:
    tally = UsageTally()
    tally.add(Usage(input_audio_tokens=100))
    tally.add(Usage(input_audio_tokens=50, output_audio_tokens=20))
    assert tally.total == Usage(input_audio_tokens=150, output_audio_tokens=20)
    running = UsageTally()
    running.add(Usage(input_audio_tokens=100), cumulative=True)
    running.add(Usage(input_audio_tokens=180, output_audio_tokens=30), cumulative=True)
    assert running.total == Usage(input_audio_tokens=180, output_audio_tokens=30)
    assert running.reports == 2


def test_usage_from_a_row_takes_its_numbers_only() -> None:
    row = {"sample_id": "s1", "input_audio_tokens": 12, "connected_s": 3.0, "timing_valid": True}
    assert Usage.from_mapping(row) == Usage(input_audio_tokens=12, connected_s=3.0)


# --- OpenAI Realtime and its dialects ---------------------------------------------------------

FULL_USAGE = {
    "total_tokens": 390,
    "input_tokens": 150,
    "output_tokens": 240,
    "input_token_details": {
        "cached_tokens": 40,
        "text_tokens": 20,
        "audio_tokens": 130,
        "image_tokens": 0,
        "cached_tokens_details": {"text_tokens": 10, "audio_tokens": 30, "image_tokens": 0},
    },
    "output_token_details": {"text_tokens": 12, "audio_tokens": 228},
}


def openai_events(body: dict, dialect: Dialect = OPENAI) -> list:
    opts = RealtimeOptions.from_options({}, None, dialect)
    return OpenAIProtocol(opts).receive_text(json.dumps(body), 4.0)


def done(**extra) -> dict:
    response = {"id": "resp_1", "object": "realtime.response", "status": "completed"}
    return {"type": "response.done", "event_id": "e1", "response": {**response, **extra}}


def test_response_done_usage_is_reported_before_the_end_of_turn() -> None:
    usage, end = openai_events(done(usage=FULL_USAGE))
    assert isinstance(usage, UsageReport) and isinstance(end, EndOfTurn)
    assert usage.source == "response.done" and not usage.cumulative and usage.arrival == 4.0
    assert usage.usage == Usage(
        input_audio_tokens=130,
        input_text_tokens=20,
        cached_audio_tokens=30,
        cached_text_tokens=10,
        output_audio_tokens=228,
        output_text_tokens=12,
    )


def test_a_response_without_usage_reports_none() -> None:
    (end,) = openai_events(done())
    assert isinstance(end, EndOfTurn)


def test_xai_usage_on_top_of_the_event_is_read() -> None:
    body = {**done(), "usage": {"input_tokens": 90, "output_tokens": 60}}
    usage, _ = openai_events(body, XAI)
    # totals without a breakdown count as audio: a speech session's input and reply are audio
    assert usage.usage == Usage(input_audio_tokens=90, output_audio_tokens=60)


def test_dashscope_spelling_and_cached_tokens_without_their_breakdown() -> None:
    usage = {
        "input_tokens": 50,
        "output_tokens": 80,
        "input_tokens_details": {"text_tokens": 5, "audio_tokens": 45, "cached_tokens": 8},
        "output_tokens_details": {"text_tokens": 10, "audio_tokens": 70},
    }
    report, _ = openai_events(done(usage=usage))
    assert report.usage == Usage(
        input_audio_tokens=45,
        input_text_tokens=5,
        cached_audio_tokens=8,
        output_audio_tokens=70,
        output_text_tokens=10,
    )


def test_a_failed_response_still_reports_what_it_used() -> None:
    details = {"type": "failed", "error": {"type": "server_error", "message": "boom"}}
    report, error = openai_events(
        done(status="failed", status_details=details, usage={"input_tokens": 3})
    )
    assert report.usage.input_audio_tokens == 3
    assert error.fatal


def test_malformed_usage_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="input_tokens"):
        openai_events(done(usage={"input_tokens": "many"}))


def test_rate_limits_updated_becomes_rate_limits() -> None:
    body = {
        "type": "rate_limits.updated",
        "event_id": "e2",
        "rate_limits": [
            {"name": "requests", "limit": 100, "remaining": 99, "reset_seconds": 0.6},
            {"name": "tokens", "limit": 20000, "remaining": 15000, "reset_seconds": 3},
        ],
    }
    (event,) = openai_events(body)
    assert isinstance(event, RateLimits) and event.source == "rate_limits.updated"
    assert event.limits == (
        ProviderLimit("requests", 100, 99, 0.6),
        ProviderLimit("tokens", 20000, 15000, 3),
    )


# --- Gemini Live ------------------------------------------------------------------------------


def gemini_events(usage: dict, *, turn: bool = True) -> list:
    proto = GeminiProtocol(setup_from_options("gemini-3.8-live", "Puck", {}))
    proto.receive_setup_reply(b'{"setupComplete":{}}')
    body = {"usageMetadata": usage}
    if turn:
        body["serverContent"] = {"turnComplete": True}
    return proto.receive(json.dumps(body).encode(), 1.0)


def test_usage_metadata_by_modality() -> None:
    end, report = gemini_events(
        {
            "promptTokenCount": 522,
            "responseTokenCount": 42,
            "totalTokenCount": 700,
            "thoughtsTokenCount": 136,
            "promptTokensDetails": [
                {"modality": "TEXT", "tokenCount": 332},
                {"modality": "AUDIO", "tokenCount": 165},
            ],
            "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 42}],
        }
    )
    assert isinstance(end, EndOfTurn) and isinstance(report, UsageReport)
    assert report.source == "usageMetadata" and not report.cumulative
    # 25 prompt tokens no modality covers count as text; thinking counts as output text
    assert report.usage == Usage(
        input_audio_tokens=165,
        input_text_tokens=357,
        output_audio_tokens=42,
        output_text_tokens=136,
    )


def test_usage_metadata_without_details_and_in_snake_case() -> None:
    (report,) = gemini_events(
        {"prompt_token_count": 320, "response_token_count": 96, "cache_tokens_details": [
            {"modality": "AUDIO", "token_count": 64}]},
        turn=False,
    )  # fmt: skip
    assert report.usage == Usage(
        input_audio_tokens=320, cached_audio_tokens=64, output_audio_tokens=96
    )


def test_usage_metadata_encodes_as_it_decodes() -> None:
    body = {
        "promptTokenCount": 10,
        "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 10}],
    }
    (part,) = gwire.decode_server(gwire.encode_server([gwire.UsageMetadata(body)]))
    assert part == gwire.UsageMetadata(body)
    assert part.usage == Usage(input_audio_tokens=10)


def test_malformed_usage_metadata_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="usageMetadata"):
        gemini_events({"promptTokensDetails": [{"modality": "AUDIO", "tokenCount": "x"}]})


# --- Nova Sonic -------------------------------------------------------------------------------


def nova_events(body: dict) -> list:
    proto = NovaProtocol(SonicSettings(), "p1")
    return proto.receive(nwire.chunk(nwire.event("usageEvent", body)), 2.0)


def test_usage_events_are_running_totals_of_speech_and_text() -> None:
    tokens = lambda s, t: {"speechTokens": s, "textTokens": t}  # noqa: E731
    (report,) = nova_events(
        {
            "completionId": "c1",
            "promptName": "p1",
            "sessionId": "s1",
            "details": {
                "delta": {"input": tokens(25, 0), "output": tokens(10, 2)},
                "total": {"input": tokens(400, 30), "output": tokens(120, 15)},
            },
            "totalInputTokens": 430,
            "totalOutputTokens": 135,
            "totalTokens": 565,
        }
    )
    assert report.cumulative and report.source == "usageEvent"
    assert report.usage == Usage(
        input_audio_tokens=400, input_text_tokens=30, output_audio_tokens=120, output_text_tokens=15
    )


def test_usage_event_totals_without_details_count_as_speech() -> None:
    (report,) = nova_events({"totalInputTokens": 50, "totalOutputTokens": 20, "totalTokens": 70})
    assert report.usage == Usage(input_audio_tokens=50, output_audio_tokens=20)


def test_a_negative_count_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="totalInputTokens"):
        nova_events({"totalInputTokens": -1})

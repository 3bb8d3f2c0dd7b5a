"""Prices as data: a session's cost is its usage times the table's prices, exactly; an unknown
price or an unreported count makes the cost unknown, never 0; every built-in table parses."""

from __future__ import annotations

import pytest

from duplexsim.core.prices import Cost, PriceTable, format_amount
from duplexsim.core.usage import Usage
from duplexsim.profiles.profile import builtin_profiles, load_profile, resolve_model

TOKENS = PriceTable.from_dict(
    {
        "currency": "USD",
        "date": "2026-10-01",
        "source": "test figures",
        "per_million_tokens": {
            "input_audio": 32.0,
            "cached_audio": 0.4,
            "input_text": 4.0,
            "output_audio": 64.0,
            "output_text": "unknown",
        },
    }
)


def test_token_cost_bills_cached_input_at_its_own_price() -> None:
    usage = Usage(
        input_audio_tokens=1000,
        cached_audio_tokens=200,
        input_text_tokens=50,
        output_audio_tokens=500,
        output_text_tokens=0,
    )
    cost = TOKENS.cost(usage)
    expected = (800 * 32.0 + 200 * 0.4 + 50 * 4.0 + 500 * 64.0) / 1e6
    assert cost.amount == pytest.approx(expected, rel=1e-12)
    assert cost.unknown == ()


def test_an_unknown_price_of_something_used_makes_the_cost_unknown_not_zero() -> None:
    cost = TOKENS.cost(Usage(input_audio_tokens=1000, output_text_tokens=30))
    assert cost.amount is None
    assert cost.known == pytest.approx(1000 * 32.0 / 1e6)
    assert cost.unknown == ("output_text_tokens (price unknown)",)


def test_counts_missing_from_a_report_are_zero_but_no_report_at_all_is_unknown() -> None:
    assert TOKENS.cost(Usage(input_audio_tokens=10)).amount == pytest.approx(320e-6)
    nothing = TOKENS.cost(Usage(audio_sent_s=9.0, connected_s=10.0))
    assert nothing.amount is None
    assert "input_audio_tokens (not reported)" in nothing.unknown


def test_minutes_are_billed_on_the_seconds_we_measure() -> None:
    table = PriceTable.from_dict({"per_minute": {"connected": 0.05}})
    cost = table.cost(Usage(connected_s=90.0, input_audio_tokens=500))
    assert cost.amount == pytest.approx(0.075)
    assert table.cost(Usage()).amount == 0.0  # never connected: nothing billed


def test_an_empty_table_is_a_known_zero() -> None:
    assert PriceTable().cost(Usage(input_audio_tokens=10, connected_s=5.0)) == Cost(0.0, 0.0)


def test_costs_add_and_scale_and_stay_unknown_once_unknown() -> None:
    a, b = Cost(1.0, 1.0), Cost(None, 2.0, ("x",))
    assert (a + a).amount == 2.0
    total = a + b
    assert total.amount is None and total.known == 3.0 and total.unknown == ("x",)
    assert a.times(3).amount == 3.0 and b.times(2).known == 4.0


def test_the_table_round_trips_and_says_its_basis() -> None:
    assert PriceTable.from_dict(TOKENS.describe()) == TOKENS
    basis = TOKENS.basis()
    assert basis.startswith("USD per 1M tokens: input audio 32, input text 4, cached audio 0.4")
    assert "output text unknown" in basis and "as of 2026-10-01, test figures" in basis


@pytest.mark.parametrize(
    ("table", "complaint"),
    [
        ({"per_second": {}}, "unknown field"),
        ({"per_minute": {"talking": 1}}, "unknown quantity talking"),
        ({"per_minute": {"connected": -1}}, "price.per_minute.connected"),
        ({"per_minute": {"connected": "free"}}, "price.per_minute.connected"),
        ({"per_minute": {"connected": True}}, "price.per_minute.connected"),
        ({"date": 2026}, "price.date"),
        ({"per_minute": 3}, "must be a table"),
    ],
)
def test_bad_tables_name_the_field(table: dict, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        PriceTable.from_dict(table)


def test_every_builtin_profile_has_a_table_and_unknown_prices_are_said_unknown() -> None:
    for name, path in builtin_profiles().items():
        price = load_profile(path).price
        assert price is not None, name
    grok = load_profile(builtin_profiles()["grok-realtime"]).price
    assert grok is not None and grok.date == "2026-04"
    assert grok.cost(Usage(connected_s=60.0)).amount == pytest.approx(0.05)
    openai = load_profile(builtin_profiles()["gpt-realtime"]).price
    assert openai is not None
    assert openai.cost(Usage(input_audio_tokens=100)).amount is None
    assert resolve_model("fake:echo").price.cost(Usage(input_audio_tokens=9)).amount == 0.0
    assert resolve_model("ws://127.0.0.1:9/x").price is None  # no table: nothing known


def test_a_profile_overrides_the_price(tmp_path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'protocol = "openai-realtime"\nurl = "wss://api.openai.com/v1/realtime"\n'
        '[price]\ndate = "2026-11-02"\nsource = "my invoice"\n'
        "per_million_tokens = { input_audio = 32, output_audio = 64 }\n"
    )
    price = load_profile(path).price
    assert price is not None and price.source == "my invoice"
    path.write_text(
        'protocol = "openai-realtime"\nurl = "wss://x"\n[price]\nper_minute = { connected = "?" }\n'
    )
    with pytest.raises(Exception, match=r"mine\.toml: price\.per_minute\.connected"):
        load_profile(path)


def test_amounts_for_people() -> None:
    assert format_amount(1234.5, "USD") == "1,234.50 USD"
    assert format_amount(0.0123) == "0.0123"
    assert format_amount(0.00004) == "4.00e-05"
    assert format_amount(0.0) == "0.00"

"""One mapping of HTTP refusals to errors for every client, and one reading of retry delays."""

from __future__ import annotations

import pytest

from duplexsim.clients.transport.httperrors import (
    duration_s,
    limits_from_headers,
    refusal,
    retry_after,
    retry_in,
)
from duplexsim.core.errors import ConnectError, RateLimited
from duplexsim.core.retry import ProviderLimit


@pytest.mark.parametrize(
    ("status", "headers", "body", "kind", "retryable", "reason"),
    [
        (401, {}, "", ConnectError, False, "auth"),
        (403, {}, "", ConnectError, False, "auth"),
        # Google answers a bad key with 400 and says so in the body
        (400, {}, '{"error":{"reason":"API_KEY_INVALID","message":"API key not valid"}}',
         ConnectError, False, "auth"),
        (400, {}, "", ConnectError, False, "connect"),
        (404, {}, "", ConnectError, False, "connect"),
        (429, {"Retry-After": "2.5"}, "", RateLimited, True, "rate-limited"),
        (429, {"retry-after": "2.5"}, "", RateLimited, True, "rate-limited"),  # any case
        (429, {}, "Rate limit reached. Please try again in 2.5s.", RateLimited, True,
         "rate-limited"),
        (429, {}, '{"error":{"code":"insufficient_quota"}}', ConnectError, False, "quota"),
        (503, {}, "RESOURCE_EXHAUSTED: retry in 2.5s", RateLimited, True, "rate-limited"),
        (408, {}, "", ConnectError, True, "connect"),
        (500, {}, "", ConnectError, True, "connect"),
        (503, {}, "", ConnectError, True, "connect"),
    ],
)  # fmt: skip
def test_statuses_map_to_one_error_each(
    status: int, headers: dict[str, str], body: str, kind: type, retryable: bool, reason: str
) -> None:
    error = refusal(status, headers, body=body)
    assert type(error) is kind and error.retryable is retryable and error.reason == reason
    assert f"HTTP {status}" in str(error)
    if isinstance(error, RateLimited):
        assert error.retry_after_s == 2.5


def test_the_body_is_never_quoted_but_a_detail_is() -> None:
    secret_body = '{"error":{"message":"Incorrect API key provided: sk-abc***wxyz"}}'
    assert "sk-abc" not in str(refusal(401, {}, body=secret_body))
    error = refusal(404, {}, what="the SDP offer", detail=": no such model")
    assert str(error).startswith("server refused the SDP offer: HTTP 404: no such model")
    aws = refusal(403, {}, what="the Bedrock stream", credential="the AWS credentials")
    assert str(aws).endswith("HTTP 403 (check the AWS credentials)")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("3", 3.0), ("0.5", 0.5), ("0", 0.0), ("-1", None), ("Wed, 21 Oct 2015 07:28:00 GMT", None),
     (None, None)],
)  # fmt: skip
def test_retry_after_reads_seconds_only(value: str | None, seconds: float | None) -> None:
    assert retry_after(value) == seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("Please try again in 1.5s.", 1.5), ("try again in 20ms", 0.02),
     ("Quota exceeded. Please retry in 7s", 7.0), ("slow down", None)],
)  # fmt: skip
def test_retry_in_reads_the_servers_wording(text: str, seconds: float | None) -> None:
    assert retry_in(text) == seconds


def test_rate_limit_headers_become_limits() -> None:
    headers = {
        "X-RateLimit-Limit-Requests": "500",
        "x-ratelimit-remaining-requests": "499",
        "x-ratelimit-reset-requests": "120ms",
        "x-ratelimit-limit-tokens": "40000",
        "x-ratelimit-remaining-tokens": "39000",
        "x-ratelimit-reset-tokens": "1m30.5s",
    }
    assert limits_from_headers(headers) == (
        ProviderLimit("requests", 500, 499, 0.12),
        ProviderLimit("tokens", 40000, 39000, 90.5),
    )
    assert limits_from_headers({"x-ratelimit-remaining-tokens": "many"}) == ()
    assert limits_from_headers({}) == ()
    assert [duration_s(t) for t in ("2", "6m0s", "1h", "soon", "5x")] == [
        2.0,
        360.0,
        3600.0,
        None,
        None,
    ]

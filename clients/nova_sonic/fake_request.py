"""The Nova Sonic fake's answer to the HTTP/2 request that opens a stream (pure: no I/O).

It answers ``POST /model/{modelId}/invoke-with-bidirectional-stream`` as Bedrock does: a request
without a SigV4 ``Authorization`` is refused 403 (``MissingAuthenticationTokenException``), one
whose signature does not match the secret, when the fake is given one, 403
(``InvalidSignatureException``); handshake faults answer with their status and
``x-amzn-ErrorType``. A request let through is answered 200 with
``application/vnd.amazon.eventstream``.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping

from duplexsim.clients.fakekit.declare import Request
from duplexsim.clients.fakekit.faults import Faults, Rejection
from duplexsim.clients.nova_sonic.sigv4 import Credentials, sign_request

__all__ = ["Authorization", "authorization", "refuse", "response_headers"]

# the AWS SDK sends an empty query ("...-stream?"), which signs like none
_PATH = re.compile(
    r"^(?P<prefix>/[^?]*)?/model/(?P<model>[^/?]+)/invoke-with-bidirectional-stream(\?|$)"
)
_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<akid>[^/]*)/(?P<date>\d{8})/(?P<region>[^/]+)/bedrock/"
    r"aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), Signature=(?P<sig>[0-9a-f]{64})$"
)
_ERROR_TYPES = {401: "AccessDeniedException", 403: "AccessDeniedException",
                429: "ThrottlingException", 503: "ServiceUnavailableException"}  # fmt: skip
_BAD_SIGNATURE = "The request signature we calculated does not match the signature you provided."

Authorization = re.Match[str]


def authorization(request: Request) -> Authorization | None:
    """The request's SigV4 ``Authorization``, parsed (region, signed headers, signature)."""
    return _AUTH.match(request.headers.get("authorization", ""))


def refuse(secret: str | None, request: Request, faults: Faults) -> Rejection | None:
    """The refusal of a request, in Bedrock's order: the operation (404), the authorization
    (403), the signature when the fake knows ``secret`` (403), then the handshake faults."""
    if request.method != "POST" or _PATH.match(request.path) is None:
        return _refusal(404, "UnknownOperationException", "")
    auth = authorization(request)
    if auth is None:
        return _refusal(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    if secret is not None and not _signed(secret, request.headers, auth):
        return _refusal(403, "InvalidSignatureException", _BAD_SIGNATURE)
    rejection = faults.admit()
    if rejection is not None:
        kind = _ERROR_TYPES.get(rejection.status, "InternalServerException")
        return _refusal(rejection.status, kind, rejection.body.strip(), rejection.headers)
    return None


def response_headers(session_id: str) -> dict[str, str]:
    """The headers of the 200 that opens the event stream."""
    return {"content-type": "application/vnd.amazon.eventstream", "x-amzn-requestid": session_id}


def _refusal(
    status: int, kind: str, message: str, extra: dict[str, str] | None = None
) -> Rejection:
    headers = {"content-type": "application/json", "x-amzn-errortype": kind}
    headers |= {k.lower(): v for k, v in (extra or {}).items()}
    return Rejection(status, headers, json.dumps({"message": message}))


def _signed(secret: str, headers: Mapping[str, str], auth: Authorization) -> bool:
    names = auth["signed"].split(";")
    added = {"host", "x-amz-date", "x-amz-content-sha256", "x-amz-security-token"}
    try:
        when = datetime.datetime.strptime(headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
    except (KeyError, ValueError):
        return False
    creds = Credentials(auth["akid"], secret, headers.get("x-amz-security-token"))
    signed = {n: headers.get(n, "") for n in names if n not in added}
    _, signature = sign_request(
        "POST", headers.get(":authority", ""), headers[":path"].partition("?")[0], signed, creds,
        auth["region"], when.replace(tzinfo=datetime.UTC),
    )  # fmt: skip
    return bool(signature == auth["sig"])

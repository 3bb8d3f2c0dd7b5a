"""The scoring service: wire format, broker logic (sans I/O), batching, and the real thing over
tcp on loopback with worker processes that get killed, frozen and fed garbage.

The scorer here is a tiny deterministic stand-in (no model weights): head k scores
mean(|x|) * (k + 1); two extra dimensions report the batch size and the worker's pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq
from numpy.typing import NDArray

from duplexsim.cli import main
from duplexsim.core.emotions import HEAD_NAMES
from duplexsim.core.errors import ConfigError
from duplexsim.core.provenance import ScorerIdentity
from duplexsim.core.retry import RetryPolicy
from duplexsim.scoring.models.base import EmotionModel
from duplexsim.scoring.service import (
    Broker,
    LocalScoring,
    ScoringClient,
    control,
    create_keys,
    wire,
)
from duplexsim.scoring.service.api import ScoreResult, open_scoring
from duplexsim.scoring.service.batch import Batcher, run_batch
from duplexsim.scoring.service.cli import load_factory, worker_endpoint_for
from duplexsim.scoring.service.dispatch import Dispatcher, Send
from duplexsim.scoring.service.errors import WireError
from duplexsim.scoring.service.security import is_local_endpoint
from tests.helpers.paths import REPO as ROOT
from tests.helpers.scoring_service import (
    LOOPBACK,
    BoomScorer,
    RawClient,
    TinyScorer,
    clip,
    expected,
    running_broker,
    running_worker,
    tiny_factory,
    worker_count,
)
from tests.helpers.waits import async_wait_until, wait_until

# ---- the tiny test scorer ---------------------------------------------------------------------


def heads(values: NDArray[np.float32] | None) -> list[float]:
    assert values is not None
    return [float(v) for v in values[: len(HEAD_NAMES)]]


# ---- harness ----------------------------------------------------------------------------------


@contextlib.contextmanager
def worker_process(
    endpoint: str,
    *,
    delay_s: float,
    max_batch: int = 8,
    max_wait_ms: float = 20,
    started: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A worker process serving the tiny scorer, ``delay_s`` per batch; ``started`` appears once
    it is inside score()."""
    cmd = [
        sys.executable, "-m", "duplexsim", "scoring", "worker",
        "--connect", endpoint,
        "--scorer", "tiny",
        "--factory", "tests.helpers.scoring_service:tiny_factory",
        "--max-batch", str(max_batch),
        "--max-wait-ms", str(max_wait_ms),
        "--heartbeat-s", "0.1",
    ]  # fmt: skip
    env = {**os.environ, "TINY_DELAY_S": str(delay_s), "TINY_STARTED": str(started or "")}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            yield proc
        finally:
            crashed = proc.poll() not in (None, -signal.SIGKILL)
            if proc.poll() is None:
                proc.kill()
            proc.wait(5)
            if crashed:
                log.seek(0)
                print(log.read().decode(errors="replace")[-3000:], file=sys.stderr)


@pytest.fixture
def raw() -> Iterator[Callable[[str], RawClient]]:
    clients: list[RawClient] = []

    def make(endpoint: str) -> RawClient:
        clients.append(RawClient(endpoint))
        return clients[-1]

    yield make
    for c in clients:
        c.close()


# ---- wire: pure encode / decode ---------------------------------------------------------------


_DROP = object()  # marks a header field to leave out


def good_frames() -> list[bytes]:
    return wire.encode_request("r1", "tiny", np.zeros(1600, np.float32), 1e9)


def _frames(overrides: dict[str, Any]) -> list[bytes]:
    """A request whose header differs from a good one by ``overrides``."""
    head = {
        "id": "r1",
        "scorer": "tiny",
        "sample_rate": 16000,
        "dtype": "float32",
        "shape": [1600],
        "deadline": 1e9,
    }
    for key, value in overrides.items():
        if value is _DROP:
            del head[key]
        else:
            head[key] = value
    return [wire.VERSION, json.dumps(head).encode(), bytes(6400)]


def test_request_round_trip_keeps_samples_and_header() -> None:
    x = np.linspace(-1, 1, 1600, dtype=np.float32)
    frames = wire.encode_request("r1", "tiny", x, 1234.5)
    assert frames[0] == b"DSCORE/1" and len(frames) == 3
    request = wire.decode_request(frames)
    assert request.header == wire.RequestHeader("r1", "tiny", 1600, 1234.5)
    np.testing.assert_array_equal(request.samples, x)
    assert b"pickle" not in frames[1] and frames[1].startswith(b"{")


def test_float64_samples_travel_as_float32_and_integers_are_refused() -> None:
    request = wire.decode_request(wire.encode_request("r", "tiny", np.full(10, 0.5), 1.0))
    assert request.samples.dtype == np.float32 and request.samples[0] == 0.5
    with pytest.raises(WireError, match="floating point"):
        wire.encode_request("r", "tiny", np.zeros(10, np.int16), 1.0)
    with pytest.raises(WireError, match="mono 1-D"):
        wire.encode_request("r", "tiny", np.zeros((2, 10), np.float32), 1.0)


def test_reply_round_trip_ok_and_error() -> None:
    ok = wire.Reply(
        "r1", "tiny", ok=True, dimensions=("a", "b"), values=np.array([1.5, -2], np.float32)
    )
    back = wire.decode_reply(wire.encode_reply(ok))
    assert back == ok and back.values is not None and list(back.values) == [1.5, -2.0]
    at = wire.Reply(
        "r3", "eiv", ok=True, dimensions=("a",), values=np.ones(1, np.float32), precision="bf16"
    )
    assert wire.decode_reply(wire.encode_reply(at)).precision == "bf16"
    who = dataclasses.replace(at, weights="sha256:ab", version="3")
    back = ScoreResult.from_reply(wire.decode_reply(wire.encode_reply(who)))
    assert back.identity == ScorerIdentity("eiv", "sha256:ab", "bf16", "3")
    header = json.loads(wire.encode_reply(ok)[1])
    for name in ("precision", "weights", "version"):  # an older worker's reply
        del header[name]
    older = [wire.VERSION, json.dumps(header).encode(), wire.encode_reply(ok)[2]]
    assert wire.decode_reply(older).precision is None
    assert not ScoreResult.from_reply(wire.decode_reply(older)).identity.known
    with pytest.raises(WireError, match="'weights' must be a string or null"):
        wire.decode_reply([wire.VERSION, json.dumps({**header, "weights": 16}).encode(), older[2]])
    with pytest.raises(WireError, match="'precision' must be a string or null"):
        wire.decode_reply(
            [wire.VERSION, json.dumps({**header, "precision": 16}).encode(), older[2]]
        )
    err = wire.error_reply("r2", "tiny", "busy", "queue full")
    back = wire.decode_reply(wire.encode_reply(err))
    assert (back.ok, back.code, back.retryable, back.error) == (
        False,
        "busy",
        True,
        "busy: queue full",
    )


@pytest.mark.parametrize(
    ("frames", "message"),
    [
        ([b"DSCORE/2", *good_frames()[1:]], "unsupported wire version b'DSCORE/2'"),
        (good_frames()[:2], "expected 3 frames"),
        ([wire.VERSION, b"{not json", bytes(6400)], "not UTF-8 JSON"),
        ([wire.VERSION, b"\xff\xfe", bytes(6400)], "not UTF-8 JSON"),
        ([wire.VERSION, b"[1, 2]", bytes(6400)], "must be a JSON object"),
        (_frames({"id": _DROP}), "lacks the field 'id'"),
        (_frames({"scorer": _DROP}), "lacks the field 'scorer'"),
        (_frames({"shape": _DROP}), "lacks the field 'shape'"),
        (_frames({"deadline": _DROP}), "lacks the field 'deadline'"),
        (_frames({"sample_rate": _DROP}), "lacks the field 'sample_rate'"),
        (_frames({"dtype": _DROP}), "lacks the field 'dtype'"),
        (_frames({"id": ""}), "'id' must be a non-empty string"),
        (_frames({"dtype": "float64"}), "dtype must be 'float32', got 'float64'"),
        (_frames({"dtype": "int16"}), "dtype must be 'float32'"),
        (_frames({"sample_rate": 8000}), "sample_rate must be 16000, got 8000"),
        (_frames({"sample_rate": True}), "'sample_rate' must be an integer"),
        (_frames({"shape": [800, 2]}), "'shape' must be \\[n\\]"),
        (_frames({"shape": [1601]}), "needs 6404 sample bytes, got 6400"),
        (_frames({"shape": [-1]}), "must not be negative"),
        (_frames({"deadline": "soon"}), "'deadline' must be a finite number"),
        (
            [wire.VERSION, _frames({})[1].replace(b"1000000000.0", b"NaN"), bytes(6400)],
            "NaN is not valid JSON",
        ),
        ([wire.VERSION, _frames({})[1], bytes(6401)], "needs 6400 sample bytes, got 6401"),
        ([wire.VERSION, b" " * (wire.MAX_HEADER_BYTES + 1), b""], "header of 16385 bytes exceeds"),
    ],
)
def test_bad_requests_are_refused_with_a_clear_error(frames: list[bytes], message: str) -> None:
    with pytest.raises(WireError, match=message) as info:
        wire.decode_request(frames)
    assert info.value.retryable is False and info.value.code == "bad-request"


def test_unknown_header_fields_are_ignored() -> None:
    assert wire.decode_request(_frames({"session": "s1"})).header.id == "r1"


def test_max_message_size_is_enforced_both_ways() -> None:
    limit = wire.max_message_bytes_for(1.0)
    wire.encode_request("r", "tiny", clip(0.1, 1.0), 1.0, max_message_bytes=limit)
    with pytest.raises(WireError, match=r"exceeds the limit of \d+ bytes \(about 1 s"):
        wire.encode_request("r", "tiny", clip(0.1, 1.3), 1.0, max_message_bytes=limit)
    frames = wire.encode_request("r", "tiny", clip(0.1, 1.3), 1.0)
    with pytest.raises(WireError, match="exceeds the limit"):
        wire.decode_request(frames, max_message_bytes=limit)
    # the default leaves slack above the 30 s MIRRORING scores, so over-long gets a per-item error
    wire.encode_request("r", "tiny", clip(0.1, 31.0), 1.0)
    with pytest.raises(WireError, match="about 40 s"):
        wire.encode_request("r", "tiny", clip(0.1, 41.0), 1.0)


def test_malformed_replies_are_refused() -> None:
    ok = wire.encode_reply(
        wire.Reply("r", "t", ok=True, dimensions=("a",), values=np.ones(1, np.float32))
    )
    with pytest.raises(WireError, match="need 4 bytes"):
        wire.decode_reply([*ok[:2], b"\x00" * 8])
    with pytest.raises(WireError, match="'ok' must be true or false"):
        wire.decode_reply([wire.VERSION, b'{"id": "r", "ok": 1, "dimensions": []}', b""])


def test_control_messages_round_trip_and_bad_ones_are_refused() -> None:
    messages: list[control.ControlMessage] = [
        control.Ready(("tiny", "prosody"), 8, 0.5),
        control.Heartbeat(),
        control.Work(b"7", good_frames()),
        control.Done(b"7", [wire.VERSION, b"{}", b""]),
        control.Drain(),
        control.Bye(),
        control.Reset(),
    ]
    for msg in messages:
        assert control.parse(control.encode(msg)) == msg
    with pytest.raises(WireError, match="'capacity' must be a positive integer"):
        control.parse(
            [wire.VERSION, b"READY", b'{"scorers": ["tiny"], "capacity": 0, "heartbeat_s": 1}']
        )
    with pytest.raises(WireError, match="bad control message"):
        control.parse([wire.VERSION, b"HEARTBEAT", b"extra"])


# ---- broker logic, sans I/O -------------------------------------------------------------------


def request(rid: str, *, deadline: float = 1e9, scorer: str = "tiny") -> list[bytes]:
    return wire.encode_request(rid, scorer, np.zeros(800, np.float32), deadline)


def ready(
    d: Dispatcher, worker: bytes, now: float, *, capacity: int = 4, beat: float = 1.0
) -> list[Send]:
    return d.on_worker(worker, control.encode(control.Ready(("tiny",), capacity, beat)), now=now)


def answer(rid: str) -> control.Done:
    reply = wire.Reply(rid, "tiny", ok=True, dimensions=("a",), values=np.ones(1, np.float32))
    return control.Done(b"", wire.encode_reply(reply))


def done(d: Dispatcher, worker: bytes, token: bytes, rid: str, now: float) -> list[Send]:
    return d.on_worker(worker, control.encode(control.Done(token, answer(rid).reply)), now=now)


def work_tokens(sends: list[Send]) -> list[tuple[bytes, bytes]]:
    """(worker, token) of every WORK in ``sends``."""
    out = []
    for s in sends:
        msg = control.parse(s.frames) if s.side == "worker" else None
        if isinstance(msg, control.Work):
            out.append((s.identity, msg.token))
    return out


def client_replies(sends: list[Send]) -> list[wire.Reply]:
    return [wire.decode_reply(s.frames) for s in sends if s.side == "client"]


def test_dispatcher_refuses_with_busy_when_the_queue_is_full() -> None:
    d = Dispatcher(queue_size=2)
    assert d.on_client(b"c", request("a"), now=0, wall=0) == []
    assert d.on_client(b"c", request("b"), now=0, wall=0) == []
    [busy] = client_replies(d.on_client(b"c", request("c"), now=0, wall=0))
    assert (busy.id, busy.code, busy.retryable) == ("c", "busy", True)
    sends = ready(d, b"W", now=0.1)
    assert [t for _, t in work_tokens(sends)] and d.queued == 0 and d.stats.busy == 1


def test_dispatcher_also_bounds_the_queue_in_bytes() -> None:
    d = Dispatcher(max_queued_bytes=8_000)
    assert d.on_client(b"c", request("a"), now=0, wall=0) == []  # 800 samples: ~3.4 kB
    assert d.on_client(b"c", request("b"), now=0, wall=0) == []
    [busy] = client_replies(d.on_client(b"c", request("c"), now=0, wall=0))
    assert busy.code == "busy" and "bytes" in (busy.error or "")
    ready(d, b"W", now=0.1)  # both dispatched: the queue is empty again
    assert d.queued == 0 and d.on_client(b"c", request("c"), now=0.2, wall=0.2) != []


def test_dispatcher_answers_expired_requests_and_never_dispatches_them() -> None:
    d = Dispatcher()
    [late] = client_replies(d.on_client(b"c", request("old", deadline=9.0), now=0, wall=10.0))
    assert late.code == "deadline" and "before the broker received it" in (late.error or "")
    assert d.on_client(b"c", request("soon", deadline=10.5), now=0, wall=10.0) == []
    [expired] = client_replies(d.tick(0.6))
    assert expired.id == "soon" and expired.code == "deadline" and not expired.retryable
    assert "no worker serves scorer 'tiny'" in (expired.error or "")
    assert work_tokens(ready(d, b"W", now=0.7)) == [] and d.stats.dispatched == 0


@pytest.mark.parametrize("late_first", [True, False])
def test_lost_worker_jobs_are_requeued_and_answered_exactly_once(late_first: bool) -> None:
    d = Dispatcher(liveness=3)
    ready(d, b"A", now=0.0)
    [(worker, token)] = work_tokens(d.on_client(b"c", request("r1"), now=0.0, wall=0.0))
    assert worker == b"A"
    ready(d, b"B", now=0.5)
    for t in (1.0, 2.0, 3.0):
        d.on_worker(b"B", control.encode(control.Heartbeat()), now=t)
    sends = d.tick(3.01)  # A silent for 3 heartbeats: dropped, r1 goes to B
    assert work_tokens(sends) == [(b"B", token)]
    assert (d.stats.workers_lost, d.stats.requeued) == (1, 1)
    first, second = (b"A", b"B") if late_first else (b"B", b"A")
    [reply] = client_replies(done(d, first, token, "r1", now=3.1))
    assert reply.id == "r1" and reply.ok
    assert client_replies(done(d, second, token, "r1", now=3.2)) == []
    assert d.stats.duplicates == 1 and d.stats.answered == 1 and d.pending == 0
    assert d.workers() == {b"B": 0}


def test_a_request_that_keeps_killing_workers_is_answered_worker_lost() -> None:
    d = Dispatcher(max_requeues=1, liveness=1)
    ready(d, b"A", now=0.0)
    d.on_client(b"c", request("poison"), now=0.0, wall=0.0)
    assert client_replies(d.tick(1.01)) == []  # A lost, first re-queue
    ready(d, b"B", now=1.1)
    [lost] = client_replies(d.tick(2.2))  # B lost too
    assert lost.id == "poison" and lost.code == "worker-lost" and not lost.retryable


def test_dispatcher_balances_load_respects_scorers_and_draining() -> None:
    d = Dispatcher()
    ready(d, b"A", now=0, capacity=2)
    ready(d, b"B", now=0, capacity=2)
    d.on_worker(b"P", control.encode(control.Ready(("prosody",), 4, 1.0)), now=0)
    sends = [s for i in range(4) for s in d.on_client(b"c", request(f"r{i}"), now=0, wall=0)]
    assert Counter(w for w, _ in work_tokens(sends)) == {b"A": 2, b"B": 2}
    assert d.on_client(b"c", request("r4"), now=0, wall=0) == [] and d.queued == 1
    d.on_worker(b"A", control.encode(control.Drain()), now=0.1)
    [(_, token)] = work_tokens(d.on_client(b"c", request("p", scorer="prosody"), now=0.1, wall=0.1))
    [ok] = client_replies(done(d, b"A", b"1", "r0", now=0.2))  # A drains: r4 must not go to it
    assert ok.id == "r0" and d.queued == 1 and token
    assert client_replies(d.on_worker(b"A", control.encode(control.Bye()), now=0.3)) == []
    assert set(d.workers()) == {b"B", b"P"} and d.stats.requeued == 1 and d.queued == 2


def test_dispatcher_ignores_a_repeated_id_resets_strangers_and_rejects_garbage() -> None:
    d = Dispatcher()
    d.on_client(b"c", request("r1"), now=0, wall=0)
    assert d.on_client(b"c", request("r1"), now=0, wall=0) == [] and d.stats.repeated_requests == 1
    [reset] = d.on_worker(b"X", control.encode(control.Heartbeat()), now=0)
    assert isinstance(control.parse(reset.frames), control.Reset)
    [bad] = client_replies(
        d.on_client(b"c", [wire.VERSION, _frames({})[1], b"\x00"], now=0, wall=0)
    )
    assert (bad.id, bad.code, bad.retryable) == ("r1", "bad-request", False)
    assert d.on_worker(b"X", [b"junk"], now=0) == [] and d.stats.bad_worker_messages == 1


# ---- batching and batch scoring ---------------------------------------------------------------


def test_batcher_hands_out_full_batches_at_once_and_partial_ones_after_the_wait() -> None:
    b: Batcher[int] = Batcher(max_batch=3, max_wait_s=0.01)
    for i in range(4):
        b.add("tiny", i, now=0.0)
    full = b.take(now=0.0)
    assert full is not None and full.items == [0, 1, 2]
    assert b.take(now=0.005) is None and b.next_due() == pytest.approx(0.01)
    b.add("prosody", 9, now=0.002)
    first, second = b.take(now=0.02), b.take(now=0.02)
    assert first is not None and second is not None
    assert (first.scorer, first.items, second.scorer, second.items) == ("tiny", [3], "prosody", [9])
    assert len(b) == 0 and b.next_due() is None


def test_run_batch_gives_per_item_errors_and_scores_the_rest_in_one_call() -> None:
    model = TinyScorer()
    now = time.time()
    clips = {
        "good": clip(0.25),
        "empty": np.zeros(0, np.float32),
        "nan": np.where(np.arange(8000) == 5, np.nan, 0.1).astype(np.float32),
        "long": clip(0.1, 31.0),
        "late": clip(0.3),
        "good2": clip(0.5),
    }
    requests = [
        wire.Request.of(k, "tiny", v, now - 1 if k == "late" else now + 10)
        for k, v in clips.items()
    ]
    replies = {r.id: r for r in run_batch(model, "tiny", requests, wall=now)}
    assert model.calls == [2]
    assert heads(replies["good"].values) == pytest.approx(expected(clips["good"]))
    assert heads(replies["good2"].values) == pytest.approx(expected(clips["good2"]))
    assert replies["empty"].code == "invalid-clip" and "too short" in (replies["empty"].error or "")
    assert replies["nan"].code == "invalid-clip" and "NaN" in (replies["nan"].error or "")
    assert replies["long"].code == "invalid-clip" and "too long" in (replies["long"].error or "")
    assert replies["late"].code == "deadline"


def test_replies_carry_the_scorers_precision() -> None:
    class Bf16Scorer(TinyScorer):
        precision = "bf16"

    requests = [wire.Request.of("r", "tiny", clip(0.1), time.time() + 10)]
    [plain] = run_batch(TinyScorer(), "tiny", requests, wall=time.time())
    [low] = run_batch(Bf16Scorer(), "tiny", requests, wall=time.time())
    assert (plain.precision, low.precision) == (None, "bf16")
    assert ScoreResult.from_reply(low).precision == "bf16"


def test_run_batch_turns_a_scorer_exception_into_item_errors() -> None:
    requests = [wire.Request.of(f"r{i}", "boom", clip(0.1), time.time() + 10) for i in range(3)]
    replies = run_batch(BoomScorer(), "boom", requests, wall=time.time())
    assert [r.code for r in replies] == ["scorer-failed"] * 3
    assert all(r.retryable and "CUDA out of memory" in (r.error or "") for r in replies)


# ---- bind safety and CURVE --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "local"),
    [
        ("tcp://127.0.0.1:5555", True),
        ("tcp://127.0.0.2:*", True),
        ("tcp://localhost:5555", True),
        ("tcp://[::1]:5555", True),
        ("ipc:///tmp/scoring", True),
        ("tcp://0.0.0.0:5555", False),
        ("tcp://*:5555", False),
        ("tcp://eth0:5555", False),
        ("tcp://10.0.0.5:5555", False),
        ("tcp://[::]:5555", False),
    ],
)
def test_which_endpoints_are_local(endpoint: str, local: bool) -> None:
    assert is_local_endpoint(endpoint) is local


def test_non_loopback_bind_without_curve_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    for frontend, backend in [("tcp://0.0.0.0:*", LOOPBACK), (LOOPBACK, "tcp://*:*")]:
        with pytest.raises(
            ConfigError, match=r"refusing to bind tcp://.* without encryption.*CURVE"
        ):
            Broker(frontend, backend)
    with Broker("tcp://0.0.0.0:*", LOOPBACK, allow_insecure=True) as broker:
        assert broker.frontend.startswith("tcp://0.0.0.0:")
    _, secret = create_keys(tmp_path)
    with Broker("tcp://0.0.0.0:*", LOOPBACK, curve_secret_key=secret) as broker:
        assert broker.frontend.startswith("tcp://0.0.0.0:")


async def test_curve_round_trip_works_and_a_client_without_the_key_gets_no_answer(
    tmp_path: Path,
) -> None:
    public, secret = create_keys(tmp_path)
    wrong_key = zmq.curve_keypair()[0]
    with (
        running_broker(curve_secret_key=secret) as broker,
        running_worker(broker.backend, {"tiny": TinyScorer()}, server_public_key=public),
    ):
        good = ScoringClient(broker.frontend, server_public_key=public)
        wrong = ScoringClient(broker.frontend, server_public_key=wrong_key, deadline_grace_s=0.2)
        plain = ScoringClient(broker.frontend, deadline_grace_s=0.2)
        try:
            ok, bad, none = await asyncio.gather(
                good.score([clip(0.2)], "tiny", 5.0),
                wrong.score([clip(0.2)], "tiny", 0.3),
                plain.score([clip(0.2)], "tiny", 0.3),
            )
        finally:
            for c in (good, wrong, plain):
                await c.aclose()
    assert ok[0].ok and heads(ok[0].values) == pytest.approx(expected(clip(0.2)))
    for result in (bad[0], none[0]):
        assert (
            result.code == "timeout"
            and result.values is None
            and "no answer" in (result.error or "")
        )
    assert broker.stats.received == 1


# ---- the service end to end over tcp on loopback ----------------------------------------------


async def test_two_worker_processes_answer_every_request_once_with_dynamic_batching() -> None:
    with (
        running_broker() as broker,
        worker_process(broker.backend, delay_s=0.03) as a,
        worker_process(broker.backend, delay_s=0.03) as b,
    ):
        await async_wait_until(lambda: worker_count(broker) == 2, what="two workers")
        clips = [clip(i / 100) for i in range(1, 41)]
        async with ScoringClient(broker.frontend) as client:
            results = await client.score(clips, "tiny", 20.0)
        assert client.unmatched_replies == 0
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    for c, r in zip(clips, results, strict=True):
        assert r.dimensions == (*HEAD_NAMES, "batch_size", "pid")
        assert heads(r.values) == pytest.approx(expected(c), rel=1e-6)
    batch_sizes = [int(r.values[-2]) for r in results if r.values is not None]
    pids = {int(r.values[-1]) for r in results if r.values is not None}
    assert max(batch_sizes) > 1 and pids == {a.pid, b.pid}
    assert (broker.stats.answered, broker.stats.duplicates, broker.stats.requeued) == (40, 0, 0)


def test_worker_killed_mid_batch_every_request_is_answered_once_by_the_other(
    raw: Callable[[str], RawClient], tmp_path: Path
) -> None:
    inside = tmp_path / "slow-scoring"
    with (
        running_broker() as broker,
        worker_process(broker.backend, delay_s=5.0, started=inside) as slow,
        worker_process(broker.backend, delay_s=0.02) as fast,
    ):
        wait_until(lambda: worker_count(broker) == 2, what="two workers")
        client = raw(broker.frontend)
        for i in range(8):
            client.request(f"r{i}", clip((i + 1) / 10))
        wait_until(lambda: broker.stats.dispatched >= 8, what="dispatch")
        wait_until(inside.exists, what="the slow worker inside score()")
        slow.send_signal(signal.SIGKILL)
        replies = client.replies(8, timeout_s=10, linger_s=0.5)
    assert Counter(r.id for r in replies) == {f"r{i}": 1 for i in range(8)}
    assert all(r.ok and r.values is not None and int(r.values[-1]) == fast.pid for r in replies)
    assert broker.stats.workers_lost == 1 and broker.stats.requeued >= 1


def test_frozen_worker_is_replaced_and_its_late_answers_are_dropped(
    raw: Callable[[str], RawClient], tmp_path: Path
) -> None:
    inside = tmp_path / "frozen-scoring"
    with (
        running_broker() as broker,
        worker_process(broker.backend, delay_s=0.5, started=inside) as frozen,
        worker_process(broker.backend, delay_s=0.02) as fast,
    ):
        wait_until(lambda: worker_count(broker) == 2, what="two workers")
        client = raw(broker.frontend)
        for i in range(8):
            client.request(f"r{i}", clip((i + 1) / 10))
        wait_until(lambda: broker.stats.dispatched >= 8, what="dispatch")
        wait_until(inside.exists, what="the frozen worker inside score()")
        frozen.send_signal(signal.SIGSTOP)
        try:
            replies = client.replies(8, timeout_s=10)
        finally:
            frozen.send_signal(signal.SIGCONT)
        wait_until(lambda: broker.stats.duplicates >= 1, timeout_s=5, what="late answers")
        wait_until(lambda: worker_count(broker) == 2, timeout_s=5, what="re-registration")
        replies += client.replies(1, timeout_s=0.3)
    assert Counter(r.id for r in replies) == {f"r{i}": 1 for i in range(8)}
    assert all(r.ok and r.values is not None and int(r.values[-1]) == fast.pid for r in replies)


def test_malformed_requests_get_error_replies_and_the_service_stays_up(
    raw: Callable[[str], RawClient],
) -> None:
    with running_broker() as broker, running_worker(broker.backend, {"tiny": TinyScorer()}):
        wait_until(lambda: worker_count(broker) == 1, what="worker")
        client = raw(broker.frontend)
        good = wire.encode_request("fine", "tiny", clip(0.3), time.time() + 10)
        client.send([b"DSCORE/9", *good[1:]])
        client.send([wire.VERSION, b'{"id": "bad-json", ', good[2]])
        client.send([wire.VERSION, good[1].replace(b'"fine"', b'"short"'), good[2][:-4]])
        client.send(good[:2])
        errors = client.replies(4, timeout_s=5)
        client.send(good)
        [fine] = client.replies(1, timeout_s=5)
    assert [(r.ok, r.code, r.retryable) for r in errors] == [(False, "bad-request", False)] * 4
    assert [r.id for r in errors] == ["fine", "", "short", "fine"]
    assert "unsupported wire version b'DSCORE/9'" in (errors[0].error or "")
    assert "needs 32000 sample bytes, got 31996" in (errors[2].error or "")
    assert fine.ok and heads(fine.values) == pytest.approx(expected(clip(0.3)))
    assert broker.stats.rejected == 4 and broker.stats.dispatched == 1


def test_worker_answers_bad_work_and_scorer_failures_and_stays_up() -> None:
    """Against a bare ROUTER standing in for the broker, so the worker itself sees the garbage."""
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    port = router.bind_to_random_port("tcp://127.0.0.1")
    scorers: dict[str, EmotionModel] = {"tiny": TinyScorer(), "boom": BoomScorer()}
    try:
        with running_worker(f"tcp://127.0.0.1:{port}", scorers, max_wait_ms=0):
            assert router.poll(5000)
            identity, *frames = router.recv_multipart()
            assert control.parse(frames) == control.Ready(("tiny", "boom"), 32, 0.1)
            good = wire.encode_request("ok", "tiny", clip(0.2), time.time() + 10)
            work = {
                b"1": [wire.VERSION, good[1], good[2][:-4]],
                b"2": wire.encode_request("b", "boom", clip(0.2), time.time() + 10),
                b"3": wire.encode_request("n", "nope", clip(0.2), time.time() + 10),
                b"4": good,
            }
            for token, request_frames in work.items():
                router.send_multipart(
                    [identity, *control.encode(control.Work(token, request_frames))]
                )
            answers: dict[bytes, wire.Reply] = {}
            end = time.monotonic() + 5
            while len(answers) < 4 and time.monotonic() < end:
                if router.poll(50):
                    msg = control.parse(router.recv_multipart()[1:])
                    if isinstance(msg, control.Done):
                        answers[msg.token] = wire.decode_reply(msg.reply)
    finally:
        router.close(0)
        ctx.term()
    assert answers[b"1"].code == "bad-request" and "sample bytes" in (answers[b"1"].error or "")
    assert answers[b"2"].code == "scorer-failed" and answers[b"2"].retryable
    assert answers[b"3"].code == "unknown-scorer"
    assert answers[b"4"].ok and answers[b"4"].id == "ok"


async def test_invalid_clips_get_per_item_errors_while_the_rest_of_the_batch_is_scored() -> None:
    model = TinyScorer()
    with (
        running_broker() as broker,
        running_worker(broker.backend, {"tiny": model}, max_wait_ms=100),
    ):
        await async_wait_until(lambda: worker_count(broker) == 1, what="worker")
        clips = [
            clip(0.1),
            np.zeros(0, np.float32),
            np.full(8000, np.nan, np.float32),
            clip(0.1, 31.0),
            clip(0.4),
            np.zeros((2, 800), np.float32),
        ]
        async with ScoringClient(broker.frontend) as client:
            results = await client.score(clips, "tiny", 10.0)
    assert [r.code for r in results] == [
        None,
        "invalid-clip",
        "invalid-clip",
        "invalid-clip",
        None,
        "bad-request",
    ]
    assert "too long (31.0 s; at most 30 s)" in (results[3].error or "")
    assert heads(results[4].values) == pytest.approx(expected(clips[4]))
    assert model.calls == [2]  # the two good clips, scored together
    assert broker.stats.received == 5  # the 2-D clip never left the client


async def test_deadlines_expire_in_the_queue_and_requests_are_never_dispatched_late() -> None:
    with running_broker() as broker:
        async with ScoringClient(broker.frontend) as client:
            [nobody] = await client.score([clip(0.1)], "tiny", 0.2)
            [past] = await client.score([clip(0.1)], "tiny", -1.0)
            assert nobody.code == "deadline" and "no worker serves scorer 'tiny'" in (
                nobody.error or ""
            )
            assert past.code == "deadline" and "before it was sent" in (past.error or "")
            with running_worker(
                broker.backend, {"tiny": TinyScorer(0.6)}, max_batch=1, capacity=1, max_wait_ms=0
            ):
                await async_wait_until(lambda: worker_count(broker) == 1, what="worker")
                results = await client.score([clip(0.1), clip(0.2)], "tiny", 0.3)
    assert [r.code for r in results] == ["deadline", "deadline"]
    assert broker.stats.dispatched == 1  # the second waited in the queue and expired there


async def test_backpressure_busy_then_client_retries_succeed() -> None:
    retry = RetryPolicy(max_attempts=100, base_s=0.02, max_s=0.05, jitter=0.0)
    with running_broker(queue_size=2) as broker:
        async with ScoringClient(broker.frontend, retry=retry) as client:
            task = asyncio.create_task(
                client.score([clip(i / 10) for i in range(1, 7)], "tiny", 10.0)
            )
            await async_wait_until(lambda: broker.stats.busy >= 4, what="busy replies")
            assert not task.done()
            with running_worker(broker.backend, {"tiny": TinyScorer()}):
                results = await asyncio.wait_for(task, 10)
    assert all(r.ok for r in results), [r.error for r in results]
    assert [heads(r.values)[0] for r in results] == pytest.approx([i / 10 for i in range(1, 7)])


async def test_clean_worker_shutdown_leaves_without_losing_work() -> None:
    with running_broker() as broker:
        async with ScoringClient(broker.frontend) as client:
            with running_worker(broker.backend, {"tiny": TinyScorer(0.2)}, max_batch=4):
                await async_wait_until(lambda: worker_count(broker) == 1, what="worker")
                pending = asyncio.create_task(client.score([clip(0.1)] * 4, "tiny", 10))
                await async_wait_until(lambda: broker.stats.dispatched == 4, what="dispatch")
            # leaving the block stopped the worker: it drained, answered, and said BYE
            results = await pending
        await async_wait_until(lambda: worker_count(broker) == 0, timeout_s=2, what="BYE")
        assert broker.stats.workers_lost == 0  # it left by BYE, not by missing heartbeats
    assert all(r.ok for r in results)


# ---- in-process scoring and the CLI helpers ---------------------------------------------------


async def test_local_scoring_has_the_same_api_and_batches_concurrent_calls() -> None:
    async with LocalScoring(tiny_factory, max_wait_ms=20) as local:
        calls = [local.score([clip(i / 10)], "tiny", 5.0) for i in range(1, 6)]
        results = [r for batch in await asyncio.gather(*calls) for r in batch]
        [empty, nan, ok] = await local.score(
            [np.zeros(0, np.float32), np.full(800, np.nan, np.float32), clip(0.5)], "tiny", 5.0
        )
        with pytest.raises(ConfigError, match="unknown test scorer"):
            await local.score([clip(0.1)], "nope", 5.0)
        assert max(local.batch_sizes) > 1
    assert [heads(r.values)[0] for r in results] == pytest.approx([i / 10 for i in range(1, 6)])
    assert (empty.code, nan.code, ok.ok) == ("invalid-clip", "invalid-clip", True)


async def test_a_precision_is_for_registry_scorers_in_process() -> None:
    with pytest.raises(ConfigError, match="not to a factory"):
        LocalScoring(tiny_factory, precision="bf16")
    with pytest.raises(ConfigError, match="in-process scoring"):
        open_scoring("tcp://127.0.0.1:1", precision="fp32")
    async with LocalScoring(precision="fp32") as local:  # the registry's prosody has none
        with pytest.raises(ConfigError, match=r"^the prosody scorer has no precision option$"):
            await local.score([clip(0.1)], "prosody", 5.0)


def test_worker_cli_passes_the_precision_and_prosody_refuses_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}
    with monkeypatch.context() as m:
        m.setattr("duplexsim.scoring.service.cli.run_worker", lambda connect, **kw: seen.update(kw))
        argv = [
            "scoring",
            "worker",
            "--scorer",
            "empathic-insight-voice-small",
            "--precision",
            "fp16",
        ]
        assert main(argv) == 0
    assert seen["precision"] == "fp16"
    argv = ["scoring", "worker", "--connect", "tcp://127.0.0.1:1", "--precision", "bf16"]
    assert main(argv) == 2  # the default scorer, prosody, refuses it before connecting
    assert (
        capsys.readouterr().err == "duplexsim: error: the prosody scorer has no precision option\n"
    )


def test_cli_helpers() -> None:
    assert worker_endpoint_for("tcp://127.0.0.1:5555") == "tcp://127.0.0.1:5556"
    assert worker_endpoint_for("tcp://127.0.0.1:*") == "tcp://127.0.0.1:*"
    assert worker_endpoint_for("ipc:///tmp/s") == "ipc:///tmp/s.workers"
    assert load_factory("tests.helpers.scoring_service:tiny_factory")("tiny").name == "tiny"
    with pytest.raises(ConfigError, match="module:callable"):
        load_factory("nothing")

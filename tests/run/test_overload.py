"""An overloaded run (a fake made slow on purpose, on the same loop, far more sessions than the
machine can pace) vouches for no latency it cannot: every session it calls timing-valid has the
latency the test recomputes from the session's own input.wav and output.wav, and the fake's true
latency, within 5 ms. It runs on the loop every paced command runs on, which records its stalls
(the slow fake's among them)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from duplexsim.clients.fakekit.behaviours import Behaviour, behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.audio import read_audio
from duplexsim.core.benchmark import load_benchmark
from duplexsim.core.retry import RetryPolicy
from duplexsim.core.stalls import StallLog
from duplexsim.core.timing import TimingBudget, measure_reply, speech_end
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.runner import Endpoint, RunOptions, execute_run
from duplexsim.run.store import ResultRow
from duplexsim.session import eventloop
from tests.helpers.runs import SETTINGS, short_benchmark


def slow(factory, burn_s: float):  # type: ignore[no-untyped-def]
    """Each frame the behaviour handles first burns ``burn_s`` of CPU on the loop."""

    def make(rate: int) -> Behaviour:
        behaviour = factory(rate)
        push = behaviour.push

        def burning(samples):  # type: ignore[no-untyped-def]
            end = time.perf_counter() + burn_s
            while time.perf_counter() < end:
                pass
            return push(samples)

        behaviour.push = burning  # type: ignore[method-assign]
        return behaviour

    return make


def strict_options(
    tmp_path: Path, run_id: str, concurrency: int, *, admission: bool = True
) -> RunOptions:
    """A run with the default timing budget and no retries: what it vouches for is on trial."""
    return RunOptions(
        run_id=run_id,
        runs_dir=tmp_path / "runs",
        concurrency=concurrency,
        settings=dataclasses.replace(SETTINGS, budget=TimingBudget()),
        retry=RetryPolicy(max_attempts=1),
        quiet=True,
        admission=admission,
    )


@pytest.mark.parametrize(
    ("burn_s", "overloaded"),
    [
        # 10 sessions x 50 frames/s x 3 ms: 1.5 cores' work on one loop, far past its capacity
        (0.003, True),
        # x 0.5 ms: a quarter of the loop's time, in short stalls that land in some sessions'
        # latency windows and not in others' (how many, the machine decides)
        (0.0005, False),
    ],
    ids=["far-past-capacity", "near-capacity"],
)
def test_an_overloaded_run_vouches_only_for_latencies_the_audio_confirms(
    tmp_path: Path, burn_s: float, overloaded: bool
) -> None:
    eventloop.run(overloaded_run(tmp_path, burn_s, overloaded))


async def overloaded_run(tmp_path: Path, burn_s: float, overloaded: bool) -> None:
    bench = load_benchmark(short_benchmark(tmp_path / "b", 10))
    echo = behaviour_factory("delayed-echo", latency_s=0.4, hangover_s=0.25)
    server = await start_server(slow(echo, burn_s))
    profile = ModelProfile(name="slow", protocol="pcm-ws", url=server.url)
    # every session at once, admission off: far above what this loop can pace
    opts = strict_options(tmp_path, "overload", 10, admission=False)
    try:
        rows = await execute_run(bench, profile, opts)
    finally:
        await server.aclose()
    if overloaded:
        invalid = [r for r in rows if r.timing_valid is False]
        assert invalid, "an overloaded run must find sessions it cannot vouch for"
    for r in rows:
        if not r.timing_valid or r.status != "ok":
            continue
        folder = opts.run_dir / r.bundle  # type: ignore[operator]
        sent = read_audio(folder / "input.wav")
        heard = read_audio(folder / "output.wav")
        end = speech_end(sent.samples, sent.sample_rate)
        again = measure_reply(heard.samples, heard.sample_rate, speech_end_s=end)
        assert again.latency_s is not None and r.latency_s is not None
        assert abs(again.latency_s - r.latency_s) <= 0.005, r
        # the truth: the fake's reply starts 0.4 s after the speech's end (its first chunk
        # leaves once the frame it answers has come in: up to a frame's placement later)
        assert abs(r.latency_s - 0.4) <= 0.005, r


def stalled_reply(factory, hold_s: float, which: Callable[[int], bool], log: StallLog | None):  # type: ignore[no-untyped-def]
    """The ``which(k)``-th connection's behaviour holds the loop ``hold_s`` as its reply leaves
    (noted in ``log`` as a fake server on this machine would report it)."""
    count = itertools.count()

    def make(rate: int) -> Behaviour:
        behaviour = factory(rate)
        push = behaviour.push
        chosen = which(next(count))

        def holding(samples):  # type: ignore[no-untyped-def]
            step = push(samples)
            if chosen and step.reply_started:
                start = time.monotonic()
                while time.monotonic() - start < hold_s:
                    pass
                if log is not None:
                    log.note(start, time.monotonic())
            return step

        behaviour.push = holding  # type: ignore[method-assign]
        return behaviour

    return make


@pytest.mark.parametrize("reported", [False, True], ids=["own-loop", "reported-by-server"])
def test_a_server_that_stalls_as_its_reply_leaves_is_not_vouched_for(
    tmp_path: Path, reported: bool
) -> None:
    eventloop.run(stalled_reply_run(tmp_path, reported))


async def stalled_reply_run(tmp_path: Path, reported: bool) -> None:
    """Two sessions one after the other; the first one's reply leaves 8 ms late. Whether the
    stall is our loop's (an in-process server) or a co-located server's (its report), the late
    reply is never vouched for; the other, if the machine let it keep its budget, is exact."""
    bench = load_benchmark(short_benchmark(tmp_path / "b", 2))
    echo = behaviour_factory("delayed-echo", latency_s=0.4, hangover_s=0.25)
    log = StallLog() if reported else None
    server = await start_server(stalled_reply(echo, 0.008, lambda k: k == 0, log))
    profile = ModelProfile(name="stalled", protocol="pcm-ws", url=server.url)
    opts = strict_options(tmp_path, "stalled", 1)
    endpoint = Endpoint(server.url, log)
    try:
        # one at a time, in the manifest's order: the first sample met the stalled reply
        rows = sorted(await execute_run(bench, profile, opts, endpoint=endpoint), key=by_id)
    finally:
        await server.aclose()
    first, second = rows
    assert first.status == "ok" and first.timing_valid is False
    assert first.latency_bound_ms is not None and first.latency_bound_ms >= 8.0
    # the stall is in the window, where it happened (whatever else a loaded machine put over
    # budget first, and so named first)
    meta = json.loads((opts.run_dir / str(first.bundle) / "meta.json").read_text())
    window = meta["outcome"]["check"]["window"]
    stall = window["server_stall_ms"] if reported else window["loop_stall_ms"]
    assert stall is not None and stall >= 8.0, window
    assert first.latency_s is not None and first.latency_s >= 0.4 + 0.007  # it was late
    if second.timing_valid:
        assert second.latency_s is not None and abs(second.latency_s - 0.4) <= 0.005


def by_id(row: ResultRow) -> str:
    return row.sample_id

"""An overloaded run (a fake made slow on purpose, on the same loop, far more sessions than the
machine can pace) vouches for no latency it cannot: every session it calls timing-valid has the
latency the test recomputes from the session's own input.wav and output.wav, within 5 ms."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from clients.behaviours import Behaviour, behaviour_factory
from clients.pcm_ws.server import start_server
from simulator.core.audio import read_audio
from simulator.core.benchmark import load_benchmark
from simulator.core.retry import RetryPolicy
from simulator.core.timing import TimingBudget, measure_reply, speech_end
from simulator.profiles import ModelProfile
from simulator.runner import RunOptions, execute_run
from tests.test_runner import SETTINGS, short_benchmark


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


async def test_an_overloaded_run_vouches_only_for_latencies_the_audio_confirms(tmp_path: Path):
    bench = load_benchmark(short_benchmark(tmp_path / "b", 10))
    echo = behaviour_factory("delayed-echo", latency_s=0.4, hangover_s=0.25)
    server = await start_server(slow(echo, 0.003))  # 10 sessions x 50 frames/s x 3 ms: 1.5 cores
    profile = ModelProfile(name="slow", protocol="pcm-ws", url=server.url)
    settings = dataclasses.replace(SETTINGS, budget=TimingBudget())  # the default budget
    opts = RunOptions(
        run_id="overload",
        runs_dir=tmp_path / "runs",
        concurrency=10,
        settings=settings,
        retry=RetryPolicy(max_attempts=1),
        quiet=True,
        admission=False,  # every session at once: far above what this loop can pace
    )
    try:
        rows = await execute_run(bench, profile, opts)
    finally:
        await server.aclose()
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

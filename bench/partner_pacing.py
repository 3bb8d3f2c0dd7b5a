"""Pacing of a two-model session (``run --partner``) beside two one-way sessions, in one run.

    python bench/partner_pacing.py [--sessions 10] [--seconds 10] [--rounds 3] [--out FILE.json]

A two-model session streams both ways at once: each frame it sends the model under test one
frame (the context, then the partner's voice relayed) and the partner one (the model's voice
relayed), and reads both. Its cost is set against what it replaces, two one-way sessions (one
to each model), measured in the same process, alternately, round by round, so a machine shared
with other work loads both arms alike:

  two-model  --sessions sessions, each an echo under test and an examiner as its partner, both
             pcm-ws fakes in child processes (``duplexsim serve-model``), talking for --seconds
             (the time limit ends each) after a 1.4 s opening context
  one-way    2 x --sessions plain sessions, half to the echo, half to the examiner, each a
             --seconds context of 1 s of speech every 3 s (each model answers every turn: audio
             both ways about as often as in the conversation)

Per arm: this process's CPU (``process_time``) per frame tick (a two-model tick is a frame each
way; a one-way tick one frame), the fakes' CPU, and each direction's send error against its
schedule. The figure of interest is the ratio: CPU per two-model tick / (2 x CPU per one-way
tick). The load average is read before and after every batch.

Then the sessions' own logic alone (``--logic-rounds``, 0 to skip): one session of each kind on
the virtual clock (no sockets, no waiting: every tick is work), against models that answer each
frame from a tape (1 s of speech every 3 s, no work of their own), alternately: the same ratio
without the transport's cost. Results: docs/performance.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import session_pacing as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from duplexsim.clients.base import AudioOut, ClientConfig
from duplexsim.clients.fakekit.behaviours import make_behaviour
from duplexsim.clients.pcm_ws.client import PcmWsClient
from duplexsim.core.partnerturns import PartnerLimits
from duplexsim.core.timing import speech_end
from duplexsim.core.turns import TurnSettings
from duplexsim.run.fakes import FakeModelProcess
from duplexsim.session import eventloop
from duplexsim.session.engine import CONTEXT_RATE, SessionOutcome, SessionSettings, run_session
from duplexsim.session.modelpartner import ModelPartner
from tests.helpers.virtualclock import ScriptedClient, run_virtual

FRAME_S = 0.02
SETTINGS = SessionSettings(
    turns=TurnSettings(hangover_s=1.0, max_reply_s=10.0, reply_timeout_s=3.0),
    deadline_margin_s=10.0,
)


def opening() -> np.ndarray:
    """The two-model sessions' context: 0.2 s of silence, 1 s of speech, 0.2 s of silence."""
    return np.concatenate((sp.silence(0.2), sp.voiced_signal(1.0), sp.silence(0.2)))


def turns_context(seconds: float) -> np.ndarray:
    """The one-way sessions' context: 1 s of speech every 3 s, for ``seconds``."""
    cycles = max(1, round(seconds / 3.0))
    return np.concatenate([np.concatenate((sp.voiced_signal(1.0), sp.silence(2.0)))] * cycles)


@dataclass
class Batch:
    arm: str
    outcomes: list[SessionOutcome]
    cpu_s: float
    wall_s: float
    fakes_cpu_s: float
    load: tuple[float, float]  # the 1-minute load average before and after

    @property
    def ticks(self) -> int:
        return sum(o.send.frames for o in self.outcomes)

    def report(self) -> dict[str, Any]:
        errors = [e for o in self.outcomes for e in o.records.send_errors()]
        partner = [
            e for o in self.outcomes if o.partner_records for e in o.partner_records.send_errors()
        ]
        return {
            "arm": self.arm,
            "sessions": len(self.outcomes),
            "failed": sum(o.status == "failed" for o in self.outcomes),
            "valid": sum(o.check.valid for o in self.outcomes),
            "ticks": self.ticks,
            "cpu_s": round(self.cpu_s, 3),
            "cpu_per_tick_us": round(1e6 * self.cpu_s / max(self.ticks, 1), 2),
            "fakes_cpu_per_tick_us": round(1e6 * self.fakes_cpu_s / max(self.ticks, 1), 2),
            "wall_s": round(self.wall_s, 2),
            "send_ms": sp.stats(1000.0 * np.array(errors)),
            "partner_send_ms": sp.stats(1000.0 * np.array(partner)) if partner else None,
            "load": [round(x, 2) for x in self.load],
        }


def client(url: str) -> PcmWsClient:
    return PcmWsClient(ClientConfig(url=url, api_key="bench", connect_timeout_s=10.0))


async def staggered(i: int, n: int, session: Any) -> SessionOutcome:
    await asyncio.sleep(i * FRAME_S / n)  # as the runner spaces its starts
    outcome: SessionOutcome = await session
    return outcome


async def batch(arm: str, sessions: list[Any], fakes: list[int]) -> Batch:
    load0 = os.getloadavg()[0]
    fakes0 = sum(sp.pid_cpu_s(p) or 0.0 for p in fakes)
    cpu0, wall0 = time.process_time(), time.monotonic()
    with sp.realtime_tuning():
        outcomes = await asyncio.gather(
            *(staggered(i, len(sessions), s) for i, s in enumerate(sessions))
        )
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    fakes_cpu = sum(sp.pid_cpu_s(p) or 0.0 for p in fakes) - fakes0
    return Batch(arm, list(outcomes), cpu, wall, fakes_cpu, (load0, os.getloadavg()[0]))


async def two_model(n: int, seconds: float, urls: dict[str, str], fakes: list[int]) -> Batch:
    context = opening()
    end = speech_end(context, CONTEXT_RATE)
    limits = PartnerLimits(turns=1000, time_s=seconds)
    sessions = [
        run_session(
            client(urls["echo"]),
            ModelPartner(context, client(urls["examiner"]), limits, SETTINGS),
            SETTINGS,
            speech_end_s=end,
        )
        for _ in range(n)
    ]
    return await batch("two-model", sessions, fakes)


async def one_way(n: int, seconds: float, urls: dict[str, str], fakes: list[int]) -> Batch:
    context = turns_context(seconds)
    end = speech_end(context, CONTEXT_RATE)
    sessions = [
        run_session(client(urls[kind]), context, SETTINGS, speech_end_s=end)
        for _ in range(n)
        for kind in ("echo", "examiner")
    ]
    return await batch("one-way", sessions, fakes)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    async with (
        FakeModelProcess("pcm-ws", "echo") as echo,
        FakeModelProcess("pcm-ws", "examiner") as examiner,
    ):
        urls = {"echo": echo.url, "examiner": examiner.url}
        fakes = sp.pids([echo, examiner])
        rounds = []
        for r in range(args.rounds):
            pair = {}
            arms = ("two-model", "one-way") if r % 2 == 0 else ("one-way", "two-model")
            for arm in arms:
                run = two_model if arm == "two-model" else one_way
                b = await run(args.sessions, args.seconds, urls, fakes)
                pair[arm] = b.report()
                print(f"round {r + 1} {arm}: {json.dumps(pair[arm])}", file=sys.stderr)
            two, one = pair["two-model"], pair["one-way"]
            pair["ratio"] = round(two["cpu_per_tick_us"] / (2 * one["cpu_per_tick_us"]), 3)
            pair["fakes_ratio"] = round(
                two["fakes_cpu_per_tick_us"] / (2 * one["fakes_cpu_per_tick_us"]), 3
            )
            rounds.append(pair)
    ratios = [p["ratio"] for p in rounds]
    return {
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "cpus": os.cpu_count(),
        "rounds": rounds,
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_range": [min(ratios), max(ratios)],
        "fakes_ratio_median": round(statistics.median(p["fakes_ratio"] for p in rounds), 3),
    }


class Tape(ScriptedClient):
    """A model that answers each frame with its tape's next frame (1 s of speech every 3 s,
    from ``offset`` samples in) and sends nothing while the tape is silent."""

    def __init__(self, offset: int = 0) -> None:
        super().__init__(make_behaviour("silent", CONTEXT_RATE), continuous=False)
        self.tape = turns_context(3.0)
        self.pos = offset

    async def send_audio(self, samples: np.ndarray) -> None:
        at = np.arange(self.pos, self.pos + samples.size) % self.tape.size
        self.pos += samples.size
        out = self.tape[at]
        if out.any():
            self._queue.append(AudioOut(out, self.clock()))


def logic(seconds: float, rounds: int) -> list[dict[str, Any]]:
    """CPU per tick of each kind of session alone, on the virtual clock, round by round."""
    out = []
    for r in range(rounds):
        cpu: dict[str, float] = {}
        for arm in ("two-model", "one-way") if r % 2 == 0 else ("one-way", "two-model"):
            if arm == "one-way":
                run = run_session(Tape(), sp.silence(seconds), SETTINGS, speech_end_s=0.1)
            else:
                limits = PartnerLimits(turns=1000, time_s=seconds)
                user = ModelPartner(sp.silence(0.1), Tape(24000), limits, SETTINGS)
                run = run_session(Tape(), user, SETTINGS, speech_end_s=0.1)
            t0 = time.process_time()
            outcome = run_virtual(run)
            cpu[arm] = 1e6 * (time.process_time() - t0) / outcome.send.frames
        out.append(
            {
                "two_model_us": round(cpu["two-model"], 1),
                "one_way_us": round(cpu["one-way"], 1),
                "ratio": round(cpu["two-model"] / (2 * cpu["one-way"]), 3),
            }
        )
    return out


def table(result: dict[str, Any]) -> str:
    lines = [
        "| round | arm | sessions | valid | ticks | CPU/tick (us) | fakes CPU/tick (us) "
        "| send p99 / max (ms) | partner send p99 / max (ms) | load before / after |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, pair in enumerate(result["rounds"], start=1):
        for arm in ("two-model", "one-way"):
            a = pair[arm]
            p = a["partner_send_ms"]
            partner = "-" if p is None else f"{p['p99_ms']} / {p['max_ms']}"
            lines.append(
                f"| {r} | {arm} | {a['sessions']} | {a['valid']} | {a['ticks']} "
                f"| {a['cpu_per_tick_us']} | {a['fakes_cpu_per_tick_us']} "
                f"| {a['send_ms']['p99_ms']} / {a['send_ms']['max_ms']} "
                f"| {partner} "
                f"| {a['load'][0]} / {a['load'][1]} |"
            )
        lines.append(f"| {r} | ratio | | | | **{pair['ratio']}** | {pair['fakes_ratio']} | | | |")
    lines.append(
        f"\nCPU per two-model tick / (2 x CPU per one-way tick): median {result['ratio_median']}"
        f" (range {result['ratio_range'][0]} to {result['ratio_range'][1]}); the fakes' "
        f"{result['fakes_ratio_median']}"
    )
    if result["logic"]:
        lines += [
            "\nThe sessions' logic alone (virtual clock, taped models):\n",
            "| round | two-model CPU/tick (us) | one-way CPU/tick (us) | ratio |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {r} | {x['two_model_us']} | {x['one_way_us']} | **{x['ratio']}** |"
            for r, x in enumerate(result["logic"], start=1)
        ]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sessions", type=int, default=10, help="two-model sessions per round")
    p.add_argument("--seconds", type=float, default=10.0, help="how long each session talks")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--logic-rounds", type=int, default=6, help="rounds of the logic alone")
    p.add_argument("--out", type=Path, help="write every figure as JSON")
    args = p.parse_args()
    result = eventloop.run(main_async(args))
    result["logic"] = logic(30.0, args.logic_rounds)
    result["load_end"] = [round(x, 2) for x in os.getloadavg()]
    print(table(result))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

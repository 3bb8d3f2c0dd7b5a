"""Building a benchmark from one hour of two-channel calls with the real ``prosody`` scorer.

    python bench/benchmark_build.py [--calls 6] [--minutes 10] [--keep DIR] [--out FILE.json]

Generates ``--calls`` synthetic two-speaker calls of ``--minutes`` each (default 6 x 10 min =
one hour; 16 kHz stereo PCM16 WAV, one speaker per channel): alternating turns of speech-like
voiced signals (harmonics of a gliding f0 under formant peaks and a syllable envelope; per turn
a random f0, glide, syllable rate and level), log-normal turn lengths (median 2.5 s), gaps from
-0.6 s (overlap) to 3 s, backchannels inside the other speaker's turns, a -65 dBFS noise floor.
Five languages, round robin. Then times, end to end and per stage, in this process:

- ``benchmark build`` (defaults: 5 s max gap, 10 s context, top 4 capped at 150) with the
  ``prosody`` scorer in-process (``LocalScoring``), FLAC output;
- ``benchmark validate`` (all adjacent pairs, 1000 permutations) on the same calls.

Generation time is not counted. Prints a Markdown table; ``--out`` writes every number as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from duplexsim.corpus import BuildOptions, ValidateOptions, build_benchmark, validate_calls
from duplexsim.scoring.service.local import LocalScoring

RATE = 16000
LANGUAGES = ("en", "hi", "ar", "it", "tl")
_FORMANTS = ((600.0, 250.0), (1300.0, 350.0), (2500.0, 500.0))


def voice(seconds: float, rng: np.random.Generator) -> np.ndarray:
    """One turn of a speech-like voiced signal with random prosody."""
    n = round(seconds * RATE)
    t = np.arange(n) / RATE
    f0 = rng.uniform(90.0, 260.0)
    glide = rng.uniform(-0.25, 0.25)  # relative f0 change over the turn
    track = f0 * (1.0 + glide * t / max(seconds, 1e-3)) * (1 + 0.05 * np.sin(2 * np.pi * 1.7 * t))
    phase = 2 * np.pi * np.cumsum(track) / RATE
    x = np.zeros(n)
    for k in range(1, int(3800.0 / f0) + 1):
        gain = sum(np.exp(-(((k * f0 - fc) / bw) ** 2)) for fc, bw in _FORMANTS)
        x += (0.15 + gain) / k * np.sin(k * phase)
    rate = rng.uniform(2.5, 6.0)  # syllables per second
    x *= 0.3 + 0.7 * 0.5 * (1.0 - np.cos(2 * np.pi * rate * t))
    fade = min(n // 2, round(0.01 * RATE))
    ramp = np.arange(1, fade + 1) / fade
    x[:fade] *= ramp
    x[n - fade :] *= ramp[::-1]
    return (x * rng.uniform(0.1, 0.45) / np.max(np.abs(x))).astype(np.float32)


def conversation(seconds: float, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """(2, frames) audio of one call and its number of turns."""
    out = (rng.standard_normal((2, round(seconds * RATE))) * 10 ** (-65 / 20)).astype(np.float32)
    t, speaker, turns = 0.5, 0, 0
    while True:
        length = float(np.clip(rng.lognormal(np.log(2.5), 0.6), 0.6, 12.0))
        if t + length > seconds - 0.5:
            break
        lo = round(t * RATE)
        out[speaker, lo : lo + round(length * RATE)] += voice(length, rng)
        if length > 3.0 and rng.random() < 0.3:  # a backchannel from the listener
            at = t + rng.uniform(1.0, length - 1.5)
            short = rng.uniform(0.3, 0.6)
            b = round(at * RATE)
            out[1 - speaker, b : b + round(short * RATE)] += voice(short, rng)
        turns += 1
        gap = float(np.clip(rng.normal(0.5, 0.7), -0.6, 3.0))
        if rng.random() < 0.05:
            gap = rng.uniform(5.0, 9.0)  # a long silence
        t = max(t + length + gap, t + 0.3)
        speaker = 1 - speaker
    return out, turns


def make_calls(root: Path, calls: int, minutes: float, seed: int) -> tuple[Path, int]:
    rng = np.random.default_rng(seed)
    rows, turns = ["id,language,audio"], 0
    for k in range(calls):
        audio, n = conversation(minutes * 60.0, rng)
        turns += n
        sf.write(root / f"call{k:02d}.wav", audio.T, RATE, subtype="PCM_16")
        rows.append(f"call{k:02d},{LANGUAGES[k % len(LANGUAGES)]},call{k:02d}.wav")
    listing = root / "calls.csv"
    listing.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return listing, turns


async def timed(listing: Path, out: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    async with LocalScoring() as scoring:
        started = time.perf_counter()
        built = await build_benchmark([listing], out, scoring, "prosody", BuildOptions())
        results["build"] = {
            "total_s": time.perf_counter() - started,
            **{k: v for k, v in vars(built.timings).items() if k != "total_s"},
            "steps": built.report["steps"],
            "turns": built.report["turns"],
        }
    async with LocalScoring() as scoring:
        started = time.perf_counter()
        m = await validate_calls([listing], scoring, "prosody", ValidateOptions())
        results["validate"] = {"total_s": time.perf_counter() - started, **m.to_dict()}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=6)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="keep the calls and the benchmark here")
    parser.add_argument("--out", type=Path, help="write every number as JSON")
    args = parser.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-build-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        print(f"generating {args.calls} x {args.minutes:g} min calls in {root}", file=sys.stderr)
        listing, turns = make_calls(root, args.calls, args.minutes, args.seed)
        print("building and validating ...", file=sys.stderr)
        results = asyncio.run(timed(listing, root / "benchmark"))
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    hours = args.calls * args.minutes / 60.0
    b, v = results["build"], results["validate"]
    print(
        f"\n{args.calls} calls x {args.minutes:g} min = {hours:.2f} h of two-channel audio, "
        f"{turns} generated turns; {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}\n"
    )
    print("| stage | build (s) |")
    print("|---|---|")
    for key, label in (
        ("decode_s", "decode and resample calls (both passes)"),
        ("turns_s", "VAD, turns, pairs, contexts"),
        ("score_s", "score turns (prosody, in-process)"),
        ("write_s", "cut, mix and write samples, manifest, report"),
        ("total_s", "**total**"),
    ):
        print(f"| {label} | {b[key]:.1f} |")
    steps, t = b["steps"], b["turns"]
    print(
        f"\nbuild: {t['turns']} turns, {t['scored']} scored; {steps['candidate_pairs']} "
        f"candidate pairs, {steps['same_emotion']} same-emotion, {steps['kept']} kept; "
        f"{hours * 3600 / b['total_s']:.0f}x real time"
    )
    print(
        f"validate: {v['total_s']:.1f} s; {v['n']} adjacent pairs, same emotion "
        f"{100 * v['observed']:.1f}% vs {100 * v['baseline']:.1f}% by permutation, "
        f"p = {v['p_value']:.4g}"
    )
    if args.out:
        args.out.write_text(json.dumps(results, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()

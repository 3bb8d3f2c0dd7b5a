"""MIRRORING metrics speed: 1,005 samples x 10 models, 1,000 shuffles, 1,000 bootstrap resamples.

    python bench/metrics_speed.py [--models 10] [--samples 1005] [--repeats 3]

Synthetic scores shaped like the benchmark (12 emotions, the four most frequent capped at 150,
5 languages, a few non-replies, models with different emotional biases and mirroring strength).
Times ``compute_many`` over all models end to end (validation included) and prints the best of
``--repeats`` runs. Target: under 1 s in total.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from duplexsim.core.emotions import EMOTION_NAMES
from duplexsim.scoring.metrics import SampleScores, compute_many

LANGUAGES = ("en", "hi", "ar", "it", "tl")


def reference_emotions(n: int, rng: np.random.Generator) -> np.ndarray:
    """Emotion indices with the four most frequent capped at 150, the rest sharing the remainder."""
    counts = np.full(len(EMOTION_NAMES), 0)
    counts[:4] = 150
    rest = n - counts.sum()
    counts[4:] = rest // 8
    counts[4 : 4 + rest % 8] += 1
    refs = np.repeat(np.arange(len(EMOTION_NAMES)), counts)
    return rng.permutation(refs)


def make_runs(models: int, n: int, seed: int = 0) -> dict[str, list[SampleScores]]:
    rng = np.random.default_rng(seed)
    refs = reference_emotions(n, rng)
    languages = rng.choice(LANGUAGES, size=n)
    eye = np.eye(len(EMOTION_NAMES))
    reference = 0.6 * eye[refs] + 0.4 * rng.random((n, len(EMOTION_NAMES)))
    runs: dict[str, list[SampleScores]] = {}
    for m in range(models):
        bias = rng.dirichlet(np.ones(len(EMOTION_NAMES)))  # the model's favourite emotions
        strength = 0.1 * m / max(models - 1, 1)
        reply = rng.random((n, len(EMOTION_NAMES))) * bias + strength * eye[refs]
        silent = rng.random(n) < 0.03
        runs[f"model-{m}"] = [
            SampleScores(
                sample_id=f"s{i:05d}",
                emotion=EMOTION_NAMES[refs[i]],
                language=str(languages[i]),
                reference=reference[i],
                reply=None if silent[i] else reply[i],
            )
            for i in range(n)
        ]
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--samples", type=int, default=1005)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--permutations", type=int, default=1000)
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args(argv)

    runs = make_runs(args.models, args.samples)
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        compute_many(runs, permutations=args.permutations, bootstrap=args.bootstrap, seed=0)
        times.append(time.perf_counter() - start)
    best = min(times)
    print(
        f"{args.samples} samples x {args.models} models, {args.permutations} permutations, "
        f"{args.bootstrap} bootstrap resamples: best of {args.repeats} = {best:.3f} s "
        f"({best / args.models * 1000:.1f} ms per model); all: "
        + ", ".join(f"{t:.3f}" for t in times)
    )
    print(f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

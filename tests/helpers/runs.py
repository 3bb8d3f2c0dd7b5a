"""Short benchmarks and run settings for real runs in tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.helpers.sessions import settings
from tests.helpers.signals import voiced_signal, write_wav
from tests.helpers.timing import LENIENT, LENIENT_ARGS

SETTINGS = settings(max_reply_s=3.0, stall_timeout_s=1.0, deadline_margin_s=3.0, budget=LENIENT)


FAST_ARGS = [
    "--hangover", "0.5", "--reply-timeout", "1", "--max-reply", "3", "--quiet", *LENIENT_ARGS
]  # fmt: skip


def short_benchmark(root: Path, n: int) -> Path:
    emotions = ["Anger", "Sadness", "Pride"]
    lines = []
    for i in range(n):
        x = np.zeros(int(1.4 * 16000), np.float32)
        x[3200 : 3200 + 16000] = voiced_signal(1.0, f0=120.0 + 10 * i)
        write_wav(root / "audio" / f"s{i}.ctx.wav", x)
        write_wav(root / "audio" / f"s{i}.ref.wav", voiced_signal(0.5))
        lines.append(
            {
                "id": f"s{i}",
                "language": "en",
                "emotion": emotions[i % 3],
                "context": f"audio/s{i}.ctx.wav",
                "reference": f"audio/s{i}.ref.wav",
            }
        )
    (root / "manifest.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return root

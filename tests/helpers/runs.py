"""Short benchmarks and run settings for real runs in tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from duplexsim.core.audio import read_audio
from tests.helpers.paths import DEMO
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


LEAD_IN = 4800  # 0.3 s of silence before the cut: the speech starts as a turn does


def short_demo(root: Path, context_s: float = 3.0, ids: tuple[str, ...] | None = None) -> Path:
    """The shipped demo benchmark with each context cut to its last ``context_s`` seconds (the
    end of Speaker A's turn: what the echo model echoes), references and source ids as they are:
    the demo's reference models answer as on the whole demo, in a few seconds of real time."""
    lines = []
    for raw in (DEMO / "manifest.jsonl").read_text().splitlines():
        sample = json.loads(raw)
        if ids is not None and sample["id"] not in ids:
            continue
        context = read_audio(DEMO / sample["context"], sample_rate=16000).samples
        cut = np.concatenate([np.zeros(LEAD_IN, np.float32), context[-int(context_s * 16000) :]])
        write_wav(root / "audio" / f"{sample['id']}.ctx.wav", cut)
        reference = read_audio(DEMO / sample["reference"], sample_rate=16000).samples
        write_wav(root / "audio" / f"{sample['id']}.ref.wav", reference)
        sample |= {"context": f"audio/{sample['id']}.ctx.wav"}
        sample |= {"reference": f"audio/{sample['id']}.ref.wav", "context_turn_start_s": 0.0}
        lines.append(sample)
    (root / "manifest.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return root

"""Generate the demo's partner set (recordings/demo/partner.jsonl and recordings/demo/partner/)
from the shipped demo audio: no synthesiser needed.

    python recordings/make_partner_demo.py [--demo recordings/demo]

Each sample's context is Speaker A's final turn of an English demo sample (cut at its
``context_turn_start_s``), so a reference model answers it and nothing earlier. Its partner:

  * interruption-*: once the model has spoken 800 ms, Speaker A cuts in with the first second
    of another sample's speech;
  * backchannel-*: at the model's first pause of 200 ms, 0.35 s of Speaker B's voice;
  * multi-turn-*: two next turns, 300 ms after each reply ends: Speaker A's final turns of two
    other samples, each scored against that sample's reference (a conversation of three turns
    is three MIRRORING samples).

The reference models that talk through an interruption (``talk-through``) and that stop when
talked over (``stop-on-overlap``) make the partner metrics come out apart:
``duplexsim demo --partner``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import soundfile as sf

from duplexsim.core.audio import read_audio
from duplexsim.core.vad import speech_bounds

SR = 16_000
INTERRUPTIONS = (("en-surprise-1", "en-anger-1"), ("en-sadness-1", "en-impatience-1"))
BACKCHANNELS = (("en-pride-1", "en-amusement-1"), ("en-confusion-1", "en-elation-1"))
CONVERSATIONS = (("en-affection-1", "en-disappointment-1", "en-contemplation-1"),)


def _final_turn(demo: Path, line: dict[str, object]) -> np.ndarray:
    x = read_audio(demo / str(line["context"]), sample_rate=SR).samples
    return x[round(float(line["context_turn_start_s"]) * SR) :]  # type: ignore[arg-type]


def _speech(x: np.ndarray, seconds: float) -> np.ndarray:
    """The first ``seconds`` of the speech in ``x``, with 10 ms fades."""
    bounds = speech_bounds(x, SR)
    assert bounds is not None
    lo = round(bounds[0] * SR)
    clip = x[lo : lo + round(seconds * SR)].copy()
    fade = np.linspace(0.0, 1.0, SR // 100, dtype=np.float32)
    clip[: fade.size] *= fade
    clip[-fade.size :] *= fade[::-1]
    return clip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--demo", type=Path, default=Path(__file__).parent / "demo")
    demo = ap.parse_args().demo
    lines = {
        d["id"]: d for d in map(json.loads, (demo / "manifest.jsonl").read_text().splitlines())
    }
    out = demo / "partner"
    out.mkdir(exist_ok=True)

    def write(name: str, x: np.ndarray) -> str:
        sf.write(out / f"{name}.ogg", x, SR, format="OGG", subtype="VORBIS")
        return f"partner/{name}.ogg"

    def turn(sample: str) -> str:
        return write(f"{sample}.turn", _final_turn(demo, lines[sample]))

    def base(task: str, k: int, sample: str, **more: object) -> dict[str, object]:
        line = lines[sample]
        return {"id": f"{task.replace('_', '-')}-{k}", "language": "en", "task": task,
                "emotion": line["emotion"], "context": turn(sample),
                "reference": line["reference"], **more}  # fmt: skip

    manifest = []
    for k, (sample, other) in enumerate(INTERRUPTIONS, start=1):
        clip = write(f"{other}.cut-in", _speech(_final_turn(demo, lines[other]), 1.0))
        step = {"kind": "interrupt", "clip": clip, "after_onset_ms": 800}
        manifest.append(base("interruption", k, sample, partner=[step]))
    for k, (sample, other) in enumerate(BACKCHANNELS, start=1):
        voice = read_audio(demo / str(lines[other]["reference"]), sample_rate=SR).samples
        clip = write(f"{other}.backchannel", _speech(voice, 0.35))
        step = {"kind": "backchannel", "clip": clip, "at_pause_ms": 200}
        manifest.append(base("backchannel", k, sample, partner=[step]))
    for k, (sample, *others) in enumerate(CONVERSATIONS, start=1):
        steps = [
            {"kind": "next_turn", "clip": turn(o), "gap_ms": 300,
             "emotion": lines[o]["emotion"], "reference": lines[o]["reference"]}
            for o in others
        ]  # fmt: skip
        manifest.append(base("multi_turn", k, sample, partner=steps))
    text = "".join(json.dumps(line) + "\n" for line in manifest)
    (demo / "partner.jsonl").write_text(text, encoding="utf-8")
    print(f"wrote {len(manifest)} samples to {demo / 'partner.jsonl'}")


if __name__ == "__main__":
    main()

"""Empathic-Insight-Voice at real size on CPU: the model card's loop vs the shared-encoder loop vs
fused inference, side by side on the same batch.

    python bench/scorer_fused.py [--batch 4] [--rounds 3] [--quick] [--out FILE.json]

Model: a Whisper-Small-sized encoder (d_model 768, 12 layers, 12 heads, ffn 3072, 80 mels, 1500
positions; random init, nothing downloaded) and 12 Small-sized heads (P=64, H=[64,32,16];
1,152,000 inputs each, random nn.Linear-style init, ~295 MB fp32 each, ~3.5 GB together).

(a) reference   ``score_reference_loop``: per head, per clip: feature extractor, encoder, head
                (the model card's Colab; the encoder runs heads x clips times). Run once.
(b) shared      ``score_shared_encoder_loop``: one feature-extractor call and encoder pass per
                batch, then each head separately (LAION's batch scripts).
(c) fused fp32  ``score``: one encoder pass, all heads in one stacked matmul.
(d) fused bf16  ``score`` with precision="bf16" (encoder under bf16 autocast, proj weights bf16).

(b), (c), (d) are interleaved over ``--rounds`` rounds and the median is reported, so machine
noise hits them alike. The stage split (encoder vs heads) explains the (c)/(b) ratio. Deviations
are max |difference| of the scores against (a) (against (c) for bf16).

``--quick`` (smoke test, well under a minute): d_model 64, 2 layers, P=16 heads, 2 clips, 1 round.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from duplexsim.core.emotions import HEAD_NAMES
from duplexsim.scoring.models.empathic_insight import EmpathicInsightVoice
from duplexsim.scoring.models.precision import default_precision

SR = 16000
SMALL = {"d_model": 768, "layers": 12, "heads": 12, "ffn": 3072, "proj": 64, "hidden": (64, 32, 16)}
QUICK = {"d_model": 64, "layers": 2, "heads": 2, "ffn": 128, "proj": 16, "hidden": (16, 8, 4)}


def build_parts(
    spec: dict[str, Any], *, n_heads: int = 12, device: str = "cpu", seed: int = 0
) -> tuple[Any, Any, dict[str, dict[str, torch.Tensor]]]:
    """A random Whisper encoder, its feature extractor and ``n_heads`` random heads (on ``device``)."""
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperModel

    torch.manual_seed(seed)
    cfg = WhisperConfig(
        vocab_size=1000,
        num_mel_bins=80,
        d_model=spec["d_model"],
        encoder_layers=spec["layers"],
        encoder_attention_heads=spec["heads"],
        encoder_ffn_dim=spec["ffn"],
        decoder_layers=1,
        decoder_attention_heads=spec["heads"],
        decoder_ffn_dim=spec["ffn"],
        max_source_positions=1500,
        max_target_positions=448,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=3,
        suppress_tokens=[],
        begin_suppress_tokens=[],
    )
    encoder = WhisperModel(cfg).get_encoder().eval()
    extractor = WhisperFeatureExtractor(feature_size=80)
    widths = [spec["proj"], *spec["hidden"], 1]
    fan_ins = [1500 * spec["d_model"], *widths[:-1]]
    heads = {}
    gen = torch.Generator(device=device).manual_seed(seed)
    for name in _head_names(n_heads):
        state = {}
        for key, fan_in, fan_out in zip(
            ("proj", "mlp.2", "mlp.5", "mlp.8", "mlp.11"), fan_ins, widths, strict=True
        ):
            bound = 1.0 / math.sqrt(fan_in)  # nn.Linear's default init range
            state[f"{key}.weight"] = torch.empty(fan_out, fan_in, device=device).uniform_(
                -bound, bound, generator=gen
            )
            state[f"{key}.bias"] = torch.empty(fan_out, device=device).uniform_(
                -bound, bound, generator=gen
            )
        heads[name] = state
    return encoder, extractor, heads


def _head_names(n: int) -> list[str]:
    return list(HEAD_NAMES[:n]) + [f"Extra_{i}" for i in range(max(0, n - len(HEAD_NAMES)))]


def speech_clips(n: int, *, max_s: float = 30.0, seed: int = 0) -> list[np.ndarray]:
    """Harmonic 'speech' clips of spread lengths (4 s .. max_s; every clip costs the same 30 s)."""
    rng = np.random.default_rng(seed)
    lengths = np.linspace(min(4.0, max_s), max_s, n) if n > 1 else [max_s]
    out = []
    for seconds in lengths:
        t = np.arange(round(seconds * SR)) / SR
        f0 = rng.uniform(90, 280)
        tone = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 7))
        x = tone * (
            0.6 + 0.4 * np.sin(2 * np.pi * rng.uniform(3, 6) * t)
        ) + 0.02 * rng.standard_normal(t.size)
        out.append((0.3 * x / np.max(np.abs(x))).astype(np.float32))
    return out


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat (zeros where absent)."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def wait_idle(max_wait_s: float, busy_below: float = 0.15) -> float:
    """Wait (up to ``max_wait_s``) until the machine has been idle for 2 s; the seconds waited."""
    waited = 0.0
    while waited < max_wait_s:
        a = machine_jiffies()
        time.sleep(2.0)
        b = machine_jiffies()
        if (b[0] - a[0]) / max(1, b[1] - a[1]) < busy_below:
            break
        waited += 2.0
    return waited


OTHER_CPU: list[float] = []  # share of the machine's CPU used by other processes, per timing
WAIT_IDLE_S = 0.0


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of ``fn()``; records how busy other processes kept the machine meanwhile."""
    if WAIT_IDLE_S:
        wait_idle(WAIT_IDLE_S)
    jiffies, cpu = machine_jiffies(), os.times()
    start = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - start
    jiffies2, cpu2 = machine_jiffies(), os.times()
    if jiffies2[1] > jiffies[1]:
        tick = os.sysconf("SC_CLK_TCK")
        own = (cpu2.user - cpu.user) + (cpu2.system - cpu.system)
        other = (jiffies2[0] - jiffies[0]) / tick - own
        OTHER_CPU.append(max(0.0, other) / ((jiffies2[1] - jiffies[1]) / tick))
    return wall, result


def stage_split(
    scorer: EmpathicInsightVoice, clips: list[np.ndarray], repeats: int
) -> dict[str, float]:
    """Seconds per batch: features, encoder, all heads fused, all heads one by one."""
    with torch.inference_mode():
        t_feat, feats = timed(lambda: scorer._features(clips))
        t_enc, hidden = timed(lambda: scorer._encode(feats))
        fused = [timed(lambda: scorer._heads_fused(hidden))[0] for _ in range(repeats)]
        modules = [scorer.head_module(n) for n in scorer.dimensions]
        loop = [timed(lambda: [m(hidden) for m in modules])[0] for _ in range(repeats)]
    return {
        "features_s": t_feat,
        "encoder_s": t_enc,
        "heads_fused_s": statistics.median(fused),
        "heads_loop_s": statistics.median(loop),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--batch", type=int, default=4, help="clips per batch (default 4)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of (b), (c), (d)")
    ap.add_argument("--quick", action="store_true", help="tiny model smoke test")
    ap.add_argument(
        "--skip-reference", action="store_true", help="skip (a), the slow model-card loop"
    )
    ap.add_argument(
        "--wait-idle",
        type=float,
        default=60.0,
        metavar="S",
        help="before each timing, wait up to S s for other work on the machine to stop",
    )
    ap.add_argument("--out", type=Path, help="write every number as JSON")
    args = ap.parse_args(argv)
    global WAIT_IDLE_S
    WAIT_IDLE_S = 0.0 if args.quick else args.wait_idle
    spec = QUICK if args.quick else SMALL
    batch = 2 if args.quick else args.batch
    rounds = 1 if args.quick else args.rounds

    t_build, (encoder, extractor, heads) = timed(lambda: build_parts(spec))
    fp32 = EmpathicInsightVoice.from_parts(
        encoder, extractor, heads, precision="fp32", batch_size=batch
    )
    bf16 = EmpathicInsightVoice.from_parts(
        encoder, extractor, heads, precision="bf16", batch_size=batch
    )
    del heads
    clips = speech_clips(batch)
    print(
        f"# Empathic-Insight-Voice fused inference, CPU ({torch.get_num_threads()} threads, "
        f"torch {torch.__version__}, {platform.processor() or platform.machine()})"
    )
    print(
        f"model: d_model {spec['d_model']}, {spec['layers']} layers, 12 heads P={spec['proj']} "
        f"H={list(spec['hidden'])}; batch {batch} clips ({', '.join(f'{c.size / SR:.0f}' for c in clips)} s); "
        f"built in {t_build:.1f} s"
    )

    fp32.score(clips[:1]), bf16.score(clips[:1])  # warm-up (allocations, oneDNN kernels)
    results: dict[str, Any] = {"batch": batch, "spec": {**spec, "hidden": list(spec["hidden"])}}
    ref = None
    if not args.skip_reference:
        t_ref, ref = timed(lambda: fp32.score_reference_loop(clips))
        results["reference_s"] = t_ref
        print(f"(a) reference loop: {t_ref:.1f} s for the batch", flush=True)
    runs: dict[str, list[float]] = {"shared": [], "fused_fp32": [], "fused_bf16": []}
    outs: dict[str, Any] = {}
    for r in range(rounds):
        for key, fn in (
            ("shared", lambda: fp32.score_shared_encoder_loop(clips)),
            ("fused_fp32", lambda: fp32.score(clips)),
            ("fused_bf16", lambda: bf16.score(clips)),
        ):
            seconds, outs[key] = timed(fn)
            runs[key].append(seconds)
        print(
            f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in runs.items()),
            flush=True,
        )
    results["runs_s"] = runs
    med = {k: statistics.median(v) for k, v in runs.items()}
    base = ref if ref is not None else outs["fused_fp32"]
    dev = {
        "fused_fp32_vs_reference": float(np.abs(outs["fused_fp32"] - base).max()),
        "shared_vs_reference": float(np.abs(outs["shared"] - base).max()),
        "bf16_vs_fused_fp32": float(np.abs(outs["fused_bf16"] - outs["fused_fp32"]).max()),
        "score_std": float(outs["fused_fp32"].std()),
        "score_abs_max": float(np.abs(outs["fused_fp32"]).max()),
    }
    with (
        torch.inference_mode()
    ):  # bf16 error at the proj output, relative to its spread (scale-free)
        h32 = nn.functional.linear(
            fp32._encode(fp32._features(clips)).flatten(1), fp32._proj_w, fp32._proj_b
        )
        hidden16 = bf16._encode(bf16._features(clips)).flatten(1).to(torch.bfloat16)
        h16 = nn.functional.linear(hidden16, bf16._proj_w, bf16._proj_b).float()
    dev["bf16_proj_rel"] = float((h16 - h32).abs().max() / h32.std())
    results["deviation"] = dev
    results["stages_fp32"] = stage_split(fp32, clips, repeats=3)
    results["stages_bf16"] = stage_split(bf16, clips, repeats=3)

    rows = [
        ("(b) shared-encoder loop, fp32", med["shared"]),
        ("(c) fused, fp32", med["fused_fp32"]),
        ("(d) fused, bf16", med["fused_bf16"]),
    ]
    if ref is not None:
        rows.insert(0, ("(a) model-card per-head loop, fp32", results["reference_s"]))
    print("\n| method | s / batch | clips/s | time ÷ fused fp32 |")
    print("|---|---|---|---|")
    for label, seconds in rows:
        print(
            f"| {label} | {seconds:.2f} | {batch / seconds:.3f} | {seconds / med['fused_fp32']:.2f}x |"
        )
    if ref is not None:
        print(
            f"\nfused fp32 / (a): {results['reference_s'] / med['fused_fp32']:.2f}x (target >= 8x); "
            f"fused bf16 / (a): {results['reference_s'] / med['fused_bf16']:.2f}x"
        )
    print(
        f"fused fp32 / (b): {med['shared'] / med['fused_fp32']:.2f}x (target >= 1.5x); "
        f"fused bf16 / (b): {med['shared'] / med['fused_bf16']:.2f}x"
    )
    mode = default_precision("cpu")
    default_key = "fused_bf16" if mode == "bf16" else "fused_fp32"
    results["default_cpu_precision"] = mode
    results["default_vs_shared"] = med["shared"] / med[default_key]
    print(
        f"default CPU mode on this machine: {mode}; fused in it / (b): "
        f"{results['default_vs_shared']:.2f}x (target >= 1.5x); its largest deviation from fp32: "
        + (
            f"{dev['bf16_vs_fused_fp32']:.4f} on the scores, {dev['bf16_proj_rel']:.4f} x std "
            "at the proj output"
            if mode == "bf16"
            else "none (fp32)"
        )
    )
    for name in ("stages_fp32", "stages_bf16"):
        s = results[name]
        print(
            f"{name[7:]} stages per batch: features {s['features_s']:.3f} s, encoder {s['encoder_s']:.2f} s, "
            f"heads fused {s['heads_fused_s']:.3f} s, heads one by one {s['heads_loop_s']:.3f} s"
        )
    print(
        f"max |diff|: fused fp32 vs (a) {dev['fused_fp32_vs_reference']:.2e}, (b) vs (a) "
        f"{dev['shared_vs_reference']:.2e}, bf16 vs fp32 {dev['bf16_vs_fused_fp32']:.4f} "
        f"(scores: std {dev['score_std']:.3f}, max |score| {dev['score_abs_max']:.3f}); "
        f"bf16 proj output: max |diff| / std = {dev['bf16_proj_rel']:.4f}"
    )
    results["other_cpu_share"] = OTHER_CPU
    print(
        f"other processes used {100 * statistics.median(OTHER_CPU):.0f}% (median), "
        f"{100 * max(OTHER_CPU):.0f}% (max) of the machine's CPU during the timings"
    )
    results["clips_per_s"] = {k: batch / v for k, v in med.items()}
    if ref is not None:
        results["clips_per_s"]["reference"] = batch / results["reference_s"]
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

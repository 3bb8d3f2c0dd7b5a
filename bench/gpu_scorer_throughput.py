"""Empathic-Insight-Voice throughput on a GPU: clips/s of the fused scorer over a batch sweep.

    python bench/gpu_scorer_throughput.py                      # cuda, bf16 and fp16, batches 32..256
    python bench/gpu_scorer_throughput.py --precision bf16 --batches 64 128 --out gpu.json
    python bench/gpu_scorer_throughput.py --device cpu --quick # smoke test on any machine

Model: Whisper-Small-sized encoder (d_model 768, 12 layers) and 12 Small heads (P=64,
H=[64,32,16]), random weights built directly on the device (nothing downloaded). Clips are 16 kHz
float32 numpy arrays of 4-30 s; every clip costs the same because the scorer pads to 30 s.

For each precision and batch size: two warm-up batches, then ``--repeats`` timed calls of
``scorer.score(clips)`` (numpy in, numpy out: host padding, H2D copy, log-mel on the GPU, encoder,
fused heads, D2H), and a stage split (features / encoder / heads, each timed with a device sync).
Also: max |bf16 or fp16 - fp32| on one batch, and peak device memory. Target: >= 500 clips/s on
one H200. The whole default sweep takes about 2-3 minutes including the model build.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scorer_fused import QUICK, SMALL, build_parts, speech_clips

from duplexsim.scoring.models.empathic_insight import EmpathicInsightVoice

TARGET = 500.0


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def stage_split(scorer: EmpathicInsightVoice, clips: list[np.ndarray]) -> dict[str, float]:
    dev = scorer.device
    out = {}
    with torch.inference_mode():
        sync(dev)
        t0 = time.perf_counter()
        feats = scorer._features(clips)
        sync(dev)
        t1 = time.perf_counter()
        hidden = scorer._encode(feats)
        sync(dev)
        t2 = time.perf_counter()
        scorer._heads_fused(hidden).cpu()
        t3 = time.perf_counter()
    out["features_s"], out["encoder_s"], out["heads_s"] = t1 - t0, t2 - t1, t3 - t2
    return out


def sweep(
    scorer: EmpathicInsightVoice, pool: list[np.ndarray], batches: list[int], repeats: int
) -> list[dict[str, Any]]:
    rows = []
    for batch in batches:
        scorer.batch_size = batch
        clips = (pool * (batch // len(pool) + 1))[:batch]
        for _ in range(2):
            scorer.score(clips)
        if scorer.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(scorer.device)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            scorer.score(clips)  # returns numpy: includes the device sync
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        row = {
            "precision": scorer.precision,
            "batch": batch,
            "s_per_batch": seconds,
            "clips_per_s": batch / seconds,
            "best_clips_per_s": batch / min(times),
            **stage_split(scorer, clips),
        }
        if scorer.device.type == "cuda":
            row["peak_gib"] = torch.cuda.max_memory_allocated(scorer.device) / 2**30
        rows.append(row)
        print(
            f"| {row['precision']} | {batch} | {seconds * 1000:.0f} | {row['clips_per_s']:.0f} | "
            f"{row['features_s'] * 1000:.0f} / {row['encoder_s'] * 1000:.0f} / {row['heads_s'] * 1000:.0f} | "
            f"{row.get('peak_gib', float('nan')):.1f} |",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--device", default="cuda")
    ap.add_argument(
        "--precision", nargs="+", default=["bf16", "fp16"], choices=["bf16", "fp16", "fp32"]
    )
    ap.add_argument("--batches", nargs="+", type=int, default=[32, 64, 128, 256])
    ap.add_argument("--repeats", type=int, default=5, help="timed calls per batch size")
    ap.add_argument(
        "--quick", action="store_true", help="tiny model, batch 2, 1 repeat (smoke test)"
    )
    ap.add_argument("--out", type=Path, help="write every number as JSON")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("CUDA is not available; use --device cpu --quick for a smoke test", file=sys.stderr)
        return 2
    spec = QUICK if args.quick else SMALL
    batches = [2] if args.quick else args.batches
    repeats = 1 if args.quick else args.repeats
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"# Empathic-Insight-Voice fused throughput on {name} (torch {torch.__version__})")

    t0 = time.perf_counter()
    encoder, extractor, heads = build_parts(spec, device=str(device))
    pool = speech_clips(16)
    print(
        f"model: d_model {spec['d_model']}, {spec['layers']} layers, 12 heads P={spec['proj']}; "
        f"built in {time.perf_counter() - t0:.1f} s"
    )
    reference = EmpathicInsightVoice.from_parts(
        encoder, extractor, heads, device=str(device), precision="fp32", batch_size=8
    )
    exact = reference.score(pool[:8])
    if "fp32" not in args.precision:
        del reference
    results: dict[str, Any] = {
        "device": name,
        "spec": {**spec, "hidden": list(spec["hidden"])},
        "rows": [],
        "deviation_vs_fp32": {},
    }
    print(
        "\n| precision | batch | ms / batch | clips/s | features / encoder / heads ms | peak GiB |"
    )
    print("|---|---|---|---|---|---|")
    for precision in args.precision:
        scorer = (
            reference
            if precision == "fp32"
            else EmpathicInsightVoice.from_parts(
                encoder, extractor, heads, device=str(device), precision=precision, batch_size=8
            )
        )
        results["deviation_vs_fp32"][precision] = float(
            np.abs(scorer.score(pool[:8]) - exact).max()
        )
        results["rows"] += sweep(scorer, pool, batches, repeats)
        del scorer
        if device.type == "cuda":
            torch.cuda.empty_cache()
    best = max(results["rows"], key=lambda r: r["clips_per_s"])
    verdict = "meets" if best["clips_per_s"] >= TARGET else "misses"
    print(
        f"\nbest: {best['clips_per_s']:.0f} clips/s ({best['precision']}, batch {best['batch']}); "
        f"{verdict} the {TARGET:.0f} clips/s target"
    )
    print(
        "max |score - fp32 score| on 8 clips: "
        + ", ".join(f"{k} {v:.4f}" for k, v in results["deviation_vs_fp32"].items())
        + f" (fp32 scores: std {exact.std():.3f})"
    )
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Empathic-Insight-Voice test helpers: a tiny Whisper encoder and heads saved as real weights, a
recorded run to score."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from duplexsim.cli import main
from duplexsim.clients.fakekit.behaviours import behaviour_factory
from duplexsim.clients.pcm_ws.server import start_server
from duplexsim.core.benchmark import load_benchmark
from duplexsim.profiles.profile import ModelProfile
from duplexsim.run.runner import RunOptions, execute_run
from duplexsim.scoring.models.empathic_insight import head_filename
from duplexsim.session import eventloop
from tests.helpers.runs import SETTINGS, short_benchmark

torch = pytest.importorskip("torch")


transformers = pytest.importorskip("transformers")


D_MODEL = 8


SEQ = 1500


def tiny_whisper(d_model: int = D_MODEL, seed: int = 0) -> object:
    torch.manual_seed(seed)
    cfg = transformers.WhisperConfig(
        vocab_size=100,
        num_mel_bins=80,
        d_model=d_model,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=16,
        decoder_ffn_dim=16,
        max_source_positions=SEQ,
        max_target_positions=32,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=3,
        suppress_tokens=[],
        begin_suppress_tokens=[],
    )
    model = transformers.WhisperModel(cfg).eval()
    with torch.no_grad():  # let the audio, not the positional embedding, dominate the states
        model.encoder.conv1.weight.mul_(20.0)
        model.encoder.conv2.weight.mul_(20.0)
    return model


def save_encoder(folder: Path, *, d_model: int = D_MODEL, extractor: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    tiny_whisper(d_model).save_pretrained(folder)
    if extractor:
        transformers.WhisperFeatureExtractor(feature_size=80).save_pretrained(folder)
    return folder


def head_state(
    p: int, hidden: Sequence[int], seed: int, *, d_model: int = D_MODEL, prefix: str = ""
) -> dict[str, torch.Tensor]:
    """A random head under the real key names (independent of the scorer's own module)."""
    gen = torch.Generator().manual_seed(seed)
    widths = [p, *hidden, 1]
    fan_ins = [SEQ * d_model, *widths[:-1]]
    state = {}
    for key, fan_in, fan_out in zip(
        ("proj", "mlp.2", "mlp.5", "mlp.8", "mlp.11"), fan_ins, widths, strict=True
    ):
        scale = (4.0 if key == "proj" else 1.0) / math.sqrt(fan_in)
        state[f"{prefix}{key}.weight"] = scale * torch.randn(fan_out, fan_in, generator=gen)
        state[f"{prefix}{key}.bias"] = 0.5 + 0.3 * torch.randn(fan_out, generator=gen)  # live ReLUs
    return state


def save_heads(
    folder: Path,
    names: Sequence[str],
    *,
    p: int = 4,
    hidden: Sequence[int] = (4, 3, 2),
    prefix: str = "",
    d_model: int = D_MODEL,
    seed: int = 100,
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(names):
        torch.save(
            head_state(p, hidden, seed + i, d_model=d_model, prefix=prefix),
            folder / head_filename(name),
        )


def duplexsim(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One session of an echo model: a reply and a reference to score."""
    root = tmp_path_factory.mktemp("run")
    bench = load_benchmark(short_benchmark(root / "bench", 1))

    async def record() -> None:
        server = await start_server(behaviour_factory("echo", hangover_s=0.25))
        try:
            profile = ModelProfile(name="fake-echo", protocol="pcm-ws", url=server.url)
            opts = RunOptions(run_id="echo", runs_dir=root / "runs", settings=SETTINGS, quiet=True)
            await execute_run(bench, profile, opts)
        finally:
            await server.aclose()

    eventloop.run(record())
    return root / "runs" / "echo"

"""Empathic-Insight-Voice scorer on a tiny random checkpoint in the real file layout.

The checkpoint has the real file names and state_dict keys (``proj.weight``, ``mlp.2.weight`` ...,
optionally ``_orig_mod.``-prefixed), a Whisper encoder with the real sequence length (1500 frames,
80 mels) but d_model 8 and one layer, and a saved ``WhisperFeatureExtractor``. Real weights and GPUs
are only used by the ``live`` / ``gpu`` tests at the end (opt-in).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from duplexsim.core.emotions import HEAD_NAMES
from duplexsim.core.errors import ConfigError
from duplexsim.runscores.score import cache_path, score_run
from duplexsim.scoring.models import load_scorer, precision
from duplexsim.scoring.models.base import emotion_matrix
from duplexsim.scoring.models.empathic_insight import EmpathicInsightVoice, head_filename
from duplexsim.scoring.service.api import registry_factory
from tests.helpers.eiv import (
    D_MODEL,
    SEQ,
    duplexsim,
    head_state,
    save_encoder,
    save_heads,
    torch,
)

SR = 16000
TOL = 1e-4


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_encoder(tmp_path_factory.mktemp("eiv") / "encoder")


@pytest.fixture
def make_checkpoint(encoder_dir: Path, tmp_path: Path) -> Callable[..., Path]:
    """A model folder: the encoder files plus heads at the top or under heads/."""

    def make(
        names: Sequence[str] = HEAD_NAMES, *, subdir: str = "", **head_options: object
    ) -> Path:
        root = tmp_path / "model"
        shutil.copytree(encoder_dir, root, dirs_exist_ok=True)
        save_heads(root / subdir if subdir else root, names, **head_options)  # type: ignore[arg-type]
        return root

    return make


@pytest.fixture(scope="module")
def scorer(tmp_path_factory: pytest.TempPathFactory, encoder_dir: Path) -> EmpathicInsightVoice:
    root = tmp_path_factory.mktemp("eiv-model")
    shutil.copytree(encoder_dir, root, dirs_exist_ok=True)
    save_heads(root, HEAD_NAMES)
    return EmpathicInsightVoice(model_path=root, batch_size=3, precision="fp32")


def speech(seconds: float, *, f0: float = 140.0, seed: int = 0) -> np.ndarray:
    """Harmonics under a syllable envelope plus a little noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * SR)) / SR
    tone = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 7))
    x = tone * (0.6 + 0.4 * np.sin(2 * np.pi * 4.0 * t)) + 0.02 * rng.standard_normal(t.size)
    return (0.3 * x / np.max(np.abs(x))).astype(np.float32)


@pytest.fixture(scope="module")
def clips() -> list[np.ndarray]:
    return [
        speech(s, f0=f, seed=i)
        for i, (s, f) in enumerate(
            [(1.0, 120.0), (3.5, 220.0), (0.4, 90.0), (7.0, 170.0), (2.0, 300.0)]
        )
    ]


# ---------------------------------------------------------------------------- loading


def test_loads_the_twelve_mirroring_heads_by_default(
    scorer: EmpathicInsightVoice, clips: list[np.ndarray]
) -> None:
    assert scorer.dimensions == HEAD_NAMES
    assert scorer.comparable_with_mirroring is True
    assert scorer.precision == "fp32"
    assert scorer.info["heads"]["Anger"] == [4, 4, 3, 2]
    scores = scorer.score(clips)
    assert scores.shape == (len(clips), 12) and scores.dtype == np.float32
    assert np.all(np.isfinite(scores))
    assert emotion_matrix(scores, scorer.dimensions).shape == (len(clips), 12)
    # the random heads are not degenerate (dead ReLUs would make every comparison vacuous)
    assert (scores.std(axis=0) > 1e-3).sum() >= 8


def test_registry_builds_it(make_checkpoint: Callable[..., Path]) -> None:
    root = make_checkpoint(["Anger", "Sadness"])
    model = load_scorer(
        "empathic-insight-voice-small", model_path=root, dimensions=["Sadness", "Anger"]
    )
    assert isinstance(model, EmpathicInsightVoice) and model.size == "small"
    assert model.dimensions == ("Sadness", "Anger")


def test_heads_in_a_heads_subfolder(
    make_checkpoint: Callable[..., Path], scorer: EmpathicInsightVoice, clips: list[np.ndarray]
) -> None:
    root = make_checkpoint(subdir="heads")
    assert not list(root.glob("model_*_best.pth"))
    sub = EmpathicInsightVoice(model_path=root, precision="fp32")
    np.testing.assert_allclose(sub.score(clips[:2]), scorer.score(clips[:2]), atol=TOL)


def test_dimension_selection_keeps_the_requested_order(
    make_checkpoint: Callable[..., Path], scorer: EmpathicInsightVoice, clips: list[np.ndarray]
) -> None:
    root = make_checkpoint()
    pick = ["Sadness", "Anger", "Impatience_and_Irritability"]
    sub = EmpathicInsightVoice(model_path=root, dimensions=pick, precision="fp32")
    assert sub.dimensions == tuple(pick)
    full = scorer.score(clips[:2])
    cols = [HEAD_NAMES.index(n) for n in pick]
    np.testing.assert_allclose(sub.score(clips[:2]), full[:, cols], atol=TOL)
    assert EmpathicInsightVoice(model_path=root, dimensions="Anger, Pride").dimensions == (
        "Anger",
        "Pride",
    )


def test_all_loads_every_head_file(make_checkpoint: Callable[..., Path]) -> None:
    root = make_checkpoint([*HEAD_NAMES, "Valence", "Jealousy_&_Envy"])
    model = EmpathicInsightVoice(model_path=root, dimensions="all")
    assert set(model.dimensions) == {*HEAD_NAMES, "Valence", "Jealousy_&_Envy"}
    assert len(model.dimensions) == 14


def test_orig_mod_prefix_and_large_shapes(
    make_checkpoint: Callable[..., Path], clips: list[np.ndarray]
) -> None:
    root = make_checkpoint(prefix="_orig_mod.", p=8, hidden=(8, 6, 4))
    model = load_scorer("empathic-insight-voice-large", model_path=root, precision="fp32")
    assert model.size == "large"  # type: ignore[attr-defined]
    assert model.info["heads"]["Pride"] == [8, 8, 6, 4]  # type: ignore[attr-defined]
    fused = model.score(clips[:3])
    np.testing.assert_allclose(fused, model.score_reference_loop(clips[:3]), atol=TOL)  # type: ignore[attr-defined]


def test_heads_of_mixed_shapes_fuse_in_groups(
    make_checkpoint: Callable[..., Path], clips: list[np.ndarray]
) -> None:
    root = make_checkpoint(HEAD_NAMES[:6])
    save_heads(root, HEAD_NAMES[6:], p=6, hidden=(5, 4, 3), seed=300)
    model = EmpathicInsightVoice(model_path=root, batch_size=2, precision="fp32")
    assert len(model._groups) == 2
    fused = model.score(clips)
    np.testing.assert_allclose(fused, model.score_shared_encoder_loop(clips), atol=TOL)
    np.testing.assert_allclose(fused, model.score_reference_loop(clips), atol=TOL)


# ---------------------------------------------------------------------------- errors


def test_missing_head_names_the_file(make_checkpoint: Callable[..., Path]) -> None:
    root = make_checkpoint([n for n in HEAD_NAMES if n != "Astonishment_Surprise"])
    with pytest.raises(
        ConfigError, match=r"model_Astonishment_Surprise_best\.pth.*--model-path"
    ) as err:
        EmpathicInsightVoice(model_path=root)
    assert "\n" not in err.value.message


def test_canonical_name_instead_of_head_name_gets_a_hint(
    make_checkpoint: Callable[..., Path],
) -> None:
    root = make_checkpoint()
    with pytest.raises(
        ConfigError, match="did you mean the head name 'Impatience_and_Irritability'"
    ):
        EmpathicInsightVoice(model_path=root, dimensions=["Impatience"])


def test_missing_encoder(tmp_path: Path) -> None:
    save_heads(tmp_path, HEAD_NAMES)
    with pytest.raises(
        ConfigError, match=r"no Whisper encoder .*config\.json missing.*--model-path"
    ):
        EmpathicInsightVoice(model_path=tmp_path)


def test_encoder_config_without_weights(make_checkpoint: Callable[..., Path]) -> None:
    root = make_checkpoint()
    for weights in root.glob("*.safetensors"):
        weights.unlink()
    with pytest.raises(ConfigError, match="cannot load the Whisper encoder"):
        EmpathicInsightVoice(model_path=root)


def test_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a folder"):
        EmpathicInsightVoice(model_path=tmp_path / "nope")


def test_head_for_another_encoder_width(make_checkpoint: Callable[..., Path]) -> None:
    root = make_checkpoint()
    save_heads(root, ["Anger"], d_model=16)
    with pytest.raises(
        ConfigError, match=r"model_Anger_best\.pth: head expects 24000 inputs .*12000"
    ):
        EmpathicInsightVoice(model_path=root)


def test_file_that_is_not_a_head(make_checkpoint: Callable[..., Path]) -> None:
    root = make_checkpoint()
    state = head_state(4, (4, 3, 2), 0)
    del state["mlp.8.bias"]
    torch.save(state, root / head_filename("Pride"))
    with pytest.raises(
        ConfigError,
        match=r"model_Pride_best\.pth: not an Empathic-Insight-Voice head \(missing mlp\.8\.bias",
    ):
        EmpathicInsightVoice(model_path=root)
    (root / head_filename("Pride")).write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match=r"model_Pride_best\.pth: cannot read head checkpoint"):
        EmpathicInsightVoice(model_path=root)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"precision": "int8"}, "precision must be one of"),
        ({"dimensions": []}, "dimensions must be"),
        ({"dimensions": ["Anger", "Anger"]}, "listed twice"),
        ({"temperature": 1}, "unknown option"),
        ({"size": "medium"}, "size must be small or large"),
        ({"batch_size": -1}, "batch_size"),
    ],
)
def test_bad_options(
    make_checkpoint: Callable[..., Path], options: dict[str, object], message: str
) -> None:
    root = make_checkpoint()
    with pytest.raises(ConfigError, match=message):
        EmpathicInsightVoice(model_path=root, **options)  # type: ignore[arg-type]


def test_hf_cache_miss_never_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(
        ConfigError,
        match=r"laion/BUD-E-Whisper is not in the Hugging Face cache; run `duplexsim scorer "
        r"download empathic-insight-voice-small` or pass --model-path",
    ):
        EmpathicInsightVoice(model_path=None, cache_dir=tmp_path / "hf")
    assert not any((tmp_path / "hf").glob("**/*.pth")) if (tmp_path / "hf").exists() else True


def test_hf_cache_hit(encoder_dir: Path, tmp_path: Path, clips: list[np.ndarray]) -> None:
    """A pre-seeded cache in huggingface_hub's layout (refs/main -> snapshots/<commit>/...)."""
    cache = tmp_path / "hub"
    for repo, fill in (
        ("laion/BUD-E-Whisper", lambda d: shutil.copytree(encoder_dir, d)),
        ("laion/Empathic-Insight-Voice-Small", lambda d: save_heads(d, HEAD_NAMES)),
    ):
        base = cache / f"models--{repo.replace('/', '--')}"
        (base / "refs").mkdir(parents=True)
        (base / "refs" / "main").write_text("0" * 40)
        fill(base / "snapshots" / ("0" * 40))
    model = EmpathicInsightVoice(model_path=None, cache_dir=cache)
    assert model.dimensions == HEAD_NAMES
    assert model.score(clips[:1]).shape == (1, 12)


# ---------------------------------------------------------------------------- numerics


def test_fused_equals_reference_loop_and_shared_encoder_loop(
    scorer: EmpathicInsightVoice, clips: list[np.ndarray]
) -> None:
    fused = scorer.score(clips)
    reference = scorer.score_reference_loop(clips)
    shared = scorer.score_shared_encoder_loop(clips)
    np.testing.assert_allclose(fused, reference, atol=TOL, rtol=0)
    np.testing.assert_allclose(shared, reference, atol=TOL, rtol=0)


def test_device_features_match_the_feature_extractor(
    scorer: EmpathicInsightVoice, clips: list[np.ndarray]
) -> None:
    with torch.inference_mode():
        ours = scorer._features(clips)
        theirs = scorer._fe_features(clips)
    assert ours.shape == theirs.shape == (len(clips), 80, 3000)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


def test_heads_match_laions_module_one_by_one(scorer: EmpathicInsightVoice) -> None:
    hidden = torch.randn(3, SEQ, D_MODEL)
    with torch.inference_mode():
        fused = scorer._heads_fused(hidden)
        for col, name in enumerate(scorer.dimensions):
            torch.testing.assert_close(
                fused[:, col], scorer.head_module(name)(hidden)[:, 0], atol=1e-5, rtol=0
            )


def test_batch_order_and_size_do_not_matter(
    scorer: EmpathicInsightVoice, clips: list[np.ndarray]
) -> None:
    base = scorer.score(clips)
    order = [3, 0, 4, 2, 1]
    np.testing.assert_allclose(scorer.score([clips[i] for i in order]), base[order], atol=TOL)
    singles = np.concatenate([scorer.score([c]) for c in clips])
    np.testing.assert_allclose(singles, base, atol=TOL)
    assert scorer.score([]).shape == (0, 12)


def test_short_clips_are_padded_and_long_ones_truncated(scorer: EmpathicInsightVoice) -> None:
    short = speech(2.0, seed=7)
    padded = np.concatenate([short, np.zeros(28 * SR, np.float32)])
    np.testing.assert_allclose(scorer.score([short]), scorer.score([padded]), atol=TOL)
    long = speech(31.0, seed=8)
    np.testing.assert_allclose(scorer.score([long]), scorer.score([long[: 30 * SR]]), atol=TOL)
    np.testing.assert_allclose(
        scorer.score_reference_loop([long]),
        scorer.score_reference_loop([long[: 30 * SR]]),
        atol=TOL,
    )
    # and the padding is not a no-op: where speech sits in the window changes the score
    shifted = np.concatenate([np.zeros(5 * SR, np.float32), short])
    assert np.abs(scorer.score([shifted]) - scorer.score([short])).max() > 1e-3


def test_bf16_runs_close_to_fp32(
    make_checkpoint: Callable[..., Path], scorer: EmpathicInsightVoice, clips: list[np.ndarray]
) -> None:
    root = make_checkpoint()
    low = EmpathicInsightVoice(model_path=root, precision="bf16")
    assert low._proj_w.dtype == torch.bfloat16
    fp32 = scorer.score(clips)
    bf16 = low.score(clips)
    deviation = float(np.abs(bf16 - fp32).max())
    spread = float(fp32.std())
    print(f"\nbf16 vs fp32: max |diff| {deviation:.4f}, score std {spread:.3f}")
    assert np.all(np.isfinite(bf16))
    assert deviation < 0.1 * max(spread, 1.0)
    np.testing.assert_allclose(low.score_shared_encoder_loop(clips), bf16, atol=0.05)


# ---------------------------------------------------------------------------- precision


@pytest.mark.parametrize(
    ("flags", "native"),
    [
        ("fpu sse2 avx2 avx512f amx_bf16 amx_tile amx_int8", True),
        ("fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni", True),
        ("fpu sse2 avx2 avx512f avx512_vnni avx512_fp16", False),
        ("", False),
    ],
)
def test_native_bf16_from_cpu_flags(flags: str, native: bool) -> None:
    assert precision.native_bf16(flags) is native


@pytest.fixture
def cpuinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """Point the cached /proc/cpuinfo reader at a file with the given flags."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the flags are read on Linux only")

    def write(flags: str) -> None:
        path = tmp_path / "cpuinfo"
        path.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: {flags}\n\n")
        monkeypatch.setattr(precision, "CPUINFO", path)
        precision.cpu_has_native_bf16.cache_clear()

    yield write
    precision.cpu_has_native_bf16.cache_clear()


def test_cpu_default_is_bf16_only_with_native_bf16(
    cpuinfo: Callable[[str], None], make_checkpoint: Callable[..., Path]
) -> None:
    root = make_checkpoint(["Anger"])
    cpuinfo("fpu avx2 avx512f amx_bf16")
    assert precision.default_precision("cpu") == "bf16"
    assert EmpathicInsightVoice(model_path=root, dimensions="Anger").precision == "bf16"
    cpuinfo("fpu avx2 avx512f")
    model = EmpathicInsightVoice(model_path=root, dimensions="Anger")
    assert model.precision == model.info["precision"] == "fp32"
    assert precision.default_precision("cuda") == "bf16"


def test_unreadable_cpuinfo_or_another_os_means_fp32(
    cpuinfo: Callable[[str], None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpuinfo("amx_bf16")
    assert precision.cpu_has_native_bf16()
    monkeypatch.setattr(precision, "CPUINFO", tmp_path / "missing")
    precision.cpu_has_native_bf16.cache_clear()
    assert not precision.cpu_has_native_bf16()
    cpuinfo("amx_bf16")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert not precision.cpu_has_native_bf16()  # cache cleared by cpuinfo()


def test_precision_reaches_the_scorer_and_prosody_has_none(
    make_checkpoint: Callable[..., Path],
) -> None:
    root = make_checkpoint()
    model = registry_factory("cpu", root, "fp16")("empathic-insight-voice-small")
    assert model.precision == "fp16" and model._proj_w.dtype == torch.float16  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match=r"^the prosody scorer has no precision option$"):
        load_scorer("prosody", precision="fp32")
    assert load_scorer("prosody", precision=None).precision is None
    with pytest.raises(ConfigError, match="precision must be one of fp32, bf16, fp16"):
        load_scorer("empathic-insight-voice-small", model_path=root, precision="int8")


def test_score_precision_is_cached_and_another_one_rescores(
    recorded_run: Path, make_checkpoint: Callable[..., Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, model = recorded_run, ("--model-path", make_checkpoint())
    cache = cache_path(run, "empathic-insight-voice-small")
    code, out, err = duplexsim(capsys, "score", run, *model, "--precision", "fp32", "--rescore")
    assert code == 0, err
    assert "2 clips scored, 0 from cache" in out and ", fp32, v1))" in out
    fp32 = json.loads(cache.read_text())
    assert fp32["identity"]["precision"] == "fp32"
    assert fp32["identity"]["weights"].startswith("sha256:")
    assert (
        "0 clips scored, 2 from cache"
        in duplexsim(capsys, "score", run, *model, "--precision", "fp32")[1]
    )

    code, out, err = duplexsim(capsys, "score", run, *model, "--precision", "bf16")
    assert code == 0, err
    assert "2 clips scored, 0 from cache" in out and "bf16, v1))" in out
    bf16 = json.loads(cache.read_text())
    assert bf16["identity"]["precision"] == "bf16" and bf16["items"].keys() == fp32["items"].keys()
    for key, item in fp32["items"].items():  # made anew at bf16: close, not equal
        assert bf16["items"][key]["values"] != item["values"]
        np.testing.assert_allclose(bf16["items"][key]["values"], item["values"], atol=0.1)

    # a cache from before identities were recorded (name and precision only) is rescored; the
    # reference comes from the benchmark's reference cache the first fp32 scoring filled
    old = {"version": 1, "scorer": "empathic-insight-voice-small", "precision": "fp32"}
    cache.write_text(json.dumps(old | {k: fp32[k] for k in ("dimensions", "items")}))
    code, out, _ = duplexsim(capsys, "score", run, *model, "--precision", "fp32")
    assert "1 clips scored, 0 from cache, 1 references from the benchmark's" in out
    again = json.loads(cache.read_text())["items"]
    assert again.keys() == fp32["items"].keys()
    for key, item in fp32["items"].items():  # fp32 in another batch: equal to rounding
        np.testing.assert_allclose(again[key]["values"], item["values"], rtol=1e-5, atol=1e-6)


def test_other_weights_rescore_and_rescore_recomputes(
    recorded_run: Path, make_checkpoint: Callable[..., Path], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    run = recorded_run
    cache = cache_path(run, "empathic-insight-voice-small")
    first = make_checkpoint()
    code, out, err = duplexsim(capsys, "score", run, "--model-path", first, "--precision", "fp32")
    assert code == 0, err
    before = json.loads(cache.read_text())
    assert (
        "0 clips scored, 2 from cache"
        in duplexsim(capsys, "score", run, "--model-path", first, "--precision", "fp32")[1]
    )
    # the same file layout and names, other head weights: every clip is scored anew
    other = shutil.copytree(first, tmp_path / "other")
    save_heads(other, HEAD_NAMES, seed=900)
    code, out, err = duplexsim(capsys, "score", run, "--model-path", other, "--precision", "fp32")
    assert code == 0, err
    assert "2 clips scored, 0 from cache" in out
    after = json.loads(cache.read_text())
    assert after["identity"]["weights"] != before["identity"]["weights"]
    assert after["items"]["reply/s0"]["values"] != before["items"]["reply/s0"]["values"]
    # --rescore: scored anew with the same weights, to the same values
    code, out, err = duplexsim(
        capsys, "score", run, "--model-path", other, "--precision", "fp32", "--rescore"
    )
    assert "2 clips scored, 0 from cache" in out
    rescored = json.loads(cache.read_text())["items"]
    for key, item in after["items"].items():
        np.testing.assert_allclose(rescored[key]["values"], item["values"], rtol=1e-5, atol=1e-6)


def fake_scorer(*precisions: str) -> Any:
    """Scores every clip by its length; call k answers at ``precisions[k]`` (the first call is
    the identity probe)."""
    answers = iter(precisions)

    async def score(clips: list[np.ndarray]) -> list[SimpleNamespace]:
        at = next(answers)
        return [
            SimpleNamespace(
                dimensions=("n",),
                values=np.array([c.size], np.float32),
                error=None,
                precision=at,
                weights="sha256:0",
                version="1",
            )
            for c in clips
        ]

    return score


def test_scores_of_two_identities_are_never_mixed_in_a_cache(recorded_run: Path) -> None:
    first = asyncio.run(score_run(recorded_run, "fake", fake_scorer("fp32", "fp32"), rescore=True))
    assert (first.scored, first.cached, first.precision) == (2, 0, "fp32")
    # a probe at bf16: the fp32 cache is stale, every clip is scored anew
    second = asyncio.run(
        score_run(recorded_run, "fake", fake_scorer("bf16", "bf16", "bf16"), batch=1)
    )
    assert (second.scored, second.cached, second.precision) == (2, 0, "bf16")
    path = cache_path(recorded_run, "fake")
    assert json.loads(path.read_text())["identity"]["precision"] == "bf16"
    # workers at two precisions within one call: refused, not mixed
    with pytest.raises(ConfigError, match=r"fp32, v1\) and from fake \(weights sha256:0, bf16"):
        asyncio.run(
            score_run(recorded_run, "fake", fake_scorer("fp32", "bf16"), rescore=True, batch=1)
        )


def test_prosody_with_an_explicit_precision_is_a_one_line_error(
    recorded_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = duplexsim(capsys, "score", recorded_run, "--precision", "fp32")
    assert (code, err) == (2, "duplexsim: error: the prosody scorer has no precision option\n")
    code, _, err = duplexsim(
        capsys,
        "score",
        recorded_run,
        "--scorer",
        "empathic-insight-voice-small",
        "--endpoint",
        "tcp://127.0.0.1:1",
        "--precision",
        "bf16",
    )
    assert code == 2 and err.startswith("duplexsim: error: --precision applies to in-process")
    assert err.count("\n") == 1


# ---------------------------------------------------------------------------- opt-in


@pytest.mark.live
def test_real_weights_from_model_path() -> None:
    """EIV_MODEL_PATH=/path/to/folder pytest -m live -k real_weights"""
    path = os.environ.get("EIV_MODEL_PATH")
    if not path:
        pytest.skip("set EIV_MODEL_PATH to a folder with BUD-E-Whisper and the 12 heads")
    model = EmpathicInsightVoice(model_path=path, precision="fp32")
    clip = speech(4.0)
    fused = model.score([clip])
    np.testing.assert_allclose(fused, model.score_reference_loop([clip]), atol=TOL)
    assert np.all((fused > -2) & (fused < 6))  # emotions are trained on a 0-4 scale


@pytest.mark.gpu
def test_cuda_bf16_matches_cpu_fp32(
    make_checkpoint: Callable[..., Path], scorer: EmpathicInsightVoice, clips: list[np.ndarray]
) -> None:
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    root = make_checkpoint()
    gpu = EmpathicInsightVoice(model_path=root, device="cuda")
    assert gpu.precision == "bf16"
    np.testing.assert_allclose(gpu.score(clips), scorer.score(clips), atol=0.1)
    exact = EmpathicInsightVoice(model_path=root, device="cuda", precision="fp32")
    np.testing.assert_allclose(exact.score(clips), scorer.score(clips), atol=1e-3)

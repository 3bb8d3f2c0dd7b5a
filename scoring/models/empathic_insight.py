"""LAION Empathic-Insight-Voice (Small / Large): the scorer MIRRORING uses.

A Whisper-Small encoder (``laion/BUD-E-Whisper``) turns each clip, padded to 30 s, into a
1500 x d_model ``last_hidden_state``. That is flattened row-major with no pooling, and one
``FullEmbeddingMLP`` head per dimension maps it to one raw score:

    proj = Linear(1500*d, P) -> ReLU -> Dropout -> Linear(P,H1) -> ReLU -> Dropout
         -> Linear(H1,H2) -> ReLU -> Dropout -> Linear(H2,H3) -> ReLU -> Dropout -> Linear(H3,1)

Small heads have P=64, H=[64,32,16]; Large heads P=128, H=[128,64,32]. Shapes are read from the
files, never assumed.

Three ways to run the same model (``docs/scorers.md``):

* ``score`` (fused): one encoder pass per batch; every head's ``proj`` weight stacked into one
  (sum P, 1500*d) matrix, so all heads cost one matmul; the small MLP layers run as batched
  matmuls over heads of equal shape. Log-mel features are computed with torch on the scorer's
  device (the same formula as ``WhisperFeatureExtractor``'s torch path).
* ``score_shared_encoder_loop``: one ``WhisperFeatureExtractor`` call and one encoder pass per
  batch, then each head separately (LAION's batch scripts).
* ``score_reference_loop``: one head at a time, the encoder run again for every clip (the model
  card's Colab).

Weights are never fetched here unless the caller passes ``download=True``; ``duplexsim scorer
download`` installs them (``duplexsim.scoring.models.weights``), and an installed scorer is used by default.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from duplexsim.core.emotions import HEAD_NAMES, emotion_by_name, suggest_emotion
from duplexsim.core.errors import ConfigError
from duplexsim.core.extras import require
from duplexsim.scoring.models.base import MAX_CLIP_S, SAMPLE_RATE, EmotionModel
from duplexsim.scoring.models.precision import default_precision
from duplexsim.scoring.models.weights import (
    ENCODER_PATTERNS,
    ENCODER_REPO,
    HEAD_REPOS,
    HEADS_SUBDIR,
    head_filename,
)

__all__ = [
    "ENCODER_REPO",
    "HEAD_REPOS",
    "PRECISIONS",
    "EmpathicInsightVoice",
    "FullEmbeddingMLP",
    "head_filename",
    "weights_digest",
]

log = logging.getLogger(__name__)

# (P, (H1, H2, H3)) of the published heads; only used to warn about a size mix-up.
PUBLISHED_SHAPES = {"small": (64, (64, 32, 16)), "large": (128, (128, 64, 32))}
PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
DROPOUTS = (0.0, 0.1, 0.1, 0.1)  # inactive in eval(); kept so the module matches the card's
MAX_SAMPLES = round(MAX_CLIP_S * SAMPLE_RATE)

_LINEARS = ("proj", "mlp.2", "mlp.5", "mlp.8", "mlp.11")
_HEAD_FILE = re.compile(r"^model_(.+)_best\.pth$")
_PREFIXES = ("_orig_mod.", "module.")
_HINT = "pass --model-path DIR (the BUD-E-Whisper files plus model_<Name>_best.pth, see docs/scorers.md)"


class FullEmbeddingMLP(nn.Module):
    """One head, exactly as LAION's Colab and ``annotate_audio.py`` define it (same keys)."""

    def __init__(self, seq_len: int, embed_dim: int, proj_dim: int, hidden: Sequence[int]) -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        self.proj = nn.Linear(seq_len * embed_dim, proj_dim)
        layers: list[nn.Module] = [nn.ReLU(), nn.Dropout(DROPOUTS[0])]
        width = proj_dim
        for h, p in zip(hidden, DROPOUTS[1:], strict=True):
            layers += [nn.Linear(width, h), nn.ReLU(), nn.Dropout(p)]
            width = h
        layers.append(nn.Linear(width, 1))
        self.mlp = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.flatten(x)
        # The casts are no-ops in fp32; in bf16/fp16 only ``proj`` runs in low precision.
        x = self.proj(x.to(self.proj.weight.dtype)).float()
        out: torch.Tensor = self.mlp(x)
        return out


@dataclass
class _Group:
    """Heads of one shape: their columns in the output, their rows in the stacked ``proj``."""

    columns: list[int]
    rows: slice
    proj_dim: int
    layers: list[tuple[torch.Tensor, torch.Tensor]]  # (G, out, in) weights, (G, out) biases


class EmpathicInsightVoice(EmotionModel):
    """Empathic-Insight-Voice heads on the BUD-E-Whisper encoder.

    Options: ``dimensions`` (head names, a comma-separated string, or ``"all"``; default the 12
    MIRRORING heads), ``precision`` (``fp32``/``bf16``/``fp16``; default bf16 on CUDA and on a
    CPU with native bf16, AMX-BF16 or AVX512-BF16, where it is 2.5-2.9x faster than fp32 and
    matches the GPU workers; else fp32; see ``duplexsim.scoring.models.precision``), ``batch_size`` (clips
    per encoder pass), ``download`` (fetch missing weights from the Hugging Face Hub; off by
    default), ``cache_dir`` (Hugging Face cache to look in).
    """

    name: ClassVar[str] = "empathic-insight-voice"
    comparable_with_mirroring: ClassVar[bool] = True
    version: ClassVar[str | None] = "1"
    precisions: ClassVar[tuple[str, ...]] = tuple(PRECISIONS)

    def __init__(
        self,
        model_path: Path | str | None = None,
        device: str = "cpu",
        size: str = "small",
        *,
        dimensions: Sequence[str] | str | None = None,
        precision: str | None = None,
        batch_size: int | None = None,
        download: bool = False,
        cache_dir: Path | str | None = None,
        **unknown: Any,
    ) -> None:
        if unknown:
            raise ConfigError(
                f"empathic-insight-voice: unknown option(s) {', '.join(sorted(unknown))} "
                "(known: dimensions, precision, batch_size, download, cache_dir)"
            )
        size = _check_size(size)
        if model_path is not None:
            root = Path(model_path).expanduser()
            if not root.is_dir():
                raise ConfigError(f"empathic-insight-voice: --model-path {root} is not a folder")
            encoder_dir, head_dirs = root, [root / HEADS_SUBDIR, root]
        else:
            encoder_dir, head_dirs = _from_hf_cache(size, dimensions, download, cache_dir)
        dims = _resolve_dimensions(dimensions, head_dirs)
        encoder, extractor = _load_encoder(encoder_dir)
        heads = {d: _load_head(_find_head(d, head_dirs, size)) for d in dims}
        self._build(
            encoder,
            extractor,
            heads,
            device=device,
            size=size,
            precision=precision,
            batch_size=batch_size,
            source=str(encoder_dir),
        )

    @classmethod
    def from_parts(
        cls,
        encoder: nn.Module,
        feature_extractor: Any,
        heads: Mapping[str, Mapping[str, torch.Tensor]],
        *,
        device: str = "cpu",
        size: str = "small",
        precision: str | None = None,
        batch_size: int | None = None,
    ) -> EmpathicInsightVoice:
        """A scorer from objects already in memory: a Whisper encoder (``WhisperModel`` or its
        ``get_encoder()``), a ``WhisperFeatureExtractor`` and head state dicts by dimension name
        (benchmarks and tests; no files)."""
        self = cls.__new__(cls)
        get_encoder = getattr(encoder, "get_encoder", None)  # a whole WhisperModel
        if get_encoder is not None:
            encoder = get_encoder()
        cleaned = {name: _strip_prefixes(sd, name) for name, sd in heads.items()}
        self._build(
            encoder,
            feature_extractor,
            cleaned,
            device=device,
            size=_check_size(size),
            precision=precision,
            batch_size=batch_size,
            source="<in memory>",
        )
        return self

    # ------------------------------------------------------------------ set-up

    def _build(
        self,
        encoder: nn.Module,
        extractor: Any,
        heads: Mapping[str, Mapping[str, torch.Tensor]],
        *,
        device: str,
        size: str,
        precision: str | None,
        batch_size: int | None,
        source: str,
    ) -> None:
        self.size = size
        self.device = _check_device(device)
        self.precision = _check_precision(precision, self.device)
        self._dtype = PRECISIONS[self.precision]
        self.batch_size = int(batch_size or (64 if self.device.type == "cuda" else 8))
        if self.batch_size < 1:
            raise ConfigError(f"empathic-insight-voice: batch_size must be >= 1, got {batch_size}")
        self._source = source
        self.weights = weights_digest(encoder, heads)
        self._extractor = extractor
        config: Any = encoder.config
        self._seq_len = int(config.max_source_positions)
        self._embed_dim = int(config.d_model)
        _check_extractor(extractor, config)
        self._encoder = encoder.float().to(self.device).eval().requires_grad_(False)
        self._dims = tuple(heads)
        if not self._dims:
            raise ConfigError("empathic-insight-voice: no dimensions selected")
        shapes = {name: _head_shape(sd, name) for name, sd in heads.items()}
        want = self._seq_len * self._embed_dim
        for name, (in_features, _, _) in shapes.items():
            if in_features != want:
                raise ConfigError(
                    f"{head_filename(name)}: head expects {in_features} inputs but the encoder gives "
                    f"{self._seq_len}x{self._embed_dim}={want} (wrong encoder, or a pooled -Plus head)"
                )
        _warn_size_mismatch(size, {n: s[1:] for n, s in shapes.items()})
        self._head_shapes = {n: (s[1], s[2]) for n, s in shapes.items()}
        self._stack_heads(heads)
        self._head_modules: dict[str, FullEmbeddingMLP] = {}
        self._fast_features = _fast_path_ok(extractor)
        if self._fast_features:
            self._window = torch.hann_window(extractor.n_fft, device=self.device)
            self._mel = torch.from_numpy(np.asarray(extractor.mel_filters, np.float32)).to(
                self.device
            )

    def _stack_heads(self, heads: Mapping[str, Mapping[str, torch.Tensor]]) -> None:
        """All proj weights into one (sum P, 1500*d) matrix, grouped by head shape; the MLP tail
        of each group as (G, out, in) stacks. Tail weights stay fp32 (they are tiny)."""
        by_shape: dict[tuple[int, tuple[int, ...]], list[int]] = {}
        for col, name in enumerate(self._dims):
            by_shape.setdefault(self._head_shapes[name], []).append(col)
        total = sum(p for p, _ in self._head_shapes.values())
        in_features = self._seq_len * self._embed_dim
        self._proj_w = torch.empty(total, in_features, dtype=self._dtype, device=self.device)
        self._proj_b = torch.empty(total, dtype=self._dtype, device=self.device)
        self._groups: list[_Group] = []
        self._rows: dict[str, int] = {}
        row = 0
        for (p, _hidden), columns in by_shape.items():
            start = row
            for col in columns:
                sd = heads[self._dims[col]]
                self._proj_w[row : row + p].copy_(sd["proj.weight"])
                self._proj_b[row : row + p].copy_(sd["proj.bias"])
                self._rows[self._dims[col]] = row
                row += p
            layers = []
            for key in _LINEARS[1:]:
                w = torch.stack([heads[self._dims[c]][f"{key}.weight"] for c in columns])
                b = torch.stack([heads[self._dims[c]][f"{key}.bias"] for c in columns])
                layers.append((w.to(self.device, torch.float32), b.to(self.device, torch.float32)))
            self._groups.append(_Group(columns, slice(start, row), p, layers))

    # ------------------------------------------------------------------ interface

    @property
    def dimensions(self) -> tuple[str, ...]:
        return self._dims

    @property
    def info(self) -> dict[str, Any]:
        """What was loaded, for results metadata."""
        return {
            "scorer": f"{self.name}-{self.size}",
            "source": self._source,
            "device": str(self.device),
            "precision": self.precision,
            "weights": self.weights,
            "heads": {n: [p, *h] for n, (p, h) in self._head_shapes.items()},
        }

    def score(self, clips: Sequence[NDArray[np.float32]]) -> NDArray[np.float32]:
        """Fused: one encoder pass per batch, all heads in one stacked matmul."""
        out = np.empty((len(clips), len(self._dims)), np.float32)
        with torch.inference_mode():
            for start, batch in self._batches(clips):
                feats = self._features(batch) if self._fast_features else self._fe_features(batch)
                hidden = self._encode(feats)
                out[start : start + len(batch)] = self._heads_fused(hidden).cpu().numpy()
        return out

    def score_shared_encoder_loop(
        self, clips: Sequence[NDArray[np.float32]]
    ) -> NDArray[np.float32]:
        """One feature-extractor call and encoder pass per batch, then each head on its own."""
        out = np.empty((len(clips), len(self._dims)), np.float32)
        with torch.inference_mode():
            for start, batch in self._batches(clips):
                hidden = self._encode(self._fe_features(batch))
                for col, name in enumerate(self._dims):
                    out[start : start + len(batch), col] = (
                        self.head_module(name)(hidden)[:, 0].cpu().numpy()
                    )
        return out

    def score_reference_loop(self, clips: Sequence[NDArray[np.float32]]) -> NDArray[np.float32]:
        """The model card's order: for each head, for each clip, run the processor, the encoder
        and the head, and take ``.item()``. Slow (encoder runs heads x clips times)."""
        prepared = [_prepare(c) for c in clips]
        out = np.empty((len(clips), len(self._dims)), np.float32)
        with torch.inference_mode():
            for col, name in enumerate(self._dims):
                head = self.head_module(name)
                for row, clip in enumerate(prepared):
                    hidden = self._encode(self._fe_features([clip]))
                    out[row, col] = head(hidden).item()
        return out

    def head_module(self, name: str) -> FullEmbeddingMLP:
        """The head as LAION's ``FullEmbeddingMLP``, its parameters views of the stacked ones."""
        module = self._head_modules.get(name)
        if module is not None:
            return module
        p, hidden = self._head_shapes[name]
        with torch.device("meta"):
            module = FullEmbeddingMLP(self._seq_len, self._embed_dim, p, hidden)
        group = next(g for g in self._groups if self._dims.index(name) in g.columns)
        k = group.columns.index(self._dims.index(name))
        row = self._rows[name]
        params = {
            "proj.weight": self._proj_w[row : row + p],
            "proj.bias": self._proj_b[row : row + p],
        }
        for key, (w, b) in zip(_LINEARS[1:], group.layers, strict=True):
            params[f"{key}.weight"], params[f"{key}.bias"] = w[k], b[k]
        module.load_state_dict(params, strict=True, assign=True)
        module.requires_grad_(False).eval()
        self._head_modules[name] = module
        return module

    # ------------------------------------------------------------------ stages

    def _batches(
        self, clips: Sequence[NDArray[np.float32]]
    ) -> Iterator[tuple[int, list[NDArray[np.float32]]]]:
        for start in range(0, len(clips), self.batch_size):
            yield start, [_prepare(c) for c in clips[start : start + self.batch_size]]

    def _fe_features(self, batch: Sequence[NDArray[np.float32]]) -> torch.Tensor:
        """(B, 80, 3000) log-mel features from ``WhisperFeatureExtractor``, as LAION calls it."""
        feats: torch.Tensor = self._extractor(
            list(batch),
            sampling_rate=SAMPLE_RATE,
            return_tensors="pt",
            padding="max_length",
            truncation=True,
        ).input_features
        return feats.to(self.device)

    def _features(self, batch: Sequence[NDArray[np.float32]]) -> torch.Tensor:
        """The same features as ``_fe_features``, computed on the scorer's device: zero-pad or
        cut to 30 s, STFT, mel, log10, clamp to max - 8, (x + 4) / 4 (transformers' torch path)."""
        fe = self._extractor
        cuda = self.device.type == "cuda"
        wave = torch.zeros(len(batch), fe.n_samples, dtype=torch.float32, pin_memory=cuda)
        for i, clip in enumerate(batch):
            wave[i, : clip.size] = torch.from_numpy(clip[: fe.n_samples])
        wave = wave.to(self.device, non_blocking=cuda)
        stft = torch.stft(wave, fe.n_fft, fe.hop_length, window=self._window, return_complex=True)
        magnitudes = (stft[..., :-1].abs() ** 2).contiguous()
        log_spec = torch.clamp(self._mel.T @ magnitudes, min=1e-10).log10()
        peak = log_spec.amax(dim=(1, 2), keepdim=True)
        feats: torch.Tensor = (torch.maximum(log_spec, peak - 8.0) + 4.0) / 4.0
        return feats

    def _autocast(self) -> contextlib.AbstractContextManager[Any]:
        if self._dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self._dtype)

    def _encode(self, feats: torch.Tensor) -> torch.Tensor:
        """(B, 1500, d) ``last_hidden_state``, padded or trimmed to 1500 like the Colab does."""
        with self._autocast():
            hidden: torch.Tensor = self._encoder(feats).last_hidden_state
        if hidden.shape[1] != self._seq_len:
            missing = self._seq_len - hidden.shape[1]
            hidden = (
                nn.functional.pad(hidden, (0, 0, 0, missing))
                if missing > 0
                else hidden[:, : self._seq_len]
            )
        return hidden

    def _heads_fused(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, n_heads) fp32 scores: one matmul for every proj, batched matmuls for the rest."""
        batch = hidden.shape[0]
        x = hidden.reshape(batch, -1).to(self._dtype)  # row-major flatten == nn.Flatten
        h = nn.functional.linear(x, self._proj_w, self._proj_b).float()
        out = torch.empty(batch, len(self._dims), dtype=torch.float32, device=h.device)
        for g in self._groups:
            z = h[:, g.rows].reshape(batch, len(g.columns), g.proj_dim).transpose(0, 1)  # (G,B,P)
            for w, b in g.layers:  # ReLU, Linear; the Dropouts are identities in eval
                z = torch.baddbmm(b.unsqueeze(1), torch.relu(z), w.transpose(1, 2))
            out[:, g.columns] = z[..., 0].T
        return out


# ---------------------------------------------------------------------- loading helpers


def weights_digest(encoder: nn.Module, heads: Mapping[str, Mapping[str, torch.Tensor]]) -> str:
    """``sha256:`` over the tensors actually loaded (encoder, then each head by name): the same
    for the same weights whether they came from a folder, the hub cache or memory."""
    h = hashlib.sha256()
    tensors = [(f"encoder.{k}", v) for k, v in sorted(encoder.state_dict().items())]
    tensors += [(f"{n}.{k}", v) for n in sorted(heads) for k, v in sorted(heads[n].items())]
    for key, tensor in tensors:
        t = tensor.detach().to("cpu").contiguous().reshape(-1)
        h.update(f"{key}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return "sha256:" + h.hexdigest()[:16]


def _check_size(size: str) -> str:
    if size not in HEAD_REPOS:
        raise ConfigError(f"empathic-insight-voice: size must be small or large, got {size!r}")
    return size


def _check_device(device: str | torch.device) -> torch.device:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"empathic-insight-voice: bad device {device!r} ({exc})") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(
            f"empathic-insight-voice: device {device} requested but CUDA is not available"
        )
    return dev


def _check_precision(precision: str | None, device: torch.device) -> str:
    if precision is None:
        return default_precision(device.type)
    if precision not in PRECISIONS:
        raise ConfigError(
            f"empathic-insight-voice: precision must be one of {', '.join(PRECISIONS)}, got {precision!r}"
        )
    return precision


def _from_hf_cache(
    size: str, dimensions: Sequence[str] | str | None, download: bool, cache_dir: Path | str | None
) -> tuple[Path, list[Path]]:
    """The encoder and head snapshot folders from the Hugging Face cache (fetched only when
    ``download`` is true)."""
    snapshot_download = require("huggingface_hub", "empathic-insight-voice").snapshot_download
    head_repo = HEAD_REPOS[size]
    if dimensions == "all":
        head_patterns = ["*.pth"]
    else:
        names = (
            HEAD_NAMES
            if dimensions is None
            else _split(dimensions)
            if isinstance(dimensions, str)
            else tuple(dimensions)
        )
        head_patterns = [head_filename(n) for n in names]
    wanted = (
        (ENCODER_REPO, ENCODER_PATTERNS),
        (head_repo, head_patterns),
    )
    folders = []
    for repo, patterns in wanted:
        try:
            folder = snapshot_download(
                repo, cache_dir=cache_dir, local_files_only=not download, allow_patterns=patterns
            )
        except Exception as exc:
            if download:
                raise ConfigError(
                    f"empathic-insight-voice: could not download {repo} "
                    f"({type(exc).__name__}: {_first_line(exc)}); {_HINT}"
                ) from None
            raise ConfigError(
                f"empathic-insight-voice-{size}: no weights installed and {repo} is not in the "
                f"Hugging Face cache; run `duplexsim scorer download empathic-insight-voice-{size}`"
                f" or {_HINT}"
            ) from None
        folders.append(Path(folder))
    return folders[0], [folders[1] / HEADS_SUBDIR, folders[1]]


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _resolve_dimensions(
    option: Sequence[str] | str | None, head_dirs: Sequence[Path]
) -> tuple[str, ...]:
    if option is None:
        return HEAD_NAMES
    if option == "all":
        found = sorted(
            {
                m.group(1)
                for d in head_dirs
                if d.is_dir()
                for p in d.iterdir()
                if (m := _HEAD_FILE.match(p.name))
            }
        )
        if not found:
            where = " or ".join(str(d) for d in head_dirs)
            raise ConfigError(
                f"empathic-insight-voice: no model_<Name>_best.pth files in {where}; {_HINT}"
            )
        return tuple(found)
    dims = _split(option) if isinstance(option, str) else tuple(option)
    if not dims or not all(isinstance(d, str) and d for d in dims):
        raise ConfigError(
            f"empathic-insight-voice: dimensions must be head names or 'all', got {option!r}"
        )
    dupes = sorted({d for d in dims if dims.count(d) > 1})
    if dupes:
        raise ConfigError(f"empathic-insight-voice: dimension(s) listed twice: {', '.join(dupes)}")
    return dims


def _find_head(name: str, head_dirs: Sequence[Path], size: str) -> Path:
    for folder in head_dirs:
        path = folder / head_filename(name)
        if path.is_file():
            return path
    where = " or ".join(str(d) for d in head_dirs)
    hint = ""
    canonical = suggest_emotion(name)
    if canonical is not None and emotion_by_name(canonical).head != name:
        hint = f" (did you mean the head name '{emotion_by_name(canonical).head}'?)"
    raise ConfigError(
        f"empathic-insight-voice: head file {head_filename(name)} for dimension '{name}' not found "
        f"in {where}{hint}; copy it from {HEAD_REPOS[size]} or {_HINT}"
    )


def _load_encoder(folder: Path) -> tuple[nn.Module, Any]:
    """The Whisper encoder (the decoder is dropped) and its feature extractor, local files only."""
    from transformers import WhisperFeatureExtractor, WhisperModel

    if not (folder / "config.json").is_file():
        raise ConfigError(
            f"empathic-insight-voice: no Whisper encoder in {folder} (config.json missing); {_HINT}"
        )
    try:
        model = WhisperModel.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:
        raise ConfigError(
            f"empathic-insight-voice: cannot load the Whisper encoder from {folder} "
            f"({type(exc).__name__}: {_first_line(exc)}); {_HINT}"
        ) from None
    encoder = model.get_encoder()
    if (folder / "preprocessor_config.json").is_file():
        extractor = WhisperFeatureExtractor.from_pretrained(str(folder), local_files_only=True)
    else:
        # openai/whisper-small's preprocessor_config.json equals these defaults.
        log.warning(
            "%s has no preprocessor_config.json; using WhisperFeatureExtractor defaults", folder
        )
        extractor = WhisperFeatureExtractor(feature_size=model.config.num_mel_bins)  # type: ignore[no-untyped-call]
    return encoder, extractor


def _check_extractor(extractor: Any, config: Any) -> None:
    problems = []
    if extractor.sampling_rate != SAMPLE_RATE:
        problems.append(f"sampling_rate {extractor.sampling_rate} != {SAMPLE_RATE}")
    if extractor.feature_size != config.num_mel_bins:
        problems.append(
            f"feature_size {extractor.feature_size} != num_mel_bins {config.num_mel_bins}"
        )
    if extractor.nb_max_frames != 2 * config.max_source_positions:
        problems.append(f"{extractor.nb_max_frames} frames != 2 x max_source_positions")
    if problems:
        raise ConfigError(
            f"empathic-insight-voice: feature extractor does not fit the encoder: {'; '.join(problems)}"
        )


def _fast_path_ok(extractor: Any) -> bool:
    return (
        float(getattr(extractor, "dither", 0.0)) == 0.0
        and float(extractor.padding_value) == 0.0
        and getattr(extractor, "padding_side", "right") == "right"
        and hasattr(extractor, "mel_filters")
    )


def _load_head(path: Path) -> dict[str, torch.Tensor]:
    try:
        try:
            raw = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # legacy (non-zip) serialisation cannot be memory-mapped
            raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise ConfigError(
            f"{path}: cannot read head checkpoint ({type(exc).__name__}: {_first_line(exc)})"
        ) from None
    if isinstance(raw, Mapping) and isinstance(raw.get("state_dict"), Mapping):
        raw = raw["state_dict"]
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{path}: expected a state_dict, got {type(raw).__name__}")
    return _strip_prefixes(raw, path.name)


def _strip_prefixes(state: Mapping[str, Any], label: str) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        k = str(key)
        while k.startswith(_PREFIXES):
            k = k.split(".", 1)[1]
        if not isinstance(value, torch.Tensor):
            raise ConfigError(f"{label}: entry {key!r} is not a tensor")
        out[k] = value
    return out


def _head_shape(state: Mapping[str, torch.Tensor], name: str) -> tuple[int, int, tuple[int, ...]]:
    """(input features, P, (H1, H2, H3)) read from the tensors; ConfigError if not a head."""
    label = head_filename(name)
    expected = {f"{k}.{p}" for k in _LINEARS for p in ("weight", "bias")}
    missing, extra = sorted(expected - set(state)), sorted(set(state) - expected)
    if missing or extra:
        what = "; ".join(
            s
            for s in (
                missing and f"missing {', '.join(missing)}",
                extra and f"unexpected {', '.join(extra[:5])}",
            )
            if s
        )
        raise ConfigError(f"{label}: not an Empathic-Insight-Voice head ({what})")
    proj = state["proj.weight"]
    if proj.ndim != 2:
        raise ConfigError(f"{label}: proj.weight has shape {tuple(proj.shape)}, expected 2-D")
    widths = [proj.shape[0]]
    for key in _LINEARS:
        w, b = state[f"{key}.weight"], state[f"{key}.bias"]
        fan_in = proj.shape[1] if key == "proj" else widths[-1]
        if w.ndim != 2 or w.shape[1] != fan_in or tuple(b.shape) != (w.shape[0],):
            raise ConfigError(
                f"{label}: {key} has weight {tuple(w.shape)} / bias {tuple(b.shape)}, "
                f"which does not follow a layer of width {fan_in}"
            )
        if key != "proj":
            widths.append(w.shape[0])
    if widths[-1] != 1:
        raise ConfigError(f"{label}: last layer has {widths[-1]} outputs, expected 1")
    return int(proj.shape[1]), int(widths[0]), tuple(int(w) for w in widths[1:-1])


def _warn_size_mismatch(size: str, shapes: Mapping[str, tuple[int, tuple[int, ...]]]) -> None:
    other = "large" if size == "small" else "small"
    odd = [n for n, s in shapes.items() if s == PUBLISHED_SHAPES[other]]
    if odd:
        log.warning(
            "empathic-insight-voice-%s: head(s) %s have %s-sized shapes %s",
            size,
            ", ".join(odd[:3]),
            other,
            PUBLISHED_SHAPES[other],
        )


def _prepare(clip: NDArray[np.float32]) -> NDArray[np.float32]:
    x = np.asarray(clip, dtype=np.float32)
    if x.ndim != 1:
        raise ValueError(f"expected mono 1-D samples, got shape {x.shape}")
    return np.ascontiguousarray(x[:MAX_SAMPLES])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""

"""An offline prosody scorer: hand-written acoustic features mapped to the 12 MIRRORING emotions.

It needs no download and no weights: numpy only. Each clip (16 kHz mono float32) gives a few
prosodic features (f0 level, range, variability and final contour; speaking rate; pauses;
loudness; spectral tilt). The features are z-scored against fixed reference means and SDs, and
each emotion's score is a similarity to that emotion's prototype in the z-space:
``4 * exp(-d² / 2σ²)`` on a 0-4 scale, d² being a weighted mean squared z-distance.

The prototypes follow the direction of the acoustic-emotion literature and are calibrated
against the shipped demo benchmark (espeak-ng speech); ``docs/prosody-scorer.md`` documents the
features, the rule, the calibration and the agreement measured on the demo.

These numbers are NOT comparable with MIRRORING's Empathic-Insight-Voice scores
(``comparable_with_mirroring = False``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.emotions import EMOTIONS, HEAD_NAMES
from duplexsim.core.provenance import NO_WEIGHTS
from duplexsim.scoring.models.base import SAMPLE_RATE, EmotionModel

__all__ = [
    "FEATURE_NAMES",
    "PROTOTYPES",
    "REFERENCE",
    "RULE_FEATURES",
    "ProsodyScorer",
    "emotion_scores",
    "prosody_features",
]

# ---------------------------------------------------------------------------------------------
# Analysis settings
# ---------------------------------------------------------------------------------------------

HOP = 160  # 10 ms
WIN = 640  # 40 ms analysis window
F0_MIN_HZ = 65.0
F0_MAX_HZ = 600.0
_TAU_MIN = int(SAMPLE_RATE // F0_MAX_HZ)  # 26 samples
_TAU_MAX = int(np.ceil(SAMPLE_RATE / F0_MIN_HZ))  # 247 samples
_INTEGRATION = WIN - _TAU_MAX - 2  # YIN integration window (24.4 ms)
_NFFT = 1024
YIN_THRESHOLD = 0.15  # first CMND dip below this is the period (de Cheveigné & Kawahara 2002)
VOICING_MAX_APERIODICITY = 0.25  # a frame is voiced if its best CMND dip is below this
ACTIVE_FLOOR_DBFS = -50.0  # speech activity: frame RMS above this ...
ACTIVE_BELOW_LOUDEST_DB = 35.0  # ... and within this many dB of the clip's 95th-percentile frame
OCTAVE_FOLD_ST = 9.0  # voiced frames this far from the clip's median f0 are folded by an octave
SYLLABLE_DIP_DB = 2.0  # a syllable nucleus is an envelope peak at least this far above its dips
FINAL_FRAMES = 10  # the final contour: the last 100 ms of voiced frames
MIN_VOICED_FRAMES = 3  # fewer voiced frames than this: the clip counts as having no voice
LEVEL_FLOOR_DBFS = -120.0

# ---------------------------------------------------------------------------------------------
# Features, reference statistics and the rule
# ---------------------------------------------------------------------------------------------

FEATURE_NAMES: tuple[str, ...] = (
    "f0_median_hz",  # median f0 of voiced frames
    "f0_range_st",  # p90 - p10 of voiced f0, semitones
    "f0_variability_st_per_s",  # mean |Δf0| between consecutive voiced frames, semitones/s
    "f0_final_st",  # mean f0 of the last 100 ms of voiced frames minus the median, semitones
    "speaking_rate_syl_per_s",  # syllable nuclei per second of the active span
    "pause_ratio",  # share of inactive frames between the first and the last active frame
    "voiced_level_dbfs",  # mean RMS level of voiced frames, dBFS
    "level_sd_db",  # SD of the frame level over active frames, dB (reported only)
    "alpha_ratio_db",  # 1-5 kHz over 50 Hz-1 kHz energy of voiced frames, dB (brightness)
    "voiced_fraction",  # voiced frames / active span (reported only)
)

# The rule's features: (name, reference mean, reference SD, weight). f0 level enters in semitones
# re 100 Hz (13 st ≈ 212 Hz). Means and SDs are the demo references' pooled statistics, rounded;
# level and brightness get wider, literature-sized SDs and a small weight because the demo is
# peak-normalised formant speech (see docs/prosody-scorer.md).
REFERENCE: tuple[tuple[str, float, float, float], ...] = (
    ("f0_level_st", 13.0, 4.0, 1.0),
    ("f0_range_st", 5.5, 3.0, 1.0),
    ("f0_variability_st_per_s", 23.0, 13.0, 1.0),
    ("f0_final_st", -1.8, 2.4, 1.0),
    ("speaking_rate_syl_per_s", 4.0, 1.1, 1.0),
    ("pause_ratio", 0.10, 0.07, 1.0),
    ("voiced_level_dbfs", -22.0, 6.0, 0.25),
    ("alpha_ratio_db", -6.3, 3.0, 0.25),
)
RULE_FEATURES: tuple[str, ...] = tuple(r[0] for r in REFERENCE)

# Prototype z-scores, one row per emotion (EMOTIONS order), columns as RULE_FEATURES:
#   level, range, variability, final, rate, pause, loudness, brightness
PROTOTYPES: dict[str, tuple[float, ...]] = {
    "Amusement":          (0.75, 1.00, 0.50, -0.50, 0.75, -1.00, 0.5, 0.5),
    "Anger":              (0.50, 0.00, 0.00, -0.25, 1.25, -1.25, 0.5, 0.5),
    "Elation":            (1.25, 1.00, 1.25, -0.75, 1.25, -1.00, 0.5, 0.5),
    "Impatience":         (0.00, 0.00, 0.00, -0.25, 0.50, -1.00, 0.5, 0.5),
    "Surprise":           (1.50, 1.00, 1.75, 0.50, -0.50, 0.75, 0.5, 0.0),
    "Emotional Numbness": (-1.25, -1.75, -1.25, 0.75, -0.75, 1.00, -0.5, -0.5),
    "Contemplation":      (-0.75, -0.25, -0.50, 0.75, -1.00, 2.00, -0.5, 0.0),
    "Disappointment":     (-1.00, -0.75, -1.00, -0.25, -0.75, 0.75, -0.5, -0.5),
    "Confusion":          (0.25, 1.25, 0.25, 1.25, -0.50, 0.75, 0.0, 0.0),
    "Pride":              (-0.25, 0.75, 0.00, -1.75, 0.75, -0.75, 0.5, 0.0),
    "Affection":          (0.00, 0.00, 0.00, -1.50, -0.25, -0.50, -0.5, -0.5),
    "Sadness":            (-1.50, -1.00, -1.00, 0.00, -1.00, 0.50, -0.5, -0.5),
}  # fmt: skip
SIMILARITY_SIGMA = 1.0  # score = 4 exp(-d² / 2σ²); d = 1 (one SD, RMS over features) gives 2.43
SCORE_MAX = 4.0


def _frames(x: NDArray[np.float64]) -> NDArray[np.float64]:
    """(n, WIN) read-only view of WIN-sample frames every HOP samples (zero-padded to one frame)."""
    if x.size < WIN:
        x = np.pad(x, (0, WIN - x.size))
    n = 1 + (x.size - WIN) // HOP
    frames: NDArray[np.float64] = np.lib.stride_tricks.sliding_window_view(x, WIN)[::HOP][:n]
    return frames


def _band_limit(
    x: NDArray[np.float64], lo_hz: float = 50.0, hi_hz: float = 1000.0
) -> NDArray[np.float64]:
    """x with everything outside lo-hi removed (one FFT over the clip); helps the pitch tracker."""
    n = x.size
    nfft = 1 << max(1, int(np.ceil(np.log2(max(n, 2)))))
    spec = np.fft.rfft(x, nfft)
    freqs = np.fft.rfftfreq(nfft, 1.0 / SAMPLE_RATE)
    spec[(freqs < lo_hz) | (freqs > hi_hz)] = 0.0
    out: NDArray[np.float64] = np.fft.irfft(spec, nfft)[:n]
    return out


def _yin(frames: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Vectorised YIN: (f0 in Hz, aperiodicity = CMND at the chosen lag) for every frame."""
    n_frames = frames.shape[0]
    taus = np.arange(_TAU_MAX + 2)
    # r(τ) = Σ_{j<W} x_j x_{j+τ}, as a cross-correlation through the FFT
    head = np.fft.rfft(frames[:, :_INTEGRATION], _NFFT)
    full = np.fft.rfft(frames, _NFFT)
    r = np.fft.irfft(np.conj(head) * full, _NFFT)[:, : _TAU_MAX + 2]
    csum = np.concatenate([np.zeros((n_frames, 1)), np.cumsum(frames**2, axis=1)], axis=1)
    energy = csum[:, taus + _INTEGRATION] - csum[:, taus]  # Σ_{j<W} x_{j+τ}²
    diff = np.maximum(energy[:, :1] + energy - 2.0 * r, 0.0)
    running = np.cumsum(diff[:, 1:], axis=1)
    cmnd = np.ones_like(diff)
    cmnd[:, 1:] = diff[:, 1:] * taus[1:] / np.maximum(running, 1e-12)
    seg = cmnd[:, _TAU_MIN - 1 : _TAU_MAX + 2]
    mid = seg[:, 1:-1]
    dips = (mid <= seg[:, :-2]) & (mid <= seg[:, 2:]) & (mid < YIN_THRESHOLD)
    first = np.where(dips.any(axis=1), dips.argmax(axis=1), mid.argmin(axis=1))
    rows = np.arange(n_frames)
    tau = first + _TAU_MIN
    a, b, c = cmnd[rows, tau - 1], cmnd[rows, tau], cmnd[rows, tau + 1]
    den = a - 2.0 * b + c
    safe = np.where(np.abs(den) > 1e-12, den, 1.0)
    shift = np.clip(np.where(np.abs(den) > 1e-12, 0.5 * (a - c) / safe, 0.0), -1.0, 1.0)
    return SAMPLE_RATE / (tau + shift), b


def _syllable_peaks(env: NDArray[np.float64], voiced: NDArray[np.bool_], start: int) -> int:
    """Count syllable nuclei: voiced local maxima of the smoothed level envelope that rise at
    least SYLLABLE_DIP_DB above the dip separating them from the previous nucleus."""
    inner = env[1:-1]
    peaks = np.flatnonzero((inner > env[:-2]) & (inner >= env[2:])) + 1
    kept: list[int] = []
    for p in peaks.tolist():
        if not voiced[p]:
            continue
        if not kept:
            if env[p] - env[start : p + 1].min() >= SYLLABLE_DIP_DB:
                kept.append(p)
            continue
        q = kept[-1]
        dip = env[q : p + 1].min()
        if env[p] - dip >= SYLLABLE_DIP_DB and env[q] - dip >= SYLLABLE_DIP_DB:
            kept.append(p)
        elif env[p] > env[q]:
            kept[-1] = p  # same syllable, higher top
    return len(kept)


def prosody_features(clip: NDArray[Any]) -> tuple[dict[str, float], bool]:
    """The acoustic features of one 16 kHz mono clip (FEATURE_NAMES) and whether it had voice.

    A clip with fewer than MIN_VOICED_FRAMES voiced frames gets zero f0 and rate features, a pause
    ratio of 1 and its plain RMS level; every value is finite.
    """
    x = np.asarray(clip, dtype=np.float64).ravel()
    x = np.nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0)
    if x.size == 0:
        x = np.zeros(1)
    x = x - x.mean()
    frames = _frames(x)
    level_db = 10.0 * np.log10(np.mean(frames**2, axis=1) + 1e-12)
    active = level_db > max(
        ACTIVE_FLOOR_DBFS, float(np.percentile(level_db, 95)) - ACTIVE_BELOW_LOUDEST_DB
    )
    f0_hz, aperiodicity = _yin(_frames(_band_limit(x)))
    voiced = active & (aperiodicity < VOICING_MAX_APERIODICITY)

    silent = {name: 0.0 for name in FEATURE_NAMES}
    silent["pause_ratio"] = 1.0
    silent["voiced_level_dbfs"] = max(
        LEVEL_FLOOR_DBFS, 10.0 * float(np.log10(np.mean(x**2) + 1e-12))
    )
    if voiced.sum() < MIN_VOICED_FRAMES:
        return silent, False

    st = 12.0 * np.log2(f0_hz / 100.0)
    centre = float(np.median(st[voiced]))
    # octave errors: fold frames about an octave off the median back, drop what is still far off
    off = st - centre
    st = np.where(off > OCTAVE_FOLD_ST, st - 12.0, np.where(off < -OCTAVE_FOLD_ST, st + 12.0, st))
    voiced &= np.abs(st - centre) < OCTAVE_FOLD_ST
    if voiced.sum() < MIN_VOICED_FRAMES:
        return silent, False
    v = st[voiced]
    median_st = float(np.median(v))
    pairs = voiced[1:] & voiced[:-1]
    steps = np.abs(np.diff(st))[pairs]
    final = st[np.flatnonzero(voiced)[-FINAL_FRAMES:]]

    act = np.flatnonzero(active)
    first, last = int(act[0]), int(act[-1])
    span_frames = last - first + 1
    kernel = np.array([1.0, 2.0, 3.0, 2.0, 1.0]) / 9.0
    env = np.convolve(np.pad(level_db, 2, mode="edge"), kernel, mode="valid")
    n_syllables = _syllable_peaks(env, voiced, first)

    spec = np.abs(np.fft.rfft(frames[voiced] * np.hanning(WIN), _NFFT)) ** 2
    freqs = np.fft.rfftfreq(_NFFT, 1.0 / SAMPLE_RATE)
    low = spec[:, (freqs >= 50.0) & (freqs < 1000.0)].sum(axis=1)
    high = spec[:, (freqs >= 1000.0) & (freqs < 5000.0)].sum(axis=1)

    feats = {
        "f0_median_hz": 100.0 * 2.0 ** (median_st / 12.0),
        "f0_range_st": float(np.percentile(v, 90) - np.percentile(v, 10)),
        "f0_variability_st_per_s": float(steps.mean() * SAMPLE_RATE / HOP) if steps.size else 0.0,
        "f0_final_st": float(final.mean() - median_st),
        "speaking_rate_syl_per_s": n_syllables / (span_frames * HOP / SAMPLE_RATE),
        "pause_ratio": float(1.0 - active[first : last + 1].mean()),
        "voiced_level_dbfs": float(level_db[voiced].mean()),
        "level_sd_db": float(level_db[active].std()),
        "alpha_ratio_db": float(np.mean(10.0 * np.log10((high + 1e-20) / (low + 1e-20)))),
        "voiced_fraction": float(voiced[first : last + 1].mean()),
    }
    return {k: float(np.nan_to_num(val)) for k, val in feats.items()}, True


def _rule_values(feats: dict[str, float]) -> NDArray[np.float64]:
    """The rule features' raw values, in REFERENCE order (f0 level in semitones re 100 Hz)."""
    values = dict(feats)
    values["f0_level_st"] = 12.0 * np.log2(max(feats["f0_median_hz"], 1e-6) / 100.0)
    return np.array([values[name] for name, _, _, _ in REFERENCE])


def _rule_vector(feats: dict[str, float], f0_ref_st: float) -> NDArray[np.float64]:
    """The features as z-scores against REFERENCE (f0 level in semitones re the f0 reference)."""
    raw = _rule_values(feats)
    means = np.array([f0_ref_st if r[0] == "f0_level_st" else r[1] for r in REFERENCE])
    z: NDArray[np.float64] = (raw - means) / np.array([r[2] for r in REFERENCE])
    return z


_PROTO = np.array([PROTOTYPES[e.name] for e in EMOTIONS], dtype=np.float64)
_WEIGHTS = np.array([r[3] for r in REFERENCE], dtype=np.float64)


def emotion_scores(z: NDArray[np.float64]) -> NDArray[np.float64]:
    """0-4 similarity of a z-vector to each emotion's prototype, EMOTIONS order."""
    d2 = ((z[None, :] - _PROTO) ** 2 * _WEIGHTS).sum(axis=1) / _WEIGHTS.sum()
    out: NDArray[np.float64] = SCORE_MAX * np.exp(-d2 / (2.0 * SIMILARITY_SIGMA**2))
    return out


class ProsodyScorer(EmotionModel):
    """Rule-based prosody scorer (no weights). ``model_path`` and ``device`` are accepted and
    ignored. Option ``f0_reference_hz`` (default ≈ 212 Hz, the demo's female voice) sets the f0
    that counts as neither high nor low; set it near a male voice's typical f0 (e.g. 120 Hz) to
    avoid reading a low voice as sad."""

    name: ClassVar[str] = "prosody"
    comparable_with_mirroring: ClassVar[bool] = False
    version: ClassVar[str | None] = "2"

    def __init__(
        self,
        model_path: Path | str | None = None,
        device: str = "cpu",
        *,
        f0_reference_hz: float | None = None,
        **options: Any,
    ) -> None:
        if options:
            raise TypeError(f"ProsodyScorer got unknown option(s): {', '.join(sorted(options))}")
        del model_path, device  # no weights, numpy on the CPU
        if f0_reference_hz is None:
            self._f0_ref_st = REFERENCE[0][1]
        else:
            if not (F0_MIN_HZ <= float(f0_reference_hz) <= F0_MAX_HZ):
                raise ValueError(f"f0_reference_hz must be within {F0_MIN_HZ:g}-{F0_MAX_HZ:g} Hz")
            self._f0_ref_st = 12.0 * float(np.log2(float(f0_reference_hz) / 100.0))
        # no weights; a changed setting of the rule scores differently, so it is named here
        self.weights = (
            NO_WEIGHTS if f0_reference_hz is None else f"rule:f0_reference_hz={f0_reference_hz:g}"
        )
        self._dimensions = (*HEAD_NAMES, *FEATURE_NAMES)

    @property
    def dimensions(self) -> tuple[str, ...]:
        return self._dimensions

    def score_one(self, clip: NDArray[Any]) -> NDArray[np.float32]:
        feats, has_voice = prosody_features(clip)
        if has_voice:
            emotions = emotion_scores(_rule_vector(feats, self._f0_ref_st))
        else:
            emotions = np.zeros(len(EMOTIONS))
        row = np.concatenate([emotions, [feats[k] for k in FEATURE_NAMES]])
        out: NDArray[np.float32] = np.nan_to_num(row, nan=0.0, posinf=0.0, neginf=0.0).astype(
            np.float32
        )
        return out

    def score(self, clips: Sequence[NDArray[np.float32]]) -> NDArray[np.float32]:
        out = np.zeros((len(clips), len(self._dimensions)), dtype=np.float32)
        for i, clip in enumerate(clips):
            out[i] = self.score_one(clip)
        return out

    @classmethod
    def speaker_normalise(
        cls, scores: NDArray[np.float32], dimensions: Sequence[str]
    ) -> NDArray[np.float32]:
        """The 12 emotions again with every rule feature measured from this speaker's own
        average over the clips given (their register, habitual rate, pausing, level and
        brightness) instead of the fixed reference means: a male voice at 107 Hz is then not read
        as sad against the default 212 Hz. The reference SDs stay. Rows without voice, and scores
        lacking the feature columns, are left as they are."""
        index = {name: i for i, name in enumerate(dimensions)}
        if any(name not in index for name in (*HEAD_NAMES, *FEATURE_NAMES)):
            return scores
        out = np.array(scores, dtype=np.float32, copy=True)
        f0 = out[:, index["f0_median_hz"]]
        voiced = np.flatnonzero(np.isfinite(f0) & (f0 >= F0_MIN_HZ))
        if voiced.size == 0:
            return out
        feats = [{n: float(out[row, index[n]]) for n in FEATURE_NAMES} for row in voiced]
        raw = np.array([_rule_values(f) for f in feats])
        z = (raw - raw.mean(axis=0)) / np.array([r[2] for r in REFERENCE])
        heads = [index[h] for h in HEAD_NAMES]
        for row, zrow in zip(voiced, z, strict=True):
            out[row, heads] = emotion_scores(zrow)
        return out
        register_st = 12.0 * float(np.log2(float(np.median(f0[voiced])) / 100.0))
        heads = [index[h] for h in HEAD_NAMES]
        for row in np.flatnonzero(voiced):
            feats = {name: float(out[row, index[name]]) for name in FEATURE_NAMES}
            out[row, heads] = emotion_scores(_rule_vector(feats, register_st))
        return out

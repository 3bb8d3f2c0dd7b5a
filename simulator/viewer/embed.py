"""Putting data inside a page safely: audio as base64 WAV data URIs, values as JSON that can sit in a
``<script>`` element whatever strings it holds (transcripts come from the model's server)."""

from __future__ import annotations

import base64
import io
import json
import wave
from typing import Any

import numpy as np
from numpy.typing import NDArray

from duplexsim.core.audio import float_to_pcm16

__all__ = ["mix", "script_json", "wav_bytes", "wav_data_uri"]

# "<" stops "</script>" and "<!--" from ending or changing the script element; U+2028/9 are
# line terminators to old JavaScript parsers.
_JSON_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def script_json(value: Any) -> str:
    """JSON for ``<script type="application/json">``; NaN and infinities are refused."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).translate(_JSON_ESCAPES)


def wav_bytes(samples: NDArray[np.float32], rate: int) -> bytes:
    """Mono PCM16 WAV."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(float_to_pcm16(samples))
    return out.getvalue()


def wav_data_uri(samples: NDArray[np.float32], rate: int) -> str:
    return "data:audio/wav;base64," + base64.b64encode(wav_bytes(samples, rate)).decode("ascii")


def mix(a: NDArray[np.float32], b: NDArray[np.float32]) -> NDArray[np.float32]:
    """The sum of two tracks, as long as the longer one (the PCM16 encoder clips)."""
    out = np.zeros(max(a.size, b.size), dtype=np.float32)
    out[: a.size] += a
    out[: b.size] += b
    return out

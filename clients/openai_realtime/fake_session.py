"""The fake server's session object: defaults, and ``session.update`` checked the way the real
server checks it, in the shape of its dialect (``dialects``).

``ga`` shape (OpenAI, Azure OpenAI): ``type: "realtime"`` is required, voice and turn detection
nest under ``audio``; the retired beta keys and any unknown key are an ``invalid_request_error``
naming the parameter, as the real API answers. Only what the fake can serve is accepted:
``audio/pcm`` at the dialect's rates and audio output. ``xai`` shape: ``voice`` and
``turn_detection`` at the top, any PCM rate xAI lists. ``flat`` shape (Azure Voice Live,
DashScope): the beta's top-level fields with the dialect's format names, and the output
modalities the fake serves, text and audio (DashScope refuses ``["audio"]`` alone). Unknown
keys are ignored where the provider's strictness is not documented (xai, flat).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from duplexsim.clients.openai_realtime.config import OPENAI_RATE, merge
from duplexsim.clients.openai_realtime.dialects import Dialect

__all__ = ["InvalidRequest", "apply_update", "default_session", "input_rate", "vad"]

_TOP = {
    "type", "model", "instructions", "output_modalities", "audio", "tools", "tool_choice",
    "max_output_tokens", "tracing", "truncation", "prompt", "include", "reasoning",
    "parallel_tool_calls",
}  # fmt: skip
_BETA_ONLY = {
    "modalities", "voice", "input_audio_format", "output_audio_format", "turn_detection",
    "input_audio_transcription", "temperature", "max_response_output_tokens",
}  # fmt: skip
_AUDIO = {"input", "output"}
_AUDIO_IN = {"format", "noise_reduction", "transcription", "turn_detection"}
_AUDIO_OUT = {"format", "voice", "speed"}
_VAD_KEYS = {
    "server_vad": {
        "type", "threshold", "prefix_padding_ms", "silence_duration_ms", "create_response",
        "interrupt_response", "idle_timeout_ms",
    },
    "semantic_vad": {"type", "eagerness", "create_response", "interrupt_response"},
}  # fmt: skip


@dataclass
class InvalidRequest(Exception):
    """Becomes an ``error`` event of type ``invalid_request_error``."""

    code: str
    message: str
    param: str | None = None


def default_session(d: Dialect, session_id: str, model: str | None) -> dict[str, Any]:
    fmt = {"type": "audio/pcm", "rate": d.input_rates[0]}
    if d.shape == "xai":
        return {
            "id": session_id,
            "voice": d.voices[0],
            "instructions": "",
            "turn_detection": {"type": "server_vad", "threshold": 0.85, "prefix_padding_ms": 333},
            "audio": {"input": {"format": dict(fmt)}, "output": {"format": dict(fmt)}},
        }
    if d.shape == "flat":
        flat = {
            "object": "realtime.session",
            "id": session_id,
            "model": model,
            "modalities": list(d.modalities),
            "voice": d.voices[0] if d.voices else "alloy",
            "instructions": "",
            "input_audio_format": d.formats[0],
            "output_audio_format": d.formats[1],
            "turn_detection": {**_VAD_DEFAULTS["server_vad"], "silence_duration_ms": 800},
        }
        return flat if d.rate_field is None else {**flat, d.rate_field: d.input_rates[0]}
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": model,
        "output_modalities": ["audio"],
        "instructions": "",
        "audio": {
            "input": {
                "format": dict(fmt),
                "noise_reduction": None,
                "transcription": None,
                "turn_detection": dict(_VAD_DEFAULTS["server_vad"]),
            },
            "output": {"format": dict(fmt), "voice": d.voices[0], "speed": 1.0},
        },
        "tools": [],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
    }


def apply_update(session: dict[str, Any], update: Any, d: Dialect) -> dict[str, Any]:
    """The session after ``update``; InvalidRequest when the real server would refuse it."""
    if not isinstance(update, dict):
        raise InvalidRequest("invalid_type", "Invalid type for 'session': expected an object.")
    check = {"ga": _check_openai, "xai": _check_xai, "flat": _check_flat}[d.shape]
    check(update, d)
    merged = merge(session, update)
    if d.shape == "ga":
        _retype_turn_detection(session, update, merged)
    return merged


def _retype_turn_detection(
    old: dict[str, Any], update: dict[str, Any], new: dict[str, Any]
) -> None:
    """A turn detection of another type replaces the old one whole, filled with that type's
    defaults (its settings do not carry over: semantic_vad has no threshold)."""
    td = update.get("audio", {}).get("input", {}).get("turn_detection")
    before = old["audio"]["input"].get("turn_detection")
    if not isinstance(td, dict) or (isinstance(before, dict) and before["type"] == td["type"]):
        return
    new["audio"]["input"]["turn_detection"] = {**_VAD_DEFAULTS[td["type"]], **td}


_VAD_DEFAULTS: dict[str, dict[str, Any]] = {
    "server_vad": {
        "type": "server_vad", "threshold": 0.5, "prefix_padding_ms": 300,
        "silence_duration_ms": 500, "idle_timeout_ms": None, "create_response": True,
        "interrupt_response": True,
    },
    "semantic_vad": {
        "type": "semantic_vad", "eagerness": "auto", "create_response": True,
        "interrupt_response": True,
    },
}  # fmt: skip


def vad(session: dict[str, Any], d: Dialect) -> dict[str, Any] | None:
    """The session's turn detection; None when the client commits turns itself."""
    if d.shape == "ga":
        td = session["audio"]["input"].get("turn_detection")
    else:
        td = session.get("turn_detection")
    return td if isinstance(td, dict) else None


def input_rate(session: dict[str, Any], d: Dialect) -> int:
    if d.shape == "flat":
        return int(session[d.rate_field]) if d.rate_field else d.input_rates[0]
    return int(session["audio"]["input"]["format"].get("rate", OPENAI_RATE))


def _check_openai(s: dict[str, Any], d: Dialect) -> None:
    if "type" not in s:
        raise _missing("session.type")
    if s["type"] != "realtime":
        raise _invalid("session.type", s["type"], "'realtime'")
    for key in s:
        if key not in _TOP:
            beta = " (a Realtime beta parameter; the GA shape nests it under 'audio')"
            raise _unknown(f"session.{key}", beta if key in _BETA_ONLY else "")
    if "output_modalities" in s and s["output_modalities"] != ["audio"]:
        raise _invalid("session.output_modalities", s["output_modalities"], "['audio'] here")
    audio = _obj(s, "audio", _AUDIO, "session")
    audio_in = _obj(audio, "input", _AUDIO_IN, "session.audio")
    audio_out = _obj(audio, "output", _AUDIO_OUT, "session.audio")
    for where, part in (("input", audio_in), ("output", audio_out)):
        if "format" in part:
            _format(part["format"], f"session.audio.{where}.format", d.input_rates)
    if "turn_detection" in audio_in:
        _turn_detection(audio_in["turn_detection"], "session.audio.input.turn_detection", _VAD_KEYS)
    if "voice" in audio_out:
        _voice(audio_out["voice"], "session.audio.output.voice", d.voices)


def _check_xai(s: dict[str, Any], d: Dialect) -> None:
    audio = s.get("audio")
    audio = audio if isinstance(audio, dict) else {}
    for where in ("input", "output"):
        part = audio.get(where)
        if isinstance(part, dict) and "format" in part:
            _format(part["format"], f"session.audio.{where}.format", d.input_rates)
    if "turn_detection" in s:
        keys = {"server_vad": _VAD_KEYS["server_vad"]}
        _turn_detection(s["turn_detection"], "session.turn_detection", keys)
    if "voice" in s:
        _voice(s["voice"], "session.voice", d.voices)


def _check_flat(s: dict[str, Any], d: Dialect) -> None:
    if "type" in s or "audio" in s:  # a GA-shaped update sent to a beta-shaped server
        raise _unknown("session.type" if "type" in s else "session.audio")
    modalities = s.get("modalities", list(d.modalities))
    if not isinstance(modalities, list) or sorted(map(str, modalities)) != sorted(d.modalities):
        raise _invalid("session.modalities", modalities, repr(list(d.modalities)))
    keys = ("input_audio_format", "output_audio_format")
    for key, name, aliases in zip(keys, d.formats, d.format_aliases, strict=True):
        if key in s and s[key] != name and s[key] not in aliases:
            raise _invalid(f"session.{key}", s[key], " or ".join(map(repr, (name, *aliases))))
    if d.rate_field is not None and d.rate_field in s and s[d.rate_field] not in d.input_rates:
        raise _invalid(f"session.{d.rate_field}", s[d.rate_field], str(d.input_rates))
    if "turn_detection" in s:
        kinds = {k: {"type", *_VAD_KEYS["server_vad"]} for k in d.vad_types}
        _turn_detection(s["turn_detection"], "session.turn_detection", kinds)
    if "voice" in s and d.voices:
        _voice(s["voice"], "session.voice", d.voices)


def _obj(parent: dict[str, Any], key: str, allowed: set[str], where: str) -> dict[str, Any]:
    value = parent.get(key, {})
    if not isinstance(value, dict):
        raise InvalidRequest("invalid_type", f"Invalid type for '{where}.{key}'.", f"{where}.{key}")
    for k in value:
        if k not in allowed:
            raise _unknown(f"{where}.{key}.{k}")
    return value


def _format(fmt: Any, where: str, rates: tuple[int, ...]) -> None:
    if not isinstance(fmt, dict) or fmt.get("type") != "audio/pcm":
        got = fmt.get("type") if isinstance(fmt, dict) else fmt
        raise _invalid(f"{where}.type", got, "'audio/pcm' (the only format this fake serves)")
    if set(fmt) - {"type", "rate"}:
        raise _unknown(f"{where}.{sorted(set(fmt) - {'type', 'rate'})[0]}")
    if fmt.get("rate", OPENAI_RATE) not in rates:
        raise _invalid(f"{where}.rate", fmt.get("rate"), " or ".join(map(str, rates)))


def _turn_detection(td: Any, where: str, kinds: dict[str, set[str]]) -> None:
    if td is None:
        return
    if not isinstance(td, dict) or td.get("type") not in kinds:
        got = td.get("type") if isinstance(td, dict) else td
        raise _invalid(f"{where}.type", got, " or ".join(f"'{k}'" for k in kinds) + " or null")
    for k in td:
        if k not in kinds[td["type"]]:
            raise _unknown(f"{where}.{k}")


def _voice(voice: Any, where: str, voices: tuple[str, ...]) -> None:
    if isinstance(voice, dict) and isinstance(voice.get("id"), str):
        return
    if not isinstance(voice, str) or voice.lower() not in {v.lower() for v in voices}:
        raise _invalid(where, voice, ", ".join(sorted(voices)))


def _missing(param: str) -> InvalidRequest:
    return InvalidRequest(
        "missing_required_parameter", f"Missing required parameter: '{param}'.", param
    )


def _unknown(param: str, hint: str = "") -> InvalidRequest:
    return InvalidRequest("unknown_parameter", f"Unknown parameter: '{param}'.{hint}", param)


def _invalid(param: str, value: Any, expected: str) -> InvalidRequest:
    message = f"Invalid value for '{param}': {value!r}. Expected {expected}."
    return InvalidRequest("invalid_value", message, param)

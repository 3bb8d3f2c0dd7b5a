"""The manifest's ``partner`` field: a sample's reactive partner script (docs/benchmark-format.md).

It is a list of steps, each an object with a ``kind`` and a ``clip`` (an audio path, relative to
the manifest like the context):

    {"kind": "interrupt", "clip": "...", "after_onset_ms": 1500}
    {"kind": "backchannel", "clip": "...", "at_pause_ms": 400}       (or "after_onset_ms")
    {"kind": "next_turn", "clip": "...", "gap_ms": 300, "timeout_ms": 15000,
     "emotion": "Anger", "reference": "..."}                       (timeout, emotion optional)
    {"kind": "distractor", "clip": "...", "at_s": 4.0}

Every problem is reported with its field as ``partner[i].name``; ``ScriptEntry`` is one step as
the manifest gives it, ``partner_script`` the pure script a session runs (``core.partner``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from duplexsim.core.partner import (
    Backchannel,
    Distractor,
    Interrupt,
    NextTurn,
    PartnerScript,
    Step,
)

__all__ = ["KINDS", "FieldChecks", "ScriptEntry", "parse_partner", "partner_script"]

# per kind: (required fields, optional fields), beside "kind" and "clip"
KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "interrupt": (("after_onset_ms",), ()),
    "backchannel": ((), ("at_pause_ms", "after_onset_ms")),
    "next_turn": (("gap_ms",), ("timeout_ms", "emotion", "reference")),
    "distractor": (("at_s",), ()),
}
MAX_STEPS = 64


@dataclass(frozen=True)
class ScriptEntry:
    kind: str
    clip: Path
    clip_s: float | None  # the clip's duration (None: its audio was not read)
    after_onset_s: float | None = None
    at_pause_s: float | None = None
    gap_s: float | None = None
    timeout_s: float | None = None
    at_s: float | None = None
    emotion: str | None = None  # a next turn whose reply is scored against a reference
    reference: Path | None = None

    def step(self, clip: int) -> Step:
        if self.kind == "interrupt":
            assert self.after_onset_s is not None
            return Interrupt(clip, self.after_onset_s)
        if self.kind == "backchannel":
            return Backchannel(clip, self.at_pause_s, self.after_onset_s)
        if self.kind == "next_turn":
            assert self.gap_s is not None
            return NextTurn(clip, self.gap_s, self.timeout_s)
        assert self.at_s is not None
        return Distractor(clip, self.at_s)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ScriptEntry:
        """The inverse of ``to_dict`` (a recorded script, for replay)."""
        reference = data.get("reference")
        return cls(
            kind=str(data["kind"]),
            clip=Path(data["clip"]),
            clip_s=None,
            **{
                k: data.get(k)
                for k in ("after_onset_s", "at_pause_s", "gap_s", "timeout_s", "at_s", "emotion")
            },
            reference=None if reference is None else Path(reference),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "clip": str(self.clip)}
        for name in ("after_onset_s", "at_pause_s", "gap_s", "timeout_s", "at_s", "emotion"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.reference is not None:
            out["reference"] = str(self.reference)
        return out


def partner_script(entries: Sequence[ScriptEntry], clip_s: Sequence[float]) -> PartnerScript:
    """The script a session runs: each entry's clip (by its index), ``clip_s`` long."""
    return PartnerScript(tuple(e.step(i) for i, e in enumerate(entries)), tuple(clip_s))


class FieldChecks(Protocol):
    """What the manifest's line parser checks a value with; ``label`` names the field in the
    problem it reports (``partner[2].clip``)."""

    def problem(self, field_name: str | None, message: str) -> None: ...

    def audio_at(self, label: str, value: object) -> tuple[Path, float | None] | None: ...

    def number_at(self, label: str, value: object) -> float | None: ...

    def emotion_at(self, label: str, value: object) -> str | None: ...

    def suggest(self, name: str, options: Sequence[str]) -> str: ...


def parse_partner(value: object, checks: FieldChecks) -> tuple[ScriptEntry, ...] | None:
    """The steps of a ``partner`` field; None (with every problem reported) if any is wrong."""
    if not isinstance(value, list):
        checks.problem("partner", f"expected a list of steps, got {_kind(value)}")
        return None
    if not value:
        checks.problem("partner", "expected at least one step")
        return None
    if len(value) > MAX_STEPS:
        checks.problem("partner", f"{len(value)} steps: at most {MAX_STEPS}")
        return None
    entries = [_entry(f"partner[{i}]", item, checks) for i, item in enumerate(value)]
    if any(e is None for e in entries):
        return None
    return tuple(e for e in entries if e is not None)


def _entry(where: str, item: object, checks: FieldChecks) -> ScriptEntry | None:
    if not isinstance(item, dict):
        checks.problem(where, f"expected an object, got {_kind(item)}")
        return None
    kind = item.get("kind")
    if kind not in KINDS:
        hint = checks.suggest(str(kind), tuple(KINDS)) if isinstance(kind, str) else ""
        got = "missing" if "kind" not in item else f"unknown kind {kind!r}"
        checks.problem(f"{where}.kind", f"{got}{hint} (one of: {', '.join(KINDS)})")
        return None
    required, optional = KINDS[kind]
    ok = _fields(where, kind, item, (*required, "clip"), optional, checks)
    clip = checks.audio_at(f"{where}.clip", item["clip"]) if "clip" in item else None
    numbers = {
        name: checks.number_at(f"{where}.{name}", item[name])
        for name in (*required, *optional)
        if name in item and name not in ("emotion", "reference")
    }
    ok = ok and clip is not None and all(v is not None for v in numbers.values())
    turn_ref = _turn_reference(where, item, checks)
    if kind == "backchannel" and ("at_pause_ms" in item) == ("after_onset_ms" in item):
        checks.problem(where, "a backchannel takes one of 'at_pause_ms' and 'after_onset_ms'")
        ok = False
    if "timeout_ms" in item and numbers.get("timeout_ms") == 0:
        checks.problem(f"{where}.timeout_ms", "expected a number > 0")
        ok = False
    if not ok or turn_ref is None or clip is None:
        return None
    ms = {k: (v / 1000.0 if k.endswith("_ms") and v is not None else v) for k, v in numbers.items()}
    return ScriptEntry(
        kind=kind,
        clip=clip[0],
        clip_s=clip[1],
        after_onset_s=ms.get("after_onset_ms"),
        at_pause_s=ms.get("at_pause_ms"),
        gap_s=ms.get("gap_ms"),
        timeout_s=ms.get("timeout_ms"),
        at_s=ms.get("at_s"),
        emotion=turn_ref[0],
        reference=turn_ref[1],
    )


def _fields(
    where: str,
    kind: str,
    item: dict[str, Any],
    required: tuple[str, ...],
    optional: tuple[str, ...],
    checks: FieldChecks,
) -> bool:
    ok = True
    for name in required:
        if name not in item:
            checks.problem(f"{where}.{name}", f"missing: {_a(kind)} needs it")
            ok = False
    known = ("kind", *required, *optional)
    for name in item:
        if name not in known:
            hint = checks.suggest(name, known)
            checks.problem(f"{where}.{name}", f"unknown field for {_a(kind)}{hint}")
            ok = False
    return ok


def _turn_reference(
    where: str, item: dict[str, Any], checks: FieldChecks
) -> tuple[str | None, Path | None] | None:
    """A next turn's ``emotion`` and ``reference``: both or neither (None: a problem)."""
    given = [name for name in ("emotion", "reference") if name in item]
    if not given:
        return None, None
    if len(given) == 1:
        other = "reference" if given[0] == "emotion" else "emotion"
        checks.problem(f"{where}.{other}", f"missing: '{given[0]}' needs '{other}' (or neither)")
        return None
    emotion = checks.emotion_at(f"{where}.emotion", item["emotion"])
    reference = checks.audio_at(f"{where}.reference", item["reference"])
    if emotion is None or reference is None:
        return None
    return emotion, reference[0]


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return "a number"
    names: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return names.get(type(value), "a value")

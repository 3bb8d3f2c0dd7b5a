"""The benchmark format: a JSONL manifest, one sample a line, audio paths relative to the manifest.

``load_benchmark`` validates the whole manifest before anything runs and reports every problem at
once, each with its file, line and field (see docs/benchmark-format.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from duplexsim.core import safejson
from duplexsim.core.audio import AudioInfo, audio_info, read_audio
from duplexsim.core.emotions import EMOTION_NAMES, suggest_emotion
from duplexsim.core.errors import AudioFileError, BenchmarkError, Problem
from duplexsim.core.names import NAME
from duplexsim.core.partnerfield import ScriptEntry, parse_partner

__all__ = [
    "MANIFEST_NAME",
    "Benchmark",
    "Sample",
    "compose_instructions",
    "load_benchmark",
    "resolve_manifest",
]

MANIFEST_NAME = "manifest.jsonl"
AudioCheck = Literal["none", "header", "full"]

_ID = NAME  # a sample id names its recording's folder
_LANGUAGE = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})?")
_REQUIRED = ("id", "language", "context")
# emotion and reference come together: a sample without them is timing-only (Full-Duplex-Bench's
# tasks): it runs and is timed, and nothing emotional is scored
_PAIRED = ("emotion", "reference")
_OPTIONAL = (
    *_PAIRED,
    "task",
    "context_turn_start_s",
    "gap_s",
    "source_id",
    "reference_scores",
    "meta",
    "partner",
    "partner_instructions",
)
_TASK = re.compile(r"[a-z][a-z0-9_-]{0,63}")
MAX_INSTRUCTIONS = 100_000  # characters of a partner model's instructions


def compose_instructions(system: str, task: str | None) -> str:
    """A partner's instructions from a system prompt and a task prompt, as Full-Duplex-Bench v2
    gives its examiner both: one text, the task after a blank line."""
    return system if not task else f"{system}\n\n{task}"


@dataclass(frozen=True)
class Sample:
    id: str
    language: str
    emotion: str | None  # None with reference: a timing-only sample
    context: Path
    reference: Path | None
    line: int
    task: str | None = None  # what the sample tests, e.g. "pause_handling"; reports group by it
    context_turn_start_s: float | None = None
    gap_s: float | None = None
    source_id: str | None = None
    reference_scores: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    context_duration_s: float | None = None
    reference_duration_s: float | None = None
    # a reactive partner script (``core.partnerfield``): the user's side reacts to the model
    partner: tuple[ScriptEntry, ...] = ()
    # what a partner model is told to be (``run --partner``): its system prompt, as given
    partner_instructions: str | None = None

    @property
    def audio(self) -> tuple[Path, ...]:
        """Every audio file the sample names."""
        paths = [self.context, self.reference]
        for e in self.partner:
            paths += [e.clip, e.reference]
        return tuple(p for p in paths if p is not None)


@dataclass(frozen=True)
class Benchmark:
    manifest: Path
    samples: tuple[Sample, ...]

    @property
    def root(self) -> Path:
        return self.manifest.parent

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.samples)

    def __len__(self) -> int:
        return len(self.samples)

    def get(self, sample_id: str) -> Sample | None:
        return next((s for s in self.samples if s.id == sample_id), None)


def resolve_manifest(path: str | Path) -> Path:
    """The manifest file for a benchmark directory or manifest path."""
    p = Path(path)
    if p.is_dir():
        p = p / MANIFEST_NAME
        if not p.is_file():
            raise BenchmarkError(
                [Problem(str(path), None, None, f"no {MANIFEST_NAME} in directory")]
            )
    elif not p.exists():
        raise BenchmarkError([Problem(str(path), None, None, "no such file or directory")])
    return p


def load_benchmark(
    path: str | Path, *, audio_check: AudioCheck = "full", allow_outside: bool = False
) -> Benchmark:
    """Parse and validate a benchmark; raises BenchmarkError listing every problem found.

    Audio paths are relative to the manifest and stay inside its folder (symlinks followed)
    unless ``allow_outside``."""
    manifest = resolve_manifest(path)
    try:
        text = manifest.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchmarkError([Problem(str(manifest), None, None, f"cannot read: {exc}")]) from None
    problems: list[Problem] = []
    samples: list[Sample] = []
    first_line: dict[str, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        parser = _LineParser(manifest, lineno, problems, allow_outside)
        sample = parser.parse(raw, audio_check)
        if sample is None:
            continue
        if sample.id in first_line:
            parser.problem(
                "id", f"duplicate id '{sample.id}' (first on line {first_line[sample.id]})"
            )
            continue
        first_line[sample.id] = lineno
        samples.append(sample)
    if not samples and not problems:
        problems.append(Problem(str(manifest), None, None, "manifest holds no samples"))
    if problems:
        raise BenchmarkError(problems)
    return Benchmark(manifest, tuple(samples))


class _LineParser:
    """Validates one manifest line, collecting problems instead of stopping at the first."""

    def __init__(
        self, manifest: Path, lineno: int, problems: list[Problem], allow_outside: bool = False
    ) -> None:
        self.manifest = manifest
        self.allow_outside = allow_outside
        self.lineno = lineno
        self.problems = problems
        self.ok = True
        self.audio_check: AudioCheck = "full"

    def problem(self, field_name: str | None, message: str) -> None:
        self.ok = False
        self.problems.append(Problem(str(self.manifest), self.lineno, field_name, message))

    def parse(self, raw: str, audio_check: AudioCheck) -> Sample | None:
        self.audio_check = audio_check
        try:
            obj = safejson.loads(raw)
        except safejson.JsonError as exc:
            self.problem(None, f"not valid JSON: {exc}")
            return None
        if not isinstance(obj, dict):
            self.problem(None, f"expected a JSON object, got {type(obj).__name__}")
            return None
        self._check_fields(obj)
        sample_id = self._string(obj, "id", pattern=_ID, hint="letters, digits, '.', '_', '-'")
        language = self._string(obj, "language", pattern=_LANGUAGE, hint="an ISO code like 'en'")
        emotion = self._emotion(obj)
        context = self._audio(obj, "context", audio_check)
        reference = self._audio(obj, "reference", audio_check)
        task = self._string(obj, "task", pattern=_TASK, hint="lower-case letters, digits, '_'")
        turn_start = self._number(obj, "context_turn_start_s")
        gap = self._number(obj, "gap_s")
        source_id = self._optional_string(obj, "source_id")
        scores = self._scores(obj)
        meta = obj.get("meta", {})
        if not isinstance(meta, dict):
            self.problem("meta", f"expected an object, got {_kind(meta)}")
        partner = parse_partner(obj["partner"], self) if "partner" in obj else ()
        instructions = self._instructions(obj)
        # (unknown without reading the audio: ``audio_check="none"`` leaves it to the reader)
        known = context is not None and context[1] is not _NO_INFO
        if context and known and turn_start is not None and turn_start > context[1].duration_s:
            self.problem("context_turn_start_s", f"{turn_start} s is past the context's end")
        if not self.ok:
            return None
        assert sample_id and language and context
        return Sample(
            id=sample_id,
            language=language,
            emotion=emotion,
            context=context[0],
            reference=reference[0] if reference else None,
            line=self.lineno,
            task=task,
            context_turn_start_s=turn_start,
            gap_s=gap,
            source_id=source_id,
            reference_scores=scores,
            meta=meta,
            context_duration_s=context[1].duration_s if context[1].frames else None,
            reference_duration_s=reference[1].duration_s
            if reference and reference[1].frames
            else None,
            partner=partner or (),
            partner_instructions=instructions,
        )

    # the checks ``parse_partner`` applies to a step's values, reported under ``label``
    def audio_at(self, label: str, value: object) -> tuple[Path, float | None] | None:
        found = self._audio({label: value}, label, self.audio_check)
        if found is None:
            return None
        return found[0], found[1].duration_s if found[1].frames else None

    def number_at(self, label: str, value: object) -> float | None:
        if value is None:
            self.problem(label, "expected a number, got null")
            return None
        return self._number({label: value}, label)

    def emotion_at(self, label: str, value: object) -> str | None:
        emotion = self._emotion({"emotion": value}, label)
        return emotion

    def suggest(self, name: str, options: Sequence[str]) -> str:
        near = _closest(name, tuple(options))
        return f" (did you mean '{near}'?)" if near else ""

    def _check_fields(self, obj: dict[str, Any]) -> None:
        for name in _REQUIRED:
            if name not in obj:
                self.problem(name, "missing required field")
        given = [name for name in _PAIRED if name in obj]
        if len(given) == 1:
            other = _PAIRED[1 - _PAIRED.index(given[0])]
            self.problem(other, f"missing: '{given[0]}' needs '{other}' (or give neither)")
        for name in obj:
            if name not in _REQUIRED and name not in _OPTIONAL:
                near = _closest(name, (*_REQUIRED, *_OPTIONAL))
                hint = f" (did you mean '{near}'?)" if near else ""
                self.problem(name, f"unknown field{hint}")

    def _string(
        self, obj: dict[str, Any], name: str, *, pattern: re.Pattern[str], hint: str
    ) -> str | None:
        value = obj.get(name)
        if name not in obj:
            return None
        if not isinstance(value, str):
            self.problem(name, f"expected a string, got {_kind(value)}")
            return None
        if not pattern.fullmatch(value):
            self.problem(name, f"invalid value {value!r} (expected {hint})")
            return None
        return value

    def _optional_string(self, obj: dict[str, Any], name: str) -> str | None:
        value = obj.get(name)
        if value is None or isinstance(value, str):
            return value
        self.problem(name, f"expected a string, got {_kind(value)}")
        return None

    def _emotion(self, obj: dict[str, Any], label: str = "emotion") -> str | None:
        value = obj.get("emotion")
        if "emotion" not in obj:
            return None
        if not isinstance(value, str):
            self.problem(label, f"expected a string, got {_kind(value)}")
            return None
        if value not in EMOTION_NAMES:
            near = suggest_emotion(value)
            hint = (
                f"did you mean '{near}'?"
                if near
                else "expected one of: " + ", ".join(EMOTION_NAMES)
            )
            self.problem(label, f"unknown emotion {value!r} ({hint})")
            return None
        return value

    def _number(self, obj: dict[str, Any], name: str) -> float | None:
        value = obj.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.problem(name, f"expected a number, got {_kind(value)}")
            return None
        if not math.isfinite(value) or value < 0:
            self.problem(name, f"expected a finite number >= 0, got {value}")
            return None
        return float(value)

    def _audio(
        self, obj: dict[str, Any], name: str, audio_check: AudioCheck
    ) -> tuple[Path, AudioInfo] | None:
        value = obj.get(name)
        if name not in obj:
            return None
        if not isinstance(value, str) or not value:
            self.problem(name, f"expected a relative audio path, got {_kind(value)}")
            return None
        if "\x00" in value:
            self.problem(name, "path holds a NUL character")
            return None
        root = self.manifest.parent.resolve()
        path = (root / value).resolve()
        if not self.allow_outside and not path.is_relative_to(root):
            self.problem(
                name,
                f"{value} leads outside the benchmark folder {root} "
                "(paths are relative to the manifest; --allow-outside-paths permits this)",
            )
            return None
        if not path.exists():
            self.problem(name, f"file not found: {value} (looked for {path})")
            return None
        try:
            info = audio_info(path) if audio_check != "none" else _NO_INFO
            if audio_check == "full":
                read_audio(path)
        except AudioFileError as exc:
            self.problem(name, str(exc))
            return None
        return path, info

    def _instructions(self, obj: dict[str, Any]) -> str | None:
        """A partner model's instructions: a string, or Full-Duplex-Bench v2's examiner prompts
        ``{"system": ..., "task": ...}``, joined as its runner joins them."""
        name = "partner_instructions"
        value = obj.get(name)
        if name not in obj:
            return None
        if isinstance(value, dict):
            value = self._examiner_prompts(value)
            if value is None:
                return None
        if not isinstance(value, str):
            self.problem(name, f"expected a string or an object, got {_kind(value)}")
        elif not value.strip():
            self.problem(name, "is empty")
        elif len(value) > MAX_INSTRUCTIONS:
            self.problem(name, f"{len(value)} characters; at most {MAX_INSTRUCTIONS}")
        else:
            return value
        return None

    def _examiner_prompts(self, value: dict[str, Any]) -> str | None:
        unknown = sorted(set(value) - {"system", "task"})
        system, task = value.get("system"), value.get("task")
        if unknown or not isinstance(system, str) or not isinstance(task, str | None):
            extra = f" (unknown: {', '.join(unknown)})" if unknown else ""
            self.problem(
                "partner_instructions",
                f"expected an object with a 'system' string and an optional 'task' string{extra}",
            )
            return None
        return compose_instructions(system, task)

    def _scores(self, obj: dict[str, Any]) -> dict[str, dict[str, float]]:
        value = obj.get("reference_scores")
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.problem(
                "reference_scores", f"expected an object of scorer -> scores, got {_kind(value)}"
            )
            return {}
        out: dict[str, dict[str, float]] = {}
        for scorer, scores in value.items():
            where = f"reference_scores.{scorer}"
            if not isinstance(scores, dict):
                self.problem(where, f"expected an object of emotion -> number, got {_kind(scores)}")
                continue
            bad = [
                k
                for k, v in scores.items()
                if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
            ]
            if bad:
                self.problem(
                    where, f"non-numeric or non-finite score for {', '.join(map(repr, bad))}"
                )
                continue
            out[scorer] = {k: float(v) for k, v in scores.items()}
        return out


_NO_INFO = AudioInfo(path="", sample_rate=1, channels=1, frames=0, format="")


def _kind(value: object) -> str:
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        type(None): "null",
    }
    return names.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )


def _closest(name: str, options: tuple[str, ...]) -> str | None:
    import difflib

    found = difflib.get_close_matches(name, options, n=1, cutoff=0.6)
    return found[0] if found else None

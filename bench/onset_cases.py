"""Reply onsets against the truth, before and after the onset rule: real human speech (tests/data)
placed after silence, a level syllable then a 70 ms pause, speech after steady -39 dBFS noise, a
breath alone and noise alone at -30..-50 dBFS, plain and through Opus (tests/helpers/onsetcases.py).

    python bench/onset_cases.py

"before" is the rule recordings made before the onset rule are re-measured with (the run rule
alone, the edge at -40 dBFS); "after" is today's default. Each onset is the one a measurement of
the whole clip finds (``measure_reply``, as ``replay`` re-measures output.wav).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from duplexsim.core.textable import render_table
from duplexsim.core.timing import measure_reply
from duplexsim.core.vad import VadConfig
from tests.helpers.onsetcases import RATE, Case, all_cases

BEFORE = replace(VadConfig(), onset_floor_db=0.0, edge_above_floor=False)
AFTER = VadConfig()


def onset_ms(case: Case, vad: VadConfig) -> float | None:
    onset = measure_reply(case.audio, RATE, speech_end_s=None, vad=vad).onset_s
    return None if onset is None else 1000.0 * onset


def cell(case: Case, got: float | None) -> str:
    if case.onset_s is None:
        return "no reply" if got is None else f"PHANTOM at {got:.1f}"
    if got is None:
        return "MISSED"
    return f"{got - 1000.0 * case.onset_s:+.1f}"


def main() -> int:
    rows, worst = [], {"before": 0.0, "after": 0.0}
    phantoms = {"before": 0, "after": 0}
    for case in all_cases():
        cells = []
        for label, vad in (("before", BEFORE), ("after", AFTER)):
            got = onset_ms(case, vad)
            cells.append(cell(case, got))
            if case.onset_s is None:
                phantoms[label] += got is not None
            elif got is not None:
                worst[label] = max(worst[label], abs(got - 1000.0 * case.onset_s))
        truth = "-" if case.onset_s is None else f"{1000.0 * case.onset_s:.1f}"
        rows.append([case.name, truth, *cells])
    print(render_table(["case", "true onset ms", "error before ms", "error after ms"], rows))
    print(
        f"\nworst |error|: before {worst['before']:.1f} ms, after {worst['after']:.1f} ms; "
        f"phantom replies: before {phantoms['before']}, after {phantoms['after']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``duplexsim demo --partner``: the partner set against the two reference models whose
behaviours make the partner metrics come out apart."""

from __future__ import annotations

from tests.helpers.cli import duplexsim
from tests.helpers.timing import LENIENT_ARGS


def test_the_partner_demo_tells_a_model_that_stops_from_one_that_talks_on(tmp_path):
    args = ("demo", "--partner", "--no-score", "--quiet", "--runs-dir", str(tmp_path))
    result = duplexsim(*args, "--run-prefix", "p", *LENIENT_ARGS)
    assert result.returncode == 0, result.stderr
    table = result.stdout.split("partner by task:")[1].splitlines()
    rows = {tuple(line.split()[:2]): line.split() for line in table[3:9]}
    # columns: run task interruptions stopped stop-ms answered answer-ms talked-on backchannels
    # kept-floor next-turns replied turn-ms distractors took-turn skipped
    talker = rows[("p-talk-through", "interruption")]
    stopper = rows[("p-stop-on-overlap", "interruption")]
    assert (talker[3], talker[7]) == ("0/2", "2/2")  # never stopped: talked on
    assert (stopper[3], stopper[5], stopper[7]) == ("2/2", "2/2", "0/2")  # stopped, answered
    assert 0 < int(stopper[4]) < 100  # it stops within a few frames of hearing the user
    assert rows[("p-talk-through", "backchannel")][9] == "2/2"  # spoke on over "mm-hm"
    assert rows[("p-stop-on-overlap", "backchannel")][9] == "0/2"  # took it for a turn
    for run in ("p-talk-through", "p-stop-on-overlap"):
        assert rows[(run, "multi_turn")][11] == "2/2"  # both next turns answered

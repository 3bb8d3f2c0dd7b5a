"""What this machine may have added to a reply's latency (``LatencyWindow``): the sends due from
the frame holding the user's speech end to the onset (``timing.window_send_s``), the stall of our
loop that ended as the onset's chunk was stamped (its bytes waited that long to be read), and the
stall of a co-located fake server as that chunk left it (it answers each frame as it reads it,
so only then does a stall move its reply). A fake the run started that answers each frame as it
arrives waited on the one frame its onset answers: that frame's lateness and the time from its
send to its answer's stamp (the fake's work, both loops, the sockets) are what this machine added,
to the sample; a stall of either loop that did not lengthen them did not move the reply.
The stall logs are in the loop's time: given only when the session runs on the loop's own clock.
A session on a loop that records no stalls (not ``eventloop``'s, or on a clock of its own) cannot
say what its loop added: its window is not known, and its latency not vouched for.
"""

from __future__ import annotations

from duplexsim.core.records import EventRecords
from duplexsim.core.stalls import StallLog
from duplexsim.core.timing import (
    LatencyWindow,
    ReplyTiming,
    answered_send,
    latency_window,
    window_send_s,
)

__all__ = ["STAMP_SLACK_S", "reply_window"]

# a stamp is taken this soon after the stall that held it ends (the loop's next poll, and the
# callbacks ahead of the read in that iteration, each shorter than a recorded stall)
STAMP_SLACK_S = 0.001


def reply_window(
    timing: ReplyTiming,
    records: EventRecords,
    frame_s: float,
    output_rate: int,
    t0: float,
    loop: StallLog | None,
    server: StallLog | None,
    *,
    answers_each_frame: bool = False,
) -> LatencyWindow | None:
    """The reply's latency window (None: no reply); ``t0``: the timeline's origin on the loop's
    clock; ``answers_each_frame``: the model answers each input frame with one output frame as
    it arrives (``Capabilities``); with a ``server`` log (a fake this run started) only the frame
    its onset answers counts among the sends, and the time its answer took (our loop's part of it
    no more than its busy span at the stamp and what the server's stalls leave, the rest the
    server's)."""
    onset = timing.onset_s
    if onset is None:
        return None
    chunk = records.chunk_of(onset, output_rate)
    stamped = t0 + (onset if chunk is None else records.recv_t[chunk])
    # a model served on this loop waits through all of it: the busy span that ran into the stamp
    # (a loop that records no stalls cannot say: its share is not known)
    loop_s = None if loop is None else loop.busy_before(stamped, STAMP_SLACK_S)
    held_s = loop_s or 0.0
    answered = None
    if answers_each_frame and server is not None:
        frame_len = round(output_rate * frame_s)
        answered = answered_send(
            records.send_n, records.send_t, records.recv_samples, records.recv_t, chunk, frame_len
        )
    send_s = window_send_s(records.send_due, records.send_t, timing, frame_s, answered)
    if answered is not None and server is not None:
        # a fake this run started answered that one frame as it read it: the time from its send
        # to its answer's stamp is all this machine added after the send (the fake's own work,
        # both loops, the sockets); stalls that did not lengthen it did not move the reply
        sent = records.send_t[answered]
        turnaround = recv_t_of(records, chunk) - sent
        # told apart as well as the logs can: the server's stalls in it first, then our loop's
        server_part = min(turnaround, server.worst(t0 + sent, stamped))
        loop_s = None if loop_s is None else min(loop_s, turnaround - server_part)
        return latency_window(send_s, loop_s, turnaround - (loop_s or 0.0))
    server_s = None
    if server is not None:
        server_s = server.worst(stamped - held_s - 2 * STAMP_SLACK_S, stamped)
    return latency_window(send_s, loop_s, server_s)


def recv_t_of(records: EventRecords, chunk: int | None) -> float:
    """When chunk ``chunk`` was stamped, on the timeline."""
    assert chunk is not None  # an answered frame has its answer
    return records.recv_t[chunk]

"""``duplexsim talk``: talk to a model through the microphone; every turn is recorded.

Also the audio-device options that ``run --monitor`` shares.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from argparse import SUPPRESS
from pathlib import Path

from duplexsim.cli.options import add_model_option_argument, deprecated_alias
from duplexsim.core.errors import ConfigError
from duplexsim.live.audio_io.base import AudioOptions
from duplexsim.session import eventloop

__all__ = ["add_audio_arguments", "add_stall_argument", "audio_options", "register"]

BACKEND_ENV = "DUPLEXSIM_AUDIO_BACKEND"


def add_stall_argument(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--stall-timeout",
        type=float,
        default=5.0,
        help="a server that sends nothing (continuous-output models) or answers no ping "
        "(WebSocket models) this long is stalled: the session fails, retryable (s, default 5)",
    )


def add_audio_arguments(p: argparse.ArgumentParser, *, latency_ms: int) -> None:
    g = p.add_argument_group("audio device")
    g.add_argument(
        "--audio-device",
        help="audio device, index or name as `python -m sounddevice` lists it (default: the "
        "system default)",
    )
    g.add_argument(
        "--device", dest="audio_device", action=deprecated_alias("--audio-device"), help=SUPPRESS
    )
    g.add_argument("--input-device", help="microphone, if not --audio-device")
    g.add_argument(
        "--audio-rate",
        type=int,
        default=48000,
        help="device sample rate in Hz; sessions are resampled (default 48000)",
    )
    g.add_argument(
        "--audio-latency-ms",
        type=int,
        default=latency_ms,
        help=f"playback delay behind the session timeline, a jitter buffer (default {latency_ms})",
    )
    g.add_argument(
        "--audio-backend",
        default=None,
        help=f"sounddevice, or fake[:MIC.wav] for tests (default: ${BACKEND_ENV} or sounddevice)",
    )


def audio_options(args: argparse.Namespace) -> AudioOptions:
    return AudioOptions(
        backend=args.audio_backend or os.environ.get(BACKEND_ENV) or "sounddevice",
        output_device=args.audio_device,
        input_device=args.input_device or args.audio_device,
        rate=args.audio_rate,
        latency_ms=args.audio_latency_ms,
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "talk",
        help="talk to a model by voice: microphone in, its reply out, every turn recorded",
    )
    p.add_argument(
        "--model",
        required=True,
        help="profile.toml, a built-in profile, fake:BEHAVIOUR[@PROTOCOL] or ws://URL",
    )
    p.add_argument("--url", help="override the profile's endpoint")
    add_model_option_argument(p)
    p.add_argument("--run-id", help="name of the run (the same id again adds turns to it)")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where runs are written")
    p.add_argument("--turns", type=int, help="stop after this many turns (default: Ctrl-C)")
    p.add_argument(
        "--seconds", type=float, default=30.0, help="longest turn of yours, in s (default 30)"
    )
    p.add_argument(
        "--end-of-turn-ms",
        type=int,
        default=800,
        help="a pause this long after you spoke ends your turn (default 800)",
    )
    g = p.add_argument_group("reply detection")
    g.add_argument("--frame-ms", type=int, help="send frame size in ms (default: the protocol's)")
    g.add_argument("--hangover", type=float, default=2.0, help="model silence ending its reply")
    add_stall_argument(g)
    g.add_argument("--max-reply", type=float, default=20.0, help="longest reply kept (s)")
    g.add_argument(
        "--reply-timeout", type=float, default=10.0, help="no speech this long means no reply"
    )
    g.add_argument("--vad", choices=("webrtc", "energy"), default="webrtc")
    g.add_argument("--vad-aggressiveness", type=int, default=2, choices=range(4))
    add_audio_arguments(p, latency_ms=100)
    p.set_defaults(func=_talk)


def _talk(args: argparse.Namespace) -> int:
    from duplexsim.cli.run_cmd import session_settings, with_overrides
    from duplexsim.live.talk import TalkOptions, talk
    from duplexsim.profiles.profile import resolve_model

    profile = with_overrides(resolve_model(args.model), args)
    if args.frame_ms is not None and not 0 < args.frame_ms <= 1000:
        raise ConfigError("--frame-ms must be between 1 and 1000")
    run_id = args.run_id or f"talk-{profile.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    opts = TalkOptions(
        run_id=run_id,
        runs_dir=args.runs_dir,
        settings=session_settings(args),
        audio=audio_options(args),
        turns=args.turns,
        max_turn_s=args.seconds,
        end_of_turn_ms=args.end_of_turn_ms,
    )
    try:
        rows = eventloop.run(talk(profile, opts, say=lambda line: print(line, flush=True)))
    except asyncio.CancelledError:
        raise KeyboardInterrupt from None
    print(f"\n{len(rows)} turn(s) recorded: {opts.run_dir}")
    return 1 if any(r.status == "failed" for r in rows) else 0

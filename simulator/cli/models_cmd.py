"""``duplexsim models list``: the ready model profiles and whether their keys are set.
``duplexsim models check [NAMES]``: a short session with each, to know it works before a run."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from duplexsim.core.errors import ConfigError
from duplexsim.core.prices import format_amount
from duplexsim.core.textable import render_table
from duplexsim.core.usage import TOKEN_FIELDS
from duplexsim.profiles.profile import ModelProfile, builtin_profiles, load_profile, resolve_model
from duplexsim.session import eventloop

if TYPE_CHECKING:
    from duplexsim.live.models_check import CheckResult

__all__ = ["register"]
__all__ = ["PAID_RETRIES", "register"]

PAID_RETRIES = (
    "a paid profile bills every session, retries included: `run` retries a session only when "
    "it failed or the model did not hear the stream as sent (input fidelity lost); one that "
    "kept fidelity but not measurement precision is kept (its latency left out) unless you "
    "pass --retry-imprecise"
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("models", help="model profiles")
    actions = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    lst = actions.add_parser("list", help="the built-in profiles (use one with run --model NAME)")
    lst.set_defaults(func=_list)
    check = actions.add_parser(
        "check",
        help="a short session with each hosted profile whose key is set, or with the named ones: "
        "handshake, audio out, audio back, end of turn, round trip",
    )
    check.add_argument(
        "names", nargs="*", metavar="NAME", help="profiles (built-in, .toml, fake:BEHAVIOUR)"
    )
    check.add_argument(
        "--url", help="connect here instead of the profile's URL (a dry run against a fake)"
    )
    check.set_defaults(func=_check)


def _list(args: argparse.Namespace) -> int:
    rows = []
    for name, path in builtin_profiles().items():
        profile = load_profile(path)
        if profile.api_key_env:
            key = f"{profile.api_key_env} ({'set' if os.environ.get(profile.api_key_env) else 'not set'})"
        else:
            key = "-"
        billed = "paid" if profile.endpoint == "hosted" else "local"
        rows.append([name, profile.protocol, profile.model or "-", profile.url or "-", key, billed])
    headers = ["profile", "protocol", "model", "url", "key", "sessions"]
    print(render_table(headers, rows, align="llllll"))
    print(
        "\nalso: fake:BEHAVIOUR[@PROTOCOL] for a local reference model, a ws:// URL of a "
        "pcm-ws server, or a path to your own profile.toml"
    )
    print(f"\n{PAID_RETRIES}")
    from duplexsim.clients.registry import client_protocols

    print(f"protocols (built in and installed plugins): {', '.join(client_protocols())}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from duplexsim.live.models_check import check_model

    profiles = [resolve_model(name) for name in args.names] or _configured()
    if not profiles:
        raise ConfigError(
            "no hosted profile has its key set (see duplexsim models list); name one to check it"
        )
    results = [eventloop.run(check_model(p, args.url)) for p in profiles]
    rows = [
        [
            r.name,
            r.protocol,
            _s(r.handshake_s),
            _s(r.audio_out_s),
            _s(r.audio_back_s),
            {None: "n/a", True: "yes", False: "no"}[r.end_of_turn],
            _s(r.round_trip_s),
            _cost(r),
            "ok" if r.ok else f"FAILED: {r.problem}",
        ]
        for r in results
    ]
    headers = ["profile", "protocol", "handshake", "audio out", "audio back", "end of turn"]
    print(render_table([*headers, "round trip", "cost", "result"], rows, align="llrrrlrrl"))
    bases = {p.name: p.price.basis() for p in profiles if p.price is not None}
    if bases:
        print("\ncost = what the check used x the profile's prices:")
        print("\n".join(f"  {name}: {basis}" for name, basis in bases.items()))
    return 0 if all(r.ok for r in results) else 1


def _cost(result: CheckResult) -> str:
    """What the check cost; where a price is unknown, what it used instead."""
    if result.cost is not None and result.cost.amount is not None:
        return format_amount(result.cost.amount)
    used = result.usage
    tokens = sum(used.counts().get(f, 0) for f in TOKEN_FIELDS)
    what = f"{tokens:.0f} tokens, " if used.tokens_reported else ""
    return f"? ({what}{used.connected_s or 0.0:.1f} s connected)"


def _configured() -> list[ModelProfile]:
    """The built-in hosted profiles whose key is set."""
    profiles = [load_profile(path) for path in builtin_profiles().values()]
    return [p for p in profiles if p.api_key_env and os.environ.get(p.api_key_env)]


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f} s"

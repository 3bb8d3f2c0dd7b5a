"""``duplexsim models list``: the ready model profiles and whether their keys are set."""

from __future__ import annotations

import argparse
import os

from simulator.profiles import builtin_profiles, load_profile
from simulator.textable import render_table

__all__ = ["register"]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("models", help="model profiles")
    actions = p.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    lst = actions.add_parser("list", help="the built-in profiles (use one with run --model NAME)")
    lst.set_defaults(func=_list)


def _list(args: argparse.Namespace) -> int:
    rows = []
    for name, path in builtin_profiles().items():
        profile = load_profile(path)
        if profile.api_key_env:
            key = f"{profile.api_key_env} ({'set' if os.environ.get(profile.api_key_env) else 'not set'})"
        else:
            key = "-"
        rows.append([name, profile.protocol, profile.model or "-", profile.url or "-", key])
    print(render_table(["profile", "protocol", "model", "url", "key"], rows, align="lllll"))
    print(
        "\nalso: fake:BEHAVIOUR[@PROTOCOL] for a local reference model, a ws:// URL of a "
        "pcm-ws server, or a path to your own profile.toml"
    )
    from clients.registry import client_protocols

    print(f"protocols (built in and installed plugins): {', '.join(client_protocols())}")
    return 0

"""A run with another model as the user (``run --partner``): which partner, what it is told, and
its client for each session.

The partner's instructions are the sample's (``partner_instructions``), else the run's
(``--partner-instructions``); they go to the partner as its system prompt, in the option its
protocol names (``DuplexClient.instructions_option``), as Full-Duplex-Bench v2 gives its examiner
its prompts. A protocol with no such option runs without them, and the run says so once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from duplexsim.clients.base import DuplexClient
from duplexsim.clients.registry import client_class
from duplexsim.core.benchmark import Benchmark, Sample
from duplexsim.core.errors import ConfigError
from duplexsim.core.partnerturns import PartnerLimits
from duplexsim.profiles.profile import ModelProfile, client_config

__all__ = ["PartnerOptions", "check_partner", "partner_client"]


@dataclass(frozen=True)
class PartnerOptions:
    profile: ModelProfile
    limits: PartnerLimits = field(default_factory=PartnerLimits)
    instructions: str | None = None  # for the samples that carry none
    instructions_source: str | None = None  # where they came from (the file), for the record

    def describe(self) -> dict[str, Any]:
        """What the run's identity records of its partner."""
        return {
            "model": self.profile.describe(),
            "turns": self.limits.turns,
            "time_s": self.limits.time_s,
            "instructions_file": self.instructions_source,
        }

    def instructions_for(self, sample: Sample) -> str | None:
        return sample.partner_instructions or self.instructions

    @property
    def instructions_option(self) -> str | None:
        return client_class(self.profile.protocol).instructions_option


def check_partner(options: PartnerOptions, bench: Benchmark) -> str | None:
    """Before anything starts: the partner's protocol and endpoint are usable and no sample
    plays a script of its own (one user at a time); a note for the user when instructions will
    not reach the partner (None: they will, or there are none)."""
    profile = options.profile
    client_class(profile.protocol)
    if profile.fake_behaviour is None or profile.url is not None:
        client_config(profile)
    scripted = [s.id for s in bench if s.partner]
    if scripted:
        shown = ", ".join(scripted[:5]) + (", ..." if len(scripted) > 5 else "")
        raise ConfigError(
            f"--partner plays the user, and these samples carry a partner script of their own: "
            f"{shown} (run them without --partner)"
        )
    told = any(options.instructions_for(s) for s in bench)
    if told and options.instructions_option is None:
        return (
            f"note: partner protocol {profile.protocol} takes no instructions; "
            "the partner runs without them"
        )
    return None


def partner_client(
    options: PartnerOptions, sample: Sample, url: str | None
) -> tuple[DuplexClient, dict[str, Any]]:
    """A fresh client of the partner for one session (its instructions in its options), and
    what the bundle records of it."""
    profile = options.profile
    instructions = options.instructions_for(sample)
    option = options.instructions_option
    if instructions is not None and option is not None:
        profile = replace(profile, options={**profile.options, option: instructions})
    client = client_class(profile.protocol)(client_config(profile, url=url))
    about = {
        "model": options.profile.describe(),
        "instructions": instructions,
        "instructions_from": _source(options, sample, instructions),
        "instructions_option": option if instructions is not None else None,
    }
    return client, about


def _source(options: PartnerOptions, sample: Sample, instructions: str | None) -> str | None:
    if instructions is None:
        return None
    if sample.partner_instructions:
        return "sample"
    return options.instructions_source or "run"

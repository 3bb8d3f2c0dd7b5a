"""Audio devices for listening to sessions and talking to models: an output and input interface,
the sounddevice backend (imported lazily) and a fake one, and the session player."""

from __future__ import annotations

from duplexsim.core.errors import ConfigError
from duplexsim.live.audio_io.base import (
    AudioInput,
    AudioOptions,
    AudioOutput,
    AudioUnavailable,
    FloatArray,
)
from duplexsim.live.audio_io.player import Player, PlayerTap

__all__ = [
    "BACKENDS",
    "AudioInput",
    "AudioOptions",
    "AudioOutput",
    "AudioUnavailable",
    "FloatArray",
    "Player",
    "PlayerTap",
    "open_input",
    "open_output",
]

BACKENDS = ("sounddevice", "fake")
BLOCK_S = 0.02  # device blocks of 20 ms


def _backend(options: AudioOptions) -> tuple[str, str]:
    kind, _, arg = options.backend.partition(":")
    if kind not in BACKENDS or (arg and kind != "fake"):
        raise ConfigError(
            f"unknown audio backend {options.backend!r} (sounddevice, fake or fake:MIC.wav)"
        )
    return kind, arg


def block_for(rate: int) -> int:
    return max(1, round(rate * BLOCK_S))


def open_output(options: AudioOptions, rate: int) -> AudioOutput:
    kind, _ = _backend(options)
    if kind == "fake":
        from duplexsim.live.audio_io import fake

        return fake.open_output(rate, block_for(rate))
    from duplexsim.live.audio_io.device import DeviceOutput

    return DeviceOutput(rate, block_for(rate), options.output_device)


def open_input(options: AudioOptions, rate: int) -> AudioInput:
    kind, arg = _backend(options)
    if kind == "fake":
        from duplexsim.live.audio_io import fake

        return fake.open_input(rate, block_for(rate), arg)
    from duplexsim.live.audio_io.device import DeviceInput

    return DeviceInput(rate, block_for(rate), options.input_device)

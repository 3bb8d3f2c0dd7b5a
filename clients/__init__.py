"""Adapters that speak each model's wire protocol, and the fakes that speak it back.

- ``base``: the interface every client implements; ``registry``: clients and fakes by protocol name.
- ``transport``: the WebSocket shell on websockets' sans-I/O API, and what HTTP refusals mean.
- ``fakekit``: what every fake server shares: serving, faults, the media clock, reply pacing, the
  reference behaviours.
- one folder per protocol (``pcm_ws``, ``moshi``, ``openai_realtime``, ...): events, a pure
  protocol, the client, and its fake; ``recorded``: a client that plays a recording back.

Imports only ``duplexsim.core`` (and itself).
"""

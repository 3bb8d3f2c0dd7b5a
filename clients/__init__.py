"""Adapters that speak each model's wire protocol, and the fakes that speak it back.

- ``base``: the interface every client implements; ``registry``: clients and fakes by protocol name.
- ``transport``: what clients and fakes share of each transport: the WebSocket shell on
  websockets' sans-I/O API (and the one send wrapper), HTTP/2, WebRTC's aiortc pieces, HTTP/1.1
  messages, and what HTTP refusals mean.
- ``fakekit``: what every fake server shares: the declarations it serves and the transports that
  serve them, faults, the media clock, reply pacing, the reference behaviours.
- one folder per protocol (``pcm_ws``, ``moshi``, ``openai_realtime``, ...): events, a pure client
  protocol and the client; a pure server protocol (``fake``) and the declaration the kit serves
  (``server``); ``recorded``: a client that plays a recording back.

Imports only ``duplexsim.core`` (and itself).
"""

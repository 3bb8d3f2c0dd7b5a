"""moshi: Kyutai Moshi's ``/api/chat`` WebSocket protocol, also spoken by NVIDIA PersonaPlex.

Every message is binary: one kind byte, then a payload. After the server's handshake both sides
stream one continuous Ogg/Opus stream of 24 kHz mono audio; the server answers each 80 ms of input
with 80 ms of output and adds text tokens. ``events`` holds the wire messages, ``codec`` the
Ogg/Opus streaming, ``protocol`` the I/O-free client logic, ``client`` the DuplexClient, ``fake``
the I/O-free fake server and ``server`` its declaration, which the fake kit serves over WebSocket
with a reference behaviour.
"""

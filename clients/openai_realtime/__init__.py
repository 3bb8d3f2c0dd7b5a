"""openai-realtime: the OpenAI Realtime API (GA shape) over one WebSocket, JSON events only.

``events`` holds the wire messages, ``config`` the client's options and its ``session.update``,
``protocol`` the I/O-free client logic, ``fake_session`` and ``server_protocol`` the I/O-free fake
server, ``client`` the DuplexClient and ``server`` the fake server that hosts a reference behaviour.
The same client speaks to OpenAI-compatible servers (xAI's Grok voice agent) through options.
"""

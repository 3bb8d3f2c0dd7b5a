"""The OpenAI family: Realtime-style JSON events over one WebSocket, in several dialects.

``dialects`` says how OpenAI, xAI, Azure OpenAI, Azure Voice Live and DashScope differ (as data),
``events`` holds the wire messages, ``config`` the client's options and its ``session.update``,
``protocol`` the I/O-free session core (openai-webrtc uses it too), ``fake_session`` and
``server_protocol`` the I/O-free fake server, ``client`` the DuplexClient per dialect and
``server`` the fake server that hosts a reference behaviour in any dialect.
"""

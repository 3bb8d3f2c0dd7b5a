"""The OpenAI family: Realtime-style JSON events over one WebSocket, in several dialects.

``dialects`` says how OpenAI, xAI, Azure OpenAI, Azure Voice Live and DashScope differ (as data),
``events`` holds the wire messages, ``config`` the client's options and its ``session.update``,
``protocol`` the I/O-free session core (openai-webrtc uses it too), ``client`` the DuplexClient
per dialect, ``fake`` the I/O-free fake server (with ``fake_session``, the session object's
shapes and checks per dialect) and ``server`` its declaration, which the fake kit serves over
WebSocket with a reference behaviour in any dialect.
"""

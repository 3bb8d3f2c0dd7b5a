"""openai-webrtc: the OpenAI Realtime API over WebRTC (aiortc): the SDP offer POSTed to
``/v1/realtime/calls``, audio as Opus on one RTP track, JSON events on the ``oai-events`` channel.

``signaling`` holds the HTTP exchange, ``protocol`` the I/O-free client logic, ``client`` the
DuplexClient (on the aiortc pieces of ``duplexsim.clients.transport.rtc``), ``fake`` the I/O-free
fake server and ``server`` its declaration, which the fake kit serves over WebRTC with a
reference behaviour. Data-channel events are decoded with
``duplexsim.clients.openai_realtime.events``.
"""

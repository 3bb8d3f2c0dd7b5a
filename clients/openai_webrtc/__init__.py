"""openai-webrtc: the OpenAI Realtime API over WebRTC (aiortc): the SDP offer POSTed to
``/v1/realtime/calls``, audio as Opus on one RTP track, JSON events on the ``oai-events`` channel.

``rtc`` holds the aiortc pieces (peers without STUN, loopback ICE, the paced outgoing track, the
receive-buffer bypass), ``signaling`` the HTTP exchange, ``protocol`` the I/O-free client and fake
server logic, ``client`` the DuplexClient and ``server`` the fake server that hosts a behaviour.
Data-channel events are decoded with ``duplexsim.clients.openai_realtime.events``.
"""

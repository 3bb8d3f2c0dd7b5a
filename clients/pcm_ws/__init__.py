"""pcm-ws: raw PCM16 over one WebSocket, with a JSON hello and JSON control messages.

``events`` holds the wire messages, ``protocol`` the I/O-free client logic, ``client`` the
DuplexClient, ``fake`` the I/O-free fake server and ``server`` its declaration, which the fake
kit serves over WebSocket with a reference behaviour.
"""

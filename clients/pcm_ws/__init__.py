"""pcm-ws: raw PCM16 over one WebSocket, with a JSON hello and JSON control messages.

``events`` holds the wire messages, ``protocol`` the I/O-free client and server logic, ``client``
the DuplexClient and ``server`` the fake server that hosts a reference behaviour.
"""

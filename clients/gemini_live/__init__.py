"""gemini-live: Google's Gemini Live API (BidiGenerateContent) over one WebSocket.

``events`` holds the wire messages, ``protocol`` the I/O-free client and server logic, ``client``
the DuplexClient and ``server`` the fake server that hosts a reference behaviour.
"""

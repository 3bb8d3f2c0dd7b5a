"""gemini-live: Google's Gemini Live API (BidiGenerateContent) over one WebSocket.

``events`` holds the wire messages, ``errors`` what closes and refusals mean, ``protocol`` the
I/O-free client logic, ``client`` the DuplexClient, ``fake`` the I/O-free fake server and
``server`` its declaration, which the fake kit serves over WebSocket with a reference behaviour.
"""

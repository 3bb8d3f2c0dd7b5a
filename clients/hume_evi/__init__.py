"""hume-evi: Hume's Empathic Voice Interface (EVI) chat over one WebSocket.

``events`` holds the wire messages, ``wav`` the WAV chunks its audio comes in, ``protocol`` the
I/O-free client logic, ``client`` the DuplexClient, ``fake`` the I/O-free fake server and
``server`` its declaration, which the fake kit serves over WebSocket with a reference behaviour.
"""

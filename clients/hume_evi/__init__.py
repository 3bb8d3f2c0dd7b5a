"""hume-evi: Hume's Empathic Voice Interface (EVI) chat over one WebSocket.

``events`` holds the wire messages, ``wav`` the WAV chunks its audio comes in, ``protocol`` the
I/O-free client logic, ``fake`` the I/O-free fake server, ``client`` the DuplexClient and
``server`` the fake server that hosts a reference behaviour.
"""

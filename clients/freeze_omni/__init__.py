"""freeze-omni: Freeze-Omni's demo server (Socket.IO events over Engine.IO on one WebSocket).

``sio`` holds the Socket.IO/Engine.IO framing, ``events`` Freeze-Omni's messages, ``protocol`` the
I/O-free client logic, ``client`` the DuplexClient, ``fake`` the I/O-free fake server and
``server`` its declaration, which the fake kit serves over WebSocket with a reference behaviour.
"""

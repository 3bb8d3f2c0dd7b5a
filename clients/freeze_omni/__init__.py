"""freeze-omni: Freeze-Omni's demo server (Socket.IO events over Engine.IO on one WebSocket).

``sio`` holds the Socket.IO/Engine.IO framing, ``events`` Freeze-Omni's messages, ``protocol`` the
I/O-free client logic, ``fake`` the I/O-free fake server, ``client`` the DuplexClient and
``server`` the fake server that hosts a reference behaviour.
"""

"""The WebSocket transport every WebSocket client and fake shares: ``wsconn`` (one connection on
websockets' sans-I/O protocol), ``wsopen`` (opening both ways), ``wsinbox`` (received messages),
``wsclient`` (the client shell), and ``httperrors`` (what an HTTP refusal means)."""

"""The transports clients and fakes share: ``wsconn`` (one WebSocket connection on websockets'
sans-I/O protocol), ``wsopen`` (opening both ways), ``wsinbox`` (received messages),
``wsclient`` (the WebSocket client shell, and the one send wrapper), ``httperrors`` (what an HTTP
refusal means) and ``h2io`` (one HTTP/2 connection carrying one long stream)."""

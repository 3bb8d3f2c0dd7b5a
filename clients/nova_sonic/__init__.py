"""nova-sonic: Amazon Nova Sonic on Bedrock's bidirectional stream (HTTP/2, AWS event stream).

``eventstream`` holds the binary message format, ``sigv4`` the request and event signing,
``events`` Nova Sonic's events, ``protocol`` the I/O-free client logic, ``h2io`` the HTTP/2
connection, ``fake`` the I/O-free fake server, ``client`` the DuplexClient and ``server`` the
fake server that hosts a reference behaviour.
"""

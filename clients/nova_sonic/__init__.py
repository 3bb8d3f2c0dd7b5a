"""nova-sonic: Amazon Nova Sonic on Bedrock's bidirectional stream (HTTP/2, AWS event stream).

``eventstream`` holds the binary message format, ``sigv4`` the request and event signing,
``events`` Nova Sonic's events, ``protocol`` the I/O-free client logic, ``client`` the
DuplexClient (on ``duplexsim.clients.transport.h2io``), ``fake`` the I/O-free fake server (with
``fake_request``, its answer to the opening request) and ``server`` its declaration, which the
fake kit serves over HTTP/2 with a reference behaviour.
"""

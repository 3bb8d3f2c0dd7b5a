"""The session engine: one session streams the user's audio to one client in real time and
captures the reply on one timeline.

``engine`` conducts; ``useraudio`` is the user's side, ``eventpump`` the receive path,
``eventloop`` the microsecond-timer loop every paced command runs on and ``stalls`` its record
of when it could not hear its sockets. Imports ``duplexsim.core`` and ``duplexsim.clients.base``.
"""

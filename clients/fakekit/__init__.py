"""What every fake server shares. A fake is a pure server protocol (``<protocol>/fake.py``) plus a
declaration (``declare``: ``WebSocketFake``, ``Http2Fake`` or ``WebRTCFake``, which names the
transport) that ``fakeserver.serve_fake`` serves.

Pure: ``declare`` (declarations, requests, sessions), ``serveractions`` and ``callactions``
(what a protocol object asks of its connection or call), ``faults`` (injected faults, one
injector for every fake), ``mediaclock`` (where a fake stands on the timeline), ``replypacing``
(how replies are paced), ``behaviours`` (the reference models: echo, neutral, silent, ...).
I/O: ``fakeserver`` (the entry and ``RunningServer``), the transports ``wsfake``, ``h2fake`` and
``rtcfake``, and ``ticker`` (the wall-clock wake-up they share)."""

"""duplexsim: a streaming full-duplex evaluation simulator for speech-to-speech models.

One installed root, one room per idea (imports point down this list, never up):

- ``duplexsim.core``: the pure ground floor (audio, timeline, timing, VAD, turns, benchmark and
  bundle types, errors). Imports nothing else of ours.
- ``duplexsim.clients``: one folder per wire protocol, the WebSocket transport and the fake-server
  kit. Imports only ``duplexsim.core``.
- ``duplexsim.scoring``: scorers, the pyzmq scoring service and the MIRRORING metrics. Imports only
  ``duplexsim.core``.
- ``duplexsim.session``: the session engine: one paced session with one client.
- ``duplexsim.profiles``: model profiles (built-in ones in ``profiles/builtin``).
- ``duplexsim.run``: many sessions over a benchmark: admission, retries, recording, results.
- ``duplexsim.replay``: recorded sessions through the engine again, and their timing audit.
- ``duplexsim.runscores``: scoring a run (clips, caches, shared references).
- ``duplexsim.report``, ``duplexsim.viewer``, ``duplexsim.export``: what a run is read into.
- ``duplexsim.corpus``: building benchmarks from two-speaker calls.
- ``duplexsim.live``: a person or a sound card in the loop (talk, monitor, models check).
- ``duplexsim.cli``: the command line, one module per subcommand.
"""

__version__ = "0.1.0"

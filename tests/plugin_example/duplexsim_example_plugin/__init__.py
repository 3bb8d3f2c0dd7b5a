"""An example duplexsim plugin: the ``raw-pcm`` protocol (its client and a local echo server) and
the ``example-loudness`` scorer."""

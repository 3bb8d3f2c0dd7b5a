"""Model profiles: how to reach a model. ``profile`` reads them; ``builtin/`` holds the ready ones.

Imports ``duplexsim.core`` and ``duplexsim.clients``.
"""

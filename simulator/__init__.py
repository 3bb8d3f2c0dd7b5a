"""duplexsim: a streaming full-duplex evaluation simulator for speech-to-speech models."""

__version__ = "0.1.0"

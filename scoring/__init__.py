"""Emotion scoring and the MIRRORING metrics."""

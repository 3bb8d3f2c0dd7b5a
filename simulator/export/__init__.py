"""A run written for other tools: ``samples`` (one record per sample, JSON lines or CSV) and
``fdb`` (Full-Duplex-Bench's folder layout, both ways)."""

"""Replaying recorded sessions: ``sessions`` runs them through the engine again and compares their
timing with the recording; ``audit`` reads what a session's own files say about its timing.
"""

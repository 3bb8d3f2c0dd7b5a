"""``duplexsim view``: a run's sessions as self-contained HTML pages (timeline, players, scores)."""

from duplexsim.viewer.write import write_view

__all__ = ["write_view"]

"""Where the repository and its demo benchmark are."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "recordings" / "demo"

"""The duplexsim command run as a user runs it: a child process from the repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO


def duplexsim(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "duplexsim", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )

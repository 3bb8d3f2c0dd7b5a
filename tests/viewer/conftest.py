"""The viewer tests share one recorded run (built once per session)."""

from tests.helpers.views import run_dir  # noqa: F401  (a fixture)

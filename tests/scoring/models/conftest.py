"""The scorer tests share one recorded run (built once per session)."""

from tests.helpers.eiv import recorded_run  # noqa: F401  (a fixture)

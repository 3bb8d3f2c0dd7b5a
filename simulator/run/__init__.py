"""A run: many concurrent sessions over a benchmark.

``runner`` owns concurrency, time and retries; ``admission`` decides when a session may start;
``recording`` writes each bundle, ``rows`` makes its results row, ``store`` keeps the results,
``runlock`` keeps one writer per run;
``fakes`` serves reference models from child processes (``lifeline`` ends them with us);
``progress`` and ``summary`` speak to the terminal; ``demo_data`` finds the shipped demo.
Imports the session engine, profiles, clients and core; never report, viewer or cli.
"""

"""Where a paced run's stalls come from, per process (``bench/demo_pace.py --trace``).

Loaded by every Python process started with this folder on PYTHONPATH and ``DEMO_PACE_TRACE``
set to a folder: the run, its fake model servers, its worker pool. Each process notes

- its event loop's stalls by kind, as ``duplexsim.session.eventloop`` sees them: *busy* (the
  loop ran callbacks that long), *late* (a wait ended later than its timeout), *queued* (woken,
  the thread waited that long for a core: schedstat's run_delay);
- every loop callback of 0.5 ms or more, by what it ran (a task's coroutine, or the callback);
- its CPU time and wall time;

and writes them as JSON into that folder when it exits. Nothing here changes what a process
does, only what it costs (two clock readings per callback).
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time

_DIR = os.environ.get("DEMO_PACE_TRACE")
EDGES_MS = (0.5, 2.0, 5.0, 20.0, 60.0)


class _Kind:
    def __init__(self) -> None:
        self.counts = [0] * len(EDGES_MS)
        self.total_ms = 0.0
        self.max_ms = 0.0

    def note(self, ms: float) -> None:
        if ms < EDGES_MS[0]:
            return
        for i, edge in enumerate(EDGES_MS):
            if ms >= edge:
                self.counts[i] += 1
        self.total_ms += ms
        self.max_ms = max(self.max_ms, ms)

    def to_dict(self) -> dict[str, object]:
        return {
            **{f">={e:g}ms": c for e, c in zip(EDGES_MS, self.counts, strict=True)},
            "total_ms": round(self.total_ms, 1),
            "max_ms": round(self.max_ms, 2),
        }


_kinds = {"busy": _Kind(), "late": _Kind(), "queued": _Kind()}
_callbacks: dict[str, list[float]] = {}  # name -> [count, total ms, max ms]
_running: list[float] = [0.0]  # when the callback under way started (0.0: none)
_samples: dict[str, int] = {}  # where long callbacks spent their time: stack -> samples
SAMPLE_AFTER_S = 0.003  # a callback this long is sampled, every millisecond, until it ends
_started = (time.monotonic(), time.process_time())


def _name(handle: object) -> str:
    cb = getattr(handle, "_callback", None)
    owner = getattr(cb, "__self__", None)
    coro = getattr(owner, "get_coro", None)
    if coro is not None:
        c = coro()
        frame = getattr(c, "cr_frame", None)
        where = ""
        if frame is not None:
            where = f" @{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        return f"task {getattr(c, '__qualname__', repr(c))}{where}"
    return getattr(cb, "__qualname__", repr(cb))


LONG_STEP_MS = 3.0
_steps: dict[str, int] = {}  # a long task step: where its task waits after it -> count


def _suspended_at(handle: object) -> str:
    """Where a task that just ran a step waits now: its await chain, innermost last."""
    owner = getattr(getattr(handle, "_callback", None), "__self__", None)
    get = getattr(owner, "get_coro", None)
    if get is None:
        return ""
    coro, where = get(), []
    while coro is not None and len(where) < 12:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        where.append(f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return " > ".join(where[-5:])


def _install_callbacks() -> None:
    import asyncio.events

    original = asyncio.events.Handle._run

    def _run(self: asyncio.events.Handle) -> None:
        t0 = _running[0] = time.perf_counter()
        try:
            original(self)
        finally:
            _running[0] = 0.0
            ms = 1000.0 * (time.perf_counter() - t0)
            if ms >= LONG_STEP_MS:
                where = _suspended_at(self)
                if where:
                    _steps[where] = _steps.get(where, 0) + 1
            if ms >= 0.5:
                name = _name(self)
                entry = _callbacks.setdefault(name, [0, 0.0, 0.0])
                entry[0] += 1
                entry[1] += ms
                entry[2] = max(entry[2], ms)

    asyncio.events.Handle._run = _run  # type: ignore[method-assign]
    import threading

    main = threading.get_ident()

    def sample() -> None:
        while True:
            time.sleep(0.001)
            started = _running[0]
            if not started or time.perf_counter() - started < SAMPLE_AFTER_S:
                continue
            frame = sys._current_frames().get(main)
            where = []
            while frame is not None and len(where) < 40:
                code = frame.f_code
                where.append(f"{os.path.basename(code.co_filename)}:{code.co_name}")
                frame = frame.f_back
            key = " < ".join(w for w in where if "sitecustomize" not in w)[:400]
            _samples[key] = _samples.get(key, 0) + 1

    if os.environ.get("DEMO_PACE_SAMPLE"):  # a thread waking every ms: it moves what it sees
        threading.Thread(target=sample, daemon=True, name="pacetrace").start()


def _install_selector() -> None:
    try:
        from duplexsim.session import eventloop
    except ImportError:
        return
    selector = getattr(eventloop, "FineTimeoutSelector", None)
    if selector is None:
        return
    original = selector.select
    state = {"returned": None, "queue": None}

    def select(self, timeout=None):  # type: ignore[no-untyped-def]
        called = time.monotonic()
        if state["returned"] is not None:
            _kinds["busy"].note(1000.0 * (called - state["returned"]))
        ready = original(self, timeout)
        returned = time.monotonic()
        state["returned"] = returned
        if timeout is not None:
            _kinds["late"].note(1000.0 * (returned - called - timeout))
        if timeout is None or timeout > 0:
            _kinds["queued"].note(1000.0 * _run_delay(state))
        return ready

    selector.select = select


def _run_delay(state: dict[str, object]) -> float:
    try:
        with open("/proc/thread-self/schedstat") as f:
            now = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return 0.0
    last, state["queue"] = state["queue"], now
    return 0.0 if last is None else (now - int(last)) / 1e9  # type: ignore[call-overload]


def _role() -> str:
    argv = " ".join(sys.argv)
    if "serve-model" in argv:
        i = sys.argv.index("--behaviour") if "--behaviour" in sys.argv else -1
        behaviours = sys.argv[i + 1] if i >= 0 else "?"
        return f"fake {behaviours}"
    if "forkserver" in argv or "multiprocessing" in argv:
        return "pool"
    if " demo" in argv or argv.endswith("demo"):
        return "run"
    return os.path.basename(sys.argv[0] or "python")


def _dump() -> None:
    if not _callbacks and all(k.total_ms == 0 for k in _kinds.values()):
        return
    wall = time.monotonic() - _started[0]
    cpu = time.process_time() - _started[1]
    top = sorted(_callbacks.items(), key=lambda kv: -kv[1][1])[:25]
    record = {
        "role": _role(),
        "pid": os.getpid(),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "stalls": {k: v.to_dict() for k, v in _kinds.items()},
        "long_steps_then_waiting_at": [
            {"at": k, "count": v} for k, v in sorted(_steps.items(), key=lambda kv: -kv[1])[:20]
        ],
        "long_callback_samples": [
            {"stack": k, "samples": v}
            for k, v in sorted(_samples.items(), key=lambda kv: -kv[1])[:25]
        ],
        "callbacks": [
            {"name": n, "count": int(c), "total_ms": round(t, 1), "max_ms": round(m, 2)}
            for n, (c, t, m) in top
        ],
    }
    path = os.path.join(_DIR or ".", f"trace-{os.getpid()}.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1)


if _DIR:
    _install_callbacks()
    # the selector class exists once duplexsim's event loop module is importable
    import importlib.abc
    import importlib.util

    class _Hook(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):  # type: ignore[no-untyped-def]
            if name != "duplexsim.session.eventloop":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None:
                return spec
            exec_module = spec.loader.exec_module

            def patched(module):  # type: ignore[no-untyped-def]
                exec_module(module)
                _install_selector()

            spec.loader.exec_module = patched  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, _Hook())
    atexit.register(_dump)
    try:  # a pool worker leaves through os._exit: multiprocessing's finalizers still run
        from multiprocessing import util

        util.Finalize(None, _dump, exitpriority=0)
    except ImportError:
        pass

"""What a pip install carries: the demo benchmark, declared dependencies, optional extras that
fail in one line naming the extra."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
import zipfile
from importlib import metadata

import pytest

from duplexsim.core.extras import EXTRA_OF, MissingExtra, missing_extra, require
from duplexsim.run import demo_data
from tests.helpers.paths import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
PACKAGES = ("simulator", "clients", "scoring")  # the folders the one root is built from


def _requirement_names(reqs: list[str]) -> set[str]:
    names = set()
    for req in reqs:
        name = req.split(";")[0]
        for stop in "<>=!~[ ":
            name = name.split(stop)[0]
        names.add(name.strip().lower().replace("_", "-"))
    return names


def _imported_top_modules() -> set[str]:
    found: set[str] = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found |= {a.name.partition(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.partition(".")[0])
    return found - set(sys.stdlib_module_names) - {"duplexsim", "__future__"}


def test_every_import_is_declared_and_optional_ones_are_in_their_extra():
    extras = PYPROJECT["project"]["optional-dependencies"]
    base = _requirement_names(PYPROJECT["project"]["dependencies"])
    dists = metadata.packages_distributions()
    for module in sorted(_imported_top_modules()):
        names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
        if module in EXTRA_OF:
            extra = EXTRA_OF[module]
            assert names & _requirement_names(extras[extra]), f"{module} not in [{extra}]"
            assert not names & base, f"{module} is optional yet a base dependency"
        else:
            assert names & base, f"{module} is imported but not a dependency"


def test_heavy_and_device_packages_are_not_base_dependencies():
    base = _requirement_names(PYPROJECT["project"]["dependencies"])
    assert not base & {"torch", "transformers", "matplotlib", "sphn", "aiortc", "sounddevice"}
    for req in (
        PYPROJECT["project"]["dependencies"]
        + PYPROJECT["project"]["optional-dependencies"]["scoring"]
    ):
        assert "==" not in req, f"{req}: a range, not a pin, lets users combine packages"


def test_a_missing_extra_is_one_line_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "sphn", None)  # import sphn now fails as if not installed
    with pytest.raises(MissingExtra, match=r"needs sphn.*pip install 'duplexsim\[moshi\]'"):
        require("sphn", "the moshi protocol")
    assert missing_extra(ModuleNotFoundError("x", name="numpy"), "x") is None  # not optional


def test_scorer_without_torch_names_the_scoring_extra(monkeypatch, tmp_path):
    from duplexsim.scoring.models import load_scorer

    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.delitem(sys.modules, "duplexsim.scoring.models.empathic_insight", raising=False)
    with pytest.raises(MissingExtra) as info:
        load_scorer("empathic-insight-voice-small", model_path=tmp_path)
    assert str(info.value) == (
        "the empathic-insight-voice-small scorer needs torch, which is not installed: "
        "pip install 'duplexsim[scoring]'"
    )


def test_protocol_without_its_extra_names_it(monkeypatch):
    from duplexsim.clients.registry import client_class

    monkeypatch.setitem(sys.modules, "sphn", None)
    for name in [m for m in sys.modules if m.startswith("duplexsim.clients.moshi")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(MissingExtra, match=r"the moshi protocol needs sphn.*duplexsim\[moshi\]"):
        client_class("moshi")


def test_report_without_matplotlib_has_no_plots_and_says_so(monkeypatch, tmp_path):
    from duplexsim.report import write

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    assert write._plots([], tmp_path) == {}
    assert "duplexsim[plots]" in write.PLOTS_MISSING


def test_demo_data_is_found_in_the_checkout():
    assert demo_data.demo_benchmark() == REPO / "recordings" / "demo"
    assert demo_data.demo_utterance().is_file()


def test_demo_data_is_found_where_a_wheel_installs_it(monkeypatch, tmp_path):
    site = tmp_path / "venv" / "site"
    info = site / "duplexsim-9.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: duplexsim\nVersion: 9.9\n")
    rel = f"../../{demo_data.SHARE_DIR}/manifest.jsonl"  # as RECORD lists data files
    (info / "RECORD").write_text(f"{rel},,\n")
    manifest = (site / rel).resolve()
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{}\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(demo_data, "CHECKOUT_DEMO", tmp_path / "nowhere")
    assert demo_data.demo_benchmark() == manifest.parent
    monkeypatch.setattr(demo_data, "_installed", lambda: None)
    with pytest.raises(demo_data.ConfigError, match="pass --benchmark DIR"):
        demo_data.demo_benchmark()


def test_wheel_carries_the_demo_benchmark(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("duplexsim-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {n.split(f"/{demo_data.SHARE_DIR}/", 1)[1] for n in names if demo_data.SHARE_DIR in n}
    demo = REPO / "recordings" / "demo"
    expected = {
        p.relative_to(demo).as_posix()
        for p in demo.rglob("*")
        if p.is_file() and p.suffix in (".jsonl", ".ogg")
    }
    assert shipped == expected
    assert "duplexsim/profiles/builtin/gpt-realtime.toml" in names
    # one import root: nothing that another distribution could own or overwrite
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.startswith("duplexsim-")} == {"duplexsim"}
    assert "duplexsim/clients/base.py" in names and "duplexsim/scoring/metrics.py" in names

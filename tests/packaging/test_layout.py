"""The installed layout: one root, ``duplexsim``; packages that import only downward; tests that
import helpers, never each other."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from tests.helpers.paths import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
FOLDERS = {"simulator": "duplexsim", "clients": "duplexsim.clients", "scoring": "duplexsim.scoring"}

# What each package may import of ours (besides itself). The root package is the CLI's entry and
# ``__version__``. A new arrow here is a change of architecture: say why in the package docstring.
ALLOWED = {
    "core": set(),
    "clients": {"core"},
    "scoring": {"core"},
    "session": {"core", "clients"},
    "profiles": {"core", "clients"},
    "run": {"core", "clients", "session", "profiles", "(root)"},
    "replay": {"core", "clients", "session"},
    "runscores": {"core", "scoring", "run"},
    "corpus": {"core", "scoring", "runscores"},
    "report": {"core", "scoring", "run", "runscores"},
    "export": {"core", "scoring", "run", "runscores", "report"},
    "viewer": {"core", "scoring", "run", "runscores", "report"},
    "live": {"core", "clients", "session", "profiles", "run", "(root)"},
    "cli": set(),  # the command line may import anything (checked below: nothing imports it)
    "(root)": {"cli"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, name in FOLDERS.items():
        for path in (REPO / folder).rglob("*.py"):
            parts = list(path.relative_to(REPO / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([name, *parts])] = path
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    if parts[1:2] in (["clients"], ["scoring"]):
        return parts[1]
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ALLOWED) else "(root)"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            subs = {f"{node.module}.{a.name}" for a in node.names}
            names |= subs if node.module == "duplexsim" else {node.module}
    return {n for n in names if n == "duplexsim" or n.startswith("duplexsim.")}


def test_every_package_folder_is_installed_under_the_one_root():
    declared = set(PYPROJECT["tool"]["setuptools"]["packages"])
    on_disk = {
        ".".join([name, *init.parent.relative_to(REPO / folder).parts])
        for folder, name in FOLDERS.items()
        for init in (REPO / folder).rglob("__init__.py")
    }
    assert declared == on_disk
    assert {p.split(".")[0] for p in declared} == {"duplexsim"}
    assert {v: k for k, v in PYPROJECT["tool"]["setuptools"]["package-dir"].items()} == FOLDERS


def test_packages_import_only_downward():
    wrong = []
    for module, path in _modules().items():
        here = _package(module)
        for target in _imports(path):
            there = _package(target) if target != "duplexsim.__version__" else "(root)"
            if there == "cli" and here != "(root)" and here != "cli":
                wrong.append(f"{module} imports {target} (nothing imports the command line)")
            elif there != here and here != "cli" and there not in ALLOWED[here]:
                wrong.append(f"{module} imports {target}")
    assert wrong == []


def test_every_package_says_what_lives_there():
    for module, path in _modules().items():
        if path.name == "__init__.py":
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
            assert doc, f"{module} has no docstring"


def test_no_test_module_imports_another():
    offenders = []
    for path in (REPO / "tests").rglob("*.py"):
        if "plugin_example" in path.parts:
            continue
        for name in _test_imports(path):
            last = name.rsplit(".", 1)[-1]
            if last.startswith("test_") or last == "conftest":
                offenders.append(f"{path.relative_to(REPO)} imports {name}")
    assert offenders == []


def _test_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.startswith("tests")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests"):
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names

"""The stages import downward only, and no module imports itself round a cycle.

The layers are the contract in ``pyproject.toml`` (``[tool.importlinter]``), checked by
import-linter; cycles are found on the same import graph (grimp), where import-linter's layers
do not look: between modules of one stage.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import grimp
from importlinter.cli import lint_imports

from tests.conftest import ROOT


def test_stages_import_downward_only():
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml")) == 0


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.append(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycles():
    graph = grimp.build_graph("auditor")
    # a package imports its own modules to re-export them; that is not a cycle of stages
    for package in [m for m in graph.modules if graph.find_children(m)]:
        for child in graph.find_children(package):
            if graph.direct_import_exists(importer=package, imported=child):
                graph.remove_import(importer=package, imported=child)
    assert _cycles(graph) == []


def test_the_contract_catches_an_inverted_import(tmp_path):
    """A copy of the package whose model imports the CLI breaks the contract, and says where."""
    shutil.copytree(ROOT / "auditor", tmp_path / "auditor", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    model = tmp_path / "auditor" / "model.py"
    model.write_text(model.read_text() + "\nfrom auditor import cli  # noqa: E402, F401\n")
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "BROKEN" in proc.stdout
    assert "auditor.model -> auditor.cli" in proc.stdout

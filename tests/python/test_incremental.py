"""A re-scan after a change evaluates again only what the change reaches, and says exactly
what a cold scan of the changed tree says (issue #20, item 2).

The Python pass keeps, per batch of modules, its gates with what their evaluation read of
the rest of the program (modules by content, calls by name, imports); its load is kept as
what it did. Each case here scans a tree with a cache, changes it, scans it again with that
cache, and compares the JSON byte for byte with a cold scan of the changed tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor import cli
from auditor.model import SourceFile
from auditor.python import extract, symbols

UTILS = """\
import torch


def get_cc():
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def is_sm90_supported():
    return get_cc() >= 90


def is_sm100_supported():
    return get_cc() >= 100
"""

CALLER = """\
from pkg.utils import is_sm90_supported{extra}


def run_{i}(x):
    if is_sm90_supported():
        return x + {i}
    return x
"""

PLATFORM = """\
import torch


class Device:
    def is_hopper(self):
        return torch.cuda.get_device_capability()[0] == 9
"""

OPAQUE = """\
def pick(device):
    if device.is_hopper():
        return "fast"
    return "slow"
"""

PLAIN = """\
def helper_{i}():
    return {i}
"""


def tree(root: Path) -> Path:
    """A package of more than two batches of modules: predicates, their callers, a method
    called on an opaque receiver, and modules the Python pass never loads."""
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "utils.py").write_text(UTILS)
    (pkg / "platform.py").write_text(PLATFORM)
    (pkg / "opaque.py").write_text(OPAQUE)
    for i in range(40):
        (pkg / f"c{i:02}.py").write_text(CALLER.format(i=i, extra=""))
    for i in range(10):
        (pkg / f"p{i:02}.py").write_text(PLAIN.format(i=i))
    return root


def scan(path: Path, out: Path, cache: Path | None) -> bytes:
    options = ["--cache-dir", str(cache)] if cache else ["--no-cache"]
    code = cli.main(
        ["scan", str(path), "--jobs", "1", "--format", "json", "-q", "--exit-zero", "-o", str(out), *options]
    )
    assert code == 0
    return out.read_bytes()


def append(path: Path, text: str) -> None:
    path.write_text(path.read_text() + text)


CHANGES = {
    "a comment in a caller": lambda pkg: append(pkg / "c07.py", "# touched\n"),
    "a comment in a module never loaded": lambda pkg: append(pkg / "p03.py", "# touched\n"),
    "a predicate's meaning": lambda pkg: (pkg / "utils.py").write_text(UTILS.replace(">= 90", ">= 80")),
    "a new gate in a caller": lambda pkg: append(pkg / "c31.py", "\n\ndef more():\n    return is_sm90_supported()\n"),
    "another method of the name an opaque call finds": lambda pkg: append(
        pkg / "p05.py",
        "\n\nclass Other:\n    def is_hopper(self):\n        import torch\n        return torch.cuda.get_device_capability()[0] >= 10\n",
    ),
    "an import of a predicate where there was none": lambda pkg: (pkg / "p07.py").write_text(
        "from pkg.utils import is_sm100_supported\n\n\ndef f():\n    return 1 if is_sm100_supported() else 0\n"
    ),
    "a predicate imported under another name": lambda pkg: (pkg / "c12.py").write_text(
        CALLER.format(i=12, extra=", is_sm100_supported as is_sm90_supported")
    ),
    "a file added": lambda pkg: (pkg / "new.py").write_text(CALLER.format(i=99, extra="")),
    "a file removed": lambda pkg: (pkg / "c20.py").unlink(),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_rescan_after_a_change_is_the_cold_scan_of_the_changed_tree(tmp_path, change):
    root = tree(tmp_path / "tree")
    cache = tmp_path / "cache"
    before = scan(root, tmp_path / "first.json", cache)
    assert before == scan(root, tmp_path / "cold.json", None)
    CHANGES[change](root / "pkg")
    again = scan(root, tmp_path / "again.json", cache)
    cold = scan(root, tmp_path / "cold2.json", None)
    assert again == cold
    if change in ("a predicate's meaning", "a new gate in a caller", "an import of a predicate where there was none"):
        assert again != before, "the change is one a scan sees"


@pytest.fixture
def evaluated(monkeypatch) -> list[list[str]]:
    """The batches of modules the Python pass evaluates from now on (none that it recalls)."""
    batches: list[list[str]] = []
    real = extract._read_modules

    def spy(paths):
        batches.append(list(paths))
        return real(paths)

    monkeypatch.setattr(extract, "_read_modules", spy)
    return batches


def test_a_comment_evaluates_again_only_the_batch_of_the_changed_module(tmp_path, evaluated):
    root = tree(tmp_path / "tree")
    cache = tmp_path / "cache"
    scan(root, tmp_path / "first.json", cache)
    evaluated.clear()
    append(root / "pkg" / "c33.py", "# touched\n")
    scan(root, tmp_path / "again.json", cache)
    assert evaluated and all(any(p.endswith("c33.py") for p in batch) for batch in evaluated), evaluated
    evaluated.clear()
    append(root / "pkg" / "p02.py", "# touched\n")
    scan(root, tmp_path / "third.json", cache)
    assert evaluated == [], "a module the pass never loads changes no batch"


def test_a_change_to_a_predicate_evaluates_again_the_batches_that_call_it(tmp_path, evaluated):
    root = tree(tmp_path / "tree")
    cache = tmp_path / "cache"
    scan(root, tmp_path / "first.json", cache)
    evaluated.clear()
    (root / "pkg" / "utils.py").write_text(UTILS.replace(">= 90", ">= 80"))
    scan(root, tmp_path / "again.json", cache)
    done = {p for batch in evaluated for p in batch}
    assert {f"pkg/c{i:02}.py" for i in range(40)} <= done


def sources(root: Path) -> list[SourceFile]:
    return [
        SourceFile(p.relative_to(root).as_posix(), p.read_bytes(), "python", "tree") for p in sorted(root.rglob("*.py"))
    ]


@pytest.mark.parametrize("jobs", [1, 2])
def test_isolated_batches_find_what_the_way_before_found(tmp_path, jobs):
    """Each batch starts from the program as loaded; before, a process kept what its batches
    loaded on the way. The gates are the same (the slow tests hold real wheels to this too)."""
    root = tree(tmp_path / "tree")
    files = sources(root)
    inputs = {f.path: f.input for f in files}
    old = extract.read(*extract.load(files), inputs, jobs, isolated=False)
    new = extract.read(*extract.load(files), inputs, jobs)
    assert new == old and old[0]


@pytest.mark.parametrize("jobs", [1, 2])
def test_trees_released_between_evaluators_find_the_same_gates(tmp_path, monkeypatch, jobs):
    """Issue #20: a process keeps the parsed trees of at most ``TREES`` bytes of source between
    evaluators and parses the rest again when used. Releasing every tree at every turn finds
    what keeping them all finds."""
    files = sources(tree(tmp_path / "tree"))
    inputs = {f.path: f.input for f in files}
    monkeypatch.setattr(extract, "TREES", 1 << 40)
    kept = extract.read(*extract.load(files), inputs, jobs)
    monkeypatch.setattr(extract, "TREES", 0)
    prog, relevant = extract.load(files)
    assert not any(m.parsed for m in prog.by_path.values())
    assert extract.read(prog, relevant, inputs, jobs) == kept and kept[0]


@pytest.mark.parametrize("apart", [True, False])
def test_learning_in_a_process_of_its_own_finds_the_same_gates(tmp_path, monkeypatch, apart):
    """Issue #20: a large program learns its predicates in a forked process that ends (its
    allocator's leavings go with it) and hands back what it did, with each module it loaded
    summarised; the caller replays that without parsing. The program and the gates are those
    of learning here."""
    files = sources(tree(tmp_path / "tree"))
    inputs = {f.path: f.input for f in files}
    monkeypatch.setattr(extract, "APART_FILES", 1 << 40)
    here = extract.load(files)
    forked: list[bool] = []
    real = extract.apart
    monkeypatch.setattr(extract, "apart", lambda work, progress: forked.append(True) or real(work, progress))
    monkeypatch.setattr(extract, "APART_FILES", 0 if apart else 1 << 40)
    there = extract.load(files)
    assert forked == ([True] if apart else [])
    if apart:  # handed back summarised, the modules are not parsed here until used
        assert not any(m.parsed for m in there[0].by_path.values())
    assert sorted(there[0].by_path) == sorted(here[0].by_path) and there[0].errors == here[0].errors
    assert there[1].known == here[1].known and here[1].known
    gates = extract.read(*here, inputs, 1)
    assert extract.read(*there, inputs, 1) == gates and gates[0]


def test_another_input_with_one_file_changed_evaluates_only_that_batch(tmp_path, monkeypatch):
    """Two revisions of a tree (``archaudit pr``, ``diff``) are two inputs of other names: what
    they have in common is kept by content, not by the input's name."""
    import shutil

    base = tree(tmp_path / "base")
    cache = tmp_path / "cache"
    scan(base, tmp_path / "base.json", cache)
    head = tmp_path / "head"
    shutil.copytree(base, head)
    (head / "pkg" / "c33.py").write_text(CALLER.format(i=33, extra="").replace("return x\n", "return -x\n"))
    evaluated: list[list[str]] = []
    real = extract._read_modules
    monkeypatch.setattr(extract, "_read_modules", lambda paths: evaluated.append(list(paths)) or real(paths))
    again = scan(head, tmp_path / "head.json", cache)
    assert len(evaluated) == 1 and "pkg/c33.py" in evaluated[0], evaluated
    monkeypatch.setattr(extract, "_read_modules", real)
    assert again == scan(head, tmp_path / "head-cold.json", None)


@pytest.mark.parametrize("kept", [True, False])
def test_a_replayed_load_parses_none_of_the_modules_it_kept(tmp_path, monkeypatch, kept):
    """Issue #20: a load is kept with each module it loaded summarised, by path and content, so
    a re-scan that replays it parses none of them again; a summary that does not decode is
    parsed instead, to the same result."""
    root = tree(tmp_path / "tree")
    cache = tmp_path / "cache"
    scan(root, tmp_path / "first.json", cache)
    parsed: list[str] = []
    real = symbols.parse
    monkeypatch.setattr(symbols, "parse", lambda f: parsed.append(f.path) or real(f))
    if not kept:
        monkeypatch.setattr(symbols.Module, "decoded", classmethod(lambda *_: {}["damaged"]))
    append(root / "pkg" / "p02.py", "# touched\n")  # a module the load never loads: it replays
    again = scan(root, tmp_path / "again.json", cache)
    assert (parsed == []) == kept and ("pkg/utils.py" in parsed) != kept, parsed
    monkeypatch.setattr(symbols, "parse", real)
    assert again == scan(root, tmp_path / "cold.json", None)

"""Python gates: known-answer tables over small fixture trees (fixtures/gates/python-*.yaml)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest
import yaml

from auditor import arch
from auditor.model import SourceFile
from auditor.python.extract import extract, load

ROOT = Path(__file__).resolve().parents[2]
TABLES = sorted((ROOT / "fixtures" / "gates").glob("python-*.yaml"))


def read_tree(name: str) -> list[SourceFile]:
    base = ROOT / "fixtures" / "python" / name
    return [SourceFile(p.relative_to(base).as_posix(), p.read_bytes(), "python") for p in sorted(base.rglob("*.py"))]


@cache
def scanned(name: str):
    return extract(read_tree(name))


def cases():
    for table in TABLES:
        spec = yaml.safe_load(table.read_text())
        for i, want in enumerate(spec["gates"]):
            yield pytest.param(spec["tree"], want, id=f"{table.stem}-{want['file']}:{want.get('line', i)}")


@pytest.mark.parametrize("tree,want", list(cases()))
def test_known_answer(tree, want):
    gates, _ = scanned(tree)
    here = [
        g
        for g in gates
        if g.file == want["file"]
        and ("line" not in want or g.line == want["line"])
        and ("expression" not in want or g.expression == want["expression"])
    ]
    if want.get("absent"):
        assert not here, here
        return
    assert len(here) == 1, [(g.line, g.expression) for g in gates if g.file == want["file"]]
    g = here[0]
    for field in ("kind", "expression", "domain", "resolved_by", "guards", "context"):
        if field in want:
            assert getattr(g, field) == want[field], (field, g)
    for field in ("admits", "name_implies", "unknowns", "body_lines", "surely"):
        if field in want:
            assert list(getattr(g, field)) == list(want[field]), (field, g)
    if "toolkits" in want:
        releases = {label: [str(r) for r in rs] for label, rs in want["toolkits"].items()}
        assert {label: list(rs) for label, rs in g.toolkits} == releases, ("toolkits", g)


@pytest.mark.parametrize("table", TABLES, ids=lambda p: p.stem)
def test_tables_that_list_everything(table):
    spec = yaml.safe_load(table.read_text())
    if spec.get("exactly"):
        gates, _ = scanned(spec["tree"])
        assert len(gates) == len([w for w in spec["gates"] if not w.get("absent")])


def test_software_versions_are_not_gates():
    gates, errors = scanned("noise")
    assert gates == [] and errors == []


def test_errors_are_listed_and_the_rest_is_scanned():
    gates, errors = scanned("errors")
    reasons = {e.file: e.reason for e in errors}
    assert reasons == {
        "mixed/broken.py": "python syntax error at line 8",
        "mixed/legacy.py": "python syntax error at line 4",
        "mixed/latin1.py": "not valid UTF-8 at line 2",
    }
    found = {(g.file, g.expression, g.admits) for g in gates}
    assert ("mixed/good.py", "torch.cuda.get_device_capability()[0] == 9", ("9.0",)) in found
    assert ("mixed/broken.py", "torch.cuda.get_device_capability()[0] == 10", ("10.0", "10.1", "10.3", "10.7")) in found


def test_gate_records_are_complete_and_stable():
    gates, _ = scanned("predicates")
    again, _ = extract(read_tree("predicates"))
    assert [g.id for g in gates] == [g.id for g in again]
    assert len({g.id for g in gates}) == len(gates)
    assert gates == sorted(gates, key=lambda g: (g.file, g.line, g.id))
    for g in gates:
        assert g.language == "python" and g.domain == "device"
        assert g.package == g.file.split("/")[0]
        assert g.admits == arch.sort_archs("device", g.admits)
        assert g.line <= g.end_line and g.body_lines[0] <= g.body_lines[1]
        if g.resolved_by == "definition":
            assert g.resolutions


def test_resolutions_name_the_definitions_followed():
    gates, _ = scanned("predicates")
    g = next(g for g in gates if g.file == "app/fusion.py" and g.context == "fusion_enabled")
    names = {r.name: (r.file, r.line) for r in g.resolutions}
    assert names["_is_sm90_supported"] == ("app/fusion.py", 4)
    assert names["is_sm100_supported"] == ("corelib/utils/common.py", 24)
    assert names["_device_major_in"][0] == "corelib/utils/common.py"


def test_a_file_without_tokens_is_not_parsed(monkeypatch):
    from auditor.python import symbols

    seen = []
    real = symbols.parse
    monkeypatch.setattr(symbols, "parse", lambda f: seen.append(f.path) or real(f))
    extract(
        [
            SourceFile("pkg/plain.py", b"def f(x):\n    return x + 1\n", "python"),
            SourceFile("pkg/k.cu", b"__global__ void k() {}\n", "cuda"),
        ]
    )
    assert seen == []


def test_jobs_do_not_change_the_gates():
    """Modules are read in batches by forked workers: 40 modules that call each other's
    predicates give the same gates with one process and with three."""
    files = [
        SourceFile(
            "pkg/caps.py",
            b"import torch\n\ndef is_sm90_supported():\n    return torch.cuda.get_device_capability()[0] == 9\n",
            "python",
        )
    ]
    for i in range(40):
        files.append(
            SourceFile(
                f"pkg/m{i:02d}.py",
                (
                    "from .caps import is_sm90_supported\nimport torch\n\n"
                    f"class Runner{i}:\n    def __init__(self):\n        self.fast = is_sm90_supported()\n\n"
                    f"    def run(self):\n        if self.fast:\n            return {i}\n"
                    f"        if torch.cuda.get_device_capability()[0] >= {7 + i % 6}:\n            return -1\n"
                ).encode(),
                "python",
            )
        )
    one = extract(files, jobs=1)
    three = extract(files, jobs=3)
    assert one == three
    gates, _ = one
    uses = [g for g in gates if g.expression == "self.fast"]
    assert len(uses) == 40 and all(g.admits == ("9.0",) for g in uses)


def test_a_body_parsed_blank_is_read_once_it_calls_a_predicate():
    """Bodies without arch tokens are parsed as blank; one that calls a predicate learned
    later (no token in its name) is parsed again and its gate found."""
    files = [
        SourceFile(
            "pkg/checks.py",
            b"import torch\n\ndef fast_path_ok():\n    return torch.cuda.get_device_capability()[0] == 9\n",
            "python",
        ),
        SourceFile(
            "pkg/ops.py",
            b"import torch\nfrom .checks import fast_path_ok\n\n"
            b"def describe():\n    return torch.cuda.get_device_capability()\n\n"
            b"def run(x):\n    y = x + 1\n    if fast_path_ok():\n        return y\n    return x\n",
            "python",
        ),
    ]
    gates, errors = extract(files)
    assert not errors
    [g] = [g for g in gates if g.file == "pkg/ops.py" and g.context == "run"]
    assert (g.line, g.expression, g.admits) == (9, "fast_path_ok()", ("9.0",))


def test_a_private_method_that_tests_the_arch_makes_its_callers_relevant():
    """A class's helper (``self._use_fast()``) is learned like a predicate, so that the method
    testing it, which names no arch token, is read and its gate found."""
    files = [
        SourceFile(
            "pkg/layer.py",
            b"import torch\n\nclass Layer:\n"
            b"    def _use_fast(self):\n        return torch.cuda.get_device_capability()[0] == 9\n\n"
            b"    def forward(self, x):\n        if self._use_fast():\n            return x * 2\n        return x\n",
            "python",
        )
    ]
    gates, errors = extract(files)
    assert not errors
    [g] = [g for g in gates if g.context == "Layer.forward"]
    assert (g.line, g.expression, g.admits) == (8, "self._use_fast()", ("9.0",))


def test_the_throwaway_name_is_no_predicate():
    """``_MAJOR, _ = get_device_capability()`` binds the minor version to ``_``: learned, every
    function that throws a value away would be read as one that may matter (and its plain
    comparisons reported as capability tests)."""
    files = [
        SourceFile(
            "pkg/arch.py",
            b"import torch\n\n_MAJOR, _ = torch.cuda.get_device_capability()\n",
            "python",
        ),
        SourceFile(
            "pkg/serve.py",
            b"def drain(chunks):\n    for _ in range(3):\n        if chunks == 'done':\n            return 1\n    return 0\n",
            "python",
        ),
    ]
    prog, relevant = load(files)
    assert "_MAJOR" in relevant.known and "_" not in relevant.known
    gates, errors = extract(files)
    assert not errors and not [g for g in gates if g.file == "pkg/serve.py"]


def test_loop_bodies_assign_what_they_bind_outside_nested_scopes():
    """What a loop body assigns is unknown at its top (it may have run before): every name it
    binds, in any form, but not the names its nested functions, classes or lambdas bind."""
    from auditor.python.symbols import assigned_in, parse

    src = (
        b"for i in range(3):\n"
        b"    a = b = f(i)\n"
        b"    c, (d, *e) = g()\n"
        b"    n += 1\n"
        b"    for k, v in items:\n"
        b"        if k:\n"
        b"            w = v\n"
        b"    def inner():\n"
        b"        hidden = 1\n"
        b"    class C:\n"
        b"        also_hidden = 2\n"
        b"    h = lambda x: x\n"
    )
    mod, error = parse(SourceFile("loop.py", src, "python"))
    assert error is None
    loop = mod.root.named_children[0]
    body = loop.child_by_field_name("body")
    assert assigned_in(mod, body) == {"a", "b", "c", "d", "e", "n", "k", "v", "w", "h"}
    inner = body.named_children[3].child_by_field_name("body")
    assert assigned_in(mod, inner) == {"w"}
    assert assigned_in(mod, body) is assigned_in(mod, body)  # looked up once


def test_a_flag_at_its_uses_names_its_one_definition():
    # #17 item 4: one root cause (the flag's definition), several sites
    gates, _ = scanned("flow")
    for use, definition in ((8, 7), (13, 12), (18, 17), (24, 23)):
        g = next(g for g in gates if g.file == "kern/flags.py" and g.line == use)
        assert ("kern/flags.py", definition) in {(r.file, r.line) for r in g.resolutions}, g.resolutions


def test_a_docstring_about_flags_is_no_flag_gate():
    """A string that is a statement of its own describes flags (``TORCH_CUDA_ARCH_LIST="9.0a"``
    in a docstring); the list assigned after it holds some."""
    text = (
        "def arch_list(value):\n"
        '    """Set TORCH_CUDA_ARCH_LIST="9.0a" while building: -gencode=arch=compute_90a,code=sm_90a."""\n'
        "    return value\n"
        "\n"
        'FLAGS = ["-gencode=arch=compute_90a,code=sm_90a"]\n'
    )
    gates, errors = extract([SourceFile("pkg/build.py", text.encode(), "python")])
    assert not errors
    assert [(g.line, g.kind.value) for g in gates] == [(5, "gencode-flags")]

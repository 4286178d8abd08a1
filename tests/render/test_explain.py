"""``archaudit explain``: locations, gate choice, and the step-by-step text."""

from __future__ import annotations

import json

import pytest

from auditor import cli
from auditor.model import Gate
from auditor.render import explain
from tests.conftest import FIXTURES

TREE = FIXTURES / "rules" / "trees" / "allreduce"


def test_parse_location(tmp_path):
    assert explain.parse_location("x.whl::flashinfer/a/b.cuh:417") == explain.Location(
        "x.whl", "flashinfer/a/b.cuh", 417
    )
    assert explain.parse_location("dir::./csrc/a.cu:3") == explain.Location("dir", "csrc/a.cu", 3)
    project = tmp_path / "proj"
    (project / "src" / "k").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    (project / "src" / "k" / "a.cu").write_text("")
    where = explain.parse_location(f"{project}/src/k/a.cu:7")
    assert where == explain.Location(str(project.resolve()), "src/k/a.cu", 7)
    for bad in ("foo", "a.cu:", "a.cu:0", "a.cu:x", "::a.cu:3", "dir:::3"):
        with pytest.raises(ValueError, match="expected"):
            explain.parse_location(bad)
    with pytest.raises(ValueError, match="no such file"):
        explain.parse_location(str(tmp_path / "missing.cu") + ":3")


def g(id, line, body, end_line=None):
    return Gate(
        id=id,
        file="a.cu",
        line=line,
        end_line=end_line or line,
        language="cuda",
        kind="preprocessor",
        expression="x",
        domain="target",
        admits=(),
        body_lines=body,
    )


def test_pick_exact_then_innermost():
    outer, inner = g("o", 2, (3, 20)), g("i", 5, (6, 9))
    gates = [outer, inner]
    assert explain.pick(gates, "a.cu", 5) == [inner]
    assert explain.pick(gates, "a.cu", 7) == [inner]
    assert explain.pick(gates, "a.cu", 15) == [outer]
    with pytest.raises(ValueError, match=r"a.cu:30: no gate here \(gates of this file start on lines 2, 5\)"):
        explain.pick(gates, "a.cu", 30)
    with pytest.raises(ValueError, match="no architecture gates"):
        explain.pick(gates, "b.cu", 1)


def test_explain_derived_macro_step_by_step(capsys):
    assert cli.main(["explain", f"{TREE}::csrc/fusion.cu:7", "--no-cache"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("csrc/fusion.cu:5  derived-macro (cuda)")
    assert "    1. defined(DEMO_HAS_PDL) && (__CUDA_ARCH__ < 1200)" in lines
    assert "    DEMO_HAS_PDL  csrc/arch.h:3  defined where defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)" in lines
    table = {ln.split()[0]: ln.split()[1:] for ln in lines if ln.startswith("    ") and ln.split()[0][0].isdigit()}
    assert table["9.0"] == ["sm_90", "sm_90a"]
    assert table["12.0"] == ["*", "-", "EXCLUDES"] and table["12.1"] == ["*", "-", "EXCLUDES"]
    assert table["8.9"] == ["-"]
    assert "    cudaGridDependencySynchronize  line 7  PDL device API; needs sm_90; 12.0: yes  12.1: yes" in lines
    # it also calls wait_for_previous_kernel(), whose needs the fact table does not know
    assert "  classification: unknown" in lines
    assert any(ln.startswith("    [high] ARCH001: ") for ln in lines)
    assert not any(ln.startswith("    [medium] ARCH007: ") for ln in lines)  # yields to ARCH001


def test_explain_python_list_and_json(capsys):
    assert (
        cli.main(["explain", f"{TREE}::pkg/jit/comm.py:6", "--no-cache", "--target", "12.1", "--format", "json"]) == 0
    )
    (doc,) = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "major-list" and doc["admits"] == ["9.0", "10.0", "10.1", "10.3", "10.7"]
    assert doc["verdicts"] == {"12.1": "excludes"}
    assert [f["rule"] for f in doc["findings"]] == ["ARCH002"]


def test_explain_errors_are_one_line(capsys):
    assert cli.main(["explain", f"{TREE}::csrc/fusion.cu:10", "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err == "archaudit: error: csrc/fusion.cu:10: no gate here (gates of this file start on lines 5)\n"
    assert cli.main(["explain", "no/such/file.cu:3"]) == 2
    assert capsys.readouterr().err.count("\n") == 1

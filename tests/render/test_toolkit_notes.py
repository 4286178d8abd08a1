"""Every report says which CUDA toolkits admit a target where they disagree, and only there."""

from __future__ import annotations

import json

import pytest

from auditor import cli
from tests.conftest import FIXTURES

TREE = str(FIXTURES / "cuda" / "toolkit")
NOTE = "CUDA ≤ 12.9"


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])  # SARIF lists findings: none here
def test_each_format_shows_the_note(fmt, capsys):
    assert cli.main(["scan", TREE, "--format", fmt, "--no-cache", "--jobs", "1"]) == 0
    assert NOTE in capsys.readouterr().out


def test_json_carries_the_toolkits_and_the_verdict_is_the_newest_toolkits(capsys):
    assert cli.main(["scan", TREE, "--format", "json", "--no-cache", "--jobs", "1"]) == 0
    (gate,) = json.loads(capsys.readouterr().out)["gates"]
    assert gate["verdicts"] == {"12.0": "excludes", "12.1": "excludes"}  # CUDA 13.5 takes no path
    assert gate["toolkit_verdicts"] == {"12.0": NOTE, "12.1": NOTE}
    assert gate["toolkits"]["sm_120"] == ["12.8", "12.9"] and gate["toolkits"]["sm_121"] == ["12.9"]


def test_explain_lists_the_toolkits(capsys):
    assert cli.main(["explain", f"{TREE}::kernel.cu:3", "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "sm_121: 12.9" in out and f"12.0 *: {NOTE}" in out


def test_only_where_toolkits_disagree(capsys):
    """``>= 900 && < 1200`` means the same to every toolkit; ``__CUDA_ARCH_SPECIFIC__`` exists from 12.9."""
    assert cli.main(["scan", str(FIXTURES / "cuda" / "basic"), "--format", "json", "--no-cache", "--jobs", "1"]) == 0
    gates = {g["line"]: g for g in json.loads(capsys.readouterr().out)["gates"] if g["file"] == "shapes.cuh"}
    assert "toolkit_verdicts" not in gates[10]
    assert gates[48]["toolkit_verdicts"] == {"12.0": "CUDA ≥ 12.9"}

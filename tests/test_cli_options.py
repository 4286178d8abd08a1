"""The command line: ``[tool.archaudit]`` with flags winning, ``--only-excluding`` in every
format, ``--quiet``, ``--exit-zero``, ``--statistics``, the ``-o`` line, per-subcommand options."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from auditor import cli
from tests.conftest import FIXTURES

REPORTS = FIXTURES / "reports"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["scan", *argv, "--jobs", "1", "--no-cache"] if argv and argv[0] != "--" else list(argv[1:]))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of the report fixture as a project of its own, the working directory."""
    root = tmp_path / "proj"
    shutil.copytree(REPORTS, root / "src")
    monkeypatch.chdir(root)
    return root


def test_only_excluding_filters_every_format(tree, capsys, tmp_path):
    outs = {ext: tmp_path / f"r.{ext}" for ext in ("json", "sarif", "md", "html", "txt")}
    args = [a for p in outs.values() for a in ("-o", str(p))]
    code, out, err = run(capsys, "src", "--only-excluding", *args)
    assert code == 0 and out == ""
    assert err.strip() == "archaudit: wrote " + ", ".join(
        f"{p} ({f})" for p, f in zip(outs.values(), ("json", "sarif", "markdown", "html", "text"))
    )
    doc = json.loads(outs["json"].read_text())
    assert doc["gates"] and all("excludes" in g["verdicts"].values() for g in doc["gates"])
    _, full, _ = run(capsys, "src", "--format", "json")
    everything = json.loads(full)
    assert len(doc["gates"]) < len(everything["gates"])
    admitted = [g for g in everything["gates"] if "excludes" not in g["verdicts"].values()]
    assert admitted
    page = outs["html"].read_text()
    data = json.loads(re.search(r'id="archaudit-data">(.*?)</script>', page, re.S)[1])
    assert sorted(g[0] for g in data["gates"]) == sorted(g["id"] for g in doc["gates"])
    rows = [ln for ln in outs["txt"].read_text().splitlines() if re.match(r"^ +\d+  \S", ln)]
    assert len(rows) == len(doc["gates"])
    md = outs["md"].read_text()
    assert not [g for g in admitted if f"`{g['expression']}`" in md]
    assert "excluding_gates" in json.dumps(doc["summary"])


def test_pyproject_table_sets_defaults_and_flags_win(tree, capsys):
    (tree / "pyproject.toml").write_text(
        '[tool.archaudit]\ntarget = "12.1"\nselect = ["ARCH001"]\nfail-on = "high"\nexclude = ["pkg/**"]\n',
        "utf-8",
    )
    code, out, _ = run(capsys, "src", "--format", "json")
    doc = json.loads(out)
    assert doc["targets"] == ["12.1"]
    assert {f["rule"] for f in doc["findings"]} == {"ARCH001"} and code == 1
    assert not any(g["file"].startswith("pkg/") for g in doc["gates"])
    code, out, _ = run(capsys, "src", "--format", "json", "--select", "ARCH007", "--exit-zero")
    assert {f["rule"] for f in json.loads(out)["findings"]} == {"ARCH007"} and code == 0


def test_pyproject_unknown_key_is_an_error(tree, capsys):
    (tree / "pyproject.toml").write_text("[tool.archaudit]\nfail_on = 'high'\n", "utf-8")
    code, _, err = run(capsys, "src")
    assert code == 2 and "no key 'fail_on'" in err


def test_statistics_counts_per_rule(tree, capsys):
    code, out, _ = run(capsys, "src", "--statistics")
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["3", "ARCH001", "high"]
    assert lines[-1].split() == ["5", "findings"]


def test_vendored_glob_orders_own_code_first(tree, capsys):
    _, out, _ = run(capsys, "src", "--vendored", "pkg/**")
    assert out.index("vendored trees") < out.index("pkg/fusion.py")


def test_each_subcommand_takes_only_its_own_options(capsys):
    assert cli.main(["explain", "x.cu:1", "-o", "r.html"]) == 2
    assert "unrecognized arguments: -o" in capsys.readouterr().err
    assert cli.main(["diff", "a", "b", "--only-excluding"]) == 2
    assert cli.main(["explain", "x.cu:1", "--format", "html"]) == 2


def test_quiet_silences_the_wrote_line_and_gateless_findings_are_printed(tmp_path, capsys):
    (tmp_path / "k.cu").write_text("// archaudit: ignore[ARCH001]\nint x;\n", "utf-8")
    code, out, err = run(capsys, str(tmp_path))
    assert "[info] ARCH000" in out and "1 findings (1 info)" in out
    code, out, err = run(capsys, str(tmp_path), "-q", "-o", str(tmp_path / "r.json"))
    assert out == "" and err == ""

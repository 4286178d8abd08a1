"""SARIF: valid against the official 2.1.0 schema, rule texts from the rule files, stable and ordered."""

from __future__ import annotations

import json
from functools import cache

import jsonschema
import pytest
import tomllib

from auditor.render import sarif
from auditor.rules import rulebook
from tests.conftest import ROOT, wheel
from tests.render.render_support import REPORTS, scan

SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"


@cache
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text("utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def assert_valid(log: dict) -> None:
    errors = sorted(validator().iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message[:300]}" for e in errors[:10])


@pytest.fixture(scope="module")
def log() -> dict:
    return json.loads(sarif.render(scan(REPORTS, formats=("sarif",))))


def test_fixture_log_is_valid(log):
    assert_valid(log)
    assert log["version"] == "2.1.0" and len(log["runs"]) == 1


def test_rules_come_from_the_rule_files_sorted(log):
    rules = log["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted(r["id"] for r in rules)
    by_id = {r.id: r for r in rulebook.builtin()}
    for r in rules:
        source = by_id[r["id"]]
        assert r["shortDescription"]["text"] == source.message
        assert r["fullDescription"]["text"] == source.rationale
        assert r["help"]["text"] == source.remediation
        if sarif.PROJECT_URL:
            anchor = f"{source.id.lower()}-{source.name}"
            assert r["helpUri"] == sarif.PROJECT_URL.rstrip("/") + f"/blob/main/docs/rules.md#{anchor}"
        else:
            assert "helpUri" not in r
        assert r["defaultConfiguration"]["level"] == sarif.LEVELS[source.severity]


def test_links_point_at_the_project_url_or_nowhere(log):
    """No placeholder address: links derive from pyproject's [project.urls], or are left out."""
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"].get("urls", {})
    assert (sarif.PROJECT_URL in urls.values()) if urls else sarif.PROJECT_URL is None
    driver = log["runs"][0]["tool"]["driver"]
    assert driver.get("informationUri") == sarif.PROJECT_URL
    assert "OWNER" not in json.dumps(log)


def test_results_are_ordered_fingerprinted_and_srcroot_relative(log):
    run = log["runs"][0]
    results = run["results"]
    assert results
    keys = [
        (
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
            r["ruleId"],
        )
        for r in results
    ]
    assert keys == sorted(keys)
    assert "%SRCROOT%" in run["originalUriBaseIds"]
    rules = run["tool"]["driver"]["rules"]
    for r in results:
        loc = r["locations"][0]["physicalLocation"]["artifactLocation"]
        assert loc["uriBaseId"] == "%SRCROOT%" and not loc["uri"].startswith("/")
        assert rules[r["ruleIndex"]]["id"] == r["ruleId"]
        assert len(r["partialFingerprints"][sarif.FINGERPRINT]) >= 8
    upper = next(
        r
        for r in results
        if r["ruleId"] == "ARCH001" and r["locations"][0]["physicalLocation"]["region"]["startLine"] == 8
    )
    assert upper["level"] == "error"
    assert upper["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "comm/allreduce.cuh"


def test_fingerprints_survive_moved_lines(tmp_path):
    """The gate fingerprint, not the line, identifies a result across pushes."""
    moved = tmp_path / "tree"
    (moved / "comm").mkdir(parents=True)
    source = (REPORTS / "comm" / "allreduce.cuh").read_text("utf-8")
    (moved / "comm" / "allreduce.cuh").write_text("// a new first line\n\n" + source, "utf-8")

    def prints(path):
        results = json.loads(sarif.render(scan(path, formats=("sarif",))))["runs"][0]["results"]
        return {
            (r["ruleId"], r["partialFingerprints"][sarif.FINGERPRINT]): r["locations"][0]["physicalLocation"]["region"][
                "startLine"
            ]
            for r in results
            if "allreduce" in json.dumps(r["locations"])
        }

    before, after = prints(REPORTS), prints(moved)
    assert before.keys() == after.keys()
    assert all(after[k] == before[k] + 2 for k in before)


@pytest.mark.slow
def test_real_wheel_log_is_valid():
    log = json.loads(sarif.render(scan(wheel("flashinfer-python==0.6.0"), formats=("sarif",))))
    assert_valid(log)
    results = log["runs"][0]["results"]
    assert results
    # one result per root cause: the 13 PDL guards of trtllm_allreduce.cuh are one, naming the others
    pdl = [
        r
        for r in results
        if r["ruleId"] == "ARCH001"
        and r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("comm/trtllm_allreduce.cuh")
    ]
    assert len(pdl) == 1 and "and 8 more" in pdl[0]["message"]["text"]
    assert len({(r["ruleId"], r["partialFingerprints"][sarif.FINGERPRINT]) for r in results}) == len(results)

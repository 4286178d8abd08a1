"""Rules are data that test themselves: every example through the real pipeline, the schema, snapshots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from auditor import arch, cli, pipeline
from auditor.model import GateKind, Severity, SourceFile
from auditor.rules import rulebook
from auditor.rules import vocabulary as predicates
from tests.conftest import FIXTURES, ROOT

RULES = rulebook.builtin()
CASES = [
    (r, case, i, ex)
    for r in RULES
    for case, exs in (("invalid", r.invalid), ("valid", r.valid))
    for i, ex in enumerate(exs)
]


def scan(files, rule, targets=arch.DEFAULT_TARGETS):
    """The real pipeline, one input, with only ``rule`` active."""
    options = pipeline.Options(targets=arch.parse_targets(targets), rules=(rule,), select=(rule.id,), jobs=1)
    _, findings, errors = pipeline.audit_input(files, "example", options)
    return findings, errors


@pytest.mark.parametrize(
    "rule,case,index,example", CASES, ids=[f"{r.id}-{case}-{i}-{ex.filename}" for r, case, i, ex in CASES]
)
def test_example(rule, case, index, example):
    (result,) = [c for c in rulebook.verify(rule, scan) if c.case == case and c.example == example]
    expected = "reported" if case == "invalid" else "validated"
    assert result.outcome == expected, f"{rule.source}:{example.line}: {result.outcome}: {result.detail}"


def test_verify_names_all_four_outcomes():
    """A rule that never fires leaves its invalid examples missing; one that always fires is noisy."""
    base = next(r for r in RULES if r.id == "ARCH001")
    never = replace(base, when=lambda v: False)
    always = replace(base, kinds=(), when=lambda v: True)
    outcomes = {c.outcome for c in rulebook.verify(never, scan)} | {c.outcome for c in rulebook.verify(always, scan)}
    assert outcomes == set(rulebook.OUTCOMES)


def test_rule_files_carry_schema_comment_and_match_their_names():
    folder = ROOT / "rules"
    files = sorted(folder.glob("*.yaml"))
    assert [f.stem for f in files] == [f"{r.id}-{r.name}" for r in RULES]
    for f in files:
        assert f.read_text().splitlines()[0] == rulebook.SCHEMA_COMMENT, f.name


def test_schema_vocabulary_is_the_registry():
    """The published schema lists exactly the predicates the code defines."""
    condition = rulebook.schema()["$defs"]["condition"]["oneOf"]
    bare = set(condition[0]["enum"])
    keyed = {next(iter(c["properties"])) for c in condition[1:]}
    assert bare == set(predicates.PREDICATES)
    assert keyed == {"all", "any", "not"} | set(predicates.PARAMETRIC)


GOOD = (ROOT / "rules" / "ARCH006-dead-arch-gate.yaml").read_text()
NAME = "ARCH006-dead-arch-gate.yaml"


def test_schema_enums_are_the_models_vocabularies():
    """Kinds, languages, severities and parametric values come from the enums, not a pattern."""
    props = rulebook.schema()["properties"]
    assert props["applies_to"]["properties"]["kinds"]["items"]["enum"] == [k.value for k in GateKind]
    assert set(props["severity"]["enum"]) == {s.value for s in Severity}
    assert props["applies_to"]["properties"]["languages"]["items"]["enum"] == ["python", "cuda"]


def test_a_misspelt_kind_fails_rules_test(tmp_path, capsys):
    """A kind no extractor mints would match nothing: the rule fails to load, with its line."""
    text = (ROOT / "rules" / "ARCH001-upper-bound-cuts-target.yaml").read_text()
    assert "derived-macro" in text
    (tmp_path / "ARCH001-upper-bound-cuts-target.yaml").write_text(text.replace("derived-macro", "derived-macros"))
    code = cli.main(["rules", "test", "--rules", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert f":{line_of(text, 'derived-macro')}:" in err and "derived-macros" in err


def line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def drop_block(text: str, key: str) -> str:
    """The rule text without the top-level ``key`` and its indented value."""
    out, skipping = [], False
    for ln in text.splitlines(keepends=True):
        if ln.startswith(f"{key}:"):
            skipping = True
            continue
        if skipping and (ln.startswith(" ") or not ln.strip()):
            continue
        skipping = False
        out.append(ln)
    return "".join(out)


@pytest.mark.parametrize("key", ["rationale", "examples", "remediation", "references", "when"])
def test_schema_rejects_a_rule_without_a_required_field(key):
    with pytest.raises(rulebook.RuleError, match=rf"^{NAME}:\d+: '{key}' is missing$"):
        rulebook.parse(drop_block(GOOD, key), NAME)


def test_schema_rejects_examples_without_valid_cases():
    text = GOOD[: GOOD.index("  valid:")]
    with pytest.raises(rulebook.RuleError, match=r"'valid' is missing in examples"):
        rulebook.parse(text, NAME)


def test_unknown_key_is_reported_with_its_line():
    text = GOOD.replace("severity: low\n", "severity: low\nseverty: high\n")
    with pytest.raises(rulebook.RuleError) as exc:
        rulebook.parse(text, NAME)
    assert str(exc.value) == f"{NAME}:{line_of(text, 'severty')}: unknown key 'severty'"


def test_unknown_key_inside_an_example_is_reported_with_its_line():
    text = GOOD.replace("      filename: kernels/old.cuh\n", "      filename: kernels/old.cuh\n      lang: cuda\n")
    with pytest.raises(rulebook.RuleError) as exc:
        rulebook.parse(text, NAME)
    assert str(exc.value) == f"{NAME}:{line_of(text, 'lang: cuda')}: unknown key 'lang' in examples.invalid.1"


def test_unknown_predicate_is_reported_with_its_line():
    text = GOOD.replace("when: dead", "when: deadd")
    with pytest.raises(
        rulebook.RuleError, match=rf"^{NAME}:{line_of(text, 'deadd')}: unknown or malformed condition 'deadd'"
    ):
        rulebook.parse(text, NAME)


def test_unknown_message_field_and_duplicate_key_and_bad_yaml():
    text = GOOD.replace("({admits})", "({admitted})")
    with pytest.raises(rulebook.RuleError, match=r"unknown message field \{admitted\}"):
        rulebook.parse(text, NAME)
    text = GOOD.replace("severity: low\n", "severity: low\nseverity: high\n")
    with pytest.raises(
        rulebook.RuleError, match=rf"^{NAME}:{line_of(text, 'severity: high')}: duplicate key 'severity'"
    ):
        rulebook.parse(text, NAME)
    with pytest.raises(rulebook.RuleError, match=rf"^{NAME}:\d+: invalid YAML"):
        rulebook.parse(GOOD + "\n  - : [\n", NAME)


def test_file_name_must_match_id_and_name():
    with pytest.raises(rulebook.RuleError, match="should be named ARCH006-dead-arch-gate.yaml"):
        rulebook.parse(GOOD, "ARCH006-dead.yaml")


def test_docs_are_generated_from_the_rules():
    """docs/rules.md is the generator's output (run scripts/gen_rule_docs.py after editing a rule)."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_rule_docs.py"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


# Command line ---------------------------------------------------------------------------


def test_cli_rules_list_show_test(capsys):
    assert cli.main(["rules", "list"]) == 0
    out = capsys.readouterr().out
    assert [ln.split()[0] for ln in out.splitlines()] == [r.id for r in RULES]
    assert cli.main(["rules", "show", "ARCH007"]) == 0
    shown = capsys.readouterr().out
    assert "conservative-gate" in shown and "benchmark" in shown and "https://" in shown
    assert cli.main(["rules", "test"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{len(RULES)} rules, 0 failing examples"
    assert cli.main(["rules", "show", "ARCH999"]) == 2
    assert "unknown rule id" in capsys.readouterr().err


def test_user_rules_directory(tmp_path, capsys):
    """--rules DIR adds rules; their examples are tested too; a broken file is one line, exit 2."""
    text = GOOD.replace("id: ARCH006", "id: TEAM001").replace("name: dead-arch-gate", "name: dead-gate-again")
    (tmp_path / "TEAM001-dead-gate-again.yaml").write_text(text)
    assert cli.main(["rules", "test", "--rules", str(tmp_path), "--select", "TEAM001"]) == 0
    assert "TEAM001 dead-gate-again: ok" in capsys.readouterr().out
    fixture = FIXTURES / "rules" / "ARCH006"
    assert cli.main(["scan", str(fixture), "--rules", str(tmp_path), "--select", "TEAM001", "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)["findings"]
    assert {f["rule"] for f in found} == {"TEAM001"} and len(found) == 2
    (tmp_path / "TEAM001-dead-gate-again.yaml").write_text(text.replace("severity: low", "severity: urgent"))
    assert cli.main(["rules", "list", "--rules", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"archaudit: error: {tmp_path}/TEAM001-dead-gate-again.yaml:{line_of(text, 'severity')}: ")
    assert len(err.splitlines()) == 1
    (tmp_path / "TEAM001-dead-gate-again.yaml").write_text(GOOD)
    assert cli.main(["rules", "list", "--rules", str(tmp_path)]) == 2  # same id twice, or a wrong file name
    assert "archaudit: error:" in capsys.readouterr().err


# Snapshots: fixtures/rules/<ID>/* rendered with findings at their locations ----------------

SNAPSHOTS = ROOT / "tests" / "snapshots"
BASELINES = {"12x": "12.0,12.1", "12.1": "12.1", "10.0": "10.0"}
"""Target baselines each fixture is re-run under; the key is in the snapshot name."""
FIXTURE_FILES = sorted(p for p in (FIXTURES / "rules").glob("ARCH*/*") if p.is_file())


def render_snapshot(path: Path, findings) -> str:
    """path:line:col rule message, the source line, and a caret under the condition."""
    lines = path.read_text().splitlines()
    out = []
    for f in findings:
        text = lines[f.line - 1]
        expression = f.message.split("`")[1] if "`" in f.message else ""
        col = text.find(expression[:24]) if expression else -1
        col = col if col >= 0 else len(text) - len(text.lstrip())
        out += [
            f"{path.parent.name}/{path.name}:{f.line}:{col + 1}: {f.rule} [{f.severity}/{f.classification or '-'}] {f.message}",
            f"  {text}",
            "  " + " " * col + "^",
        ]
    return "\n".join(out) + "\n" if out else "(no findings)\n"


@pytest.mark.parametrize("baseline", sorted(BASELINES))
@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=[f"{p.parent.name}/{p.name}" for p in FIXTURE_FILES])
def test_fixture_snapshot(fixture: Path, baseline: str):
    rule = next(r for r in RULES if r.id == fixture.parent.name)
    source = SourceFile(fixture.name, fixture.read_bytes(), "python" if fixture.suffix == ".py" else "cuda", "fixture")
    findings, errors = scan([source], rule, BASELINES[baseline])
    assert errors == []
    text = render_snapshot(fixture, findings)
    snap = SNAPSHOTS / fixture.parent.name / f"{fixture.name}.{baseline}.txt"
    if os.environ.get("ARCHAUDIT_UPDATE_SNAPSHOTS") == "1":
        snap.parent.mkdir(parents=True, exist_ok=True)
        snap.write_text(text)
    assert snap.exists(), f"no snapshot {snap}; run with ARCHAUDIT_UPDATE_SNAPSHOTS=1 and review it"
    assert text == snap.read_text()


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=[f"{p.parent.name}/{p.name}" for p in FIXTURE_FILES])
def test_fixture_sections(fixture: Path):
    """Under the default targets, findings sit in the ``Errors`` section and none in ``OK``."""
    rule = next(r for r in RULES if r.id == fixture.parent.name)
    lines = fixture.read_text().splitlines()
    ok_from = next(i for i, ln in enumerate(lines, 1) if ln.strip() in ("# OK", "// OK"))
    errors_from = next(i for i, ln in enumerate(lines, 1) if ln.strip() in ("# Errors", "// Errors"))
    source = SourceFile(fixture.name, fixture.read_bytes(), "python" if fixture.suffix == ".py" else "cuda", "fixture")
    findings, _ = scan([source], rule)
    assert findings, "the Errors section must trigger the rule"
    assert all(errors_from < f.line < ok_from for f in findings), [f.line for f in findings]

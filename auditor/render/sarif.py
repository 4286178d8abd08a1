"""SARIF 2.1.0 for code scanning (GitHub and other viewers), built field by field from the model.

Rule metadata comes from the rule files, which the scan passes in ``AuditResult.rules``,
so this stays a pure function of its input. Locations are relative to
``%SRCROOT%`` (the scanned input's root) so an upload maps them onto the repository.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import quote

from auditor.model import AuditResult, Finding, Gate, RuleInfo, Severity
from auditor.render.counts import headline
from auditor.render.report import rules_of
from auditor.verdicts import toolkit_notes

VERSION = "2.1.0"
SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
PROJECT_URL: str | None = None
"""The project's public home, as ``[project.urls]`` in pyproject.toml gives it (a test keeps the
two equal). There is none yet, so the log has no ``informationUri`` and no rule ``helpUri``
(both optional in SARIF 2.1.0) rather than a made-up address."""
HELP_PATH = "/blob/main/docs/rules.md#{anchor}"
"""A rule's section in the generated rule docs (heading ``ARCH001 `name` `` -> ``#arch001-name``)."""
FINGERPRINT = "archauditGate/v1"
"""``partialFingerprints`` key: the gate's fingerprint survives line moves."""
LEVELS = {Severity.HIGH: "error", Severity.MEDIUM: "warning", Severity.LOW: "note", Severity.INFO: "note"}


def _base_ids(result: AuditResult) -> dict[str, str]:
    """Input -> uriBaseId: the first input is ``%SRCROOT%``, others get their own."""
    return {i.path: "%SRCROOT%" if n == 0 else f"INPUT{n + 1}" for n, i in enumerate(result.inputs)}


def _descriptor(rule_id: str, rule: RuleInfo | None, findings: Iterable[Finding]) -> dict:
    if rule is None:
        first = next(iter(findings))
        return {"id": rule_id, "defaultConfiguration": {"level": LEVELS.get(first.severity, "note")}}
    out = {
        "id": rule.id,
        "name": rule.name,
        "shortDescription": {"text": rule.message},
        "fullDescription": {"text": rule.rationale},
        "help": {"text": rule.remediation, "markdown": rule.remediation},
        "defaultConfiguration": {"level": LEVELS.get(rule.severity, "note")},
        "properties": {"tags": ["gpu-architecture", rule.name], "references": list(rule.references)},
    }
    if PROJECT_URL:
        out["helpUri"] = PROJECT_URL.rstrip("/") + HELP_PATH.format(anchor=f"{rule.id.lower()}-{rule.name}")
    return out


def _location(base: str, file: str, line: int, end_line: int = 0) -> dict:
    region = {"startLine": max(line, 1)}
    if end_line > line:
        region["endLine"] = end_line
    return {
        "physicalLocation": {"artifactLocation": {"uri": quote(file, safe="/"), "uriBaseId": base}, "region": region}
    }


def _result(f: Finding, gate: Gate | None, index: int, base: str, targets, toolkits: tuple[str, ...] = ()) -> dict:
    out: dict = {
        "ruleId": f.rule,
        "ruleIndex": index,
        "level": LEVELS.get(f.severity, "note"),
        "message": {"text": f.message},
        "locations": [_location(base, f.file, f.line, gate.end_line if gate else 0)],
        "partialFingerprints": {FINGERPRINT: f.gate},
        "properties": {"severity": f.severity, "confidence": f.confidence, "classification": f.classification},
    }
    if gate is not None:
        out["properties"].update(
            {
                "expression": gate.expression,
                "kind": gate.kind,
                "admits": list(gate.admits),
                "unknowns": list(gate.unknowns),
                "targets": [t.label for t in targets],
            }
        )
        notes = toolkit_notes(gate, targets, toolkits)
        if notes:
            out["properties"]["toolkits"] = notes
        related = [
            dict(
                _location(base, r.file, r.line), id=n, message={"text": f"{r.name}: {r.detail}" if r.detail else r.name}
            )
            for n, r in enumerate(gate.resolutions, 1)
            if r.file and r.line
        ]
        if related:
            out["relatedLocations"] = related
    return out


def document(result: AuditResult) -> dict:
    """The SARIF log as a JSON-ready dict: one run, rules sorted, results by file, line, rule."""
    known = rules_of(result)
    gates = {(g.input, g.id): g for g in result.gates}
    findings = sorted(result.findings, key=lambda f: (f.input, f.file, f.line, f.rule, f.gate))
    used = sorted({f.rule for f in findings} | set(known))
    index = {rule_id: n for n, rule_id in enumerate(used)}
    bases = _base_ids(result)
    default_base = "%SRCROOT%"
    return {
        "$schema": SCHEMA_URI,
        "version": VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "archaudit",
                        "version": result.tool_version,
                        **({"informationUri": PROJECT_URL} if PROJECT_URL else {}),
                        "rules": [_descriptor(r, known.get(r), (f for f in findings if f.rule == r)) for r in used],
                    }
                },
                "originalUriBaseIds": {
                    base: {"description": {"text": f"root of the scanned input {path}"}} for path, base in bases.items()
                }
                or {default_base: {"description": {"text": "root of the scanned input"}}},
                "results": [
                    _result(
                        f,
                        gates.get((f.input, f.gate)),
                        index[f.rule],
                        bases.get(f.input, default_base),
                        result.targets,
                        result.toolkits,
                    )
                    for f in findings
                ],
                "columnKind": "unicodeCodePoints",
                "properties": {"targets": [t.label for t in result.targets], **_headline(result)},
            }
        ],
    }


def _headline(result: AuditResult) -> dict:
    """The headline counts, as the other formats state them."""
    h = headline(result)
    return {
        "decisions_routed_away": h.decisions,
        "decisions_runnable": h.runnable,
        "findings": h.findings,
        "unreached_gates": h.unreached,
    }


def render(result: AuditResult) -> str:
    """Deterministic SARIF text."""
    return json.dumps(document(result), indent=2, ensure_ascii=False) + "\n"

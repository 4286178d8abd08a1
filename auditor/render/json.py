"""The ``archaudit/1`` JSON document (DESIGN.md), built field by field from the model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from auditor import arch
from auditor.facts.features import is_around
from auditor.model import AuditResult, Binary, Domain, Finding, Gate, Verdict
from auditor.render.counts import headline
from auditor.verdicts import classify, toolkit_notes, verdicts

SCHEMA = "archaudit/1"


def gate_document(gate: Gate, targets, toolkits: tuple[str, ...] = ()) -> dict:
    """One gate as the contract spells it, plus a few extra fields (``toolkits``: the CUDA releases the scan chose)."""
    v = verdicts(gate, targets)
    doc = {
        "id": gate.id,
        "file": gate.file,
        "line": gate.line,
        "end_line": gate.end_line,
        "language": gate.language,
        "kind": gate.kind,
        "expression": gate.expression,
        "domain": gate.domain,
        "admits": list(gate.admits),
        "excludes_target": Verdict.EXCLUDES in v.values(),
        "verdicts": v,
        "unknowns": list(gate.unknowns),
        "resolved_by": gate.resolved_by,
        "classification": classify(gate, targets) or None,
        "features": [
            {
                "token": f.token,
                "line": f.line,
                "feature": f.feature,
                "min_arch": f.min_arch,
                "on_target": dict(f.on_target),
                **({"around": f.notes} if is_around(f) else {}),
            }
            for f in gate.features
        ],
        "resolutions": [{"name": r.name, "file": r.file, "line": r.line, "detail": r.detail} for r in gate.resolutions],
        "chain": list(gate.chain),
        "body": list(gate.body_lines),
        "context": gate.context,
        "package": gate.package,
        "input": gate.input,
    }
    if gate.domain == Domain.TARGET:
        doc["admitting_variants"] = {t.label: list(arch.admitting_variants(gate.admits, t)) for t in targets}
    if gate.guards:
        doc["guards"] = gate.guards
        doc["surely"] = list(gate.surely)
    if gate.name_implies:
        doc["name_implies"] = list(gate.name_implies)
    if gate.extensions:
        doc["extensions"] = list(gate.extensions)
    if gate.prebuilt_elsewhere:
        doc["prebuilt_elsewhere"] = list(gate.prebuilt_elsewhere)
    if gate.builds:
        doc["builds"] = list(gate.builds)
    if gate.emits:
        doc["emits"] = list(gate.emits)
    if gate.platform:
        doc["platform"] = [need.partition(" ")[2] for need in gate.platform]
    if gate.reach:
        doc["reach"] = gate.reach
    if gate.remarks:
        doc["remarks"] = list(gate.remarks)
    if gate.scope:
        doc["scope"] = gate.scope
    if gate.measured:
        doc["measured"] = gate.measured
    if gate.limit:
        doc["limit"] = gate.limit
    if gate.settled:
        doc["settled"] = list(gate.settled)
    if gate.built_by:
        doc["built_by"] = list(gate.built_by)
    if gate.toolkits:
        doc["toolkits"] = {target: list(releases) for target, releases in gate.toolkits}
        doc["toolkit_verdicts"] = toolkit_notes(gate, targets, toolkits)
    return doc


def finding_document(f: Finding) -> dict:
    """One finding as the contract spells it (scan and diff documents alike)."""
    return {
        "rule": f.rule,
        "severity": f.severity,
        "gate": f.gate,
        "file": f.file,
        "line": f.line,
        "message": f.message,
        "confidence": f.confidence,
        "classification": f.classification,
        **({"decision": f.decision} if f.decision else {}),
        **({"also": [{"file": file, "line": line} for file, line in f.also]} if f.also else {}),
        **({"root_cause": f.root} if f.root else {}),
        **({"vendored": f.vendored} if f.vendored else {}),
    }


def document(result: AuditResult) -> dict:
    """The whole result as a JSON-ready dict."""
    return {key: list(value) if isinstance(value, Iterator) else value for key, value in _fields(result)}


def _fields(result: AuditResult) -> Iterator[tuple[str, Any]]:
    """The document's fields in order, its records made one at a time: a render holds one
    record's dict at a time, not all of them (four times the text on a large input)."""
    yield "schema", SCHEMA
    yield "tool", {"name": "archaudit", "version": result.tool_version}
    yield "targets", [t.label for t in result.targets]
    if result.toolkits and result.toolkits != arch.releases_of():
        yield "cuda", list(result.toolkits)
    yield "inputs", [{"path": i.path, "kind": i.kind} for i in result.inputs]
    yield "gates", (gate_document(g, result.targets, result.toolkits) for g in result.gates)
    yield "findings", (finding_document(f) for f in result.findings)
    yield "errors", ({"file": e.file, "reason": e.reason, "input": e.input} for e in result.errors)
    yield "summary", summary_document(result)
    if result.binaries:
        yield "binaries", (binary_document(b) for b in result.binaries)


def summary_document(result: AuditResult) -> dict:
    """The headline counts (:mod:`auditor.render.counts`), as every format states them."""
    h = headline(result)
    return {
        "decisions_routed_away": h.decisions,
        "decisions_runnable": h.runnable,
        "gates": h.gates,
        "excluding_gates": h.excluding,
        "findings": h.findings,
        "errors": h.errors,
        "unreached_gates": h.unreached,
    }


def binary_document(b: Binary) -> dict:
    """A shared object and the GPU code it embeds, with per-target loadability (extra field)."""
    return {
        "path": b.path,
        "package": b.package,
        "input": b.input,
        "entries": [
            {"kind": e.kind, "target": e.target, "compressed": e.compressed, "note": e.note} for e in b.entries
        ],
        "verdicts": dict(b.verdicts),
    }


def render(result: AuditResult) -> str:
    """Deterministic JSON text: the top level indented, one gate (finding, error) per line.

    ``json.dumps(indent=...)`` runs Python's pure-Python encoder, about 3 s for 40,000 gates;
    encoding each record on its own line keeps to the C encoder, and keeps ``grep`` useful."""
    encode = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode
    out: list[str] = []  # joined once: the text is held twice at most, never four times
    for key, value in _fields(result):
        out.append(",\n" if out else "{\n")
        if not isinstance(value, (list, Iterator)):
            out.append(f"  {encode(key)}: {encode(value)}")
            continue
        records = iter(value)
        first = next(records, _NONE)
        if first is _NONE:
            out.append(f"  {encode(key)}: []")
            continue
        out += [f"  {encode(key)}: [\n    ", encode(first)]
        for record in records:
            out += [",\n    ", encode(record)]
        out.append("\n  ]")
    out.append("\n}\n")
    return "".join(out)


_NONE = object()

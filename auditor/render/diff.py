"""Reports of a :class:`~auditor.model.DiffResult`: text, JSON, Markdown, HTML and SARIF.

Pure functions ``DiffResult -> str`` (:class:`~auditor.render.formats.Format` picks one). A definition change
(a predicate or derived macro whose meaning changed) is shown once, as the root cause, with
the call sites through it; the gates it explains are not listed again on their own.
The Markdown of ``archaudit pr`` (``mode == "pr"``) starts with the sticky-comment marker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from auditor import arch
from auditor.model import (
    AuditResult,
    DefinitionChange,
    DiffResult,
    Gate,
    GateChange,
    Guards,
    How,
    Verdict,
)
from auditor.render import counts, markdown, report
from auditor.render.counts import STATUSES
from auditor.render.json import finding_document, gate_document
from auditor.verdicts import allowed, toolkit_notes

SCHEMA = "archaudit-diff/1"
MARKER = "<!-- archaudit -->"
"""Hidden marker of the sticky PR comment (``archaudit comment`` finds it again by this)."""
MARKDOWN_ROWS = 150
"""Rows per Markdown table; the rest are counted, so a comment stays under GitHub's limit."""
DEFINITIONS_SHOWN = 30
"""Definition changes shown in Markdown and HTML, each with at most ``CALL_SITE_ROWS`` call sites."""
CALL_SITE_ROWS = 25


def _verdict_word(v: Verdict | None) -> str:
    return "—" if v is None else v


def _admits(gate: Gate | None) -> str:
    """The set a gate admits; for a rejection guard, what it lets through (the verdicts' set)."""
    if gate is None:
        return "—"
    if gate.guards == Guards.REJECT:
        return "lets through " + arch.compact(gate.domain, allowed(gate))
    return arch.compact(gate.domain, gate.admits)


def _where(c: GateChange) -> str:
    return f"{c.gate.file}:{c.gate.line}"


ANY_CUDA = "any CUDA"
"""A target every chosen toolkit answers alike for, beside one whose answer depends on the toolkit."""


def toolkit_cell(c: GateChange, d: DiffResult) -> str:
    """Which CUDA releases admit each requested target, where the toolkit changes an answer on
    either side (``12.1: CUDA ≥ 12.9``; ``12.0: any CUDA → CUDA ≥ 13.0`` when that changed);
    "" when no toolkit changes any answer, so the column shows only where it matters."""
    before = toolkit_notes(c.old, d.targets, d.toolkits) if c.old is not None else {}
    after = toolkit_notes(c.new, d.targets, d.toolkits) if c.new is not None else {}
    parts = []
    for t in d.targets:
        b, a = before.get(t.label), after.get(t.label)
        if not (a or b):
            continue
        if c.old is None or c.new is None or a == b:
            parts.append(f"{t.label}: {a or b}")
        else:
            parts.append(f"{t.label}: {b or ANY_CUDA} → {a or ANY_CUDA}")
    return "; ".join(parts)


def _worst(findings) -> str:
    return min((f.severity for f in findings), key=report.severity_rank, default="")


def summary(d: DiffResult) -> dict:
    """Counts the reports lead with, from :func:`counts.diff_headline` (computed once)."""
    h = counts.diff_headline(d)
    return {
        **{str(st): h.count(st) for st in STATUSES},
        "explained": {str(st): h.explained(st) for st in STATUSES},
        "unchanged": h.unchanged,
        "definitions": h.definitions,
        "newly_excludes": dict(h.newly_excludes),
        "now_admits": dict(h.now_admits),
        "new_findings": dict(h.new_findings),
        "resolved_findings": dict(h.resolved_findings),
        "findings": h.failing,
        "errors": h.errors,
    }


def section_count(s: dict, status: str) -> str:
    """A section's heading count: the headline's, and how many of them the definitions show."""
    under = s["explained"][status]
    return f"{s[status]:,}" + (f"; {under:,} of them under the definition changes above" if under else "")


def headline_lines(d: DiffResult) -> list[str]:
    """The summary in words, the same in text, Markdown and HTML."""
    s = summary(d)
    lines = [
        f"{s['added']:,} added, {s['changed']:,} changed, {s['removed']:,} removed, {s['unchanged']:,} unchanged gates; "
        f"{s['definitions']:,} definition change(s)"
    ]
    new = ", ".join(f"{n:,} {sev}" for sev, n in s["new_findings"].items() if n) or "none"
    gone = ", ".join(f"{n:,} {sev}" for sev, n in s["resolved_findings"].items() if n) or "none"
    lines.append(f"new findings: {new}; resolved findings: {gone}")
    for t in d.targets:
        lines.append(
            f"{t.label}: {s['newly_excludes'][t.label]:,} decision(s) newly turn it away, "
            f"{s['now_admits'][t.label]:,} now let it in"
        )
    return lines


def _side(inputs) -> str:
    return ", ".join(f"{i.path} ({i.kind})" for i in inputs) or "nothing"


# -- text ----------------------------------------------------------------------------------


def _text_change(c: GateChange, d: DiffResult, indent: str = "  ") -> list[str]:
    g = c.gate
    head = f"{indent}{c.status:<8} {_where(c)}  {g.kind}  {g.expression}"
    if c.how == How.REWRITTEN and c.old is not None:
        head += f"   (was: {c.old.expression})"
    out = [head]
    admits = (
        _admits(c.new)
        if c.old is None
        else (_admits(c.old) if c.new is None else f"{_admits(c.old)} -> {_admits(c.new)}")
    )
    tail = "; ".join(c.delta) or "verdicts unchanged"
    if g.guards == Guards.REJECT:
        tail += "; guards an exit (raise or early return)"
    out.append(f"{indent}         admits {admits}   {tail}")
    kits = toolkit_cell(c, d)
    if kits:
        out.append(f"{indent}         admitted with {kits}")
    out += [f"{indent}         [{f.severity}] {f.rule}: {f.message}" for f in c.findings]
    return out


def _details_differ(dc: DefinitionChange) -> bool:
    """Whether the recorded definitions differ (known on both sides, or now in another file)."""
    return bool(dc.old_file) or (bool(dc.old_detail and dc.new_detail) and dc.old_detail != dc.new_detail)


def _detail(dc: DefinitionChange, side: str) -> str:
    """The definition before or after, with its place when the name moved to another file."""
    if side == "old":
        return (f"{dc.old_file}:{dc.old_line}: " if dc.old_file else "") + dc.old_detail
    return (f"{dc.file}:{dc.new_line}: " if dc.old_file else "") + dc.new_detail


def _text_definition(dc: DefinitionChange, d: DiffResult) -> list[str]:
    moved = dc.old_line and dc.new_line and dc.old_line != dc.new_line and not dc.old_file
    out = [
        f"definition changed: {dc.name}  {dc.file}:"
        + (f"{dc.old_line} -> {dc.new_line}" if moved else str(dc.new_line or dc.old_line))
    ]
    if _details_differ(dc):
        out += [f"    before: {_detail(dc, 'old')}", f"    after:  {_detail(dc, 'new')}"]
    for c in dc.body:
        before = f"{c.old.expression}  (admits {_admits(c.old)})" if c.old else "(absent)"
        after = f"{c.new.expression}  (admits {_admits(c.new)})" if c.new else "(absent)"
        out.append(f"    inside: {before}  ->  {after}" + (f"   {'; '.join(c.delta)}" if c.delta else ""))
    if dc.call_sites:
        out.append("    call sites:")
        for c in dc.call_sites:
            out += _text_change(c, d, "      ")
    else:
        out.append("    no call site changed")
    if dc.unchanged_call_sites:
        out.append(f"    ({dc.unchanged_call_sites} more call site(s) resolve through it and admit the same set)")
    return out


def render_text(d: DiffResult) -> str:
    """Plain text for people."""
    s = summary(d)
    targets = ", ".join(t.label for t in d.targets)
    out = [
        f"archaudit {'pr' if d.mode == 'pr' else 'diff'}: {_side(d.old_inputs)} -> {_side(d.new_inputs)}; "
        f"targets {targets}"
    ]
    out += headline_lines(d)
    for dc in d.definitions:
        out += [""] + _text_definition(dc, d)
    for status in STATUSES:
        rows = d.by_status(status)
        if rows:
            out += ["", f"{status} ({section_count(s, status)}):"]
            for c in rows:
                out += _text_change(c, d)
    if not d.changes:
        out += ["", "no architecture gate was added, removed or changed"]
    for e in d.errors:
        out.append(f"error: {e.input + ': ' if e.input else ''}{e.file}: {e.reason}")
    return "\n".join(out) + "\n"


# -- JSON ----------------------------------------------------------------------------------


def _change_doc(c: GateChange, targets, toolkits: tuple[str, ...]) -> dict:
    return {
        "status": c.status,
        "how": c.how,
        "id": c.gate.id,
        "file": c.gate.file,
        "line": c.gate.line,
        "verdicts": {v.target: {"before": v.before or None, "after": v.after or None} for v in c.verdicts},
        "delta": list(c.delta),
        "definition": c.definition or None,
        "causes": list(c.causes),
        "old": gate_document(c.old, targets, toolkits) if c.old else None,
        "new": gate_document(c.new, targets, toolkits) if c.new else None,
        "findings": [finding_document(f) for f in c.findings],
    }


def _site_doc(c: GateChange) -> dict:
    return {
        "status": c.status,
        "how": c.how,
        "id": c.gate.id,
        "file": c.gate.file,
        "line": c.gate.line,
        "expression": c.gate.expression,
        "delta": list(c.delta),
    }


def document(d: DiffResult) -> dict:
    """The ``archaudit-diff/1`` document."""
    return {
        "schema": SCHEMA,
        "tool": {"name": "archaudit", "version": d.tool_version},
        "mode": d.mode,
        "targets": [t.label for t in d.targets],
        **({"cuda": list(d.toolkits)} if d.toolkits and d.toolkits != arch.releases_of() else {}),
        "old": {"inputs": [{"path": i.path, "kind": i.kind} for i in d.old_inputs]},
        "new": {"inputs": [{"path": i.path, "kind": i.kind} for i in d.new_inputs]},
        "summary": summary(d),
        "definitions": [
            {
                "name": dc.name,
                "key": dc.key,
                "file": dc.file,
                "old_file": dc.old_file or dc.file,
                "old_line": dc.old_line or None,
                "new_line": dc.new_line or None,
                "old_detail": dc.old_detail,
                "new_detail": dc.new_detail,
                "body": [_site_doc(c) for c in dc.body],
                "call_sites": [_site_doc(c) for c in dc.call_sites],
                "unchanged_call_sites": dc.unchanged_call_sites,
            }
            for dc in d.definitions
        ],
        "changes": [_change_doc(c, d.targets, d.toolkits) for c in d.changes],
        "findings": [finding_document(f) for f in d.findings],
        "errors": [{"file": e.file, "reason": e.reason, "input": e.input} for e in d.errors],
    }


def render_json(d: DiffResult) -> str:
    """Deterministic JSON text."""
    return json.dumps(document(d), indent=2, ensure_ascii=False) + "\n"


# -- Markdown and HTML ---------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One change as the Markdown and HTML tables show it (raw text; templates escape)."""

    status: str
    file: str
    line: int
    kind: str
    expression: str
    was: str
    admits_before: str
    admits_after: str
    verdicts: tuple[tuple[str, str, str], ...]
    """(target, before, after) words."""
    delta: str
    severity: str
    findings: tuple[tuple[str, str, str], ...]
    """(severity, rule, message)."""
    guards: str
    toolkits: str = ""
    """Which CUDA releases admit a target, where that differs (:func:`toolkit_cell`)."""


def _row(c: GateChange, d: DiffResult) -> Row:
    return Row(
        status=c.status,
        file=c.gate.file,
        line=c.gate.line,
        kind=c.gate.kind,
        expression=c.gate.expression,
        was=c.old.expression if c.how == How.REWRITTEN and c.old else "",
        admits_before=_admits(c.old),
        admits_after=_admits(c.new),
        verdicts=tuple((v.target, _verdict_word(v.before), _verdict_word(v.after)) for v in c.verdicts),
        delta="; ".join(c.delta),
        severity=_worst(c.findings),
        findings=tuple((f.severity, f.rule, f.message) for f in c.findings),
        guards=c.gate.guards,
        toolkits=toolkit_cell(c, d),
    )


def view(d: DiffResult, limit: int = MARKDOWN_ROWS) -> dict:
    """The plain view-model the templates receive; at most ``limit`` rows per table."""
    sections = []
    counted = summary(d)
    for status in STATUSES:
        rows = [_row(c, d) for c in d.by_status(status)]
        sections.append(
            {
                "status": status,
                "rows": rows[:limit],
                "omitted": max(0, len(rows) - limit),
                "count": section_count(counted, status),
            }
        )
    definitions = [
        {
            "name": dc.name,
            "file": dc.file,
            "old_line": dc.old_line,
            "new_line": dc.new_line,
            "details": (_detail(dc, "old"), _detail(dc, "new")) if _details_differ(dc) else None,
            "body": [_row(c, d) for c in dc.body],
            "call_sites": [_row(c, d) for c in dc.call_sites[: min(limit, CALL_SITE_ROWS)]],
            "omitted": max(0, len(dc.call_sites) - min(limit, CALL_SITE_ROWS)),
            "unchanged": dc.unchanged_call_sites,
        }
        for dc in d.definitions[:DEFINITIONS_SHOWN]
    ]
    return {
        "mode": d.mode,
        "marker": MARKER,
        "version": d.tool_version,
        "targets": [t.label for t in d.targets],
        "old": [(i.path, i.kind) for i in d.old_inputs],
        "new": [(i.path, i.kind) for i in d.new_inputs],
        "summary": counted,
        "headline": headline_lines(d),
        "sections": sections,
        "definitions": definitions,
        "definitions_omitted": max(0, len(d.definitions) - DEFINITIONS_SHOWN),
        "errors": [(e.input, e.file, e.reason) for e in d.errors],
        "icons": markdown.ICONS,
        "toolkit_column": any(toolkit_cell(c, d) for c in d.changes),
    }


def render_markdown(d: DiffResult) -> str:
    """Markdown (a PR comment body in ``pr`` mode: it starts with the sticky marker).

    Tables shrink until the text fits a GitHub comment; the rows left out are counted.
    """
    template = report.templates().get_template("diff.md.j2")
    limit = MARKDOWN_ROWS
    while True:
        text = template.render(**view(d, limit), code=markdown.code, plain=markdown.inline)
        text = "\n".join(line.rstrip() for line in text.splitlines()).strip() + "\n"
        if len(text) <= markdown.LIMIT or limit <= 5:
            return text
        limit //= 2


HTML_FIELDS = (
    "status",
    "file",
    "line",
    "kind",
    "expression",
    "was",
    "admits_before",
    "admits_after",
    "verdicts",
    "delta",
    "severity",
    "findings",
    "resolved",
    "definition",
    "toolkits",
    "guards",
)
"""A change's row in the diff page's data is a list in this order (30,000 rows, names once)."""


def page_data(d: DiffResult) -> dict:
    """The diff page's rows as compact JSON-ready data: strings interned, worst new finding
    first, then the changes that move a verdict, then by place."""
    from auditor.render.html import Interner, shown

    strings = Interner()

    def finding_rows(findings) -> list:
        return [[report.severity_rank(f.severity), strings(f.rule), strings(f.message)] for f in findings]

    def row(c: GateChange) -> list:
        worst = min((report.severity_rank(f.severity) for f in c.findings), default=len(report.SEVERITIES))
        values = {
            "status": strings(c.status),
            "file": strings(c.gate.file),
            "line": c.gate.line,
            "kind": strings(c.gate.kind),
            "expression": strings(c.gate.expression),
            "was": strings(c.old.expression if c.how == How.REWRITTEN and c.old else ""),
            "admits_before": strings(_admits(c.old)),
            "admits_after": strings(_admits(c.new)),
            "verdicts": [[strings(_verdict_word(v.before)), strings(_verdict_word(v.after))] for v in c.verdicts],
            "delta": strings("; ".join(c.delta)),
            "severity": worst,
            "findings": finding_rows(c.findings),
            "resolved": finding_rows(c.resolved),
            "definition": strings(c.definition or ", ".join(c.causes)),
            "toolkits": strings(toolkit_cell(c, d)),
            "guards": strings(c.gate.guards),
        }
        return [values[k] for k in HTML_FIELDS]

    ordered = sorted(
        d.changes,
        key=lambda c: (
            min((report.severity_rank(f.severity) for f in c.findings), default=len(report.SEVERITIES)),
            not c.delta,
            c.gate.file,
            c.gate.line,
        ),
    )
    rows = [row(c) for c in ordered]
    page = {
        "targets": [t.label for t in d.targets],
        "severities": list(report.SEVERITIES),
        "fields": list(HTML_FIELDS),
        "strings": strings.items,
        "rows": rows,
    }
    return {k: v if k == "rows" else shown(v, "\n") for k, v in page.items()}


def render_html(d: DiffResult) -> str:
    """A self-contained HTML page: the summary first (new and resolved findings by severity,
    routes changed per target, definition changes with the sites they reach), then every
    change in a filterable, virtualised table drawn by the page's script from JSON."""
    from auditor.render.html import script_json

    return (
        report.templates()
        .get_template("diff.html.j2")
        .render(**view(d, DEFINITIONS_SHOWN), data=script_json(page_data(d)))
    )


# -- SARIF ---------------------------------------------------------------------------------


def render_sarif(d: DiffResult) -> str:
    """SARIF of the new findings only (those on gates that newly exclude a target)."""
    from auditor.render import sarif

    gates = tuple(c.new for c in d.changes if c.new is not None and c.newly_excludes)
    result = AuditResult(
        tool_version=d.tool_version,
        targets=d.targets,
        inputs=d.new_inputs,
        gates=gates,
        findings=d.findings,
        rules=d.rules,
        toolkits=d.toolkits,
    )
    return sarif.render(result)

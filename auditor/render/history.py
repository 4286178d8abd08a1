"""Reports of a :class:`~auditor.history.timeline.History`: JSON, text, Markdown and HTML.

Pure functions ``History -> str``. Every format states the same things: per release its
summary line (gates, findings, the decisions that route each target away, what is new and
resolved since the release before), then per decision that changed, for each target, the
runs of releases where each of its gates admits or turns the target away, the first release
that admits it, the releases that take it away again, and each change with the definitions
behind it. HTML adds a release × target matrix and draws each decision as a timeline.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from auditor import arch
from auditor.history.timeline import Cause, Cell, DecisionHistory, GateHistory, History, ReleaseSummary, Step
from auditor.model import Verdict
from auditor.render import report
from auditor.render.formats import Format

SCHEMA = "archaudit-history/1"
ABSENT = "absent"
"""A release without the gate (or one that could not be scanned), in runs and cells."""


def _word(v: Cell) -> str:
    return str(v) if v is not None else ABSENT


@dataclass(frozen=True, slots=True)
class Run:
    """Consecutive releases with one verdict for a target."""

    verdict: str
    """``admits``, ``excludes`` or ``absent``."""
    first: str
    last: str

    @property
    def span(self) -> str:
        """``0.6.7``, or ``0.6.7 … 0.7.1``."""
        return self.first if self.first == self.last else f"{self.first} … {self.last}"


def runs(row: Sequence[Cell], labels: Sequence[str]) -> list[Run]:
    """A target's verdicts across the releases as runs, absent stretches at either end left out."""
    out: list[Run] = []
    for v, label in zip(row, labels):
        word = _word(v)
        if out and out[-1].verdict == word:
            out[-1] = Run(word, out[-1].first, label)
        else:
            out.append(Run(word, label, label))
    while out and out[0].verdict == ABSENT:
        out.pop(0)
    while out and out[-1].verdict == ABSENT:
        out.pop()
    return out


def cause_text(c: Cause) -> str:
    """``definition `name` (file:line)`` as the diff names a root cause."""
    return f"definition `{c.name}` ({c.file}:{c.new_line or c.old_line})"


def step_text(s: Step, labels: Sequence[str]) -> str:
    """One change in words: ``0.7.2 (vs 0.7.1): now admits 12.1; rewritten, was `…`; definition …``."""
    parts = ["; ".join(s.delta) or str(s.status)]
    if s.status != "changed":
        parts.append(f"gate {s.status}")
    elif s.how == "rewritten":
        parts.append(f"rewritten, was `{s.was}`")
    parts += [cause_text(c) for c in s.causes]
    if s.findings:
        parts.append("new findings " + ", ".join(s.findings))
    if s.resolved:
        parts.append("resolved " + ", ".join(s.resolved))
    return f"{labels[s.release]} (vs {labels[s.since]}): " + "; ".join(parts)


def _counts(pairs: Sequence[tuple[str, int]] | None) -> str:
    """``2 high, 1 low`` (zeros left out), ``none``."""
    if pairs is None:
        return "—"
    return ", ".join(f"{n:,} {k}" for k, n in pairs if n) or "none"


def _many(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def summary_line(r: ReleaseSummary) -> str:
    """A release's summary line, the same in every human format."""
    if r.failed:
        return f"not scanned: {r.error}"
    routed = ", ".join(f"{t} {n:,}" for t, n in r.routed)
    line = f"{_many(r.gates, 'gate')}, {_many(r.findings, 'finding')}; decisions routing away: {routed}"
    if r.new_findings is not None:
        line += f"; new findings: {_counts(r.new_findings)}; resolved: {_counts(r.resolved_findings)}"
    moves = [f"{t} let in by {n:,}" for t, n in r.opened if n] + [f"{t} turned away by {n:,}" for t, n in r.closed if n]
    if moves:
        line += "; " + ", ".join(moves) + " gate(s)"
    if r.errors:
        line += f"; {r.errors:,} file(s) not scanned"
    return line


def _title(h: History) -> str:
    labels = [r.label for r in h.releases]
    span = labels[0] if len(labels) == 1 else f"{labels[0]} … {labels[-1]}"
    failed = sum(r.failed for r in h.releases)
    return f"{span}: {len(labels)} release(s){f', {failed} not scanned' if failed else ''}"


def _chosen_toolkits(h: History) -> bool:
    """Whether ``--cuda`` chose the toolkits (every known one is not worth a line)."""
    return bool(h.toolkits) and h.toolkits != arch.releases_of()


def _labels(h: History) -> list[str]:
    return [r.label for r in h.releases]


def target_lines(g: GateHistory, labels: Sequence[str]) -> list[tuple[str, str]]:
    """Per target: its runs, the first release that admits it and the regressions, in words."""
    out = []
    for label, row in g.cells:
        text = "; ".join(f"{r.verdict} {r.span}" for r in runs(row, labels))
        first = g.first_admits(label)
        if first is not None and g.opened(label):
            text += f"; first admitted in {labels[first]}"
        back = g.regressions(label)
        if back:
            text += "; turned away again in " + ", ".join(labels[i] for i in back)
        out.append((label, text))
    return out


# -- JSON ----------------------------------------------------------------------------------


def _cause_document(c: Cause) -> dict:
    return {
        "name": c.name,
        "file": c.file,
        "old_line": c.old_line,
        "new_line": c.new_line,
        "old": c.old_detail,
        "new": c.new_detail,
    }


def _step_document(s: Step, labels: Sequence[str]) -> dict:
    return {
        "release": labels[s.release],
        "since": labels[s.since],
        "status": str(s.status),
        "how": str(s.how),
        "line": s.line,
        "expression": s.expression,
        "was": s.was,
        "verdicts": {v.target: {"before": v.before, "after": v.after} for v in s.verdicts},
        "delta": list(s.delta),
        "definitions": [_cause_document(c) for c in s.causes],
        "new_findings": list(s.findings),
        "resolved_findings": list(s.resolved),
    }


def _gate_document(g: GateHistory, labels: Sequence[str]) -> dict:
    targets = [t for t, _ in g.cells]
    return {
        "id": g.id,
        "file": g.file,
        "line": g.line,
        "kind": g.kind,
        "expression": g.expression,
        "context": g.context,
        "package": g.package,
        "rules": list(g.rules),
        "verdicts": {t: [v for v in row] for t, row in g.cells},
        "first_admits": {t: labels[i] if (i := g.first_admits(t)) is not None else None for t in targets},
        "opened": {t: [labels[i] for i in g.opened(t)] for t in targets},
        "regressions": {t: [labels[i] for i in g.regressions(t)] for t in targets},
        "changes": [_step_document(s, labels) for s in g.steps],
    }


def _pairs(pairs: Sequence[tuple[str, int]] | None) -> dict | None:
    return None if pairs is None else dict(pairs)


def _release_document(r: ReleaseSummary) -> dict:
    doc: dict = {"label": r.label, "spec": r.spec}
    if r.failed:
        return {**doc, "status": "failed", "error": r.error}
    return {
        **doc,
        "status": "scanned",
        "kind": r.kind,
        "summary": {
            "gates": r.gates,
            "findings": r.findings,
            "decisions_routed_away": r.decisions,
            "routed_away": dict(r.routed),
            "new_findings": _pairs(r.new_findings),
            "resolved_findings": _pairs(r.resolved_findings),
            "opened": dict(r.opened),
            "closed": dict(r.closed),
            "errors": r.errors,
        },
    }


def document(h: History) -> dict:
    """The ``archaudit-history/1`` document (docs/json-contract.md)."""
    labels = _labels(h)
    doc: dict = {
        "schema": SCHEMA,
        "tool": {"name": "archaudit", "version": h.tool_version},
        "targets": [t.label for t in h.targets],
    }
    if _chosen_toolkits(h):
        doc["cuda"] = list(h.toolkits)
    doc["releases"] = [_release_document(r) for r in h.releases]
    doc["decisions"] = [{"id": d.id, "gates": [_gate_document(g, labels) for g in d.gates]} for d in h.decisions]
    doc["followed"] = h.followed
    return doc


def render_json(h: History) -> str:
    """The history as JSON; the same releases give the same bytes."""
    return json.dumps(document(h), indent=2, ensure_ascii=False) + "\n"


# -- text ----------------------------------------------------------------------------------


def render_text(h: History) -> str:
    """The history for a terminal or a log."""
    from auditor.render.text import printable

    labels = _labels(h)
    width = max(len(x) for x in labels)
    out = [f"archaudit history {_title(h)}; targets {', '.join(t.label for t in h.targets)}", "", "releases:"]
    out += [f"  {r.label:<{width}}  {summary_line(r)}" for r in h.releases]
    out += ["", f"decisions that changed: {len(h.decisions):,} (of {h.followed:,} gates followed)"]
    for d in h.decisions:
        for g in d.gates:
            where = f" [{g.context}]" if g.context else ""
            out.append(f"  {g.file}:{g.line}  {g.kind}  {g.expression}{where}")
            out += [f"      {t}: {text}" for t, text in target_lines(g, labels)]
            out += [f"      {step_text(s, labels)}" for s in g.steps]
    return "\n".join(printable(line) for line in out) + "\n"


# -- Markdown and HTML ---------------------------------------------------------------------


def view(h: History) -> dict:
    """What the Markdown and HTML templates show: plain data, every sentence made here."""
    labels = _labels(h)
    targets = [t.label for t in h.targets]
    return {
        "title": _title(h),
        "version": h.tool_version,
        "targets": targets,
        "cuda": list(h.toolkits) if _chosen_toolkits(h) else [],
        "labels": labels,
        "releases": [
            {
                "label": r.label,
                "spec": r.spec,
                "failed": r.failed,
                "line": summary_line(r),
                "routed": dict(r.routed),
                "opened": dict(r.opened),
                "closed": dict(r.closed),
            }
            for r in h.releases
        ],
        "decisions": [_decision_view(d, labels) for d in h.decisions],
        "followed": h.followed,
    }


def _decision_view(d: DecisionHistory, labels: Sequence[str]) -> dict:
    return {
        "id": d.id,
        "gates": [
            {
                "where": f"{g.file}:{g.line}",
                "kind": g.kind,
                "expression": g.expression,
                "context": g.context,
                "rules": ", ".join(g.rules),
                "targets": [
                    {
                        "target": t,
                        "text": text,
                        "cells": [
                            {"verdict": _word(v), "changed": i in changed, "label": labels[i]}
                            for i, v in enumerate(row)
                        ],
                    }
                    for (t, text), (_, row), changed in zip(target_lines(g, labels), g.cells, _changed_at(g))
                ],
                "steps": [step_text(s, labels) for s in g.steps],
            }
            for g in d.gates
        ],
    }


def _changed_at(g: GateHistory) -> list[set[int]]:
    """Per target, the releases whose change moved its verdict (marked on the timeline)."""
    return [{s.release for s in g.steps for v in s.verdicts if v.target == t and v.phrase} for t, _ in g.cells]


def render_markdown(h: History) -> str:
    """The history as Markdown (an issue, a release note, a wiki page)."""
    from auditor.render import markdown

    text = report.templates().get_template("history.md.j2").render(**view(h), code=markdown.code)
    return "\n".join(line.rstrip() for line in text.splitlines()).strip() + "\n"


def render_html(h: History) -> str:
    """A self-contained page: the release × target matrix, then a timeline per decision."""
    return report.templates().get_template("history.html.j2").render(**view(h), verdicts=[str(v) for v in Verdict])


RENDERERS: dict[Format, Callable[[History], str]] = {
    Format.TEXT: render_text,
    Format.JSON: render_json,
    Format.MARKDOWN: render_markdown,
    Format.HTML: render_html,
}
"""The formats a history is written in (SARIF reports findings, not releases)."""

"""What the human reports (HTML, Markdown, terminal) share: templates, rule metadata, counts.

Everything here is a pure function of an :class:`AuditResult`: rule metadata and source
excerpts arrive in it (``rules``, ``excerpts``) because renderers read no files.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

import jinja2
from markupsafe import Markup

from auditor import model
from auditor.model import AuditResult, Classification, Finding, Gate, RuleInfo, Verdict
from auditor.render.counts import headline, sentence, unreached_note
from auditor.render.json import verdicts
from auditor.render.text import printable

SEVERITIES = tuple(reversed(model.SEVERITIES))
"""Worst first, as reports list them."""
CLASSIFICATIONS = tuple(c for c in Classification if c)
"""What an excluding gate guards, as reports list them."""


def visible(value: Any) -> Any:
    """What a template prints: strings with control characters and bidi overrides written as
    escapes (:func:`~auditor.render.text.printable`); anything else, and markup a renderer
    built as safe (the page data, the stylesheet), as it is. Line breaks and tabs stay: a
    macro's output is a string too, laid out over lines (cells collapse white space themselves)."""
    return printable(value, "\t\n") if isinstance(value, str) and not isinstance(value, Markup) else value


@cache
def templates() -> jinja2.Environment:
    """The ``auditor.reports`` templates: autoescape for HTML, no silent blanks, no raw control characters."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("auditor.reports", "."),
        autoescape=jinja2.select_autoescape(["html", "html.j2"]),
        finalize=visible,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def rules_of(result: AuditResult) -> dict[str, RuleInfo]:
    """Rule metadata by id."""
    return {r.id: r for r in result.rules}


def excludes(gate: Gate, targets) -> bool:
    """Whether the gate turns at least one requested target away."""
    return Verdict.EXCLUDES in verdicts(gate, targets).values()


def findings_by_gate(result: AuditResult) -> dict[tuple[str, str], list[Finding]]:
    """(input, gate id) -> its findings, worst first."""
    out: dict[tuple[str, str], list[Finding]] = {}
    for f in result.findings:
        out.setdefault((f.input, f.gate), []).append(f)
    for fs in out.values():
        fs.sort(key=lambda f: (severity_rank(f.severity), f.rule))
    return out


def severity_rank(severity: str) -> int:
    """0 for the worst severity; unknown ones last."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


def classification(findings: list[Finding]) -> str:
    """A gate's classification as its findings state it ('' when none does)."""
    return next((f.classification for f in findings if f.classification), "")


@dataclass(frozen=True)
class Summary:
    """The counts every report header shows."""

    gates: int
    excluding: int
    findings: int
    errors: int
    decisions: int
    """Decisions that route a target away from a fast path (:mod:`auditor.render.counts`)."""
    runnable: int
    """Of those, the ones whose guarded code the target can run."""
    headline: str
    """The two counts in words, as every format states them."""
    unreached: str
    """Gates not judged because the package never reaches their code, in words ("" when none)."""
    by_severity: tuple[tuple[str, int], ...]
    """Findings per severity, worst first (all severities, zeros included)."""
    by_classification: tuple[tuple[str, int], ...]
    """Excluding gates per classification of their findings; ``unclassified`` when none says."""
    by_package: tuple[tuple[str, int, int, int], ...]
    """(package, gates, excluding gates, findings), most excluding first."""


def summary(result: AuditResult) -> Summary:
    """Counts by severity, classification and package."""
    by_gate = findings_by_gate(result)
    severity = Counter(f.severity for f in result.findings)
    classes: Counter[str] = Counter()
    packages: dict[str, list[int]] = {}
    for g in result.gates:
        row = packages.setdefault(g.package or "(root)", [0, 0, 0])
        row[0] += 1
        fs = by_gate.get((g.input, g.id), [])
        row[2] += len(fs)
        if excludes(g, result.targets):
            row[1] += 1
            classes[classification(fs) or "unclassified"] += 1
    order = [*CLASSIFICATIONS, "unclassified"]
    head = headline(result)
    return Summary(
        gates=len(result.gates),
        excluding=sum(classes.values()),
        findings=len(result.findings),
        errors=len(result.errors),
        decisions=head.decisions,
        runnable=head.runnable,
        headline=sentence(head, ", ".join(t.label for t in result.targets)),
        unreached=unreached_note(head),
        by_severity=tuple((s, severity[s]) for s in SEVERITIES)
        + tuple(sorted((s, n) for s, n in severity.items() if s not in SEVERITIES)),
        by_classification=tuple((c, classes[c]) for c in order if classes[c] or c in CLASSIFICATIONS),
        by_package=tuple(
            sorted(
                ((p, n, excluding, found) for p, (n, excluding, found) in packages.items()),
                key=lambda r: (-r[2], -r[3], r[0]),
            )
        ),
    )

"""Markdown for pull-request comments and issue reports: counts, then the gates that exclude a target.

It must fit a GitHub comment (65,536 characters, with room for the sticky-comment
marker), so the gate list is cut to fit and says how many rows it left out. File links
need a base URL (``--link-base``), which the CLI sets as ``AuditResult.link_base``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from itertools import groupby
from urllib.parse import quote

from auditor import arch
from auditor.model import AuditResult, Gate, Severity, Target
from auditor.render import report
from auditor.rules.roots import vendored
from auditor.verdicts import toolkit_notes

LIMIT = 65_536 - 512
"""GitHub's comment limit, less room for the marker and a note the poster may add."""
ICONS = {Severity.HIGH: "🔴", Severity.MEDIUM: "🟠", Severity.LOW: "🟡", Severity.INFO: "🔵", "": "⚪"}
_CODE = re.compile(r"(`+)(.+?)\1")
_SPACE = re.compile(r"[ \t\n\r\f\v]+")


def _one_line(text: object) -> str:
    """``text`` with runs of ASCII white space as one space; other controls stay, for the
    templates to show as escapes (``report.visible``) rather than as blanks."""
    return _SPACE.sub(" ", str(text)).strip(" ")


def code(text: str) -> str:
    """An inline code span that survives any backticks inside and sits safely in a table cell."""
    text = _one_line(text).replace("|", "\\|")
    fence = "`" * (max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _plain(text: str) -> str:
    for a, b in (
        ("&", "&amp;"),
        ("<", "&lt;"),
        (">", "&gt;"),
        ("|", "\\|"),
        ("*", "\\*"),
        ("_", "\\_"),
        ("[", "\\["),
        ("]", "\\]"),
    ):
        text = text.replace(a, b)
    return text


def inline(text: str) -> str:
    """Prose with backticked code (rule messages) for a table cell: HTML and markdown stay text."""
    text = _one_line(text)
    out, pos = [], 0
    for m in _CODE.finditer(text):
        out += [_plain(text[pos : m.start()]), code(m.group(2))]
        pos = m.end()
    return "".join(out + [_plain(text[pos:])])


def link(base: str, file: str, line: int) -> str:
    """``file:line`` as a code span, linked to ``base/file#Lline`` when a base is given."""
    label = code(f"{file}:{line}")
    if not base:
        return label
    return f"[{label}]({base.rstrip('/')}/{quote(file, safe='/')}#L{line})"


@dataclass(frozen=True)
class Row:
    """One excluding gate as the table shows it."""

    severity: str
    where: str
    expression: str
    admits: str
    rules: str
    classification: str


def _rows(result: AuditResult, base: str) -> list[Row]:
    by_gate = report.findings_by_gate(result)
    rows: list[tuple[tuple, Row]] = []
    for g in result.gates:
        if not report.excludes(g, result.targets):
            continue
        fs = by_gate.get((g.input, g.id), [])
        worst = fs[0].severity if fs else ""
        rank = report.severity_rank(worst) if fs else len(report.SEVERITIES) + 1
        key = (rank, bool(vendored(g.file)[0]), g.input, g.file, g.line, g.id)  # own code before vendored trees
        rows.append(
            (
                key,
                Row(
                    severity=worst,
                    where=link(base, g.file, g.line),
                    expression=code(_shorten(g.expression)),
                    admits=_plain(arch.compact(g.domain, g.admits) + _toolkits(g, result.targets, result.toolkits)),
                    rules=", ".join(sorted({f.rule for f in fs})) or "—",
                    classification=report.classification(fs) or "—",
                ),
            )
        )
    return [r for _, r in sorted(rows, key=lambda kr: kr[0])]


def _toolkits(g: Gate, targets: tuple[Target, ...], toolkits: tuple[str, ...] = ()) -> str:
    """``" (12.1: CUDA ≥ 12.9)"`` where the toolkit changes a requested target's answer."""
    notes = toolkit_notes(g, targets, toolkits)
    return " (" + "; ".join(f"{t}: {n}" for t, n in notes.items()) + ")" if notes else ""


def _shorten(text: str, width: int = 120) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _groups(rows: list[Row]) -> list[tuple[str, list[Row]]]:
    return [(severity, list(group)) for severity, group in groupby(rows, key=lambda r: r.severity)]


def _left_out(rows: list[Row]) -> str:
    """What a cut left out, by severity: ``189 medium, 15,163 without a finding``."""
    return ", ".join(f"{n:,} {s or 'without a finding'}" for s, n in Counter(r.severity for r in rows).items())


def render(result: AuditResult) -> str:
    """The comment body; the gate table is cut to fit :data:`LIMIT`, saying how much was left out."""
    template = report.templates().get_template("report.md.j2")
    rows = _rows(result, result.link_base)
    summary = report.summary(result)

    def body(shown: int) -> str:
        return template.render(
            result=result,
            summary=summary,
            targets=", ".join(t.label for t in result.targets),
            groups=_groups(rows[:shown]),
            omitted=len(rows) - shown,
            left_out=_left_out(rows[shown:]),
            icons=ICONS,
            code=code,
        )

    text = body(len(rows))
    if len(text) <= LIMIT:
        return text
    lo, hi = 0, len(rows)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(body(mid)) <= LIMIT:
            lo = mid
        else:
            hi = mid - 1
    return body(lo)

"""One self-contained, interactive HTML report: header, architecture matrix, filters, drill-down.

A full scan can hold tens of thousands of gates, so the page carries the data once, as
compact JSON in a ``<script type="application/json">`` (repeated strings and admitted sets
interned), and its script draws only the rows on screen and the one detail open. The
header is plain HTML from jinja2 (autoescaped); the script builds every data-bearing node
with ``textContent``, so scanned text can never become markup.

Code excerpts need source text, which a renderer may not read: the scan gathers the lines
of each gate's :func:`~auditor.model.excerpt_windows` into ``AuditResult.excerpts``.
Pygments highlights them here, into (class, text) runs the script turns into spans.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from markupsafe import Markup
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import CudaLexer, PythonLexer
from pygments.styles import get_style_by_name
from pygments.token import STANDARD_TYPES, _TokenType

from auditor import arch, verdicts
from auditor.model import AuditResult, Domain, excerpt_windows
from auditor.render import report
from auditor.render.text import INVISIBLE, printable
from auditor.rules.roots import vendored

STYLE = "vs"
"""The pygments style of the excerpts: few colours, so runs of equal style merge into few spans."""
GATE_FIELDS = (
    "id",
    "file",
    "line",
    "end_line",
    "kind",
    "expression",
    "domain",
    "admits",
    "verdicts",
    "unknowns",
    "resolved_by",
    "features",
    "resolutions",
    "chain",
    "body",
    "context",
    "findings",
    "windows",
    "variants",
    "guards",
    "name_implies",
    "compact",
    "toolkits",
)
"""A gate's row in the page data is a list in this order (names would repeat 20k times)."""
_SCRIPT_UNSAFE = re.compile(rf"[<>&{INVISIBLE}]")
"""Characters JSON may carry raw that must not reach a ``<script>`` element: markup, and the
invisible ones (C1 controls, bidi overrides, line separators). json.dumps escapes C0 itself."""


def _runs(numbers: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted runs of consecutive numbers as (first, last)."""
    out: list[list[int]] = []
    for n in sorted(numbers):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return [(a, b) for a, b in out]


class Interner:
    """Repeated values stored once; rows refer to them by index."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.items: list[Any] = []

    def __call__(self, value: Any) -> int:
        key = json.dumps(value, sort_keys=True) if isinstance(value, (list, dict)) else value
        n = self.index.get(key)
        if n is None:
            n = self.index[key] = len(self.items)
            self.items.append(value)
        return n


@cache
def _by_style() -> dict[_TokenType, str]:
    """Token type -> one CSS class per distinct look in :data:`STYLE` ('' for unstyled text)."""
    style = get_style_by_name(STYLE)
    first: dict[tuple, str] = {}
    out = {}
    for token, css in STANDARD_TYPES.items():
        look = tuple(sorted((k, v) for k, v in style.style_for_token(token).items() if v and "ansi" not in k))
        out[token] = first.setdefault(look, css) if look else ""
    return out


@cache
def _short_class(token: _TokenType) -> str:
    while token not in STANDARD_TYPES and token.parent is not None:
        token = token.parent
    return _by_style()[token]


@cache
def _lexer(language: str) -> Lexer:
    options = {"stripnl": False, "ensurenl": False}
    return PythonLexer(**options) if language == "python" else CudaLexer(**options)


def _highlight(lines: Mapping[int, str], language: str, classes: Interner) -> list:
    """Runs of consecutive lines as ``[first_line, [[class, text, class, text, ...], ...]]``."""
    out = []
    for first, last in _runs(lines):
        text = "\n".join(lines[n].rstrip("\r") for n in range(first, last + 1))
        rows: list[list] = [[]]
        for token, value in _lexer(language).get_tokens(text):
            cls = classes(_short_class(token))
            for i, piece in enumerate(value.split("\n")):
                if i:
                    rows.append([])
                if piece:
                    row = rows[-1]
                    if row and row[-2] == cls:
                        row[-1] += piece
                    else:
                        row += [cls, piece]
        out.append([first, rows[: last - first + 1]])
    return out


def view(result: AuditResult) -> dict:
    """The page's data as one JSON-ready dict; repeated strings, sets and facts are interned."""
    targets = result.targets
    strings, sets, facts, resolutions, classes = Interner(), Interner(), Interner(), Interner(), Interner()
    classes("")
    columns = {"target": list(arch.target_order()), "device": list(arch.capabilities())}
    position = {d: {a: i for i, a in enumerate(cols)} for d, cols in columns.items()}
    files = Interner()
    by_gate = report.findings_by_gate(result)
    rules = report.rules_of(result)
    excerpts = {(e.input, e.file): dict(e.lines) for e in result.excerpts}
    findings: list = []
    gates: list = []
    for g in result.gates:
        fs = by_gate.get((g.input, g.id), [])
        first = len(findings)
        # A finding: [rule, severity rank, gate index, message, confidence, classification,
        # root cause, vendored tree, decision, other sites [[file, line], ...]].
        findings += [
            [
                strings(f.rule),
                report.severity_rank(f.severity),
                len(gates),
                strings(f.message),
                strings(f.confidence),
                strings(f.classification),
                strings(f.root),
                strings(f.vendored or vendored(g.file)[0]),
                strings(f.decision),
                [[strings(file), line] for file, line in f.also],
            ]
            for f in fs
        ]
        order = position.get(g.domain, {})
        row = {  # files are [input, path, package, language]
            "id": g.id,
            "file": files([g.input, g.file, g.package or "(root)", g.language]),
            "line": g.line,
            "end_line": g.end_line,
            "kind": strings(g.kind),
            "expression": strings(g.expression),
            "domain": 0 if g.domain == Domain.TARGET else 1,
            # The matrix shows where the guarded code may run: for a rejection, what it lets through.
            "admits": sets(sorted(order[a] for a in verdicts.allowed(g) if a in order)),
            "verdicts": [int(verdicts.turns_away(g, t)) for t in targets],
            "unknowns": [strings(u) for u in g.unknowns],
            "resolved_by": strings(g.resolved_by),
            "features": [
                [strings(f.token), f.line, facts([f.feature, f.min_arch, [list(p) for p in f.on_target], f.notes])]
                for f in g.features
            ],
            "resolutions": [resolutions([r.name, r.file, r.line, r.detail]) for r in g.resolutions],
            "chain": [strings(c) for c in g.chain],
            "body": list(g.body_lines),
            "context": strings(g.context),
            "findings": list(range(first, len(findings))),
            "windows": excerpt_windows(g),
            "variants": [
                list(arch.admitting_variants(g.admits, t)) if g.domain == Domain.TARGET else [] for t in targets
            ],
            "guards": strings(g.guards),
            "name_implies": [strings(a) for a in g.name_implies],
            "compact": strings(arch.compact(g.domain, g.admits)),
            "toolkits": [
                [strings(label), strings(note)]
                for label, note in verdicts.toolkit_notes(g, targets, result.toolkits).items()
            ],
        }
        gates.append([row[k] for k in GATE_FIELDS])
    code = {}
    for n, (inp, path, _, language) in enumerate(files.items):
        lines = excerpts.get((inp, path))
        if lines:
            code[n] = _highlight(lines, language, classes)
    page = {
        "tool": {"name": "archaudit", "version": result.tool_version},
        "inputs": [[i.path, i.kind] for i in result.inputs],
        "targets": [[t.label, t.capability, list(t.variants)] for t in targets],
        "columns": columns,
        "emphasis": {
            d: [i for i, a in enumerate(cols) if _is_target_column(d, a, targets)] for d, cols in columns.items()
        },
        "severities": list(report.SEVERITIES),
        "files": files.items,
        "strings": strings.items,
        "sets": sets.items,
        "facts": facts.items,
        "resolutions": resolutions.items,
        "fields": GATE_FIELDS,
        "gates": gates,
        "findings": findings,
        "classes": classes.items,
        "code": code,
        "rules": {
            r.id: {
                "name": r.name,
                "severity": r.severity,
                "rationale": r.rationale,
                "remediation": r.remediation,
                "references": list(r.references),
            }
            for r in sorted(rules.values(), key=lambda r: r.id)
        },
    }
    # Scanned text is shown as the page's text: control characters and bidi overrides as
    # visible escapes, as in every report; tabs kept in excerpts, line breaks kept everywhere
    # (the script lays them out; an escaped one would read as a literal ``\n``). Gate rows hold no text.
    return {k: v if k == "gates" else shown(v, "\t\n" if k == "code" else "\n") for k, v in page.items()}


def shown(value: Any, keep: str = "") -> Any:
    """``value`` with every string in it made printable (lists and dict values walked)."""
    if isinstance(value, str):
        return printable(value, keep)
    if isinstance(value, list):
        return [shown(v, keep) for v in value]
    if isinstance(value, dict):
        return {k: shown(v, keep) for k, v in value.items()}
    return value


def _is_target_column(domain: str, column: str, targets) -> bool:
    if domain == Domain.TARGET:
        return any(column in t.variants for t in targets)
    return any(column == t.capability for t in targets)


def script_json(data: Any) -> Markup:
    """JSON safe inside ``<script>``: no ``<``, ``>`` or ``&`` can end the element or open a comment,
    and no control character or bidi override is carried raw."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return Markup(_SCRIPT_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


@cache
def _pygments_css() -> Markup:
    return Markup(HtmlFormatter(style=STYLE).get_style_defs(".code"))


def render(result: AuditResult) -> str:
    """The report page."""
    summary = report.summary(result)
    data = view(result)
    code = data.pop("code")
    return (
        report.templates()
        .get_template("report.html.j2")
        .render(
            result=result,
            summary=summary,
            data=script_json(data),
            code=script_json(code),
            pygments_css=_pygments_css(),
            targets=[t.label for t in result.targets],
            rules=sorted(data["rules"]),
            rule_ids=sorted({f.rule for f in result.findings} | set(data["rules"])),
            packages=[p for p, *_ in summary.by_package],
            severities=report.SEVERITIES,
            classifications=[c for c, _ in summary.by_classification],
            domains=[(d, sum(1 for g in result.gates if g.domain == d)) for d in Domain],
            roots=sum(1 for f in result.findings if f.gate),  # the page's script groups them by root cause
        )
    )

"""Views of a result the command line asks for before any renderer runs, so every format
shows the same thing: only the gates that exclude a target, vendored trees named by the
project's own globs, and per-rule statistics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

import pathspec

from auditor.model import SEVERITIES, AuditResult
from auditor.render.report import rules_of
from auditor.verdicts import turns_away


def only_excluding(result: AuditResult) -> AuditResult:
    """The result narrowed to gates that turn a requested target away, and their findings
    (a finding without a gate, an unused suppression, is about no gate and goes too)."""
    kept = [g for g in result.gates if any(turns_away(g, t) for t in result.targets)]
    ids = {(g.input, g.id) for g in kept}
    return replace(
        result,
        gates=tuple(kept),
        findings=tuple(f for f in result.findings if (f.input, f.gate) in ids),
    )


def tree_name(glob: str) -> str:
    """What a vendored glob calls its tree: its literal folder part (``third_party/**`` -> ``third_party``)."""
    parts = [p for p in glob.strip("/").split("/") if p and not any(c in p for c in "*?[")]
    return parts[-1] if parts else glob


def mark_vendored(result: AuditResult, globs: Sequence[str]) -> AuditResult:
    """Findings in files matching the project's vendored ``globs`` (gitignore syntax) marked as
    vendored, in addition to the folders archaudit knows (``data/vendored.json``)."""
    if not globs:
        return result
    specs = [(tree_name(g), pathspec.GitIgnoreSpec.from_lines([g])) for g in globs]

    def tree(path: str) -> str:
        return next((name for name, spec in specs if spec.match_file(path)), "")

    return replace(
        result, findings=tuple(f if f.vendored else replace(f, vendored=tree(f.file)) for f in result.findings)
    )


def statistics(result: AuditResult) -> str:
    """Findings per rule, most first (``--statistics``), as ruff prints them."""
    counted = Counter(f.rule for f in result.findings)
    rules = rules_of(result)
    rank = {s: i for i, s in enumerate(reversed(SEVERITIES))}
    severity = {f.rule: f.severity for f in result.findings}
    rows = sorted(counted.items(), key=lambda kv: (-kv[1], rank.get(severity[kv[0]], 99), kv[0]))
    width = max((len(f"{n:,}") for _, n in rows), default=1)
    lines = [
        f"{n:>{width},}  {rule:<8} {severity[rule]:<6}  {rules[rule].name if rule in rules else ''}".rstrip()
        for rule, n in rows
    ]
    lines.append(f"{sum(counted.values()):>{width},}  findings")
    return "\n".join(lines) + "\n"

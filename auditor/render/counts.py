"""The headline every format states alike: decisions, not lines.

A decision (an ``if``/``elif``/``else`` chain, an ``#if`` group, a table of per-architecture
values) that routes a requested target away from a fast path counts once, however many of its
branches and use sites carry findings; of those, the ones whose guarded code the target can
run (every feature it uses is available there) are the cheapest to widen. Counted from the
findings of the rules that judge routes (``Finding.decision``), so text, Markdown, HTML,
SARIF and JSON cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass

from auditor.model import AuditResult, Classification, Verdict
from auditor.verdicts import verdicts


@dataclass(frozen=True, slots=True)
class Headline:
    """The counts at the top of every report."""

    decisions: int
    """Decisions that route a requested target away from a fast path."""
    runnable: int
    """Of those, decisions whose guarded code the target can run (classified conservative)."""
    gates: int
    excluding: int
    """Gates whose own condition is false on a requested target (most of them are not findings)."""
    findings: int
    errors: int


def headline(result: AuditResult) -> Headline:
    """The headline counts of one result."""
    routed: dict[tuple[str, str], bool] = {}
    for f in result.findings:
        if f.decision:
            key = (f.input, f.decision)
            routed[key] = routed.get(key, False) or f.classification == Classification.CONSERVATIVE
    excluding = sum(1 for g in result.gates if Verdict.EXCLUDES in verdicts(g, result.targets).values())
    return Headline(
        decisions=len(routed),
        runnable=sum(routed.values()),
        gates=len(result.gates),
        excluding=excluding,
        findings=len(result.findings),
        errors=len(result.errors),
    )


def sentence(h: Headline, targets: str) -> str:
    """The headline in words, the same in every format."""
    decided = "decision routes" if h.decisions == 1 else "decisions route"
    return (
        f"{h.decisions:,} {decided} {targets} away from a fast path "
        f"({h.runnable:,} of them guard code {targets} can run)"
    )

"""The headline every format states alike: decisions, not lines.

A decision (an ``if``/``elif``/``else`` chain, an ``#if`` group, a table of per-architecture
values) that routes a requested target away from a fast path counts once, however many of its
branches and use sites carry findings; of those, the ones whose guarded code the target can
run (every feature it uses is available there) are the cheapest to widen. Counted from the
findings of the rules that judge routes (``Finding.decision``), so text, Markdown, HTML,
SARIF and JSON cannot disagree.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from auditor.model import SEVERITIES, AuditResult, Classification, DiffResult, GateChange, Reach, Status, Verdict
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
    unreached: int = 0
    """Gates in vendored code the package never includes, imports or calls: listed, not judged."""


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
        unreached=sum(1 for g in result.gates if g.reach),
    )


REACH = {
    Reach.UNINCLUDED: "a vendored header that no translation unit or JIT source of the input includes",
    Reach.UNIMPORTED: "a vendored module that nothing of the package imports",
    Reach.TEST: "a test of the package, not a path the package runs",
    Reach.UNBUILT: "code the package builds only for another generation (its JIT flags or run-time compile options)",
    Reach.UNCALLED: "a function of vendored code that no file able to see its definition calls",
    Reach.PROGRAM: "a standalone program (its own main()), not the library the package loads",
}
"""Why a gate is not judged, by its :attr:`~auditor.model.Gate.reach`."""


def unreached_note(h: Headline) -> str:
    """Why some gates have no finding, in words ("" when every gate was judged)."""
    if not h.unreached:
        return ""
    gates = "gate" if h.unreached == 1 else "gates"
    return (
        f"{h.unreached:,} {gates} in tests and standalone programs, in code built only for other generations and in"
        " vendored code the package never includes, imports or calls, not judged (--unreached judges them)"
    )


def sentence(h: Headline, targets: str) -> str:
    """The headline in words, the same in every format."""
    decided = "decision routes" if h.decisions == 1 else "decisions route"
    return (
        f"{h.decisions:,} {decided} {targets} away from a fast path "
        f"({h.runnable:,} of them guard code {targets} can run)"
    )


STATUSES = (Status.ADDED, Status.CHANGED, Status.REMOVED)


@dataclass(frozen=True, slots=True)
class DiffHeadline:
    """The counts of a diff, computed once: every format and every section states these."""

    statuses: tuple[tuple[Status, int, int], ...]
    """(status, changes, of them shown under a definition change rather than in their section)."""
    unchanged: int
    definitions: int
    newly_excludes: tuple[tuple[str, int], ...]
    """Per target: decisions that turn it away now and did not before, with a new finding that
    says so (the thousands of added gates no rule judges, ``#if __CUDA_ARCH__ < 700`` in a
    vendored tree, are counted as added gates, not as routes)."""
    now_admits: tuple[tuple[str, int], ...]
    """Per target: decisions whose gate still stands and lets it in now (a removed gate is not one)."""
    new_findings: tuple[tuple[str, int], ...]
    """Findings the new side has and the old did not, per severity, worst first."""
    resolved_findings: tuple[tuple[str, int], ...]
    """Findings the old side had and the new does not, per severity, worst first."""
    failing: int
    """New findings on gates that newly exclude a target: what ``--fail-on`` and SARIF see."""
    errors: int

    def count(self, status: Status) -> int:
        return next(n for s, n, _ in self.statuses if s == status)

    def explained(self, status: Status) -> int:
        return next(e for s, _, e in self.statuses if s == status)


def _decision(c: GateChange) -> str:
    """The decision a change belongs to (its findings say; else the gate is its own)."""
    return next((f.decision for f in (*c.findings, *c.resolved) if f.decision), c.gate.id)


def _by_severity(findings) -> tuple[tuple[str, int], ...]:
    counted = Counter(f.severity for f in findings)
    return tuple((s, counted[s]) for s in reversed(SEVERITIES))


def diff_headline(d: DiffResult) -> DiffHeadline:
    """The headline counts of one diff."""
    labels = [t.label for t in d.targets]
    away: dict[str, set[str]] = {t: set() for t in labels}
    back: dict[str, set[str]] = {t: set() for t in labels}
    for c in d.changes:
        for v in c.verdicts:
            if v.newly_excludes and c.findings:
                away[v.target].add(_decision(c))
            elif v.now_admits:
                back[v.target].add(_decision(c))
    return DiffHeadline(
        statuses=tuple(
            (s, len(d.by_status(s, explained=True)), sum(1 for c in d.by_status(s, explained=True) if c.explained))
            for s in STATUSES
        ),
        unchanged=d.unchanged,
        definitions=len(d.definitions),
        newly_excludes=tuple((t, len(away[t])) for t in labels),
        now_admits=tuple((t, len(back[t])) for t in labels),
        new_findings=_by_severity(f for c in d.changes for f in c.findings),
        resolved_findings=_by_severity(f for c in d.changes for f in c.resolved),
        failing=len(d.findings),
        errors=len(d.errors),
    )

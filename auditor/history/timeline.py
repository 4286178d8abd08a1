"""Releases joined into one history: each gate followed from release to release, and what
changed for each requested target, with the definition changes behind it.

Consecutive scanned releases are compared by :func:`auditor.diff.compare` (its matching, its
verdict deltas, its root causes) and followed through :func:`auditor.diff.matches`, so a
gate that moved, was renamed or had its condition rewritten stays one line of the history.
A release that could not be scanned is skipped: the next one is compared with the last one
scanned. A gate is listed when a release changes what it decides for a target (the diff's
``now admits`` / ``newly excludes``; an added gate only with a new finding that says so, as the
diff's headline counts it); gates are grouped by the decision their findings name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from auditor import diff
from auditor.history.engines import Scanned
from auditor.model import (
    SEVERITIES,
    AuditResult,
    DefinitionChange,
    DiffResult,
    Finding,
    Gate,
    GateChange,
    How,
    Status,
    Target,
    Verdict,
    VerdictDelta,
)
from auditor.verdicts import verdicts

Cell = Verdict | None
"""A gate's verdict for a target in one release; None where it is absent or the release failed."""


@dataclass(frozen=True, slots=True)
class Cause:
    """A changed predicate or derived macro that a step goes through (the diff's root cause)."""

    name: str
    file: str
    old_line: int
    new_line: int
    old_detail: str = ""
    new_detail: str = ""


@dataclass(frozen=True, slots=True)
class Step:
    """One gate's change between a release and the last one scanned before it."""

    release: int
    """Index (in :attr:`History.releases`) of the release that made the change."""
    since: int
    """Index of the release it is compared with."""
    status: Status
    how: How
    verdicts: tuple[VerdictDelta, ...]
    line: int
    expression: str
    was: str = ""
    """The condition before, when it was rewritten."""
    causes: tuple[Cause, ...] = ()
    findings: tuple[str, ...] = ()
    """Rules that newly fire on the gate (their ids)."""
    resolved: tuple[str, ...] = ()
    """Rules that no longer fire on it."""

    @property
    def delta(self) -> tuple[str, ...]:
        """``now admits 12.1``, ``newly excludes 12.0``."""
        return tuple(v.phrase for v in self.verdicts if v.phrase)


@dataclass(frozen=True, slots=True)
class GateHistory:
    """One gate followed through the releases (as it reads in the newest release that has it)."""

    id: str
    file: str
    line: int
    kind: str
    expression: str
    context: str
    package: str
    cells: tuple[tuple[str, tuple[Cell, ...]], ...]
    """Per requested target, its verdict in each release."""
    steps: tuple[Step, ...]
    rules: tuple[str, ...] = ()
    """Every rule that fired on it in some release."""

    def row(self, target: str) -> tuple[Cell, ...]:
        """The target's verdict in each release."""
        return dict(self.cells)[target]

    def first_admits(self, target: str) -> int | None:
        """The first release that admits the target (None: none does)."""
        return next((i for i, v in enumerate(self.row(target)) if v == Verdict.ADMITS), None)

    def opened(self, target: str) -> tuple[int, ...]:
        """Releases that let the target in where the release before it (of those with the gate) turned it away."""
        return _turns(self.row(target), Verdict.EXCLUDES, Verdict.ADMITS)

    def regressions(self, target: str) -> tuple[int, ...]:
        """Releases that turn the target away again after an earlier one let it in."""
        return _turns(self.row(target), Verdict.ADMITS, Verdict.EXCLUDES)


def _turns(row: Sequence[Cell], before: Verdict, after: Verdict) -> tuple[int, ...]:
    out = []
    last: Cell = None
    for i, v in enumerate(row):
        if v is None:
            continue
        if last == before and v == after:
            out.append(i)
        last = v
    return tuple(out)


@dataclass(frozen=True, slots=True)
class DecisionHistory:
    """The gates of one decision (an ``if``/``elif`` chain, an ``#if`` group) that changed."""

    id: str
    """The id of the gate that names the decision (its first branch), in the newest release that has it."""
    gates: tuple[GateHistory, ...]
    """In file order."""

    @property
    def first_step(self) -> int:
        """The release of its earliest change."""
        return min(s.release for g in self.gates for s in g.steps)


@dataclass(frozen=True, slots=True)
class ReleaseSummary:
    """One release of the history, as its summary line states it."""

    label: str
    spec: str
    kind: str = ""
    """The input kind (``wheel``, ``sdist``, ``dir``); "" when it failed."""
    error: str = ""
    """Why it could not be scanned ("" when it was)."""
    gates: int = 0
    findings: int = 0
    decisions: int = 0
    """Decisions that route a requested target away (the scan's headline)."""
    routed: tuple[tuple[str, int], ...] = ()
    """Per target, the decisions that route it away."""
    new_findings: tuple[tuple[str, int], ...] | None = None
    """Per severity (worst first), findings new since the release compared with; None for the first."""
    resolved_findings: tuple[tuple[str, int], ...] | None = None
    opened: tuple[tuple[str, int], ...] = ()
    """Per target, the gates listed that let it in from this release."""
    closed: tuple[tuple[str, int], ...] = ()
    """Per target, the gates listed that turn it away from this release."""
    errors: int = 0
    """Files that could not be scanned."""

    @property
    def failed(self) -> bool:
        """The release could not be scanned at all."""
        return bool(self.error)


@dataclass(frozen=True, slots=True)
class History:
    """Everything a history report needs; renderers are pure functions of this."""

    tool_version: str
    targets: tuple[Target, ...]
    releases: tuple[ReleaseSummary, ...]
    """Oldest first, as compared."""
    decisions: tuple[DecisionHistory, ...]
    """By their first change, then place."""
    followed: int = 0
    """Gates followed through the releases (listed or not)."""
    toolkits: tuple[str, ...] = ()


class _Track:
    """A gate being followed: its verdict per release, its steps, its latest record."""

    def __init__(self, releases: int, targets: Sequence[Target]):
        self.cells: dict[str, list[Cell]] = {t.label: [None] * releases for t in targets}
        self.steps: list[Step] = []
        self.rules: set[str] = set()
        self.gate: Gate | None = None
        self.decision: int | None = None

    def see(self, k: int, gate: Gate, targets: Sequence[Target], rules: Sequence[str]) -> None:
        self.gate = gate
        for label, v in verdicts(gate, targets).items():
            self.cells[label][k] = v
        self.rules.update(rules)


def _causes(c: GateChange, d: DiffResult) -> tuple[Cause, ...]:
    """The changed definitions a change belongs to or goes through, as the diff found them."""
    by_key: dict[str, DefinitionChange] = {}
    for x in d.definitions:
        by_key.setdefault(x.key, x)
        by_key.setdefault(f"{x.name}@{diff.match_path(x.file)}", x)
    out = []
    for key in (c.definition, *c.causes):
        found = by_key.get(key) if key else None
        if found is not None:
            out.append(
                Cause(found.name, found.file, found.old_line, found.new_line, found.old_detail, found.new_detail)
            )
    return tuple(dict.fromkeys(out))


def _listed(c: GateChange) -> bool:
    """A change the history shows: a matched gate whose verdict moved, or a gate added that
    turns a target away with a new finding saying so."""
    if not c.delta:
        return False
    return c.status == Status.CHANGED or bool(c.findings)


def _routed(result: AuditResult, targets: Sequence[Target]) -> tuple[tuple[str, int], ...]:
    """Per target, the decisions whose route findings sit on a gate that turns it away."""
    gates = {g.id: g for g in result.gates}
    away: dict[str, set[str]] = {t.label: set() for t in targets}
    for f in result.findings:
        g = gates.get(f.gate)
        if not f.decision or g is None:
            continue
        for label, v in verdicts(g, targets).items():
            if v == Verdict.EXCLUDES:
                away[label].add(f.decision)
    return tuple((t.label, len(away[t.label])) for t in targets)


def _decisions(result: AuditResult) -> int:
    """Decisions that route a requested target away: the scan's headline count
    (:func:`auditor.render.counts.headline`; a test holds the two together)."""
    return len({(f.input, f.decision) for f in result.findings if f.decision})


def _by_severity(findings) -> tuple[tuple[str, int], ...]:
    """Per severity, worst first, zeros included (as the diff's headline counts them)."""
    counted = Counter(f.severity for f in findings)
    return tuple((str(s), counted[s]) for s in reversed(SEVERITIES))


def _by_rule(findings: Sequence[Finding]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for f in findings:
        out.setdefault(f.gate, []).append(f.rule)
    return out


def build(scans: Sequence[Scanned], targets: Sequence[Target], toolkits: tuple[str, ...] = ()) -> History:
    """The history of the releases scanned, in the order given (oldest first)."""
    targets = tuple(targets)
    n = len(scans)
    tracks: list[_Track] = []
    following: dict[str, int] = {}
    """Gate id in the last release scanned -> its track."""
    previous: tuple[int, AuditResult] | None = None
    summaries: list[ReleaseSummary] = []
    opened: list[Counter[str]] = [Counter() for _ in scans]
    closed: list[Counter[str]] = [Counter() for _ in scans]
    tool_version = ""
    for k, s in enumerate(scans):
        r = s.result
        if r is None:
            summaries.append(ReleaseSummary(s.release.label, s.release.spec, error=s.error or "not scanned"))
            continue
        tool_version = tool_version or r.tool_version
        rules = _by_rule(r.findings)
        current: dict[str, int] = {}
        d: DiffResult | None = None
        if previous is not None:
            j, old = previous
            for a, b in diff.matches(old, r):
                current[b.id] = following[a.id]
            d = diff.compare(old, r, targets)
        for g in r.gates:
            if g.id not in current:
                current[g.id] = len(tracks)
                tracks.append(_Track(n, targets))
            tracks[current[g.id]].see(k, g, targets, rules.get(g.id, ()))
        if d is not None and previous is not None:
            for c in d.changes:
                if not _listed(c):
                    continue
                t = current[c.new.id] if c.new is not None else following[c.gate.id]
                tracks[t].steps.append(
                    Step(
                        k,
                        previous[0],
                        c.status,
                        c.how,
                        c.verdicts,
                        c.gate.line,
                        c.gate.expression,
                        c.old.expression if c.how == How.REWRITTEN and c.old is not None else "",
                        _causes(c, d),
                        tuple(sorted({f.rule for f in c.findings})),
                        tuple(sorted({f.rule for f in c.resolved})),
                    )
                )
                for v in c.verdicts:
                    if v.now_admits:
                        opened[k][v.target] += 1
                    elif v.newly_excludes:
                        closed[k][v.target] += 1
        for f in r.findings:
            if f.decision and f.gate in current and f.decision in current:
                tracks[current[f.gate]].decision = current[f.decision]
        summaries.append(
            ReleaseSummary(
                s.release.label,
                s.release.spec,
                kind=r.inputs[0].kind if r.inputs else "",
                gates=len(r.gates),
                findings=len(r.findings),
                decisions=_decisions(r),
                routed=_routed(r, targets),
                new_findings=_by_severity(f for c in d.changes for f in c.findings) if d else None,
                resolved_findings=_by_severity(f for c in d.changes for f in c.resolved) if d else None,
                opened=tuple((t.label, opened[k][t.label]) for t in targets),
                closed=tuple((t.label, closed[k][t.label]) for t in targets),
                errors=len(r.errors),
            )
        )
        following, previous = current, (k, r)
    groups: dict[int, list[int]] = {}
    for i, track in enumerate(tracks):
        if track.steps:
            groups.setdefault(track.decision if track.decision is not None else i, []).append(i)
    decisions = []
    for head, members in groups.items():
        shown = sorted((_gate_history(tracks[i]) for i in members), key=lambda g: (g.file, g.line, g.id))
        named = tracks[head].gate
        decisions.append(DecisionHistory(named.id if named else shown[0].id, tuple(shown)))
    decisions.sort(key=lambda x: (x.first_step, x.gates[0].file, x.gates[0].line, x.id))
    return History(tool_version, targets, tuple(summaries), tuple(decisions), len(tracks), toolkits)


def _gate_history(t: _Track) -> GateHistory:
    g = t.gate
    assert g is not None
    return GateHistory(
        g.id,
        g.file,
        g.line,
        str(g.kind),
        g.expression,
        g.context,
        g.package,
        tuple((label, tuple(row)) for label, row in t.cells.items()),
        tuple(t.steps),
        tuple(sorted(t.rules)),
    )

"""Decisions and routes: the branches a gate is one of, and which branch each target takes.

A gate is one branch of a decision: an ``if``/``elif``/``else`` chain, an ``#if``/``#elif``/
``#else`` group, an early-return sequence of adjacent tests with disjoint admitted sets, or a
table of side-by-side per-architecture constants (``sm120a_flags``, ``sm121a_flags``). What a target loses is decided by the whole decision, not by one line's
condition: ``elif major == 12 and minor == 0: … elif major == 12 and minor == 1: …`` gives
each 12.x its own branch and excludes nothing. The chains the extractors write
(``Gate.chain``: enclosing conditions, negated earlier siblings, its own) are enough to
rebuild the branches in order.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

from auditor import arch
from auditor.arch import Capability
from auditor.model import Gate, GateKind, Guards, Target
from auditor.verdicts import capabilities_of

_NEGATED = re.compile(r"^(?:!|not )\((.*)\)$", re.S)
"""How the extractors write an earlier sibling in a chain: ``!(cond)`` (C) or ``not (cond)`` (Python)."""

NEAR = 5
"""At most this many lines between a branch's end and the next branch of the same decision
(its ``elif``/``#else``); further apart, two statements with complementary conditions are two
decisions."""

TABLE_KINDS = frozenset({GateKind.GENCODE_FLAGS, GateKind.MAJOR_LIST})
"""Kinds that are values, not tests: consecutive ones in one function form a table."""
TABLE_GAP = 3
"""At most this many lines between two rows of one table."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The branches of one decision, in source order."""

    branches: tuple[Gate, ...]
    table: bool = False
    """Side-by-side values (per-architecture flags or lists) rather than one chain of tests."""

    @property
    def id(self) -> str:
        """The first branch's gate id: what a report counts decisions by."""
        return self.branches[0].id

    def route(self, target: Target) -> Gate | None:
        """The branch ``target`` takes: the first that may be taken on it; None when it takes
        none (the decision skips the guarded code there)."""
        return next((b for b in self.branches if takes(b, target)), None)

    def is_else(self, branch: Gate) -> bool:
        """The branch is the chain's ``else``: its chain only negates the branches before it."""
        i = self.branches.index(branch)
        if i == 0 or self.table or not branch.chain or not self.branches[i - 1].chain:
            return False
        m = _NEGATED.match(branch.chain[-1])
        return m is not None and m.group(1) == self.branches[i - 1].chain[-1]

    def newer_branch_takes(self, branch: Gate, target: Target) -> bool:
        """The target takes a later branch written for newer devices than ``branch``: a branch
        that does work, not the ``else``, and admits nothing as old as what ``branch`` admits
        (``sm >= 75 && sm < 80`` then ``else if (sm >= 90)``): ``branch`` is the path for older
        devices, not the target's gate. A later ``else`` or a branch shared with older devices
        (``else if (sm >= 80)`` after ``sm >= 90 && sm < 120``) does not count."""
        route = self.route(target)
        if route is None or route.id == branch.id or branch not in self.branches or self.table:
            return False
        if self.branches.index(route) < self.branches.index(branch) or self.is_else(route):
            return False
        mine, theirs = capabilities_of(branch), capabilities_of(route)
        return (
            route.guards in (Guards.TAKE, Guards.DEFINE, Guards.TUNE)
            and bool(mine)
            and bool(theirs)
            and Capability.parse(theirs[0]) > Capability.parse(mine[-1])
        )


def takes(branch: Gate, target: Target) -> bool:
    """Whether ``target`` may take the branch (its own condition and the chain before it hold)."""
    return arch.admits_target(branch.domain, branch.admits, target)


def own_branch(branch: Gate, target: Target) -> bool:
    """A branch written for the target's generation: it does work (no rejection, no log line),
    and it admits nothing older than the target's major (``elif major == 12``, ``elif
    is_sm120_supported()``), unlike a fallback the target falls into with older GPUs."""
    if branch.guards not in (Guards.TAKE, Guards.DEFINE, Guards.TUNE) or not takes(branch, target):
        return False
    major = Capability.parse(target.capability).major
    return all(Capability.parse(c).major >= major for c in capabilities_of(branch))


def decisions(gates: Iterable[Gate]) -> dict[str, Decision]:
    """Each gate's decision, by gate id (a gate alone is a decision of one branch)."""
    gates = sorted(gates, key=lambda g: (g.input, g.file, g.line))
    by_chain: dict[tuple[str, str, tuple[str, ...]], list[Gate]] = {}
    for g in gates:
        by_chain.setdefault((g.input, g.file, g.chain), []).append(g)
    lines = {key: [g.line for g in group] for key, group in by_chain.items()}

    def before(key: tuple[str, str, tuple[str, ...]], g: Gate) -> Gate | None:
        i = bisect.bisect_left(lines.get(key, ()), g.line)
        s = by_chain[key][i - 1] if i else None
        # 0: C++ writes the next branch on the line that closes the last (``} else if (…) {``)
        return s if s is not None and 0 <= g.line - max(s.body_lines[1], s.line) <= NEAR else None

    def previous(g: Gate) -> Gate | None:
        """The branch right before ``g`` in its chain: the sibling its last negation names
        (``g`` is the ``else``), or the one before its own condition (``g`` is an ``elif``)."""
        chain = g.chain
        for i in (len(chain) - 1, len(chain) - 2):
            m = _NEGATED.match(chain[i]) if i >= 0 else None
            if m:
                s = before((g.input, g.file, chain[:i] + (m.group(1),)), g)
                if s is not None:
                    return s
        return None

    heads: dict[str, Gate] = {}
    groups: dict[str, list[Gate]] = {}
    for g in gates:  # in line order: a branch's predecessor has its head already
        p = previous(g)
        head = heads.get(p.id, p) if p is not None else g
        heads[g.id] = head
        groups.setdefault(head.id, []).append(g)
    chains = [groups[g.id] for g in gates if g.id in groups]
    for run in _sequences(chains):
        merged = [b for chain in run for b in chain]
        for chain in run:
            groups[chain[0].id] = merged
    out = {g.id: Decision(tuple(groups[heads[g.id].id])) for g in gates}
    for table in _tables(gates):
        d = Decision(tuple(table), table=True)
        out.update((g.id, d) for g in table)
    return out


def _sequences(chains: list[list[Gate]]) -> list[list[list[Gate]]]:
    """Runs of adjacent one-branch tests in one function under the same enclosing conditions
    whose admitted sets are disjoint: an early-return sequence or a set of per-architecture
    blocks (``if cap == (12, 0): return 128`` then ``if cap == (12, 1): return 96``), one
    decision whatever the statements are called."""
    out: list[list[list[Gate]]] = []
    run: list[list[Gate]] = []
    for chain in chains:
        g = chain[0]
        last = run[-1][0] if run else None
        if (
            last is not None
            and len(chain) == 1
            and (g.input, g.file, g.context, g.chain[:-1]) == (last.input, last.file, last.context, last.chain[:-1])
            and 0 < g.line - max(last.body_lines[1], last.line) <= NEAR
            and all(not set(g.admits) & set(other[0].admits) for other in run)
        ):
            run.append(chain)
            continue
        if len(run) > 1:
            out.append(run)
        run = [chain] if len(chain) == 1 and g.kind not in TABLE_KINDS else []
    if len(run) > 1:
        out.append(run)
    return out


def _tables(gates: list[Gate]) -> list[list[Gate]]:
    """Runs of two or more value gates (nvcc flags, capability lists) of one kind, in one
    function, each within :data:`TABLE_GAP` lines of the last: per-architecture rows."""
    out: list[list[Gate]] = []
    run: list[Gate] = []
    for g in gates:
        last = run[-1] if run else None
        if (
            last is not None
            and g.kind in TABLE_KINDS
            and (g.input, g.file, g.context, g.kind) == (last.input, last.file, last.context, last.kind)
            and g.line - last.end_line <= TABLE_GAP
        ):
            run.append(g)
            continue
        if len(run) > 1:
            out.append(run)
        run = [g] if g.kind in TABLE_KINDS else []
    if len(run) > 1:
        out.append(run)
    return out

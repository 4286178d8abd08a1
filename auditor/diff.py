"""Two scans compared: which gates a change adds, removes or changes, and why.

Pure: :func:`compare` takes two :class:`AuditResult` records and returns a
:class:`DiffResult`; running the scans and writing reports is the CLI's job.

Gates are matched by what their fingerprint is made of (file, kind, enclosing context,
normalised condition), never by line; a file moved or renamed (gone on one side, new on the
other) is matched by the rest of the key: within each file the two sequences of gate keys are
aligned (as ``diff`` aligns lines), so a gate that merely moved, or an identical gate
inserted before its twin, is matched correctly; keys left over on both sides are then
paired wherever they sit in the file (code moved past other gates). A condition edited in
place — the leftovers of one kind and context between the same matched neighbours, or in
the same named function; where their counts differ, those that stayed where they were and
read alike — is a *rewritten* gate rather than one removed and one added.

A gate whose condition is unchanged can still admit a different set because a definition
it resolves through changed: a Python predicate whose body conditions changed, or a
derived macro whose defining condition changed. Such a definition is reported once, as
the root cause, with the call sites that resolve through it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import replace
from difflib import SequenceMatcher

from auditor import fingerprint
from auditor import verdicts as meaning
from auditor.model import (
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

REWRITE_SIMILARITY = 0.5
"""How alike (difflib ratio of the normalised conditions) an old and a new gate must be to be
taken for one condition edited in place, where the counts around it differ."""
_VERSIONED_TOP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*-v?\d[A-Za-z0-9_.+!-]*$")
_WHEEL_DATA = re.compile(r"^[^/]+-[^/]+\.data/(?:purelib|platlib|headers|scripts|data)/")


def top_prefix(paths: Iterable[str]) -> str:
    """A version-bearing top folder all paths share (``pkg-1.2/``), to ignore when matching."""
    tops = {p.split("/", 1)[0] for p in paths if "/" in p}
    if len(tops) != 1:
        return ""
    top = next(iter(tops))
    return top + "/" if _VERSIONED_TOP.match(top) and not top.endswith(".data") else ""


def match_path(path: str, prefix: str = "") -> str:
    """The path used for matching: no versioned top folder, no wheel ``.data/<scheme>/`` part."""
    if prefix and path.startswith(prefix):
        path = path[len(prefix) :]
    return _WHEEL_DATA.sub("", path, count=1)


def _verdicts(gate: Gate | None, targets: Sequence[Target]) -> dict[str, Verdict]:
    """``{label: admits|excludes}``; empty for no gate."""
    if gate is None:
        return {}
    return meaning.verdicts(gate, targets)


def _deltas(old: Gate | None, new: Gate | None, targets: Sequence[Target]) -> tuple[VerdictDelta, ...]:
    before, after = _verdicts(old, targets), _verdicts(new, targets)
    return tuple(VerdictDelta(t.label, before.get(t.label), after.get(t.label)) for t in targets)


_Key = tuple[str, str, str, str]


class _Side:
    """One side's gates, indexed for matching."""

    def __init__(self, result: AuditResult):
        self.result = result
        self.prefix = top_prefix(g.file for g in result.gates)
        self.path = {g.id: self.match(g.file) for g in result.gates}
        self.by_file: dict[str, list[Gate]] = defaultdict(list)
        for g in sorted(result.gates, key=lambda g: (g.line, g.end_line, g.kind, g.id)):
            self.by_file[self.path[g.id]].append(g)
        self.findings: dict[str, list[Finding]] = defaultdict(list)
        for f in result.findings:
            self.findings[f.gate].append(f)
        self.defined: dict[tuple[str, str], tuple[int, str, str]] = {}
        """Every definition a gate resolves through: (name, matching path) -> (line, detail, file)."""
        for g in result.gates:
            for r in g.resolutions:
                self.defined.setdefault((r.name, self.match(r.file)), (r.line, r.detail, r.file))
        self.defined_in: dict[str, list[tuple[int, str]]] = defaultdict(list)
        """Matching path -> (line, name) of the definitions in it, in order."""
        for (name, path), (line, _, _) in sorted(self.defined.items(), key=lambda kv: (kv[1][0], kv[0])):
            self.defined_in[path].append((line, name))

    def match(self, path: str) -> str:
        """A path of this side as matching sees it."""
        return match_path(path, self.prefix)

    def key(self, g: Gate) -> _Key:
        return (self.path[g.id], g.kind, g.context, fingerprint.normalise(g.expression))


def _pairs(old: _Side, new: _Side) -> tuple[list[tuple[Gate, Gate, How]], list[Gate], list[Gate]]:
    """Matched (old, new, how) pairs, then unmatched old and unmatched new gates."""
    pairs: list[tuple[Gate, Gate, How]] = []
    left_old: list[tuple[Gate, int]] = []
    left_new: list[tuple[Gate, int]] = []
    shift: dict[int, int] = {}
    """Per unaligned block: how far its matched neighbour above moved (lines)."""
    for path in sorted(set(old.by_file) | set(new.by_file)):
        a, b = old.by_file.get(path, []), new.by_file.get(path, [])
        ka, kb = [old.key(g) for g in a], [new.key(g) for g in b]
        opcodes: Sequence[tuple[str, int, int, int, int]]
        if ka == kb:
            opcodes = [("equal", 0, len(a), 0, len(b))]
        elif not a or not b:
            opcodes = [("replace", 0, len(a), 0, len(b))]
        else:
            opcodes = SequenceMatcher(None, ka, kb, autojunk=False).get_opcodes()
        for op, i1, i2, j1, j2 in opcodes:
            if op == "equal":
                pairs += [(a[i], b[j], How.NONE) for i, j in zip(range(i1, i2), range(j1, j2))]
            else:
                block = len(shift) + 1
                shift[block] = b[j1 - 1].line - a[i1 - 1].line if i1 and j1 else 0
                left_old += [(g, block) for g in a[i1:i2]]
                left_new += [(g, block) for g in b[j1:j2]]
    # Moved: the same key elsewhere in the file.
    waiting: dict[_Key, list[tuple[Gate, int]]] = defaultdict(list)
    for g, blk in left_old:
        waiting[old.key(g)].append((g, blk))
    unmatched_new: list[tuple[Gate, int]] = []
    for g, blk in left_new:
        queue = waiting.get(new.key(g))
        if queue:
            pairs.append((queue.pop(0)[0], g, How.NONE))
        else:
            unmatched_new.append((g, blk))
    unmatched_old = [item for queue in waiting.values() for item in queue]
    # A moved or renamed file: gates of a file gone from the old side and of one new on the new
    # side that decide alike (kind, context, condition) are the same gates, not removed and added.
    gone, fresh = set(old.by_file) - set(new.by_file), set(new.by_file) - set(old.by_file)
    moved: dict[tuple[str, str, str], list[tuple[Gate, int]]] = defaultdict(list)
    for g, blk in unmatched_old:
        if old.path[g.id] in gone:
            moved[old.key(g)[1:]].append((g, blk))
    still_new: list[tuple[Gate, int]] = []
    for g, blk in unmatched_new:
        queue = moved.get(new.key(g)[1:]) if new.path[g.id] in fresh else None
        if queue:
            pairs.append((queue.pop(0)[0], g, How.NONE))
        else:
            still_new.append((g, blk))
    paired = {id(x) for x, _, _ in pairs}
    unmatched_old = [(g, blk) for g, blk in unmatched_old if id(g) not in paired]
    unmatched_new = still_new

    # Rewritten: one kind and context, between the same neighbours or in the same named function.
    def group(side: _Side, g: Gate, blk: int) -> tuple:
        return (side.path[g.id], g.kind, g.context, 0 if g.context else blk)

    olds: dict[tuple, list[tuple[Gate, int]]] = defaultdict(list)
    news: dict[tuple, list[tuple[Gate, int]]] = defaultdict(list)
    for g, blk in sorted(unmatched_old, key=lambda item: item[0].line):
        olds[group(old, g, blk)].append((g, blk))
    for g, blk in unmatched_new:
        news[group(new, g, blk)].append((g, blk))
    removed: list[Gate] = []
    added: list[Gate] = []
    for k in set(olds) | set(news):
        o, n = olds.get(k, []), news.get(k, [])
        if o and len(o) == len(n):
            pairs += [(x, y, How.REWRITTEN) for (x, _), (y, _) in zip(o, n)]
            continue
        done = _edited_in_place(o, n, shift)
        pairs += [(x, y, How.REWRITTEN) for x, y in done]
        removed += [x for x, _ in o if all(x is not p for p, _ in done)]
        added += [y for y, _ in n if all(y is not q for _, q in done)]
    return pairs, removed, added


def _edited_in_place(
    old: list[tuple[Gate, int]], new: list[tuple[Gate, int]], shift: dict[int, int]
) -> list[tuple[Gate, Gate]]:
    """Where the counts differ (a gate edited and another added beside it): pair the gates that
    stayed where they were, relative to the matched neighbour above, and read alike (at least
    :data:`REWRITE_SIMILARITY`); nearest first, then most alike."""
    scored = []
    for i, (x, _) in enumerate(old):
        for j, (y, blk) in enumerate(new):
            alike = SequenceMatcher(
                None, fingerprint.normalise(x.expression), fingerprint.normalise(y.expression)
            ).ratio()
            if alike >= REWRITE_SIMILARITY:
                scored.append((abs(y.line - x.line - shift.get(blk, 0)), -alike, i, j))
    used_old: set[int] = set()
    used_new: set[int] = set()
    out = []
    for _, _, i, j in sorted(scored):
        if i not in used_old and j not in used_new:
            used_old.add(i)
            used_new.add(j)
            out.append((old[i][0], new[j][0]))
    return out


def _change(status: Status, old: Gate | None, new: Gate | None, how: How, targets, sides) -> GateChange:
    old_side, new_side = sides
    before = old_side.findings.get(old.id, []) if old is not None else []
    after = new_side.findings.get(new.id, []) if new is not None else []
    known, kept = {f.rule for f in before}, {f.rule for f in after}
    return GateChange(
        status,
        old,
        new,
        how,
        _deltas(old, new, targets),
        findings=tuple(f for f in after if f.rule not in known),
        resolved=tuple(f for f in before if f.rule not in kept),
    )


def _meaningful(c: GateChange) -> bool:
    """A change that alters what a definition admits (not a rewording with the same set)."""
    return not (c.old is not None and c.new is not None and set(c.old.admits) == set(c.new.admits))


def _present(side: _Side, key: tuple[str, str], owner) -> bool:
    """Whether a definition exists on a side: something resolves through it, or a gate sits in it."""
    return key in side.defined or any(owner(side, g) == key for g in side.by_file.get(key[1], ()))


def _definitions(
    changes: list[GateChange], old: _Side, new: _Side, unchanged: list[tuple[Gate, Gate]]
) -> tuple[list[GateChange], list[DefinitionChange]]:
    """Find changed definitions; tag the changes inside them and the call sites through them.

    A definition changed when a condition inside it changed what it admits (Python
    predicates: the gate's context is the definition's name, in the definition's file), or
    when its recorded detail differs (a derived macro's defining condition) and a call site
    with an unchanged condition now admits another set.
    """
    names = set(old.defined) | set(new.defined)
    files_of: dict[str, set[str]] = defaultdict(set)
    for name, path in names:
        files_of[name].add(path)

    def owner(side: _Side, g: Gate | None) -> tuple[str, str] | None:
        """The definition a gate belongs to: the function it sits in, or the ``#define`` it encloses."""
        if g is None:
            return None
        path = side.path[g.id]
        name = g.context.rsplit(".", 1)[-1]
        if name and path in files_of.get(name, ()):
            return (name, path)
        first, last = g.body_lines
        return next(((n, path) for line, n in side.defined_in.get(path, ()) if first <= line <= last), None)

    def through(side: _Side, g: Gate | None) -> set[tuple[str, str]]:
        return set() if g is None else {(r.name, side.match(r.file)) for r in g.resolutions}

    body: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, c in enumerate(changes):
        where = owner(new, c.new) or owner(old, c.old)
        if where is not None:
            body[where].append(i)
    # A definition present on one side only is new or gone, not changed: its call sites are
    # added or removed gates in their own right.
    changed = {
        k
        for k, idx in body.items()
        if any(_meaningful(changes[i]) for i in idx) and _present(old, k, owner) and _present(new, k, owner)
    }
    # A call site whose condition is unchanged but whose set moved: a definition it goes
    # through now reads differently, or the name now resolves to another definition.
    elsewhere: dict[tuple[str, str], tuple[int, str, str]] = {}
    for c in changes:
        if c.how != How.ADMITS:
            continue
        before = {r.name: r for r in c.old.resolutions} if c.old else {}
        for r in c.new.resolutions if c.new else ():
            was = before.get(r.name)
            k = (r.name, new.match(r.file))
            if was is None or (was.file, was.line, was.detail) == (r.file, r.line, r.detail):
                continue
            if old.match(was.file) != k[1]:
                elsewhere[k] = (was.line, was.detail, was.file)
                changed.add(k)
            elif was.detail != r.detail:
                changed.add(k)
    if not changed:
        return changes, []
    label = {k: f"{k[0]}@{k[1]}" for k in changed}
    out = list(changes)
    for k in changed:
        for i in body.get(k, []):
            out[i] = replace(out[i], definition=label[k])
    sites: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, c in enumerate(out):
        via = sorted((through(old, c.old) | through(new, c.new)) & changed)
        if via and not c.definition:
            out[i] = replace(c, causes=tuple(label[k] for k in via))
            for k in via:
                sites[k].append(i)
    still: dict[tuple[str, str], int] = defaultdict(int)
    for x, y in unchanged:
        for k in (through(old, x) | through(new, y)) & changed:
            still[k] += 1
    result = []
    for k in sorted(changed):
        prior, current = elsewhere.get(k, old.defined.get(k)), new.defined.get(k)
        inside = [out[i] for i in body.get(k, [])]
        home = current or prior
        result.append(
            DefinitionChange(
                name=k[0],
                file=home[2] if home else k[1],
                old_file=prior[2] if prior and k in elsewhere else "",
                old_line=prior[0] if prior else min((c.old.line for c in inside if c.old), default=0),
                new_line=current[0] if current else min((c.new.line for c in inside if c.new), default=0),
                old_detail=prior[1] if prior else "",
                new_detail=current[1] if current else "",
                body=tuple(inside),
                call_sites=tuple(out[i] for i in sites.get(k, [])),
                unchanged_call_sites=still.get(k, 0),
            )
        )
    return out, result


def _toolkits_differ(a: Gate, b: Gate, targets, toolkits: tuple[str, ...]) -> bool:
    """Whether the CUDA releases that admit a requested target changed (the flag a gate tests
    now needs CUDA 13): a change even when the newest toolkit's answer is the same."""
    if not (a.toolkits or b.toolkits):
        return False
    return meaning.toolkit_notes(a, targets, toolkits) != meaning.toolkit_notes(b, targets, toolkits)


def compare(old: AuditResult, new: AuditResult, targets: tuple | None = None, mode: str = "diff") -> DiffResult:
    """Gates added, removed and changed from ``old`` to ``new``, with their root causes."""
    targets = targets or new.targets
    sides = (_Side(old), _Side(new))
    pairs, removed, added = _pairs(*sides)
    changes: list[GateChange] = []
    unchanged: list[tuple[Gate, Gate]] = []
    for a, b, how in pairs:
        if how or set(a.admits) != set(b.admits) or _toolkits_differ(a, b, targets, new.toolkits):
            changes.append(_change(Status.CHANGED, a, b, how or How.ADMITS, targets, sides))
        else:
            unchanged.append((a, b))
    changes += [_change(Status.REMOVED, g, None, How.NONE, targets, sides) for g in removed]
    changes += [_change(Status.ADDED, None, g, How.NONE, targets, sides) for g in added]
    changes.sort(key=lambda c: (sides[1].path[c.new.id] if c.new else sides[0].path[c.gate.id], c.gate.line, c.status))
    changes, definitions = _definitions(changes, *sides, unchanged)
    return DiffResult(
        tool_version=new.tool_version,
        targets=tuple(targets),
        old_inputs=old.inputs,
        new_inputs=new.inputs,
        changes=tuple(changes),
        definitions=tuple(definitions),
        unchanged=len(unchanged),
        errors=tuple(old.errors) + tuple(new.errors),
        mode=mode,
        rules=new.rules,
        toolkits=new.toolkits,
    )


def matches(old: AuditResult, new: AuditResult) -> list[tuple[Gate, Gate]]:
    """Every gate of ``old`` paired with the gate of ``new`` that :func:`compare` takes for it
    (unchanged, moved, renamed or rewritten alike): a release history follows gates through it."""
    pairs, _, _ = _pairs(_Side(old), _Side(new))
    return [(a, b) for a, b, _ in pairs]

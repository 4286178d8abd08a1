"""Macros over the whole input: which are derived from the architecture, and every condition's
value on each nvcc target, in three-valued logic."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache

from auditor import arch
from auditor.cuda import cexpr
from auditor.cuda.structure import ARCH_PREFIX, HAS_FEATURE, Constraint, Definition, Structure

# --- evaluation over the target domain -------------------------------------------------

Tri = bool | None


def is_arch_macro(name: str) -> bool:
    """Macros nvcc defines per target (any ``__CUDA_ARCH*`` name; undefined ones read as 0)."""
    return name.startswith(ARCH_PREFIX) and name != HAS_FEATURE


@cache
def parse_condition(text: str) -> cexpr.Node:
    """Parse once per distinct condition text in the run."""
    return cexpr.parse(text)


def names_an_arch(node: cexpr.Node, derived_naming: Iterable[str] = ()) -> bool:
    """Whether a condition tests an architecture, beyond whether ``__CUDA_ARCH__`` is defined."""
    ids = cexpr.identifiers(node)
    named = derived_naming if isinstance(derived_naming, (set, frozenset)) else set(derived_naming)
    if any(n.startswith(ARCH_PREFIX) and n != "__CUDA_ARCH__" for n in ids):
        return True
    return "__CUDA_ARCH__" in cexpr.value_identifiers(node) or bool(ids & named)


@dataclass
class Evaluation:
    """A condition's value on every target of the domain, with what it depended on."""

    values: tuple[Tri, ...]
    unknowns: frozenset[str]
    derived: frozenset[str]


@dataclass
class _MacroState:
    defined: tuple[Tri, ...]
    values: tuple[cexpr.Value, ...]
    unknowns: frozenset[str]
    derived: frozenset[str]


@dataclass
class MacroTable:
    """Derived macros over the whole input: name -> where defined, and under which conditions."""

    definitions: dict[str, list[tuple[str, Definition]]] = field(default_factory=dict)
    derived: set[str] = field(default_factory=set)
    naming: set[str] = field(default_factory=set)
    """Derived macros whose definitions name an architecture (not only host/device)."""
    uses: dict[str, frozenset[str]] = field(default_factory=dict)
    """Per derived macro, the derived macros its definitions read."""

    @classmethod
    def build(cls, structures: Iterable[tuple[str, Structure]]) -> MacroTable:
        """Collect definitions and find, by fixpoint, the macros that depend on the arch."""
        table = cls()
        for path, s in structures:
            for d in s.definitions:
                if is_arch_macro(d.name):
                    continue  # nvcc defines these per target; a header's copy does not change that
                table.definitions.setdefault(d.name, []).append((path, d))
        mentions: dict[str, tuple[set[str], set[str]]] = {}
        for name, defs in table.definitions.items():
            ids: set[str] = set()
            naming_arch = False
            for _, d in defs:
                for text, _pol in d.constraints:
                    try:
                        node = parse_condition(text)
                    except cexpr.ConditionError:
                        continue
                    ids |= cexpr.identifiers(node)
                    naming_arch = naming_arch or names_an_arch(node)
                if d.body and not d.function_like:
                    try:
                        node = parse_condition(d.body)
                        ids |= cexpr.identifiers(node)
                        naming_arch = naming_arch or names_an_arch(node)
                    except cexpr.ConditionError:
                        pass
            ids.discard(name)
            mentions[name] = (ids, {"naming"} if naming_arch else set())
            if any(is_arch_macro(i) or i == HAS_FEATURE or i in arch.TOOLKIT_MACROS for i in ids):
                table.derived.add(name)
                if naming_arch:
                    table.naming.add(name)
        # Least fixpoint by worklist over who uses whom (a loop over every macro until nothing
        # changes was quadratic on a 10,000-macro chain written in reverse order).
        users: dict[str, list[str]] = {}
        for name, (ids, _) in mentions.items():
            for i in ids:
                users.setdefault(i, []).append(name)
        work = sorted(table.derived)
        while work:
            for user in users.get(work.pop(), ()):
                if user not in table.derived:
                    table.derived.add(user)
                    work.append(user)
        work = sorted(table.naming)
        while work:
            for user in users.get(work.pop(), ()):
                if user in table.derived and user not in table.naming:
                    table.naming.add(user)
                    work.append(user)
        table.uses = {n: frozenset(mentions[n][0] & table.derived) for n in table.derived}
        return table

    def within(self, files: set[str], names: set[str]) -> MacroTable:
        """The derived macros ``names`` as the definitions in ``files`` alone make them (the
        files a translation unit can hold: :mod:`auditor.cuda.includes`)."""
        sub = MacroTable()
        for name in sorted(names & self.derived):
            defs = [(p, d) for p, d in self.definitions.get(name, ()) if p in files]
            if defs:
                sub.definitions[name] = defs
        sub.derived = set(sub.definitions)
        sub.naming = self.naming & sub.derived
        sub.uses = {n: self.uses.get(n, frozenset()) & sub.derived for n in sub.derived}
        return sub

    def where(self, name: str) -> tuple[str, Definition]:
        """The first definition of a derived macro (for the report)."""
        return self.definitions[name][0]


class Evaluator:
    """Evaluates conditions on a list of points (the macros defined at each), memoised per text.

    Arch macros a point does not define read as 0, as nvcc leaves them undefined; any other
    name a point defines (a toolkit's version macros) is known there; the rest are unknowns."""

    def __init__(self, table: MacroTable, points: Sequence[dict[str, int]] | None = None):
        self.table = table
        self.macros = list(points) if points is not None else [arch.target_macros()[t] for t in arch.target_order()]
        self.targets = range(len(self.macros))
        self.known = frozenset.intersection(*(frozenset(m) for m in self.macros)) - {HAS_FEATURE}
        """Non-arch names every point defines: not unknowns."""
        self._memo: dict[str, Evaluation] = {}
        self._macro_memo: dict[str, _MacroState] = {}
        self._under_memo: dict[str, frozenset[str]] = {}
        self._before_memo: dict[tuple[str, str], _MacroState] = {}
        self._in_progress: set[str] = set()

    def evaluate(self, text: str) -> Evaluation:
        """Per-target value of one condition (True, False or None for unknown)."""
        hit = self._memo.get(text)
        if hit is None:
            hit = self._memo[text] = self._evaluate(parse_condition(text), self_name=None, inside=text)
        return hit

    def _evaluate(self, node: cexpr.Node, self_name: str | None, inside: str | None = None) -> Evaluation:
        raw, unknowns, derived = self._raw(node, self_name, inside)
        values = tuple(None if v is None else v[0] != 0 for v in raw)
        return Evaluation(values, frozenset(unknowns), frozenset(derived))

    def _raw(
        self, node: cexpr.Node, self_name: str | None, inside: str | None = None
    ) -> tuple[list[cexpr.Value], set[str], set[str]]:
        """Integer value per target, with the unknown and derived names it went through.

        ``inside`` is the text of the ``#if`` being evaluated: a macro's definitions nested
        under that very ``#if`` come after it, so they cannot decide it (``#if !defined(X) &&
        ... / #define X``, CUTLASS's config blocks); the macro's other definitions still do."""
        unknowns: set[str] = set()
        derived: set[str] = set()
        states = {}
        for n in sorted(cexpr.identifiers(node)):  # sorted: with a cycle, the order decides
            if n == self_name:
                continue
            if n in self.table.derived:
                st = self._macro_before(n, inside) if inside in self._under(n) else self.macro(n)
                states[n] = st
                derived.add(n)
                unknowns |= st.unknowns
                derived |= st.derived
            elif not is_arch_macro(n) and n != HAS_FEATURE and n not in self.known:
                unknowns.add(n)
        values: list[cexpr.Value] = []
        for i, env_macros in enumerate(self.macros):
            try:
                values.append(cexpr.evaluate(node, self._env(env_macros, states, i, self_name)))
            except cexpr.ConditionError:
                values.append(None)
        return values, unknowns, derived

    def _env(self, macros: dict[str, int], states: dict[str, _MacroState], i: int, self_name) -> cexpr.Env:
        def defined(n: str) -> Tri:
            if n == self_name:
                return False  # the `#ifndef X / #define X` idiom: first definition wins
            if n in states:
                return states[n].defined[i]
            if is_arch_macro(n):
                return n in macros
            return True if n in self.known else None

        def value(n: str) -> cexpr.Value:
            if n in states:
                st = states[n]
                return (0, False) if st.defined[i] is False else st.values[i]
            if is_arch_macro(n):
                return (macros.get(n, 0), False)
            return (macros[n], False) if n in self.known else None

        def call(n: str, args: str) -> cexpr.Value:
            if n == HAS_FEATURE:
                return (int(f"__CUDA_ARCH_FEAT_{args.strip()}" in macros), False)
            return None

        return cexpr.Env(defined, value, call)

    def macro(self, name: str) -> _MacroState:
        """Per target: is the derived macro defined, and with what value."""
        hit = self._macro_memo.get(name)
        if hit is not None:
            return hit
        n = len(self.targets)
        if name in self._in_progress:  # a cycle: say nothing rather than guess
            return _MacroState((None,) * n, (None,) * n, frozenset({name}), frozenset())
        # Depth first over what it depends on, each macro computed after its dependencies, with
        # an explicit stack: a chain of 3,000 derived macros must not exhaust Python's. Macros on
        # the current path are the cycle case above, exactly as a recursive walk would see them.
        stack = [(name, iter(self._dependencies(name)))]
        self._in_progress.add(name)
        try:
            while stack:
                current, deps = stack[-1]
                for dep in deps:
                    if dep not in self._macro_memo and dep not in self._in_progress:
                        self._in_progress.add(dep)
                        stack.append((dep, iter(self._dependencies(dep))))
                        break
                else:
                    stack.pop()
                    self._macro_memo[current] = self._compute(current)
                    self._in_progress.discard(current)
        finally:
            for current, _ in stack:
                self._in_progress.discard(current)
        return self._macro_memo[name]

    def _dependencies(self, name: str) -> list[str]:
        """Derived macros a macro's definitions use, in the order :meth:`_compute` asks for them."""
        out: dict[str, None] = {}
        for _path, d in self.table.definitions.get(name, []):
            if d.body is None:
                continue
            texts = [c for c, _ in d.constraints] + ([d.body] if d.body and not d.function_like else [])
            for text in texts:
                try:
                    node = parse_condition(text)
                except cexpr.ConditionError:
                    continue
                for i in sorted(cexpr.identifiers(node)):
                    if i != name and i in self.table.derived:
                        out[i] = None
        return list(out)

    def _under(self, name: str) -> frozenset[str]:
        """The ``#if`` texts some definition of a macro is nested under."""
        hit = self._under_memo.get(name)
        if hit is None:
            hit = self._under_memo[name] = frozenset(
                text for _, d in self.table.definitions.get(name, []) for text, _ in d.constraints
            )
        return hit

    def _macro_before(self, name: str, text: str) -> _MacroState:
        """A derived macro as its definitions outside the ``#if`` ``text`` make it."""
        key = (name, text)
        hit = self._before_memo.get(key)
        if hit is None:
            for dep in self._dependencies(name):
                self.macro(dep)
            hit = self._before_memo[key] = self._compute(name, skip=text)
        return hit

    def _compute(self, name: str, skip: str | None = None) -> _MacroState:
        """One derived macro from its definitions (its dependencies already resolved), leaving
        out those nested under the ``#if`` ``skip``."""
        n = len(self.targets)
        defined: list[Tri] = [False] * n
        values: list[cexpr.Value] = [None] * n
        seen_value: list[bool] = [False] * n
        unknowns: set[str] = set()
        derived: set[str] = set()
        for _path, d in self.table.definitions.get(name, []):
            if d.body is None:
                continue  # `#undef`: order-dependent; the definitions decide (noted in docs)
            if skip is not None and any(text == skip for text, _ in d.constraints):
                continue
            reach = self._reach(d.constraints, name, unknowns, derived)
            body_values: list[cexpr.Value] = [None] * n
            if d.body and not d.function_like:
                try:
                    raw, u, dv = self._raw(parse_condition(d.body), name)
                    body_values, unknowns, derived = raw, unknowns | u, derived | dv
                except cexpr.ConditionError:
                    pass  # a body that is not an expression: only definedness counts
            for i, r in enumerate(reach):
                if r is False:
                    continue
                if r is True:
                    defined[i] = True
                elif defined[i] is False:
                    defined[i] = None
                v = body_values[i]
                if not seen_value[i]:
                    values[i], seen_value[i] = v, True
                elif values[i] != v:
                    values[i] = None
        return _MacroState(tuple(defined), tuple(values), frozenset(unknowns), _first(derived))

    def _reach(self, constraints, self_name, unknowns: set[str], derived: set[str]) -> list[Tri]:
        n = len(self.targets)
        reach: list[Tri] = [True] * n
        for text, polarity in constraints:
            try:
                node = parse_condition(text)
            except cexpr.ConditionError:
                reach = [None if r is not False else False for r in reach]
                continue
            ev = self._evaluate(node, self_name, inside=text)
            unknowns |= ev.unknowns
            derived |= ev.derived
            for i, v in enumerate(ev.values):
                reach[i] = _and(reach[i], v if polarity or v is None else not v)
        return reach

    def effective(self, constraints: Iterable[Constraint]) -> tuple[list[Tri], set[str], set[str]]:
        """Where a branch body is compiled: every constraint of its chain may hold."""
        n = len(self.targets)
        reach: list[Tri] = [True] * n
        unknowns: set[str] = set()
        derived: set[str] = set()
        for text, polarity in constraints:
            ev = self.evaluate(text)
            unknowns |= ev.unknowns
            derived |= ev.derived
            for i, v in enumerate(ev.values):
                reach[i] = _and(reach[i], v if polarity or v is None else not v)
        return reach, unknowns, derived


KEEP_DERIVED = 256
"""Derived macros a derived macro remembers having gone through: the first by name. Reports
list at most 100 per gate; keeping all made a chain of 3,000 macros cost 3,000 x 3,000 names."""


def _first(names: set[str]) -> frozenset[str]:
    """The first :data:`KEEP_DERIVED` names (all of them, below that); the first K of a union
    are the first K of the union of each part's first K, so nothing listed changes."""
    return frozenset(names if len(names) <= KEEP_DERIVED else sorted(names)[:KEEP_DERIVED])


def _and(a: Tri, b: Tri) -> Tri:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


class Axis:
    """Conditions over every nvcc target of every known toolkit, judged by the chosen ones.

    A target's verdict is the newest chosen toolkit's that has it (by default every toolkit is
    chosen: sm_101 is 12.9's, sm_120 13.5's); where toolkits answer differently (a
    ``__CUDACC_VER_MAJOR__`` test, 12.8's sm_100a without the family macros), the toolkits
    that admit the target are noted, chosen or not. A target no chosen toolkit has is noted
    wherever a toolkit admits it (its code needs another CUDA: it is not dead); it is not
    admitted when a chosen toolkit builds its capability otherwise (sm_120f under 12.8), and
    judged by the nearest toolkit that builds it when none does (12.1 under 12.8: 12.9). Conditions are
    evaluated once on every distinct (target, macros) point; only those that read a toolkit's
    version macros are evaluated once per toolkit as well.
    """

    def __init__(self, table: MacroTable, releases: Sequence[str] = ()):
        self.targets = arch.target_order()
        self.toolkits = arch.toolkits()
        chosen = set(arch.releases_of(releases))
        points: list[dict[str, int]] = []
        index: dict[tuple, int] = {}
        self._rows: list[list[int]] = []
        """Per toolkit, the point of each target (-1 where the toolkit lacks it)."""
        for k in self.toolkits:
            row = []
            for t in self.targets:
                m = {} if t == arch.HOST else k.targets.get(t)
                if m is None:
                    row.append(-1)
                    continue
                key = (t, tuple(sorted(m.items())))
                if key not in index:
                    index[key] = len(points)
                    points.append(m)
                row.append(index[key])
            self._rows.append(row)
        self._base = Evaluator(table, points)
        self._table = table
        self._per_toolkit: dict[int, Evaluator] = {}
        having = [[j for j, r in enumerate(self._rows) if r[i] >= 0] for i in range(len(self.targets))]
        judged = [[j for j in js if self.toolkits[j].release in chosen] for js in having]
        self._outside = {i for i, js in enumerate(judged) if not js}
        """Targets no chosen toolkit has: noted wherever a toolkit admits them."""
        built = {arch.capability_of(t) for i, t in enumerate(self.targets) if t != arch.HOST and judged[i]}
        self._excluded = {i for i in self._outside if arch.capability_of(self.targets[i]) in built}
        """Variants no chosen toolkit has of a capability one of them builds (12.8 has sm_120, not
        sm_120f): never admitted. A capability none of them builds (12.1 under 12.8) is judged
        by the nearest toolkit that does (:func:`arch.nearest`: 12.9)."""
        for i in self._outside - self._excluded:
            nearest = arch.nearest((self.toolkits[j].release for j in having[i]), releases)
            judged[i] = [j for j in having[i] if self.toolkits[j].release == nearest]
        self._newest_kit = [js[-1] if js else having[i][-1] for i, js in enumerate(judged)]
        """Per target, the newest toolkit judging it: the verdict's."""
        self._newest = [self._rows[j][i] for i, j in enumerate(self._newest_kit)]
        self._varied = [i for i in range(len(self.targets)) if len({r[i] for r in self._rows if r[i] >= 0}) > 1]
        """Targets whose macros differ between toolkits: only there can arch-only answers differ."""
        self._noted = sorted(set(self._varied) | self._outside)
        """Targets whose arch-only answers may need a note."""

    def effective(self, constraints: Iterable[Constraint]) -> tuple[list[Tri], set[str], set[str], tuple]:
        """Where a branch body is compiled, per target; the unknown and derived names it went
        through; and the targets some toolkits admit and others do not, as (target, releases)."""
        constraints = tuple(constraints)
        reach, unknowns, derived = self._base.effective(constraints)
        if unknowns & arch.TOOLKIT_MACROS:
            return self._per_toolkit_effective(constraints)
        values = [False if i in self._excluded else reach[p] for i, p in enumerate(self._newest)]
        notes: list = []
        for i in self._noted:
            self._note(notes, i, [None if r[i] < 0 else reach[r[i]] for r in self._rows])
        return values, unknowns, derived, tuple(notes)

    def _per_toolkit_effective(self, constraints: tuple) -> tuple[list[Tri], set[str], set[str], tuple]:
        per: list[list[Tri]] = []
        unknowns: set[str] = set()
        derived: set[str] = set()
        for j, row in enumerate(self._rows):
            reach, u, d = self._evaluator(j).effective(constraints)
            unknowns |= u
            derived |= d
            own = iter(reach)
            per.append([next(own) if p >= 0 else None for p in row])
        values: list[Tri] = []
        notes: list = []
        for i, newest in enumerate(self._newest_kit):
            column = [reach[i] for reach in per]
            values.append(False if i in self._excluded else column[newest])
            self._note(notes, i, column)
        return values, unknowns, derived, tuple(notes)

    def _note(self, notes: list, i: int, column: list[Tri]) -> None:
        """Record target ``i``'s admitting toolkits when they are not all the toolkits that have it,
        or when no chosen toolkit has it."""
        having = [j for j, row in enumerate(self._rows) if row[i] >= 0]
        admitting = [j for j in having if column[j] is not False]
        if admitting and (len(admitting) != len(having) or i in self._outside):
            notes.append((self.targets[i], tuple(self.toolkits[j].release for j in admitting)))

    def _evaluator(self, j: int) -> Evaluator:
        """The evaluator for one toolkit: its targets, with its version macros at every point."""
        hit = self._per_toolkit.get(j)
        if hit is None:
            k = self.toolkits[j]
            points = [dict(self._base.macros[p], **k.macros) for p in self._rows[j] if p >= 0]
            hit = self._per_toolkit[j] = Evaluator(self._table, points)
        return hit

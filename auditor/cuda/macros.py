"""Macros over the whole input: which are derived from the architecture, and every condition's
value on each nvcc target, in three-valued logic."""

from __future__ import annotations

from collections.abc import Iterable
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
            if any(is_arch_macro(i) or i == HAS_FEATURE for i in ids):
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
        return table

    def where(self, name: str) -> tuple[str, Definition]:
        """The first definition of a derived macro (for the report)."""
        return self.definitions[name][0]


class Evaluator:
    """Evaluates conditions over the target domain, memoised per distinct text."""

    def __init__(self, table: MacroTable):
        self.table = table
        self.targets = arch.target_order()
        self.macros = [arch.target_macros()[t] for t in self.targets]
        self._memo: dict[str, Evaluation] = {}
        self._macro_memo: dict[str, _MacroState] = {}
        self._in_progress: set[str] = set()

    def evaluate(self, text: str) -> Evaluation:
        """Per-target value of one condition (True, False or None for unknown)."""
        hit = self._memo.get(text)
        if hit is None:
            hit = self._memo[text] = self._evaluate(parse_condition(text), self_name=None)
        return hit

    def _evaluate(self, node: cexpr.Node, self_name: str | None) -> Evaluation:
        raw, unknowns, derived = self._raw(node, self_name)
        values = tuple(None if v is None else v[0] != 0 for v in raw)
        return Evaluation(values, frozenset(unknowns), frozenset(derived))

    def _raw(self, node: cexpr.Node, self_name: str | None) -> tuple[list[cexpr.Value], set[str], set[str]]:
        """Integer value per target, with the unknown and derived names it went through."""
        unknowns: set[str] = set()
        derived: set[str] = set()
        states = {}
        for n in sorted(cexpr.identifiers(node)):  # sorted: with a cycle, the order decides
            if n == self_name:
                continue
            if n in self.table.derived:
                st = self.macro(n)
                states[n] = st
                derived.add(n)
                unknowns |= st.unknowns
                derived |= st.derived
            elif not is_arch_macro(n) and n != HAS_FEATURE:
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
            return None

        def value(n: str) -> cexpr.Value:
            if n in states:
                st = states[n]
                return (0, False) if st.defined[i] is False else st.values[i]
            if is_arch_macro(n):
                return (macros.get(n, 0), False)
            return None

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

    def _compute(self, name: str) -> _MacroState:
        """One derived macro from its definitions (its dependencies already resolved)."""
        n = len(self.targets)
        defined: list[Tri] = [False] * n
        values: list[cexpr.Value] = [None] * n
        seen_value: list[bool] = [False] * n
        unknowns: set[str] = set()
        derived: set[str] = set()
        for _path, d in self.table.definitions.get(name, []):
            if d.body is None:
                continue  # `#undef`: order-dependent; the definitions decide (noted in docs)
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
            ev = self._evaluate(node, self_name)
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

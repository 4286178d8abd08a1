"""Preprocessor gates: conditional structure per file, derived macros over the tree, admitted sets.

Per file (in worker processes) :func:`structure` turns directives into branches, each with
the chain of constraints under which its body is compiled, plus the ``#define``s with theirs.
Over the whole input, :class:`MacroTable` decides which macros are *derived* (defined under
arch-dependent conditions) and :class:`Evaluator` enumerates every condition over the target
domain in three-valued logic. A branch is reported as a gate when its own condition chain
names an architecture; pure host/device splits (``#ifdef __CUDA_ARCH__``) and include guards
are not gates.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Iterable, Optional

from auditor import arch, cexpr
from auditor.directives import Directive

Constraint = tuple[str, bool]
"""(condition text, polarity): the body is compiled where the condition is true (or false)."""

ARCH_PREFIX = "__CUDA_ARCH"
HAS_FEATURE = "__CUDA_ARCH_HAS_FEATURE__"


class StructureError(ValueError):
    """Unbalanced conditionals: the file's branch structure cannot be trusted."""


class NestingError(StructureError):
    """A branch whose chain (enclosing groups plus earlier siblings) passes :data:`MAX_CHAIN`."""


MAX_CHAIN = 256
"""Most constraints one branch's chain may hold. The chain is stored per branch (and reported
per gate), so 10,000 nested ``#if`` or a 100,000-branch ``#elif`` chain would cost quadratic
memory and time; the deepest chain in flashinfer 0.7.4 (14,458 files) holds 28."""


@dataclass(frozen=True, slots=True)
class Branch:
    """One arm of a conditional group as it appears in a file."""

    keyword: str
    expression: str
    """Its condition, normalised to ``#if`` form (``#ifdef X`` -> ``defined(X)``)."""
    line: int
    end_line: int
    body: tuple[int, int]
    inherited: tuple[Constraint, ...]
    """Constraints of the enclosing branches (include guards left out)."""
    local: tuple[Constraint, ...]
    """This group's part: earlier siblings negated, then the branch's own condition."""


@dataclass(frozen=True, slots=True)
class Definition:
    """A ``#define`` (or ``#undef`` with ``body=None``) and where it is compiled."""

    name: str
    body: Optional[str]
    function_like: bool
    line: int
    constraints: tuple[Constraint, ...]


@dataclass(frozen=True, slots=True)
class Structure:
    """What the tree-wide stages need from one file."""

    branches: tuple[Branch, ...]
    definitions: tuple[Definition, ...]
    enclosing: tuple[tuple[int, int, tuple[Constraint, ...]], ...] = ()
    """(first, last, constraints) of every branch body, for code outside directives (CCCL)."""


_DEFINE = re.compile(r"([A-Za-z_]\w*)(\()?\s*(.*)", re.S)


def _condition(d: Directive) -> str:
    if d.keyword in ("ifdef", "elifdef"):
        return f"defined({d.text.split()[0]})" if d.text else "0"
    if d.keyword in ("ifndef", "elifndef"):
        return f"!defined({d.text.split()[0]})" if d.text else "1"
    return d.text


def _negate(cond: str) -> str:
    return f"!({cond})"


def _include_guard(directives: list[Directive]) -> Optional[int]:
    """Index of the ``#endif`` that closes an include guard wrapping the file, if any."""
    conds = [i for i, d in enumerate(directives) if d.keyword not in ("define", "undef")]
    if len(directives) < 3 or not conds or conds[0] != 0:
        return None
    first, second = directives[0], directives[1]
    m = re.fullmatch(r"!\s*defined\s*\(?\s*(\w+)\s*\)?", _condition(first).strip())
    name = m.group(1) if m else None
    if not name or second.keyword != "define" or second.text.split()[:1] != [name]:
        return None
    depth = 0
    for i, d in enumerate(directives):
        if d.keyword in ("if", "ifdef", "ifndef"):
            depth += 1
        elif d.keyword == "endif":
            depth -= 1
            if depth == 0:
                return i if all(x.keyword in ("define", "undef") for x in directives[i + 1 :]) else None
    return None


def structure(directives: list[Directive], last_line: int) -> Structure:
    """Branches and definitions of a file, with their constraint chains.

    Raises StructureError on an ``#elif``/``#else``/``#endif`` without ``#if``, an ``#elif``
    after ``#else``, or an ``#if`` left open at the end of the file.
    """
    guard_end = _include_guard(directives)
    skip = {0, guard_end} if guard_end is not None else set()
    branches: list[Branch] = []
    definitions: list[Definition] = []
    enclosing: list[tuple[int, int, tuple[Constraint, ...]]] = []
    # Stack of open groups: [inherited constraints, earlier conditions, open branch info, has_else]
    stack: list[list] = []

    def current() -> tuple[Constraint, ...]:
        if not stack:
            return ()
        g = stack[-1]
        return g[0] + g[2]

    def close_branch(end_line: int) -> None:
        g = stack[-1]
        kw, expr, line, eline, local = g[3]
        body = (eline + 1, end_line - 1)
        branches.append(Branch(kw, expr, line, eline, body, g[0], local))
        enclosing.append((body[0], body[1], g[0] + local))

    for i, d in enumerate(directives):
        if i in skip:
            continue
        kw = d.keyword
        if kw in ("define", "undef"):
            m = _DEFINE.match(d.text)
            if m:
                body = m.group(3).strip() if kw == "define" else None
                definitions.append(Definition(m.group(1), body, bool(m.group(2)), d.line, current()))
            continue
        if kw in ("if", "ifdef", "ifndef"):
            if len(current()) + 1 > MAX_CHAIN:
                raise NestingError(f"#{kw} at line {d.line} would be under more than {MAX_CHAIN} conditions")
            cond = _condition(d)
            local = ((cond, True),)
            stack.append([current(), [cond], local, (kw, cond, d.line, d.end_line, local), False])
            continue
        if not stack:
            raise StructureError(f"#{kw} without #if at line {d.line}")
        g = stack[-1]
        close_branch(d.line)
        if kw == "endif":
            stack.pop()
            continue
        if g[4]:
            raise StructureError(f"#{kw} after #else at line {d.line}")
        if len(g[0]) + len(g[1]) + (kw != "else") > MAX_CHAIN:
            raise NestingError(f"#{kw} at line {d.line} would be under more than {MAX_CHAIN} conditions")
        earlier = tuple((c, False) for c in g[1])
        if kw == "else":
            g[4] = True
            local = earlier
            expr = " && ".join(_negate(c) for c in g[1])
        else:
            cond = _condition(d)
            local = earlier + ((cond, True),)
            expr = cond
            g[1].append(cond)
        g[2] = local
        g[3] = (kw, expr, d.line, d.end_line, local)
    if stack:
        raise StructureError(f"#{stack[-1][3][0]} at line {stack[-1][3][2]} is never closed")
    branches.sort(key=lambda b: b.line)
    return Structure(tuple(branches), tuple(definitions), tuple(enclosing))


# --- evaluation over the target domain -------------------------------------------------

Tri = Optional[bool]


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
    def build(cls, structures: Iterable[tuple[str, Structure]]) -> "MacroTable":
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

    def _evaluate(self, node: cexpr.Node, self_name: Optional[str]) -> Evaluation:
        raw, unknowns, derived = self._raw(node, self_name)
        values = tuple(None if v is None else v[0] != 0 for v in raw)
        return Evaluation(values, frozenset(unknowns), frozenset(derived))

    def _raw(self, node: cexpr.Node, self_name: Optional[str]) -> tuple[list[cexpr.Value], set[str], set[str]]:
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


@cache
def cccl_queries() -> tuple[tuple[re.Pattern, str], ...]:
    """CCCL target queries -> preprocessor condition templates, from data."""
    data = json.loads(resources.files("auditor").joinpath("data", "cccl-queries.json").read_text("utf-8"))
    return tuple((re.compile(q["pattern"]), q["condition"]) for q in data["queries"])


def cccl_condition(query: str) -> Optional[str]:
    """``NV_PROVIDES_SM_90`` -> ``defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900``."""
    for pattern, template in cccl_queries():
        m = pattern.match(query.strip())
        if m:
            sm = m.group(1) if m.groups() else ""
            n = int(sm) * 10 if sm else 0
            return template.format(n=n, sm=sm)
    return None

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

import re
from dataclasses import dataclass
from typing import Any

from auditor.cuda.directives import Directive

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
    body: str | None
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


def _include_guard(directives: list[Directive]) -> int | None:
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
            local: tuple[Constraint, ...] = ((cond, True),)
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
        earlier: tuple[Constraint, ...] = tuple((c, False) for c in g[1])
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


def encode(s: Structure) -> list:
    """A file's structure as nested lists of plain values (the result cache stores it as JSON)."""
    return [
        [
            [
                b.keyword,
                b.expression,
                b.line,
                b.end_line,
                list(b.body),
                [list(c) for c in b.inherited],
                [list(c) for c in b.local],
            ]
            for b in s.branches
        ],
        [[d.name, d.body, d.function_like, d.line, [list(c) for c in d.constraints]] for d in s.definitions],
        [[a, b, [list(c) for c in cs]] for a, b, cs in s.enclosing],
    ]


def decode(d: Any) -> Structure:
    """Inverse of :func:`encode`; raises on any unexpected shape (a foreign cache entry)."""
    branches, definitions, enclosing = d

    def constraints(cs: list) -> tuple:
        return tuple((str(c), bool(p)) for c, p in cs)

    return Structure(
        tuple(
            Branch(str(k), str(e), int(l1), int(l2), (int(b[0]), int(b[1])), constraints(i), constraints(lc))
            for k, e, l1, l2, b, i, lc in branches
        ),
        tuple(
            Definition(str(n), None if b is None else str(b), bool(f), int(ln), constraints(c))
            for n, b, f, ln, c in definitions
        ),
        tuple((int(a), int(b), constraints(cs)) for a, b, cs in enclosing),
    )

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

import bisect
import re
from dataclasses import dataclass, replace
from typing import Any

from auditor.cuda.directives import UNCONDITIONAL, Directive, code_lines

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
    defines: bool = False
    """Its body only ``#define``s or ``#undef``s macros (CUTLASS's per-arch config blocks): what it
    decides happens where those macros are used."""


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
    includes: tuple[str, ...] = ()
    """Headers named by ``#include "..."`` or ``<...>``, as written, in order (under any condition:
    what the file *can* include)."""


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
    conds = [i for i, d in enumerate(directives) if d.keyword not in UNCONDITIONAL]
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
                return i if all(x.keyword in UNCONDITIONAL for x in directives[i + 1 :]) else None
    return None


_INCLUDE = re.compile(r'["<]([^">]+)[">]')


def structure(directives: list[Directive], last_line: int, text: str | None = None) -> Structure:
    """Branches and definitions of a file, with their constraint chains.

    With the file's ``text``, branches whose body only defines macros are marked (``defines``).

    Raises StructureError on an ``#elif``/``#else``/``#endif`` without ``#if``, an ``#elif``
    after ``#else``, or an ``#if`` left open at the end of the file.
    """
    guard_end = _include_guard(directives)
    skip = {0, guard_end} if guard_end is not None else set()
    branches: list[Branch] = []
    definitions: list[Definition] = []
    enclosing: list[tuple[int, int, tuple[Constraint, ...]]] = []
    includes: list[str] = []
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
        if kw == "include":
            m = _INCLUDE.match(d.text)
            if m:
                includes.append(m.group(1).strip())
            continue
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
    if text is not None:
        branches = _mark_definitions(branches, directives, text)
    return Structure(tuple(branches), tuple(definitions), tuple(enclosing), tuple(includes))


_CONSTANT = re.compile(
    r"\s*(?:static\s+|inline\s+)*(?:(?:constexpr|const)\s+)*[\w:]+(?:\s*<[^;{}()]*>)?"
    r"(?:\s+(?:const|constexpr))*\s+\w+\s*(?:=\s*[^;{}()]+|\{[^;{}()]*\})\s*;\s*"
    r"|\s*using\s+\w+\s*=\s*[^;{}]+;\s*"
)
"""One declaration of a constant or an alias on its own line: ``static int const kVerticalVisit
= true;``, ``constexpr int kStages = 4;``, ``using Arch = cutlass::arch::Sm90;``."""


def _mark_definitions(branches: list[Branch], directives: list[Directive], text: str) -> list[Branch]:
    """Branches whose body only defines: ``#define``/``#undef``, or per-architecture constants
    and aliases, with no ``#include`` and no other code line, marked ``defines``. Nested groups
    are part of the body, so a block of nested definitions is one too."""
    defining = sorted(d.line for d in directives if d.keyword in ("define", "undef"))
    including = sorted(d.line for d in directives if d.keyword == "include")
    code = code_lines(text, directives)
    lines = text.split("\n")
    constants = [n for n in code if "const" in lines[n - 1] or "using" in lines[n - 1]]
    constants = [n for n in constants if _CONSTANT.fullmatch(lines[n - 1].split("//", 1)[0])]
    declared = sorted(set(defining) | set(constants))
    others = sorted(set(code) - set(constants))
    marked = {
        b.line
        for b in branches
        if _within(declared, b.body) and not _within(including, b.body) and not _within(others, b.body)
    }
    return [replace(b, defines=True) if b.line in marked else b for b in branches]


def _within(lines: list[int], span: tuple[int, int]) -> bool:
    """Some line of the sorted ``lines`` falls in ``span`` (first, last)."""
    i = bisect.bisect_left(lines, span[0])
    return i < len(lines) and lines[i] <= span[1]


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
                b.defines,
            ]
            for b in s.branches
        ],
        [[d.name, d.body, d.function_like, d.line, [list(c) for c in d.constraints]] for d in s.definitions],
        [[a, b, [list(c) for c in cs]] for a, b, cs in s.enclosing],
        list(s.includes),
    ]


def decode(d: Any) -> Structure:
    """Inverse of :func:`encode`; raises on any unexpected shape (a foreign cache entry)."""
    branches, definitions, enclosing, includes = d

    def constraints(cs: list) -> tuple:
        return tuple((str(c), bool(p)) for c, p in cs)

    return Structure(
        tuple(
            Branch(str(k), str(e), int(l1), int(l2), (int(b[0]), int(b[1])), constraints(i), constraints(lc), bool(df))
            for k, e, l1, l2, b, i, lc, df in branches
        ),
        tuple(
            Definition(str(n), None if b is None else str(b), bool(f), int(ln), constraints(c))
            for n, b, f, ln, c in definitions
        ),
        tuple((int(a), int(b), constraints(cs)) for a, b, cs in enclosing),
        tuple(str(i) for i in includes),
    )

"""What the comments beside a gate say about the parts it decides.

A comment that names the part a gate turns away was written by someone who thought about that
part (``# SM121 (GB10) is intentionally excluded: cutlass is faster there``, ``// do not widen
to SM12x: corrupts long decodes on SM121``): the exclusion is a decision, not an oversight, and
a finding that invites widening it points the wrong way. A comment that leaves the question
open (``# TODO: enable on sm_121``) closes nothing (``data/predicate-names.json`` ``comments``).
Only the comment blocks right above and right below the gate, and comments on its own lines,
count; for a Python rejection, also the block that opens what it lets through (right after its
body: ``return None`` then ``# Keep the collective above the measured crossover``); and the
same beside the definition of a flag or predicate the gate reads.

A comment may also state what exists (``# The SM100 mega kernels exist for 10.x only``), and so
may a rejection's message (``"FA4 is only supported on devices with compute capability 9.x,
10.x, or 11.x"``, ``"FlashInfer allreduce fusion requires SM90 or SM10X"``, in its body or the
body of a predicate it calls): when it names a part the gate lets through, the gate restates the
kernels' scope, and widening it alone gives the turned-away target nothing to run. The statement
is kept as the gate's ``scope``. What a rejection says holds for every test of the same predicates
(:func:`auditor.facts.causes.tests`), and for the callers of a predicate whose body holds such a
test: the check that turns a device away with its reason and the switch that enables the same
kernels on the same test are about one thing. A floor (``sm90 or newer``, ``at least 8.0``)
states what a kernel needs, not where it ends: no scope.

A comment that gives a shared-memory size as its reason (``sm_121 caps shared memory at 99 KB
per block``) is kept as the gate's ``limit``: the rules compare it with the other parts' sizes.

A comment that gives a measurement (``those cells run 2-5 % faster``, ``no A/B recorded``), beside
the gate, in its function's docstring or beside what it reads, says the gate is a speed choice
made on the parts it was measured on; the first such line is kept as the gate's ``measured``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import lru_cache

from auditor import arch, verdicts
from auditor.facts import causes, names
from auditor.model import Gate, Guards, Language, Resolution, SourceFile, Target

HELD_FILES = 64
"""Files whose lines are held while the gates are read (the least recently used beyond it go)."""
NEAR = 8
"""How many lines above or below a gate its comment blocks may reach."""
_PY_COMMENT = re.compile(r"#")
_C_COMMENT = re.compile(r"//|/\*")


def with_remarks(gates: Sequence[Gate], files: Sequence[SourceFile], targets: Sequence[Target]) -> list[Gate]:
    """The gates, each that excludes a requested target with the capabilities its comments name."""
    by_path = {f.path: f for f in files}
    wanted: dict[str, list[int]] = {}
    for i, g in enumerate(gates):
        if g.file in by_path and any(verdicts.turns_away(g, t) for t in targets):
            wanted.setdefault(g.file, []).append(i)
    out = list(gates)
    given: dict[frozenset[Resolution], list[tuple[str, frozenset[str]]]] = {}
    """What rejections say of the kernels behind them, by the predicates they test."""

    @lru_cache(maxsize=HELD_FILES)  # held all, the C gates' files took hundreds of MB
    def lines_of(path: str) -> list[str]:
        return by_path[path].data.decode("utf-8", "replace").split("\n")

    for path, indices in wanted.items():
        for i in indices:
            g = out[i]
            said = [_comments(lines_of(path), g.line, g.end_line, g.language)]
            if g.guards == Guards.REJECT and g.language == Language.PYTHON and g.body_lines[1] > g.end_line:
                # what a rejection guards is what follows it: the comment that opens it explains it
                said.append(_below(lines_of(path), g.body_lines[1], g.language))
            # a flag's or predicate's definition speaks for its uses
            said += [
                _comments(lines_of(r.file), r.line, _body_end(lines_of(r.file), r.line, r.detail), g.language)
                for r in g.resolutions
                if r.line > 0 and r.file in by_path and (r.file, r.line) != (g.file, g.line)
            ]
            text = "\n".join(said)
            named = names.comment_architectures(text)
            if named:
                g = replace(g, remarks=tuple(sorted(named, key=arch.Capability.parse)))
            measured = names.measurements(text + "\n" + _docstring(lines_of(path), g))
            if measured:
                g = replace(g, measured=measured[0])
            limit = names.limits(text)
            if limit:
                g = replace(g, limit=limit[0])
            stated = names.scope_statements(text)
            # what is said on giving up: the reasons of the predicates it reads, and its own when it
            # is a rejection (the messages in a branch that does the work are about other things)
            spans = [
                (lines_of(r.file), r.line, _body_end(lines_of(r.file), r.line, r.detail))
                for r in g.resolutions
                if r.line > 0 and r.file in by_path
            ]
            stated += names.scope_statements(_strings(spans), messages=True)
            if g.guards == Guards.REJECT:
                own = names.scope_statements(_strings([(lines_of(path), *g.body_lines)]), messages=True)
                stated += own
                if own and causes.tests(g):
                    given.setdefault(causes.tests(g), []).extend(own)
            out[i] = _scoped(g, stated)
    judged = [i for indices in wanted.values() for i in indices]
    # a rejection's reason speaks for every test of the same predicates
    for i in judged:
        if not out[i].scope and (cause := causes.tests(out[i])) in given:
            out[i] = _scoped(out[i], given[cause])
    # and a test in a predicate's body for the predicate's callers
    scoped = [out[i] for i in judged if out[i].scope]
    for i in judged:
        if not out[i].scope:
            inside = next((s.scope for r in causes.tests(out[i]) for s in scoped if _within(s, r, lines_of)), "")
            out[i] = replace(out[i], scope=inside) if inside else out[i]
    return out


_QUOTES = ('"""', "'''")


def _docstring(lines: list[str], gate: Gate) -> str:
    """The docstring of the Python function holding the gate: what it says of the choices in it."""
    name = gate.context.rpartition(".")[2]
    if gate.language != Language.PYTHON or not name:
        return ""
    head = re.compile(rf"\s*(?:async\s+)?def\s+{re.escape(name)}\s*\(")
    start = next((n for n in range(min(gate.line, len(lines)) - 1, -1, -1) if head.match(lines[n])), None)
    if start is None:
        return ""
    end = next((n for n in range(start, min(gate.line, len(lines))) if lines[n].rstrip().endswith(":")), None)
    first = next((n for n in range(end + 1, min(gate.line, len(lines))) if lines[n].strip()), None) if end else None
    if first is None or not lines[first].strip().lstrip("rRuU").startswith(_QUOTES):
        return ""
    quote = lines[first].strip().lstrip("rRuU")[:3]
    for n in range(first, min(gate.line, len(lines))):
        if lines[n].count(quote) >= (2 if n == first else 1):
            return "\n".join(lines[first : n + 1])
    return ""


def _within(gate: Gate, r: Resolution, lines_of: Callable[[str], list[str]]) -> bool:
    """Whether the gate sits in the body of the predicate ``r`` defines."""
    return gate.file == r.file and r.line < gate.line <= _body_end(lines_of(r.file), r.line, r.detail)


def _scoped(gate: Gate, stated: Sequence[tuple[str, frozenset[str]]]) -> Gate:
    """The gate with the statements of what exists that name a part it lets through, if any."""
    scope = "; ".join(list(dict.fromkeys(line for line, caps in stated if _admits_any(gate, caps)))[:SCOPES])
    return replace(gate, scope=scope) if scope else gate


_STRING = re.compile(r"""(["'])((?:\\.|(?!\1).)*)\1""")


def _strings(spans: Sequence[tuple[list[str], int, int]]) -> str:
    """The string literals on the lines of the spans (a file's lines, first and last line,
    1-based, inclusive), one per line: a rejection's messages."""
    found = []
    for lines, first, last in spans:
        for text in lines[max(first - 1, 0) : last] if first else ():
            found += [m.group(2) for m in _STRING.finditer(text)]
    return "\n".join(found)


def _admits_any(gate: Gate, capabilities: frozenset[str]) -> bool:
    """Whether the gate lets one of the capabilities a comment names through to the code it guards."""
    return any(not verdicts.turns_away(gate, arch.parse_target(c)) for c in capabilities)


SCOPES = 2
"""How many distinct statements of what exists a gate quotes (FA3's and FA4's for a test of both)."""

BODY = 40
"""How many lines of a predicate's body its comments may come from."""


def _body_end(lines: list[str], line: int, detail: str) -> int:
    """The last line of a Python predicate's body (``def …:``, indented deeper than the ``def``,
    at most :data:`BODY` lines): its comments explain what it returns. Other definitions are one line."""
    if not detail.lstrip().startswith(("def ", "async def ")) or line > len(lines):
        return line
    indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    end = line
    for n in range(line, min(len(lines), line + BODY)):
        text = lines[n]
        if text.strip() and len(text) - len(text.lstrip()) <= indent:
            break
        if text.strip():
            end = n + 1
    return end


def _comments(lines: list[str], line: int, end_line: int, language: Language) -> str:
    """The comment blocks right above and right below lines ``line..end_line``, and the comments on them."""
    python = language == Language.PYTHON
    starts = _STARTS[python]
    marker = _PY_COMMENT if python else _C_COMMENT
    found: list[str] = []
    n = line - 2
    while n >= 0 and line - 2 - n < NEAR and lines[n].strip().startswith(starts):
        found.append(lines[n])
        n -= 1
    for text in lines[max(line - 1, 0) : end_line]:
        m = marker.search(text)
        if m and not any(q in text[: m.start()] for q in "\"'"):
            found.append(text[m.start() :])
    found.append(_below(lines, end_line, language))  # the block right below a flag's definition explains it
    return "\n".join(found)


_STARTS = {True: ("#",), False: ("//", "/*", "*")}
"""How a comment line starts, in Python (True) and in C/CUDA."""


def _below(lines: list[str], end_line: int, language: Language) -> str:
    """The comment block right below line ``end_line`` (one blank line between allowed)."""
    starts = _STARTS[language == Language.PYTHON]
    found = []
    n = end_line + (end_line < len(lines) and not lines[end_line].strip())
    while n < len(lines) and n < end_line + NEAR and lines[n].strip().startswith(starts):
        found.append(lines[n])
        n += 1
    return "\n".join(found)

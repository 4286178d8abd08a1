"""Host C++ capability checks: the dispatch on the SM version and the checks that throw.

Preprocessor gates say where device code is compiled; much of what turns a GPU away is host
code that runs at launch: ``if (sm >= 100 && sm < 120)``, ``switch (sm)``,
``TORCH_CHECK(major >= 9)``. Per file (in workers) :func:`scan_text` finds the functions that
mention a capability source (a cheap token search first), reads them with tree-sitter-cpp
(whose error recovery keeps the rest of a file that does not parse whole), follows values
from their sources (``data/host-checks.json``) through assignments, derived values
(``major * 10 + minor``) and calls of the file's own functions, and records every condition
that reads one, as a :mod:`.cexpr` node over the device's major and minor. Over the whole
input :func:`gates` resolves helper calls through their definitions (by name otherwise),
evaluates each condition on every device capability in three-valued logic, and applies the
preprocessor branches around the check.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any, Protocol

import re2
import tree_sitter_cpp
from tree_sitter import Language, Node, Parser, Range

from auditor import arch, datafiles, fingerprint
from auditor.arch import Capability
from auditor.cuda import cexpr
from auditor.cuda.includes import Scopes
from auditor.cuda.structure import Constraint, Structure
from auditor.model import Domain, FileError, Gate, GateKind, Guards, Resolution, ResolvedBy
from auditor.model import Language as Lang

MAJOR = ("id", "<major>")
"""The device's major, as a condition node."""
MINOR = ("id", "<minor>")
NAMED = "@name:"
"""Prefix of a call node that stands for a variable trusted by its name (``sm``)."""

Value = Any
"""What a C++ expression holds: a cexpr node (a number), a dict of fields (a ``cudaDeviceProp``,
a pair), or None when it holds nothing known about the device."""

CONFLICT = ("id", "<conflict>")
"""A parameter whose calls pass different values (or one that is not a capability value)."""

MAX_FUNCTION_BYTES = 200_000
"""Functions longer than this are not followed (generated tables)."""
PASSES = 2
"""Walks of a file's functions before its checks are recorded: parameters filled through a
chain of calls this long are followed."""
MAX_DEPTH = 8
"""Helper definitions resolved through at most this many calls of one another."""


@dataclass(frozen=True, slots=True)
class Check:
    """One host condition on the device's capability, as a file holds it (no evaluation yet)."""

    line: int
    end_line: int
    form: str
    """``if``, ``else``, ``case``, ``default``, ``ternary`` or ``check``."""
    expression: str
    outer: tuple[tuple[Any, str, bool], ...]
    """Enclosing capability conditions: (node, text, polarity), outermost first."""
    local: tuple[tuple[Any, str, bool], ...]
    """Earlier siblings negated, then its own condition (a check: its condition, negated)."""
    body: tuple[int, int]
    guards: Guards
    function: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class Helper:
    """A function of the file that returns a capability value (``getSMVersion``)."""

    name: str
    line: int
    value: Any


@dataclass(frozen=True, slots=True)
class HostScan:
    """What one file holds for the host pass."""

    checks: tuple[Check, ...] = ()
    helpers: tuple[Helper, ...] = ()


# Data --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Table:
    calls: dict[str, str]
    out_params: tuple[dict, ...]
    attributes: dict[str, str]
    types: dict[str, str]
    fields: dict[str, dict[str, str]]
    names: frozenset[str]
    members: frozenset[str]
    constants: tuple[tuple[re.Pattern, str], ...]
    checks: tuple[tuple[re.Pattern, str], ...]
    compare_ops: dict[str, str]
    reject: re.Pattern
    logs: re.Pattern
    returns_reject: frozenset[str]
    tokens: re.Pattern
    """The names, as a pattern to extend (with a file's own helpers)."""
    token_text: Any = field(repr=False, default=None)
    """The same, compiled by RE2 (a DFA: one pass over a file whatever the number of names)."""
    token_bytes: Any = field(repr=False, default=None)
    """The same over bytes (the pre-filter every C/CUDA file goes through)."""


@cache
def table() -> _Table:
    """``data/host-checks.json``, compiled."""
    raw = datafiles.read_json("host-checks.json")
    tokens = {*raw["calls"], *(o["call"] for o in raw["out_params"]), *raw["attributes"], *raw["types"]}
    tokens |= {*raw["names"], *raw["members"]}
    words = "|".join(sorted(map(re.escape, tokens), key=len, reverse=True))
    return _Table(
        calls=raw["calls"],
        out_params=tuple(raw["out_params"]),
        attributes=raw["attributes"],
        types=raw["types"],
        fields=raw["fields"],
        names=frozenset(raw["names"]),
        members=frozenset(raw["members"]),
        constants=tuple((re.compile(c["pattern"]), c["value"]) for c in raw["constants"]),
        checks=tuple((re.compile(c["pattern"]), c["form"]) for c in raw["checks"]),
        compare_ops=raw["compare_ops"],
        reject=re.compile("|".join(raw["reject_calls"])),
        logs=re.compile("|".join(raw["log_calls"])),
        returns_reject=frozenset(raw["returns_reject"]),
        tokens=re.compile(rf"\b(?:{words})\b"),
        token_text=re2.compile(rf"\b(?:{words})\b"),
        token_bytes=re2.compile(rf"\b(?:{words})\b".encode()),
    )


@cache
def _parser() -> Parser:
    return Parser(Language(tree_sitter_cpp.language()))


def _source(kind: str) -> Value:
    """The value a source of ``kind`` gives."""
    if kind == "sm":
        return ("bin", "+", ("bin", "*", MAJOR, ("num", 10, False)), MINOR)
    if kind == "arch":
        return ("bin", "+", ("bin", "*", MAJOR, ("num", 100, False)), ("bin", "*", MINOR, ("num", 10, False)))
    if kind == "major":
        return MAJOR
    if kind == "minor":
        return MINOR
    return {f: _source(k) for f, k in table().fields.get(kind, {}).items()}


# Worker side -------------------------------------------------------------------------------

_DIRECTIVE = re.compile(rb"^[ \t]*#(?:\\\r?\n|[^\n])*", re.M)


def wanted(data: bytes) -> bool:
    """The cheap pre-filter: whether a file mentions any capability source or name."""
    return table().token_bytes.search(data) is not None


def scan_bytes(data: bytes) -> HostScan:
    """The capability checks and helpers of one file (its bytes: tree-sitter reads them as
    they are, and lines do not depend on the encoding)."""
    tab = table()
    if not tab.token_bytes.search(data):
        return HostScan()
    # Directives blanked (same bytes, same lines): both arms of an #if parse as one body,
    # and the preprocessor's say over each check comes from the file's structure instead.
    data = _DIRECTIVE.sub(lambda m: m.group().translate(_BLANK), data)
    code = _code(data)
    if not tab.token_text.search(code):
        return HostScan()  # only comments and strings name a source
    # Only the functions that name a source, and those they call, are parsed: each on its
    # own, at its place (everything else blanked), so that a region tree-sitter cannot read
    # costs only itself. A helper found there (a function of the file that returns a
    # capability value) is a source too: the functions that call it are read in a second round.
    found = _scan(data, _regions(code, tab.token_text))
    extra = {h.name for h in found.helpers} - tab.names - set(tab.calls)
    if extra:
        more = re.compile(tab.tokens.pattern + "|" + "|".join(rf"\b{re.escape(n)}\b" for n in sorted(extra)))
        found = _scan(data, _regions(code, more))
    return found


def _scan(data: bytes, regions: list[tuple[int, int]]) -> HostScan:
    """Checks and helpers of the functions in ``regions``."""
    if not regions:
        return HostScan()
    data = _only(data, regions)
    parser = _parser()
    parser.included_ranges = [_range(data, a, b) for a, b in _merged(regions)]  # the rest is blank: not read at all
    root = parser.parse(data).root_node
    functions = list(_functions(root, data))
    named = [(_function_name(f, data), f) for f in functions]
    file = _File(data, {n: f for n, f in named if n})
    file.chosen = _chosen_members(functions, data)
    for n, _ in named:
        file.definitions[n] = file.definitions.get(n, 0) + 1
    # Helpers and parameters first (a function returning a capability value is a source for
    # the others; a parameter every call fills with the same capability value holds it),
    # each pass reading the bindings of the one before; then the checks.
    todo = list(functions)
    for _ in range(PASSES):
        file.incoming, file.bindings, file.calls = file.bindings, {}, {}
        for f in todo:
            file.walk_function(f, record=False)
        if not (file.bindings or file.helpers):
            break  # another pass would see the same
        bound = {n for n, b in file.bindings.items() if any(v is not CONFLICT for v in b.values())}
        todo += [g for n, g in file.functions.items() if n in bound and g not in todo]
    file.incoming = file.bindings
    if file.incoming:  # calls in functions not walked (no token) pass something else
        names = sorted(file.incoming, key=len, reverse=True)
        calls = Counter(m.group(1).decode() for m in re.finditer(_call_of(names), data))
        for name in names:
            if file.calls.get(name, 0) < calls[name] - file.definitions.get(name, 0):
                file.incoming[name] = {i: CONFLICT for i in file.incoming[name]}
    for f in todo:
        file.walk_function(f, record=True)
    return HostScan(tuple(sorted(file.checks, key=lambda c: c.line)), tuple(file.helpers.values()))


def _merged(regions: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans, overlapping ones joined."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(regions):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _range(data: bytes, start: int, end: int) -> Range:
    def point(at: int) -> tuple[int, int]:
        return data.count(b"\n", 0, at), at - (data.rfind(b"\n", 0, at) + 1)

    return Range(point(start), point(end), start, end)


def _chosen_members(functions: list[Node], data: bytes) -> frozenset[str]:
    """Members a constructor of the file sets to a nonzero number (``: sm_version(120)``): the
    architecture of a configuration object, one constructor per architecture, not the device's
    SM, whatever their name (a member set to the device's SM is set from a call)."""
    out = set()
    for f in functions:
        inits = next((c for c in f.children if c.type == "field_initializer_list"), None)
        for init in inits.named_children if inits is not None else ():
            name = next((c for c in init.named_children if c.type == "field_identifier"), None)
            args = init.child_by_field_name("arguments") or next(
                (c for c in init.named_children if c.type == "argument_list"), None
            )
            values = [c for c in args.named_children if c.type != "comment"] if args is not None else []
            if name is not None and len(values) == 1 and values[0].type == "number_literal":
                if _number(_text(values[0], data)) not in (("num", 0, False), ("num", -1, False)):
                    out.add(_text(name, data))
    return frozenset(out)


_BLANK = bytes(10 if b == 10 else 32 for b in range(256))
"""A translation table: every byte but a newline becomes a space."""
_BLANK_TEXT = {c: 32 for c in range(256) if c != 10}
_NOT_CODE = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
_BODY_BEFORE = re.compile(r"(?:\)|\b(?:const|noexcept|override|final|mutable))\s*$")
_ACCESS = re.compile(r"\s*(?:public|private|protected)\s*:(?!:)")
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def _code(data: bytes) -> str:
    """The file as text (Latin-1: one character a byte) with comments and literals blanked."""
    text = data.decode("latin-1")
    return _NOT_CODE.sub(lambda m: m.group().translate(_BLANK_TEXT), text)


def _bodies(code: str) -> list[tuple[int, int]]:
    """(start, end) of every outermost function body: a brace block after ``)`` (or after
    ``const``, ``noexcept``, ...) that no other such block holds."""
    spans: list[tuple[int, int]] = []
    stack: list[tuple[int, bool]] = []
    inside = 0  # how many open blocks are function bodies
    for m in re.finditer(r"[{}]", code):
        if m.group() == "{":
            body = not inside and bool(_BODY_BEFORE.search(code, max(0, m.start() - 64), m.start()))
            stack.append((m.start(), body))
            inside += body
        elif stack:
            start, body = stack.pop()
            if body:
                inside -= 1
                spans.append((start, m.end()))
    return sorted(spans)


def _head(code: str, start: int) -> int:
    """Where the declaration that a body at ``start`` belongs to begins (after an access label)."""
    head = max(code.rfind(c, 0, start) for c in ";{}") + 1
    label = _ACCESS.match(code, head)
    return label.end() if label else head


def _regions(code: str, tokens: Any) -> list[tuple[int, int]]:
    """The spans to parse: each function whose body names a source, with its declaration;
    the functions those call (their parameters may receive a capability); and, for a name
    outside any function (a ``static_assert`` in a class template), its statement."""
    bodies = _bodies(code)
    starts = [b[0] for b in bodies]
    heads = [_head(code, b[0]) for b in bodies]
    chosen: set[int] = set()
    out: list[tuple[int, int]] = []
    for m in tokens.finditer(code):
        i = bisect.bisect_right(starts, m.start()) - 1
        if i >= 0 and bodies[i][0] <= m.start() < bodies[i][1]:
            chosen.add(i)  # in a body
        elif i + 1 < len(bodies) and heads[i + 1] <= m.start():
            chosen.add(i + 1)  # in a declaration (a parameter)
        else:
            end = code.find(";", m.start())
            out.append((_head(code, m.start()), len(code) if end < 0 else end + 1))
    called = {n for i in chosen for n in _CALLED.findall(code, bodies[i][0], bodies[i][1])}
    for i, (start, _) in enumerate(bodies):
        if i not in chosen:
            name = _CALLED.search(code, heads[i], start)
            if name and name.group(1) in called:
                chosen.add(i)
    out += [(heads[i], bodies[i][1]) for i in chosen]
    return sorted(out)


def _only(data: bytes, regions: list[tuple[int, int]]) -> bytes:
    """``data`` with everything outside ``regions`` blanked (newlines kept)."""
    out = bytearray(data.translate(_BLANK))
    for a, b in regions:
        out[a:b] = data[a:b]
    return bytes(out)


def _call_of(names: list[str]) -> re.Pattern[bytes]:
    """Calls of any of ``names`` (the name is group 1)."""
    return re.compile(rb"\b(" + b"|".join(re.escape(n.encode()) for n in names) + rb")\s*\(")


def _functions(root: Node, data: bytes) -> Iterator[Node]:
    """Every function definition, outermost ones only (a lambda is walked with its function),
    and the ``static_assert``s outside them (on a class template's SM parameter)."""
    stack = [root]
    while stack:
        n = stack.pop()
        if n.type == "static_assert_declaration":
            yield n
            continue
        if n.type == "function_definition" or (
            n.type == "compound_statement" and n.parent is not None and n.parent.type in ("ERROR", "translation_unit")
        ):
            if n.end_byte - n.start_byte <= MAX_FUNCTION_BYTES:
                yield n  # a body whose declaration did not parse is walked without it
            continue
        stack.extend(reversed(n.children))


def _function_name(f: Node, data: bytes) -> str:
    if f.type != "function_definition":
        return ""
    d = f.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    if d is None:
        return ""
    name = d.child_by_field_name("declarator")
    return _bare(_text(name, data)) if name is not None else ""


def _text(n: Node, data: bytes) -> str:
    return data[n.start_byte : n.end_byte].decode("utf-8", "replace")


def _bare(name: str) -> str:
    """``tensorrt_llm::common::getSMVersion`` -> ``getSMVersion``; ``f<T>`` -> ``f``."""
    return name.split("<", 1)[0].rsplit("::", 1)[-1].strip()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _mentions(v: Value) -> bool:
    """Whether a value reads the device's capability."""
    if isinstance(v, dict):
        return any(_mentions(x) for x in v.values())
    if not isinstance(v, tuple):
        return False
    return any(n in (MAJOR, MINOR) or (n[0] == "call" and n[1] != "<unknown>") for n in cexpr.nodes(v))


@lru_cache(maxsize=4096)
def _number(text: str) -> tuple:
    """A C++ integer literal as a condition node (a floating one is unknown)."""
    try:
        return cexpr.parse(text.rstrip("uUlLzZ") if "." not in text else "x")
    except cexpr.ConditionError:
        return _unknown(text)


def _condition_text(cond: Node, data: bytes) -> str:
    """An ``if`` condition as written, without its parentheses."""
    shown = _one_line(_text(cond, data))
    return shown[1:-1].strip() if shown.startswith("(") and shown.endswith(")") else shown


def _unknown(text: str) -> tuple:
    return ("id", _one_line(text)[:80] or "<unknown>")


class _File:
    """One file's walk: values per function, calls of its own functions with capability arguments."""

    def __init__(self, data: bytes, functions: dict[str, Node]):
        self.data = data
        self.functions = functions
        self.helpers: dict[str, Helper] = {}
        self.bindings: dict[str, dict[int, Value]] = {}
        """Per function of the file: the capability value each parameter receives from every
        call seen (:data:`CONFLICT` when calls disagree or one passes something else)."""
        self.definitions: dict[str, int] = {}
        """How many functions of the file have each name."""
        self.calls: dict[str, int] = {}
        """Calls of each of the file's functions seen in the last pass."""
        self.incoming: dict[str, dict[int, Value]] = {}
        """The bindings of the previous pass, which parameters take."""
        self.checks: list[Check] = []
        self.seen: set[tuple[int, str]] = set()
        self.configured: set[str] = set()
        """Parameters with a literal default (``int sm_version = 100``) in the function walked:
        a value the caller chooses (one constructor per architecture), not the device's SM,
        whatever their name."""
        self.chosen: frozenset[str] = frozenset()
        """See :func:`_chosen_members`."""
        self.tab = table()

    # walking -----------------------------------------------------------------------------

    def walk_function(self, f: Node, record: bool) -> None:
        """Follow values through one function; with ``record``, keep its checks."""
        self.record = record
        self.env: dict[str, Value] = {}
        self.configured = set()
        self.function = _function_name(f, self.data)
        self.returns: list[Value] = []
        if f.type in ("static_assert_declaration", "compound_statement"):
            self.walk(f, ())
            return
        self._parameters(f)
        body = f.child_by_field_name("body")
        if body is not None:
            self.walk(body, ())
        # A helper returns one capability value (besides constant early exits: ``return false``
        # when an API call fails); a function whose returns differ (a switch of returns)
        # depends on its control flow, which is not followed: it is not a source.
        values = [r for r in self.returns if _mentions(r)]
        others = [r for r in self.returns if not _mentions(r)]
        if (
            self.function
            and values
            and len(set(map(repr, values))) == 1
            and all(isinstance(r, tuple) and r[0] == "num" for r in others)
        ):
            self.helpers.setdefault(self.function, Helper(self.function, f.start_point[0] + 1, values[0]))

    def _parameters(self, f: Node) -> None:
        bound = {i: v for i, v in self.incoming.get(self.function, {}).items() if v is not CONFLICT}
        d = f.child_by_field_name("declarator")
        while d is not None and d.type != "function_declarator":
            d = d.child_by_field_name("declarator")
        params = d.child_by_field_name("parameters") if d is not None else None
        if params is None:
            return
        i = 0
        for p in params.named_children:
            if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
                continue
            name = self._declared_name(p)
            typ = p.child_by_field_name("type")
            kind = self.tab.types.get(_bare(_text(typ, self.data))) if typ is not None else None
            default = p.child_by_field_name("default_value")
            if i in bound:
                self.env[name] = bound[i]
            elif kind:
                self.env[name] = _source(kind)
            elif default is not None and default.type == "number_literal":
                self.configured.add(name)
            i += 1

    def _declared_name(self, n: Node) -> str:
        d = n.child_by_field_name("declarator")
        while d is not None and d.type not in ("identifier", "field_identifier"):
            nxt = d.child_by_field_name("declarator")
            if nxt is None:
                nxt = next((c for c in d.named_children if c.type == "identifier"), None)
            d = nxt
        return _text(d, self.data) if d is not None else ""

    def walk(self, n: Node, outer: tuple) -> None:
        t = n.type
        if t == "if_statement":
            self._if(n, outer)
        elif t == "switch_statement":
            self._switch(n, outer)
        elif t == "conditional_expression":
            self._ternary(n, outer)
        elif t == "static_assert_declaration":
            cond = n.child_by_field_name("condition")
            msg = n.child_by_field_name("message")
            if cond is not None:
                shown = _text(cond, self.data)
                self._check(n, "static_assert", shown, shown, self.top(cond), msg, outer)
        elif t == "declaration" or t == "field_declaration":
            self._declaration(n, outer)
        elif t == "assignment_expression":
            for c in n.children:
                if c.type != "=":
                    self.walk(c, outer)
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            op = n.child_by_field_name("operator")
            if left is not None and right is not None and (op is None or op.type == "="):
                self._assign(left, self.top(right), outer, right)
        elif t == "return_statement":
            for c in n.named_children:
                self.walk(c, outer)
            if n.named_children:
                self.returns.append(self.top(n.named_children[0]))
        elif t == "call_expression":
            self._call(n, outer)
        elif t == "lambda_expression":
            return  # its own scope, its own parameters: not followed
        elif t == "compound_statement":
            known: tuple = ()
            for c in n.children:
                if c.is_named and not self._relevant(c):
                    continue  # names nothing that holds a capability: no check inside, no value changes
                self.walk(c, outer + known)
                known += self._after(c)
        else:
            for c in n.children:
                self.walk(c, outer)

    def _after(self, s: Node) -> tuple:
        """What the statements after ``s`` in its block may assume: an ``if`` without ``else``
        whose branch leaves (returns, throws) was not taken. (A check that passed is not
        assumed: each check is judged on its own.)"""
        if s.type == "if_statement" and s.child_by_field_name("alternative") is None:
            cond, body = s.child_by_field_name("condition"), s.child_by_field_name("consequence")
            if cond is None or body is None or not self._leaves(body):
                return ()
            v = self.top_scalar(cond)
            return ((v, _condition_text(cond, self.data), False),) if _mentions(v) else ()
        return ()

    def _leaves(self, body: Node) -> bool:
        """Whether a branch ends by leaving the block (return, throw, break, continue, an exit)."""
        last = body
        while last.type == "compound_statement":
            inner = [c for c in last.named_children if c.type != "comment"]
            if not inner:
                return False
            last = inner[-1]
        return last.type in ("return_statement", "throw_statement", "break_statement", "continue_statement") or (
            self._gives_up(last)
        )

    def _assign(self, left: Node, v: Value, outer: tuple = (), right: Node | None = None) -> None:
        """A capability variable given a new value keeps it only where the assignment ran: after
        ``if (sm > 120 && sm < 130) sm = 120;`` the variable is 120 on every 12.x part and the
        device's SM elsewhere. A plain value (``sm = 120;``) ends its reading as the device's
        SM, even for a name the convention would take as one."""
        key = _one_line(_text(left, self.data))
        old = self._name(left, key) if left.type in ("identifier", "field_expression") else None
        if isinstance(old, tuple) and _mentions(old) and not (isinstance(v, tuple) and _mentions(v)):
            new = v if isinstance(v, tuple) or right is None else self._scalar(right)
            self.env[key] = ("cond", _all(outer), new, old) if outer else new
        elif v is None or not _mentions(v):
            self.env.pop(key, None)
        else:
            self.env[key] = v

    def _declaration(self, n: Node, outer: tuple) -> None:
        typ = n.child_by_field_name("type")
        kind = self.tab.types.get(_bare(_text(typ, self.data))) if typ is not None else None
        for d in n.children_by_field_name("declarator"):
            for c in d.children:
                self.walk(c, outer)
            if d.type == "init_declarator":
                target = d.child_by_field_name("declarator")
                value = d.child_by_field_name("value")
                if target is None or value is None:
                    continue
                if target.type == "structured_binding_declarator":
                    v = self.top(value)
                    names = [_text(c, self.data) for c in target.named_children]
                    fields = list(v) if isinstance(v, dict) else []
                    for name, f in zip(names, fields):
                        self._set(name, v[f])
                    continue
                if value.type in ("argument_list", "initializer_list"):
                    args = value.named_children
                    v = self.top(args[0]) if len(args) == 1 else None
                else:
                    v = self.top(value)
                self._set(self._declared_name(d) or _text(target, self.data), v)
            else:
                name = _text(d, self.data) if d.type == "identifier" else self._declared_name(d)
                if kind:
                    self._set(name, _source(kind))
                else:
                    self.env.pop(name, None)

    def _set(self, name: str, v: Value) -> None:
        if v is None or not _mentions(v):
            self.env.pop(name, None)
        else:
            self.env[name] = v

    # values ------------------------------------------------------------------------------

    def value(self, n: Node) -> Value:
        """What an expression holds (a cexpr node, a dict of fields, or None)."""
        t = n.type
        text = _text(n, self.data)
        if t in ("parenthesized_expression", "condition_clause"):
            inner = [c for c in n.named_children if c.type != "comment"]
            return self.value(inner[-1]) if inner else None
        if t == "number_literal":
            return _number(text)
        if t in ("true", "false"):
            return ("num", int(t == "true"), False)
        if t in ("string_literal", "concatenated_string", "raw_string_literal"):
            return ("num", 1, False)  # a pointer: true (``assert(ok && "message")``)
        if t in ("identifier", "field_expression", "qualified_identifier", "this"):
            return self._name(n, text)
        if t == "binary_expression":
            op = n.child_by_field_name("operator")
            a, b = n.child_by_field_name("left"), n.child_by_field_name("right")
            if op is None or a is None or b is None or op.type not in cexpr._BINARY:
                return _unknown(text)
            return ("bin", op.type, self._scalar(a), self._scalar(b))
        if t == "unary_expression":
            op = n.child_by_field_name("operator")
            x = n.child_by_field_name("argument")
            if op is None or x is None or op.type not in ("!", "-", "~", "+"):
                return _unknown(text)
            operand = self._scalar(x)
            return operand if op.type == "+" else ("un", op.type, operand)
        if t == "conditional_expression":
            c, a, b = (n.child_by_field_name(k) for k in ("condition", "consequence", "alternative"))
            if c is None or a is None or b is None:
                return _unknown(text)
            return ("cond", self._scalar(c), self._scalar(a), self._scalar(b))
        if t == "cast_expression":
            v = n.child_by_field_name("value")
            return self.value(v) if v is not None else None
        if t == "pointer_expression":
            x = n.child_by_field_name("argument")
            op = n.child_by_field_name("operator")
            return self.value(x) if x is not None and op is not None and op.type == "*" else None
        if t == "call_expression":
            return self._call_value(n)
        return _unknown(text)

    def top(self, n: Node) -> Value:
        """:meth:`value` of a whole expression, or None at once when it names nothing that could
        hold a capability (most expressions of a long function)."""
        return self.value(n) if self._relevant(n) else None

    def top_scalar(self, n: Node) -> tuple:
        """:meth:`_scalar` of a whole expression, as cheaply as :meth:`top`."""
        return self._scalar(n) if self._relevant(n) else _unknown(_text(n, self.data))

    def _relevant(self, n: Node) -> bool:
        if self.tab.token_bytes.search(self.data, n.start_byte, n.end_byte):
            return True
        piece = self.data[n.start_byte : n.end_byte]
        return any(k.encode() in piece for k in self.env) or any(k.encode() in piece for k in self.helpers)

    def _scalar(self, n: Node) -> tuple:
        v = self.value(n)
        return v if isinstance(v, tuple) else _unknown(_text(n, self.data))

    def _name(self, n: Node, text: str) -> Value:
        key = _one_line(text)
        if key in self.env:
            return self.env[key]
        if n.type == "field_expression":
            base = n.child_by_field_name("argument")
            member = n.child_by_field_name("field")
            if base is not None and member is not None:
                of = self.value(base)
                name = _text(member, self.data)
                if isinstance(of, dict) and name in of:
                    return of[name]
                if name in self.tab.members and not (base.type == "this" and name in self.chosen):
                    return ("call", NAMED + name, "")
            return _unknown(text)
        bare = _bare(key)
        if bare in self.tab.names and bare == key.split("::")[-1] and key not in self.configured | self.chosen:
            return ("call", NAMED + bare, "")
        for pattern, value in self.tab.constants:
            if m := pattern.match(bare):
                return ("num", int(value.format(m.group(), *m.groups())), False)
        return _unknown(text)

    def _callee(self, n: Node) -> str:
        f = n.child_by_field_name("function")
        return _bare(_text(f, self.data)) if f is not None else ""

    def _call_value(self, n: Node) -> Value:
        name = self._callee(n)
        args = n.child_by_field_name("arguments")
        argv = [c for c in args.named_children if c.type != "comment"] if args is not None else []
        if name in ("static_cast", "int", "int32_t", "int64_t", "unsigned", "size_t") and len(argv) == 1:
            return self.value(argv[0])
        if name in ("make_pair", "make_tuple", "pair") and len(argv) == 2:
            return {"first": self.value(argv[0]), "second": self.value(argv[1])}
        if name in self.tab.calls or name in self.helpers:
            kind = self.tab.calls.get(name, "")
            if kind in ("pair", "properties"):
                return {f: ("call", name, f) for f in self.tab.fields[kind]}
            helper = self.helpers.get(name)
            if helper is not None and isinstance(helper.value, dict):
                return {f: ("call", name, f) for f in helper.value}
            return ("call", name, "")
        return _unknown(_text(n, self.data))

    # checks ------------------------------------------------------------------------------

    def _call(self, n: Node, outer: tuple) -> None:
        name = self._callee(n)
        args = n.child_by_field_name("arguments")
        argv = [c for c in args.named_children if c.type != "comment"] if args is not None else []
        for c in argv:
            self.walk(c, outer)
        for spec in self.tab.out_params:
            if spec["call"] != name or len(argv) <= spec["arg"]:
                continue
            target = argv[spec["arg"]]
            if target.type == "pointer_expression" and target.child_by_field_name("argument") is not None:
                target = target.child_by_field_name("argument")
            gives = spec.get("gives")
            if "attribute" in spec and len(argv) > spec["attribute"]:
                gives = self.tab.attributes.get(_bare(_text(argv[spec["attribute"]], self.data)))
            if gives:
                self._assign(target, _source(gives))
        form = next((f for p, f in self.tab.checks if p.match(name)), None)
        if form is not None and argv:
            if form == "compare" and len(argv) >= 2:
                suffix = name.rsplit("_", 1)[-1]
                op = self.tab.compare_ops[suffix]
                relevant = self._relevant(argv[0]) or self._relevant(argv[1])
                cond: Value = ("bin", op, self._scalar(argv[0]), self._scalar(argv[1])) if relevant else None
                shown = f"{_text(argv[0], self.data)} {op} {_text(argv[1], self.data)}"
                written = f"{_text(argv[0], self.data)}, {_text(argv[1], self.data)}"
                self._check(n, name, written, shown, cond, argv[2:], outer)
            elif form == "condition":
                shown = _text(argv[0], self.data)
                self._check(n, name, shown, shown, self.top(argv[0]), argv[1:], outer)
        if name in self.functions and not self.record:
            bound = self.bindings.setdefault(name, {})
            self.calls[name] = self.calls.get(name, 0) + 1
            for i, a in enumerate(argv):
                v = self.top(a)
                if v is None or not _mentions(v) or bound.get(i, v) != v:
                    v = CONFLICT
                bound[i] = v

    def _check(self, n: Node, keyword: str, written: str, shown: str, v: Value, rest: Any, outer: tuple) -> None:
        """A check macro: it rejects where its condition (``shown``, as a condition) is false."""
        if not self.record or not isinstance(v, tuple) or not _mentions(v):
            return
        messages = self._strings(rest if isinstance(rest, list) else [rest] if rest is not None else [])
        stream = n.parent  # TVM_FFI_ICHECK_EQ(a, b) << "message" << value
        while stream is not None and stream.type == "binary_expression":
            op = stream.child_by_field_name("operator")
            if op is None or op.type != "<<":
                break
            right = stream.child_by_field_name("right")
            messages += self._strings([right] if right is not None else [])
            stream = stream.parent
        text = f"{keyword}({_one_line(written)})"
        line = n.start_point[0] + 1
        self._add(
            Check(
                line,
                line,
                "check",
                text,
                outer,
                ((v, _one_line(shown), False),),
                (line, n.end_point[0] + 1),
                Guards.REJECT,
                self.function,
                " ".join(" ".join(messages).split())[:200],
            )
        )

    def _strings(self, nodes: Iterable[Node | None]) -> list[str]:
        out = []
        for a in nodes:
            if a is None:
                continue
            stack = [a]
            while stack:
                x = stack.pop()
                if x.type == "string_content":
                    out.append(_text(x, self.data))
                elif x.type not in ("call_expression",):
                    stack.extend(reversed(x.children))
        return out

    def _add(self, c: Check) -> None:
        key = (c.line, c.expression + c.form)
        if key not in self.seen:
            self.seen.add(key)
            self.checks.append(c)

    def _if(self, n: Node, outer: tuple) -> None:
        earlier: list[tuple[Any, str, bool]] = []
        mentions = False
        node: Node | None = n
        while node is not None and node.type == "if_statement":
            cond = node.child_by_field_name("condition")
            body = node.child_by_field_name("consequence")
            if cond is None:
                return
            self.walk(cond, outer)
            v = self.top_scalar(cond)
            shown = _condition_text(cond, self.data)
            here = _mentions(v)
            mentions = mentions or here
            local = tuple((c, s, False) for c, s, _ in earlier) + ((v, shown, True),)
            if here and body is not None:
                self._branch(node, "if" if not earlier else "else if", shown, local, body, outer, cond)
            if body is not None:
                self.walk(body, outer + (local if mentions else ()))
            earlier.append((v, shown, True))
            alt = node.child_by_field_name("alternative")
            node = None
            if alt is not None:
                inner = [c for c in alt.named_children if c.type != "comment"]
                nxt = inner[0] if inner else None
                if nxt is not None and nxt.type == "if_statement":
                    node = nxt
                elif nxt is not None:
                    local = tuple((c, s, False) for c, s, _ in earlier)
                    if mentions:
                        shown = " && ".join(f"!({s})" for _, s, _ in earlier)
                        self._branch(alt, "else", shown, local, nxt, outer, alt)
                    self.walk(nxt, outer + (local if mentions else ()))

    def _branch(self, n: Node, form: str, shown: str, local: tuple, body: Node, outer: tuple, at: Node) -> None:
        if not self.record:
            return
        self._add(
            Check(
                at.start_point[0] + 1,
                at.end_point[0] + 1,
                form,
                shown,
                outer,
                local,
                (body.start_point[0] + 1, body.end_point[0] + 1),
                Guards.REJECT if self._rejects([body]) else Guards.TAKE,
                self.function,
            )
        )

    def _rejects(self, statements: list[Node]) -> bool:
        """Whether a branch only gives up: throws, fails a check, calls an exit, returns nothing or false."""
        flat: list[Node] = []
        for s in statements:
            if s.type == "compound_statement":
                flat += [c for c in s.named_children if c.type != "comment"]
            elif s.type != "comment":
                flat.append(s)
        flat = [s for s in flat if s.type != "break_statement" and not self._logs(s)]
        return bool(flat) and all(self._gives_up(s) for s in flat)

    def _logs(self, s: Node) -> bool:
        """A statement that only reports (``fprintf(stderr, ...)``, ``std::cerr << ...``)."""
        if s.type != "expression_statement" or not s.named_children:
            return False
        e = s.named_children[0]
        while e.type == "binary_expression" and (left := e.child_by_field_name("left")) is not None:
            e = left
        name = self._callee(e) if e.type == "call_expression" else _text(e, self.data)
        return bool(self.tab.logs.match(name))

    def _gives_up(self, s: Node) -> bool:
        if s.type == "throw_statement":
            return True
        if s.type == "return_statement":
            values = [c for c in s.named_children if c.type != "comment"]
            return (_one_line(_text(values[0], self.data)) if values else "") in self.tab.returns_reject
        if s.type == "compound_statement":
            return self._rejects([s])
        if s.type != "expression_statement" or not s.named_children:
            return False
        e = s.named_children[0]
        while e.type == "binary_expression":  # CHECK(false) << "message"
            left = e.child_by_field_name("left")
            if left is None:
                break
            e = left
        if e.type != "call_expression":
            return False
        name = self._callee(e)
        if self.tab.reject.match(name):
            return True
        args = e.child_by_field_name("arguments")
        first = args.named_children[0] if args is not None and args.named_children else None
        is_check = any(p.match(name) and f == "condition" for p, f in self.tab.checks)
        return is_check and first is not None and _text(first, self.data).strip() in ("false", "0")

    def _switch(self, n: Node, outer: tuple) -> None:
        cond = n.child_by_field_name("condition")
        body = n.child_by_field_name("body")
        if cond is None or body is None:
            return
        self.walk(cond, outer)
        subject = self.top_scalar(cond)
        shown = _condition_text(cond, self.data)
        if not _mentions(subject):
            self.walk(body, outer)
            return
        earlier: list[tuple[Any, str, bool]] = []
        labels: list[tuple[Any, str]] = []
        groups: list[tuple[Node, list[tuple[Any, str]], list[Node], bool]] = []
        for case in body.named_children:
            if case.type != "case_statement":
                continue
            value = case.child_by_field_name("value")
            statements = [c for c in case.named_children if c != value and c.type != "comment"]
            if value is None:
                groups.append((case, labels, statements, True))
                labels = []
                continue
            labels = labels + [(("bin", "==", subject, self._scalar(value)), f"{shown} == {_text(value, self.data)}")]
            if statements:
                groups.append((case, labels, statements, False))
                labels = []
        for case, group, statements, default in groups:
            if default:
                local = tuple((c, s, False) for c, s, _ in earlier) + tuple((c, s, False) for c, s in group)
                text = "default of switch (" + shown + ")"
            else:
                node = group[0][0]
                for c, _ in group[1:]:
                    node = ("bin", "||", node, c)
                text = " || ".join(s for _, s in group)
                local = tuple((c, s, False) for c, s, _ in earlier) + ((node, text, True),)
                earlier.append((node, text, True))
            if self.record:
                first, last = statements[0] if statements else case, statements[-1] if statements else case
                self._add(
                    Check(
                        case.start_point[0] + 1,
                        case.start_point[0] + 1,
                        "default" if default else "case",
                        text,
                        outer,
                        local,
                        (first.start_point[0] + 1, last.end_point[0] + 1),
                        Guards.REJECT if self._rejects(statements) else Guards.TAKE,
                        self.function,
                    )
                )
            for s in statements:
                self.walk(s, outer + local)

    def _ternary(self, n: Node, outer: tuple) -> None:
        c, a, b = (n.child_by_field_name(k) for k in ("condition", "consequence", "alternative"))
        if c is None or a is None or b is None:
            for x in n.children:
                self.walk(x, outer)
            return
        self.walk(c, outer)
        v = self.top_scalar(c)
        shown = _one_line(_text(c, self.data))
        local = ((v, shown, True),)
        if _mentions(v) and self.record:
            self._add(
                Check(
                    c.start_point[0] + 1,
                    c.end_point[0] + 1,
                    "ternary",
                    shown,
                    outer,
                    local,
                    (a.start_point[0] + 1, a.end_point[0] + 1),
                    Guards.TAKE,
                    self.function,
                )
            )
        inside = local if _mentions(v) else ()
        self.walk(a, outer + inside)
        self.walk(b, outer + tuple((x, s, False) for x, s, _ in inside))


# Tree side ---------------------------------------------------------------------------------


def _all(constraints: tuple) -> tuple:
    """The conjunction of path constraints ``(condition, text, holds)``, as one cexpr node."""
    out: tuple = ("num", 1, False)
    for node, _, holds in constraints:
        out = ("bin", "&&", out, node if holds else ("un", "!", node))
    return out


def _env(major: int, minor: int, helpers: dict[str, Helper], used: dict[str, str], depth: int = 0) -> cexpr.Env:
    values = {MAJOR[1]: (major, False), MINOR[1]: (minor, False)}

    def call(name: str, member: str) -> cexpr.Value:
        if name.startswith(NAMED):
            used.setdefault(name[len(NAMED) :], "name")
            return _eval(_source("sm"), major, minor, helpers, used, depth)
        helper = helpers.get(name)
        if helper is not None and depth < MAX_DEPTH:
            used.setdefault(name, "definition")
            v = helper.value
            v = v.get(member) if isinstance(v, dict) else (v if not member else None)
            return None if v is None else _eval(v, major, minor, helpers, used, depth + 1)
        kind = table().calls.get(name)
        if kind is None:
            return None
        used.setdefault(name, "name")
        v = _source(kind)
        v = v.get(member) if isinstance(v, dict) else v
        return None if v is None else _eval(v, major, minor, helpers, used, depth)

    return cexpr.Env(lambda _name: None, lambda name: values.get(name), call)


def _eval(
    node: Any, major: int, minor: int, helpers: dict[str, Helper], used: dict[str, str], depth: int = 0
) -> cexpr.Value:
    try:
        return cexpr.evaluate(node, _env(major, minor, helpers, used, depth))
    except cexpr.ConditionError:
        return None


def _truth(node: Any, cap: Capability, helpers: dict[str, Helper], used: dict[str, str]) -> bool | None:
    v = _eval(node, cap.major, cap.minor, helpers, used)
    return None if v is None else v[0] != 0


def _unknowns(node: Any) -> set[str]:
    """What a condition reads besides the capability (a dtype flag, a config field)."""
    return cexpr.value_identifiers(node) - cexpr.identifiers(_calls_only(node)) - {MAJOR[1], MINOR[1]}


def _calls_only(node: Any) -> Any:
    """The call nodes of a condition, joined (helpers and named variables: resolved, not unknown)."""
    calls = [n for n in _walk(node) if n[0] == "call"]
    out: Any = ("num", 0, False)
    for c in calls:
        out = ("bin", "+", out, c)
    return out


def _walk(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if n[0] == "un":
            stack.append(n[2])
        elif n[0] == "bin":
            stack.extend((n[2], n[3]))
        elif n[0] == "cond":
            stack.extend((n[1], n[2], n[3]))


def _innermost(structure: Structure, line: int) -> tuple[Constraint, ...]:
    best: tuple[int, int, tuple[Constraint, ...]] | None = None
    for first, last, constraints in structure.enclosing:
        if first <= line <= last and (best is None or first >= best[0]):
            best = (first, last, constraints)
    return best[2] if best else ()


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


class Scanned(Protocol):
    """A file's scan (:class:`auditor.cuda.gates.FileScan`, which imports this module), as far as the host pass reads it."""

    @property
    def path(self) -> str: ...

    @property
    def package(self) -> str: ...

    @property
    def structure(self) -> Structure: ...

    @property
    def host(self) -> HostScan: ...


def gates(scans: Iterable[Scanned], scopes: Scopes, input_name: str, errors: list[FileError]) -> list[Gate]:
    """Every host check of the input's files (``FileScan``s carrying a :class:`HostScan`),
    evaluated over the device capabilities, with the preprocessor branches around it (each file
    under the derived macros it can see: ``scopes``)."""
    scans = [s for s in scans if s.host.checks or s.host.helpers]
    helpers: dict[str, Helper] = {}
    where: dict[str, str] = {}
    for s in scans:
        for h in s.host.helpers:
            if h.name not in helpers:
                helpers[h.name] = h
                where[h.name] = s.path
    caps = [Capability.parse(c) for c in arch.capabilities()]
    targets = arch.target_order()
    out: list[Gate] = []
    for s in scans:
        ordinals: dict[tuple[str, str], int] = {}
        for c in s.host.checks:
            used: dict[str, str] = {}
            pre = _preprocessor(
                scopes.of(s.path)[1], _innermost(s.structure, c.line), caps, targets, s.path, c.line, errors, input_name
            )
            if pre is None:
                continue
            constraints = c.outer + c.local
            values: list[bool | None] = []
            for cap, p in zip(caps, pre):
                v: bool | None = True
                for node, _, polarity in constraints:
                    t = _truth(node, cap, helpers, used)
                    v = _and(v, t if polarity or t is None else not t)
                    if v is False:
                        break
                values.append(_and(v, p))
            # a check rejects where its condition is false; a branch is taken where its chain holds
            admits = tuple(str(cap) for cap, v in zip(caps, values) if v is not False)
            surely = tuple(str(cap) for cap, v in zip(caps, values) if v is True) if c.guards == Guards.REJECT else ()
            unknown = sorted(set().union(*(_unknowns(n) for n, _, _ in constraints)))
            if all(v is not None for v in values):
                unknown = []
            kinds = set(used.values())
            resolved = (
                ResolvedBy.DEFINITION
                if "definition" in kinds
                else ResolvedBy.NAME
                if "name" in kinds
                else ResolvedBy.LITERAL
            )
            key = (c.form, c.expression)
            ordinal = ordinals.get(key, 0)
            ordinals[key] = ordinal + 1
            out.append(
                Gate(
                    id=fingerprint.gate_id(s.path, GateKind.RUNTIME_CHECK, c.function, c.expression, ordinal),
                    file=s.path,
                    line=c.line,
                    end_line=c.end_line,
                    language=Lang.CUDA,
                    kind=GateKind.RUNTIME_CHECK,
                    expression=c.expression,
                    domain=Domain.DEVICE,
                    admits=admits,
                    unknowns=tuple(unknown),
                    resolved_by=resolved,
                    resolutions=tuple(
                        Resolution(n, where.get(n, ""), helpers[n].line if n in helpers else 0, how)
                        for n, how in sorted(used.items())
                    ),
                    chain=tuple(t if pol else f"!({t})" for _, t, pol in constraints),
                    context=f'{c.function}: "{c.message}"' if c.message else c.function,
                    guards=c.guards,
                    surely=surely,
                    body_lines=c.body,
                    input=input_name,
                    package=s.package,
                )
            )
    return out


def _preprocessor(
    axis: Any,
    constraints: tuple[Constraint, ...],
    caps: list[Capability],
    targets: tuple[str, ...],
    path: str,
    line: int,
    errors: list[FileError],
    input_name: str,
) -> list[bool | None] | None:
    """Per device capability, whether the preprocessor keeps the check: everywhere when it
    is host code (the host pass compiles it, or may); where code built for the targets it is
    compiled for runs, when only device passes compile it (inside ``#if __CUDA_ARCH__``)."""
    if not constraints:
        return [True] * len(caps)
    try:
        reach = axis.effective(constraints)[0]
    except cexpr.ConditionError as exc:
        errors.append(FileError(path, f"line {line}: cannot evaluate enclosing condition ({exc})", input_name))
        return None
    host = reach[0]
    if host is not False:
        return [host] * len(caps)
    out: list[bool | None] = []
    for cap in caps:
        v: bool | None = False
        for t, r in zip(targets[1:], reach[1:]):
            if r is not False and arch.runs_on("sass", t, cap):
                v = True if r is True else (v or None)
                if v is True:
                    break
        out.append(v)
    return out


# The cache: checks as JSON ------------------------------------------------------------------


def _tuples(x: Any) -> Any:
    if isinstance(x, list):
        return tuple(_tuples(i) for i in x)
    if isinstance(x, dict):
        return {k: _tuples(v) for k, v in x.items()}
    return x


def encode(h: HostScan) -> list:
    """A file's host scan as JSON-able lists (tuples become lists)."""
    return [
        [
            [c.line, c.end_line, c.form, c.expression, c.outer, c.local, c.body, c.guards.value, c.function, c.message]
            for c in h.checks
        ],
        [[x.name, x.line, x.value] for x in h.helpers],
    ]


def decode(raw: Any) -> HostScan:
    """:func:`encode` read back."""
    checks, helpers = raw
    return HostScan(
        tuple(
            Check(line, end, form, expr, _tuples(outer), _tuples(local), tuple(body), Guards(guards), fn, msg)
            for line, end, form, expr, outer, local, body, guards, fn, msg in checks
        ),
        tuple(Helper(name, line, _tuples(value)) for name, line, value in helpers),
    )

"""From what a scan recorded to Gate records: which evaluated nodes are gates, what text and
lines they report, their effective admitted set, kind, resolution and guards.

A *root* is a condition whose value depends on the arch: the test of an ``if``/``elif``/
``while``/``assert``/conditional expression, or the outermost truth-valued arch-dependent
expression of a statement (a call argument, an assigned flag). A root that merely defines a
flag from a predicate (``_ok = is_cuda() and is_sm90_supported()``) is a definition, not a
decision: it is reported where it is used, unless it compares the capability itself
(``ok = major == 12 and minor == 0``), which is where the decision is.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from auditor import arch
from auditor.facts import names as names_mod
from auditor.model import Domain, GateKind, Guards, Resolution, ResolvedBy
from auditor.python import roles
from auditor.python.interp import Interp
from auditor.python.scan import Older, Rec, Scanner
from auditor.python.symbols import Module
from auditor.python.syntax import callee_name, child, context_of, line_of, one_line
from auditor.python.values import Taint, capability

KIND_ORDER = (GateKind.PREDICATE_CALL, GateKind.PLATFORM_API, GateKind.CAPABILITY_COMPARE)
_BOOLEAN = ("boolean_operator", "not_operator", "parenthesized_expression")
_BOUNDARY = {
    "expression_statement",
    "return_statement",
    "if_statement",
    "elif_clause",
    "while_statement",
    "assert_statement",
    "for_statement",
    "with_statement",
    "block",
    "module",
    "decorator",
    "lambda",
    "raise_statement",
    "function_definition",
    "class_definition",
    "match_statement",
    "case_clause",
    "delete_statement",
    "else_clause",
    "if_clause",
    "for_in_clause",
}
_TEST_PARENTS = {"if_statement", "elif_clause", "while_statement"}
_EITHER = frozenset({True, False})


@dataclass(frozen=True, slots=True)
class Found:
    """A gate before it gets its id: everything but the ordinal."""

    line: int
    col: int
    end_line: int
    kind: GateKind
    expression: str
    domain: Domain
    admits: tuple[str, ...]
    context: str
    unknowns: tuple[str, ...] = ()
    resolved_by: ResolvedBy = ResolvedBy.LITERAL
    resolutions: tuple[Resolution, ...] = ()
    chain: tuple[str, ...] = ()
    guards: Guards = Guards.TAKE
    surely: tuple[str, ...] = ()
    name_implies: tuple[str, ...] = ()
    body_lines: tuple[int, int] = (0, 0)
    toolkits: tuple[tuple[str, tuple[str, ...]], ...] = ()
    settled: tuple[str, ...] = ()


def scan_module(it: Interp, mod: Module, relevant) -> list[Found]:
    """Walk every relevant scope of ``mod`` (for every capability at once), then read off the gates."""
    top, classes, functions = _scopes(mod, lambda m, n: relevant(m, n) or _parametric(it, m, n))
    if not (top or classes or functions):
        return []
    scan = Scanner(it, tuple(capability(label) for label in arch.capabilities()))
    with it.scanning():
        if top:
            scan.body(mod, [u for u, scope, _ in mod.units if scope == ""])
        for qual in classes:
            info = mod.classes[qual]
            scan.body(mod, child(info.node, "body").named_children, qual)
        for fn, cls in functions:
            scan.function(mod, fn, scan.caps, None, cls)
    return Assembler(it, mod, scan.records()).gates()


def _parametric(it: Interp, mod: Module, node: Node) -> bool:
    """A function with a capability parameter (``def ok(cc): return cc in [90, 100]``)."""
    inner = child(node, "definition") if node.type == "decorated_definition" else node
    return inner is not None and inner.type == "function_definition" and bool(it.parametric(mod, inner))


def _scopes(mod: Module, relevant):
    """Which bodies to walk: the module's and classes' own statements when one of them is
    relevant, and each relevant function (nested ones are walked inside their parent)."""
    top = False
    classes: list[str] = []
    functions: list[tuple[Node, str | None]] = []
    for node, scope, _ in mod.units:
        inner = child(node, "definition") if node.type == "decorated_definition" else node
        if inner is None or inner.type == "class_definition":
            continue
        if node.has_error or not relevant(mod, node):
            continue
        if inner.type == "function_definition":
            functions.append((inner, scope or None))
        elif scope == "":
            top = True
        elif scope not in classes:
            classes.append(scope)
    return top, classes, functions


class Assembler:
    """Reads the gates of one module off a scan's records."""

    def __init__(self, it: Interp, mod: Module, recs: dict[int, Rec]) -> None:
        self.it = it
        self.mod = mod
        self.recs = recs
        self.tainted = sorted(
            (r for r in self.recs.values() if r.taint is not None), key=lambda r: (r.node.start_byte, -r.node.end_byte)
        )
        self.caps = arch.capabilities()

    def gates(self) -> list[Found]:
        out: list[Found] = []
        roots = [r for r in self.tainted if self._is_root(r)]
        for r in roots:
            g = self._gate(r)
            if g is not None:
                out.append(g)
        out.extend(self._else_gates())
        return out

    # -------------------------------------------------------------- roots
    def _is_root(self, r: Rec) -> bool:
        if not (r.boolish or _is_test(r.node)):
            return False
        if r.node.parent is not None and r.node.parent.type == "expression_statement":
            return False
        p = r.node.parent
        while p is not None and p.type not in _BOUNDARY:
            q = self.recs.get(p.id)
            if q is not None and q.taint is not None and (q.boolish or _is_test(p)):
                return False
            p = p.parent
        return True

    def _gate(self, r: Rec) -> Found | None:
        node = r.node
        position = "use" if _is_test(node) else _position(node)
        sites = self._sites(node)
        if not sites:
            return None
        t = r.taint
        assert t is not None  # a root is tainted
        defines = position == "def" and t.kinds <= {GateKind.PREDICATE_CALL}
        start, end, first = self._span(node, sites)
        expression = one_line(self.mod.data[start.start_byte : end.end_byte].decode("utf-8", "replace"), 400)
        kind = _kind(self._taint(sites[0]).kinds)
        admits, surely, chain = self._effective(node)
        earlier = _earlier_conditions(node)
        toolkits = self._toolkits(
            node, lambda p: True in self._at(node, p) and all(False in self._at(e, p) for e in earlier)
        )
        guards = Guards.DEFINE if defines else self._guards(_test_of(node))
        if guards == Guards.REJECT:
            admits, surely = self._reached(node, admits, surely)
        resolutions = set(t.resolutions) | self._globals_in(start.start_byte, end.end_byte)
        via = t.via
        resolved_by = (
            ResolvedBy.NAME
            if ResolvedBy.NAME in via
            else ResolvedBy.DEFINITION
            if (ResolvedBy.DEFINITION in via or resolutions)
            else ResolvedBy.LITERAL
        )
        return Found(
            line=line_of(start),
            col=start.start_point[1],
            end_line=end.end_point[0] + 1,
            kind=kind,
            expression=expression,
            domain=Domain.DEVICE,
            admits=admits,
            context=context_of(node),
            unknowns=_unknowns(t.unknowns, expression),
            resolved_by=resolved_by,
            resolutions=tuple(sorted(resolutions, key=lambda x: (x.file, x.line, x.name))),
            chain=chain,
            guards=guards,
            surely=surely if guards == Guards.REJECT else (),
            name_implies=self._name_implies(t.names),
            body_lines=_body_lines(node),
            toolkits=toolkits,
            settled=self._settled(node, sites, admits, guards == Guards.REJECT),
        )

    def _settled(self, node: Node, sites: list[Node], admits: tuple[str, ...], rejects: bool) -> tuple[str, ...]:
        """Capabilities the branch turns away even with its own capability tests granted: a
        value chosen upstream (``fa_version``, see :attr:`Taint.chosen`) already rules them out,
        so the decision is made where that value is chosen. A rejection (its ``admits`` are
        the rejected) turns a capability away when its condition cannot be false there."""
        out = []
        for c in self.caps:
            cap = capability(c)
            chosen = {s.id for s in sites if cap in self.recs[s.id].chosen}
            if chosen and (c in admits) == rejects and (not rejects) not in self._granted(node, c, sites, chosen):
                out.append(c)
        return tuple(out)

    def _granted(self, n: Node, label: str, sites: list[Node], chosen: set[int]) -> frozenset:
        """The truth of ``n`` on ``label`` were every capability test in it that reads no chosen
        value free to go either way."""
        if n.type == "parenthesized_expression" and n.named_children:
            return self._granted(n.named_children[0], label, sites, chosen)
        if n.type == "not_operator":
            return frozenset(not t for t in self._granted(child(n, "argument"), label, sites, chosen))
        if n.type == "boolean_operator":
            a = self._granted(child(n, "left"), label, sites, chosen)
            b = self._granted(child(n, "right"), label, sites, chosen)
            stop = child(n, "operator").type == "or"
            out = set()
            if stop in a or stop in b:
                out.add(stop)
            if (not stop) in a and (not stop) in b:
                out.add(not stop)
            return frozenset(out)
        inside = [s for s in sites if n.start_byte <= s.start_byte and s.end_byte <= n.end_byte]
        if any(s.id not in chosen for s in inside):
            return _EITHER
        return self._truths(n, label)

    def _taint(self, node: Node) -> Taint:
        """The taint of a node the scan found arch-dependent."""
        t = self.recs[node.id].taint
        assert t is not None
        return t

    def _sites(self, root: Node) -> list[Node]:
        """The arch tests inside ``root``: tainted nodes with no tainted node inside them."""
        inside = [
            r.node for r in self.tainted if root.start_byte <= r.node.start_byte and r.node.end_byte <= root.end_byte
        ]
        out = []
        for n in inside:
            if not any(
                m is not n
                and n.start_byte <= m.start_byte
                and m.end_byte <= n.end_byte
                and m.id != n.id
                and (m.start_byte, m.end_byte) != (n.start_byte, n.end_byte)
                for m in inside
            ):
                out.append(n)
        return out

    def _span(self, root: Node, sites: list[Node]):
        """The smallest sub-expression of ``root`` holding every arch test: each test lifted to
        the operand of the boolean structure it sits in, then their common ancestor (narrowed
        to a run of operands of an ``and``/``or`` chain, widened over ``not`` and parentheses)."""
        lifted = [_lift(s, root) for s in sites]
        tested = [n for n in lifted if self.recs.get(n.id) is not None and self.recs[n.id].taint is not None]
        lifted = tested or lifted
        common = _common(lifted, root)
        while (
            common.id != root.id
            and common.parent is not None
            and common.parent.type in ("not_operator", "parenthesized_expression")
        ):
            common = common.parent
        if common.type == "boolean_operator":
            operands = _chain(common)
            hit = [
                i
                for i, o in enumerate(operands)
                if any(o.start_byte <= s.start_byte and s.end_byte <= o.end_byte for s in lifted)
            ]
            if hit and (hit[0] > 0 or hit[-1] < len(operands) - 1):
                return operands[hit[0]], operands[hit[-1]], operands[hit[0]]
        return common, common, common

    def _truths(self, node: Node | None, label: str) -> frozenset:
        r = self.recs.get(node.id) if node is not None else None
        if r is None:
            return frozenset({True, False})
        return r.truths.get(capability(label), frozenset({True, False}))

    def _at(self, node: Node | None, point) -> frozenset:
        r = self.recs.get(node.id) if node is not None else None
        return _EITHER if r is None else r.truths.get(point, _EITHER)

    def _toolkits(self, node: Node, admitted) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The capabilities that only some toolkits admit (``admitted(point)``), with the releases
        that do; only where ``node`` was evaluated under every toolkit (its scope read one)."""
        r = self.recs.get(node.id)
        others, newest = self.it.others, self.it.newest
        if r is None or not others:
            return ()
        out = []
        for label in self.caps:
            cap = capability(label)
            if Older(cap, others[0]) not in r.truths:
                continue
            points = {k: cap if k == newest else Older(cap, k) for k in arch.releases_of()}
            admitting = tuple(k for k, point in points.items() if admitted(point))
            if admitting and len(admitting) != len(others) + 1:
                out.append((label, admitting))
        return tuple(out)

    def _effective(self, node: Node) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
        """Admitted set of the branch (for ``elif``, the earlier conditions must be able to be
        false too), the capabilities on which it is certainly taken, and its chain."""
        earlier = _earlier_conditions(node)
        admits = tuple(
            c for c in self.caps if True in self._truths(node, c) and all(False in self._truths(e, c) for e in earlier)
        )
        surely = tuple(
            c for c in admits if self._truths(node, c) == {True} and all(self._truths(e, c) == {False} for e in earlier)
        )
        chain = tuple(f"not ({one_line(self.mod.text(e))})" for e in earlier) + (one_line(self.mod.text(node)),)
        return admits, surely, chain

    def _reached(
        self, node: Node, admits: tuple[str, ...], surely: tuple[str, ...]
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """A rejection's capabilities narrowed to those that can reach it through the branches
        of its function that hold it: ``raise`` under ``if minor < 5`` inside ``if major < 8``
        rejects 7.0 at most, never 12.0. A branch on something else (``if params is not
        None:``) leaves the rejection as sure as it was: it is met whenever that feature is used."""
        around = _enclosing(node)
        if not around:
            return admits, surely
        reached = {c for c in admits if all(want in self._truths(e, c) for e, want in around)}
        return tuple(c for c in admits if c in reached), tuple(c for c in surely if c in reached)

    def _globals_in(self, start: int, end: int) -> set[Resolution]:
        out = set()
        for node, mod, name in self.it.globals_read.values():
            if not (start <= node.start_byte and node.end_byte <= end):
                continue
            for b in mod.bindings.get(name, ()):
                if b.kind == "value" and b.node is not None:
                    out.add(Resolution(name, mod.path, line_of(b.node), one_line(mod.text(b.node))))
        return out

    def _guards(self, node: Node) -> Guards:
        """The branch's role read from its body (:mod:`auditor.python.roles`), or a
        rejection when the test is an argument of a rejecting call."""
        body = _controlled_block(node)
        if body is not None:
            found = roles.role(body)
            if found == Guards.REJECT or _bails_out(node):
                return Guards.REJECT
            if found in (Guards.LOG, Guards.TUNE):
                return found
        if roles.tuned_with(node):
            return Guards.TUNE
        p = node.parent
        while p is not None and p.type in ("parenthesized_expression", "argument_list", "not_operator"):
            if p.type == "argument_list" and p.parent is not None and p.parent.type == "call":
                f = child(p.parent, "function")
                if names_mod.rejects(callee_name(f)):
                    return Guards.REJECT
            p = p.parent
        return Guards.TAKE

    def _name_implies(self, named) -> tuple[str, ...]:
        out: set[str] = set()
        for name, key in named:
            promise = names_mod.promised(name)
            if promise is None or key is None:
                continue
            if self.it.admits(key, self.caps) != promise:
                out |= promise
        return arch.sort_archs("device", out)

    # -------------------------------------------------------------- later branches
    def _else_gates(self) -> list[Found]:
        """The later branches of a chain with an arch test whose own condition tests no arch:
        each ``elif`` on something else (``elif compute_capability is not None:``, the branch
        every part but 9.0 takes) and the ``else``. Each is admitted where every condition before
        it may be false (and its own may be true), and reported when that excludes something:
        a target's route needs the branch it takes."""
        out = []
        seen = set()
        for r in self.tainted:
            ifs = _if_of(r.node)
            if ifs is None or ifs.id in seen:
                continue
            seen.add(ifs.id)
            for clause in ifs.children_by_field_name("alternative"):
                own = child(clause, "condition") if clause.type == "elif_clause" else None
                if clause.type == "elif_clause" and self._tainted(own):
                    continue  # a root of its own
                found = self._later(ifs, clause, own)
                if found is not None:
                    out.append(found)
        return out

    def _tainted(self, node: Node | None) -> bool:
        rec = self.recs.get(node.id) if node is not None else None
        return rec is not None and rec.taint is not None

    def _later(self, ifs: Node, clause: Node, own: Node | None) -> Found | None:
        """The gate of one ``elif`` (its condition ``own``, testing no arch) or ``else`` of a chain."""
        conds = _conditions_before(ifs, clause)
        tainted = [c for c in conds if self._tainted(c)]
        if not tainted:
            return None
        admits = tuple(
            c
            for c in self.caps
            if all(False in self._truths(e, c) for e in conds) and (own is None or True in self._truths(own, c))
        )
        toolkits = self._toolkits(
            tainted[0],
            lambda p: all(False in self._at(e, p) for e in conds) and (own is None or True in self._at(own, p)),
        )
        if len(admits) == len(self.caps) and not toolkits or own is not None and not admits:
            return None
        parts = []
        kinds: set = set()
        t = None
        for c in conds:
            rec = self.recs.get(c.id)
            if rec is not None and rec.taint is not None:
                sites = self._sites(c)
                s, e, _ = self._span(c, sites) if sites else (c, c, c)
                text = one_line(self.mod.data[s.start_byte : e.end_byte].decode("utf-8", "replace"), 200)
                kinds |= rec.taint.kinds
                t = rec.taint if t is None else t.merge(rec.taint)
            else:
                text = one_line(self.mod.text(c), 200)
            parts.append(f"not ({text})")
        assert t is not None  # some condition is tainted
        chain = tuple(f"not ({one_line(self.mod.text(c))})" for c in conds if c is not None)
        if own is not None:
            parts.append(one_line(self.mod.text(own), 200))
            chain += (one_line(self.mod.text(own)),)
        body = child(clause, "body" if own is None else "consequence")
        kw = clause.child(0)
        guards = roles.role(body)
        surely = tuple(
            c
            for c in admits
            if all(self._truths(e, c) == {False} for e in conds) and (own is None or self._truths(own, c) == {True})
        )
        if guards == Guards.REJECT:
            admits, surely = self._reached(ifs, admits, surely)
            if len(admits) == len(self.caps) and not toolkits:
                return None
        return Found(
            line=line_of(kw),
            col=kw.start_point[1],
            end_line=own.end_point[0] + 1 if own is not None else line_of(kw),
            kind=_kind(kinds),
            expression=" and ".join(parts),
            domain=Domain.DEVICE,
            admits=admits,
            context=context_of(ifs),
            unknowns=_unknowns(t.unknowns, ""),
            resolved_by=ResolvedBy.NAME
            if ResolvedBy.NAME in t.via
            else ResolvedBy.DEFINITION
            if ResolvedBy.DEFINITION in t.via
            else ResolvedBy.LITERAL,
            resolutions=tuple(sorted(t.resolutions, key=lambda x: (x.file, x.line, x.name))),
            chain=chain,
            guards=guards,
            surely=surely if guards == Guards.REJECT else (),
            name_implies=self._name_implies(t.names),
            body_lines=(line_of(body), body.end_point[0] + 1) if body is not None else (0, 0),
            toolkits=toolkits,
        )


def _is_test(node: Node) -> bool:
    p = node.parent
    if p is None:
        return False
    if p.type in _TEST_PARENTS:
        return child(p, "condition") is not None and child(p, "condition").id == node.id
    if p.type == "assert_statement":
        kids = [c for c in p.named_children if c.type != "comment"]
        return bool(kids) and kids[0].id == node.id
    if p.type == "conditional_expression":
        kids = [c for c in p.named_children if c.type != "comment"]
        return len(kids) == 3 and kids[1].id == node.id
    return False


def _test_of(node: Node) -> Node:
    """The test a root is part of (``if X and not is_sm100_supported(): raise`` where ``X`` is
    decided alike on every capability, so that only the operand is arch-dependent): the
    branch it guards is that test's, whatever decided the rest."""
    n = node
    while n.parent is not None and n.parent.type in _BOOLEAN and not _is_test(n):
        n = n.parent
    return n if _is_test(n) else node


def _position(node: Node) -> str:
    """``def`` when the value only defines a name (a flag, a lambda, a default). A function's
    return value is a decision its callers act on, so it counts as a use."""
    n = node
    while n.parent is not None and n.parent.type == "parenthesized_expression":
        n = n.parent
    p = n.parent
    if p is None:
        return "use"
    right = p.child_by_field_name("right") if p.type == "assignment" else None
    if right is not None and right.id == n.id:
        left = child(p, "left")
        while p.parent is not None and p.parent.type == "assignment":
            p = p.parent
            left = child(p, "left")
        return "def" if left is not None and left.type in ("identifier", "pattern_list", "tuple_pattern") else "use"
    if p.type in ("lambda", "default_parameter", "typed_default_parameter"):
        return "def"
    return "use"


def _lift(site: Node, root: Node) -> Node:
    n = site
    while n.id != root.id and n.parent is not None and n.parent.type not in _BOOLEAN:
        n = n.parent
    return n


def _common(nodes: list[Node], root: Node) -> Node:
    def chain(n):
        out = []
        while n is not None:
            out.append(n)
            if n.id == root.id:
                break
            n = n.parent
        return out[::-1]

    chains = [chain(n) for n in nodes]
    common = root
    for level in zip(*chains):
        if all(x.id == level[0].id for x in level):
            common = level[0]
        else:
            break
    return common


def _chain(node: Node) -> list[Node]:
    """Operands of a left-nested ``a and b and c`` (same operator), in order."""
    op = child(node, "operator").type
    out = []
    n = node
    stack = []
    while n.type == "boolean_operator" and child(n, "operator").type == op:
        stack.append(child(n, "right"))
        n = child(n, "left")
    out.append(n)
    out.extend(reversed(stack))
    return out


def _kind(kinds) -> GateKind:
    for k in KIND_ORDER:
        if k in kinds:
            return k
    return GateKind.CAPABILITY_COMPARE


MAX_UNKNOWNS = 16
"""How many unknown operands a gate records: enough for a long condition's shape tests
(``… and scores.shape[1] == 512 and … and topk == 22``, read by the shape rule)."""


def _unknowns(notes: tuple, expression: str) -> tuple[str, ...]:
    own = [u for u in notes if u in expression]
    rest = [u for u in notes if u not in own]
    return tuple(dict.fromkeys(own + rest))[:MAX_UNKNOWNS]


def _earlier_conditions(node: Node) -> list[Node]:
    p = node.parent
    if p is not None and p.type == "elif_clause" and p.parent is not None:
        return _conditions_before(p.parent, p)
    return []


def _conditions_before(ifs: Node, clause: Node | None = None) -> list[Node]:
    """The conditions of an ``if`` chain before one of its ``elif``/``else`` clauses (all of
    them without one): the ``if``'s, then each ``elif``'s."""
    out = [child(ifs, "condition")]
    for a in ifs.children_by_field_name("alternative"):
        if clause is not None and a.id == clause.id:
            break
        if a.type == "elif_clause":
            out.append(child(a, "condition"))
    return out


def _enclosing(node: Node) -> list[tuple[Node, bool]]:
    """The conditions of the branches of its function that hold ``node``, each with the value
    it has on the way in (an ``elif`` or ``else`` body comes after its earlier conditions fail)."""
    out: list[tuple[Node, bool]] = []
    p = node.parent
    while p is not None and p.type not in ("function_definition", "class_definition", "lambda"):
        owner = p.parent if p.type == "block" else None
        if owner is not None and owner.type == "if_statement" and child(owner, "consequence") == p:
            out.append((child(owner, "condition"), True))
        elif owner is not None and owner.type in ("elif_clause", "else_clause") and owner.parent is not None:
            out += [(c, False) for c in _conditions_before(owner.parent, owner)]
            if owner.type == "elif_clause":
                out.append((child(owner, "condition"), True))
        p = p.parent
    return [(c, want) for c, want in out if c is not None]


def _if_of(node: Node) -> Node | None:
    p = node.parent
    if p is None:
        return None
    if p.type == "if_statement" and child(p, "condition").id == node.id:
        return p
    if p.type == "elif_clause" and child(p, "condition").id == node.id:
        return p.parent
    return None


def _controlled_block(node: Node) -> Node | None:
    p = node.parent
    if p is not None and p.type in ("if_statement", "elif_clause"):
        return child(p, "consequence")
    return None


def _bails_out(cond: Node) -> bool:
    """``if major != 12: return False`` and the function goes on: the branch only gives up, so
    what the condition guards is the rest of the function, as with a rejection (also before a
    final ``return True``: ``if sm == 120: return False`` is the predicate's "no" for 12.0).
    Not when the branch does anything else, or when an ``else``/``elif`` follows."""
    stmt = cond.parent
    if stmt is None or stmt.type != "if_statement" or stmt.child_by_field_name("alternative") is not None:
        return False
    body = _code(child(stmt, "consequence").named_children)
    if len(body) != 1 or _returned(body[0]) not in ([], ["none"], ["false"]):
        return False
    after = stmt.next_named_sibling
    while after is not None and after.type == "comment":
        after = after.next_named_sibling
    return after is not None


def _returned(stmt: Node) -> list[str] | None:
    """The node types a ``return`` gives back (``[]`` for a bare one), or None for any other statement."""
    return [c.type for c in _code(stmt.named_children)] if stmt.type == "return_statement" else None


def _code(nodes) -> list[Node]:
    return [n for n in nodes if n.type != "comment"]


def _body_lines(node: Node) -> tuple[int, int]:
    """The region the condition controls: the branch body, the chosen value, or the statement."""
    block = _controlled_block(node)
    p = node.parent
    if block is None and p is not None and p.type == "while_statement":
        block = child(p, "body")
    if block is None and p is not None and p.type == "conditional_expression":
        block = p.named_children[0]
    if block is None:
        n = node
        while n.parent is not None and n.parent.type not in ("block", "module"):
            n = n.parent
        block = n
    return line_of(block), block.end_point[0] + 1

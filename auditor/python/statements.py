"""Statements in call mode: a body run once, on one capability, to learn what it returns.

Only live paths are followed; a branch an arch-dependent condition decides taints what it
assigns and returns (the path taint); past an ``assert`` or an ``if …: raise`` a local keeps only
the values the check lets through. The simple statements, the state a loop body or an
``except`` handler starts from, and where branches meet are shared with scan mode
(:mod:`auditor.python.scan`), which walks the compound statements for all capabilities at once.
"""

from __future__ import annotations

from tree_sitter import Node

from auditor.model import Resolution
from auditor.python.core import Core, Frame, OutOfFuel, State
from auditor.python.symbols import assigned_in, definition_at, destructure, imports
from auditor.python.syntax import (
    calls_in,
    case_bodies,
    child,
    clause_body,
    compared_literals,
    identifiers_in,
    if_clauses,
    line_of,
    one_line,
    self_attribute,
    text_of,
    try_parts,
)
from auditor.python.values import (
    ANY,
    UNKNOWN,
    Func,
    Other,
    Taint,
    Val,
    along,
    binary,
    is_boolish,
    is_data,
    items_of,
    join,
    make,
    merge,
    pick,
    truth,
    val,
)

_NOPE = object()
NARROWED = 2
"""Locals a test narrows at most (the first it reads)."""
MAX_TRIED = 8
"""Values tried one by one at most, per local."""


class Statements(Core):
    """Statements in call mode, and the steps scan mode shares."""

    def walk(self, stmts, st: State, fr: Frame, rets: list) -> State:
        """Statements in order while the path is live; returns add to ``rets``."""
        for s in stmts:
            if not st.live:
                break
            st = self.stmt(s, st, fr, rets)
        return st

    def stmt(self, s: Node, st: State, fr: Frame, rets: list) -> State:
        """One statement in call mode (scan mode has its own compound statements)."""
        if self.fuel is not None:
            self.fuel -= 1
            if self.fuel < 0:
                raise OutOfFuel
        t = s.type
        fr.env = st.env
        if t == "if_statement":
            return self.s_if(s, st, fr, rets)
        if t in ("for_statement", "while_statement"):
            return self.s_loop(s, st, fr, rets)
        if t == "try_statement":
            return self.s_try(s, st, fr, rets)
        if t == "with_statement":
            self.with_items(s, st, fr)
            return self.walk(child(s, "body").named_children, st, fr, rets)
        if t == "decorated_definition":
            return self.stmt(child(s, "definition"), st, fr, rets)
        if t == "match_statement":
            subj = s.child_by_field_name("subject")
            if subj is not None:
                self.eval(subj, fr)
            outs = [
                self.walk(body.named_children, State(dict(st.env), st.live, st.path), fr, rets)
                for body in case_bodies(s)
            ]
            return self.join_states([st, *outs])
        return self.simple(s, st, fr, rets)

    def simple(self, s: Node, st: State, fr: Frame, rets: list) -> State:
        """A statement without a body of statements (both modes); a ``def`` only binds its name."""
        t = s.type
        fr.env = st.env
        if t == "expression_statement":
            for c in s.named_children:
                if c.type in ("assignment", "augmented_assignment"):
                    self.assign(c, st, fr)
                elif self.recording and c.type == "call":  # a statement's value is no gate: no body is run
                    self.recorded.append((c, self.e_call(c, fr, run=False)))
                elif self.recording:
                    self.eval(c, fr)
            return st
        if t == "return_statement":
            kids = [c for c in s.named_children if c.type != "comment"]
            v = self.eval(kids[0], fr) if kids else val(None)
            if st.live:
                rets.append(along(v, st.path))
            return State(st.env, False, st.path)
        if t == "raise_statement":
            if self.recording:
                for c in s.named_children:
                    self.eval(c, fr)
            return State(st.env, False, st.path)
        if t == "function_definition":
            name = text_of(child(s, "name"))
            st.env[name] = val(Func(fr.mod.name, s.start_byte, name))
            return st
        if t == "class_definition":
            st.env[text_of(child(s, "name"))] = ANY
            return st
        if t in ("import_statement", "import_from_statement"):
            for name, target in imports(fr.mod, s):
                if name != "*":
                    st.env[name] = self.import_value(target)
            return st
        if t == "assert_statement":
            kids = [c for c in s.named_children if c.type != "comment"]
            if kids:
                cv = self.eval(kids[0], fr)
                if True not in truth(cv):
                    return State(st.env, False, merge(st.path, cv.taint))
                if not self.recording:
                    st = self.narrow(kids[0], st, fr, True)
                if cv.taint is not None and not self.recording:
                    return State(st.env, st.live, merge(st.path, cv.taint))
            return st
        return st

    def narrow(self, cond: Node, st: State, fr: Frame, want: bool) -> State:
        """Past ``assert cond`` (``want`` True) or ``if cond: raise`` (False), keep of each
        local that ``cond`` reads the values under which it can come out ``want``: after
        ``assert supported(v)`` with ``v`` one of 2, 3, 4, only the supported versions remain.
        An unknown local is first split over the literals ``cond`` and the definitions it calls
        compare with, and what is none of them (``Other``). What is kept depends on the check."""
        env = None
        for name in identifiers_in(cond)[:NARROWED]:
            v = st.env.get(name)
            if v is None or len(v.elems) > MAX_TRIED or (len(v.elems) < 2 and UNKNOWN not in v.elems):
                continue
            trials = [x for x in v.elems if is_data(x)]
            if UNKNOWN in v.elems:
                literals = self._literals(cond, fr)
                if not literals or len(literals) > MAX_TRIED:
                    continue
                trials += [*literals, Other(frozenset(literals))]
            kept: set = {x for x in v.elems if not is_data(x) and x is not UNKNOWN}
            base = dict(env or st.env)
            t = v.taint
            for x in trials:
                fr.env = {**base, name: Val(frozenset({x}), v.taint)}
                c = self.eval(cond, fr)
                t = along(Val(v.elems, t), c.taint).taint
                if want in truth(c):
                    kept.add(UNKNOWN if isinstance(x, Other) else x)
            fr.env = st.env
            if kept and kept != v.elems:
                env = {**base, name: make(kept, t)}
        fr.env = st.env
        return st if env is None else State(env, st.live, st.path)

    def _literals(self, cond: Node, fr: Frame) -> list:
        """The literals ``cond`` and the definitions it calls tell apart, in a stable order."""
        found = compared_literals(cond)
        for call in calls_in(cond):
            for f in self.eval(child(call, "function"), fr).elems:
                if isinstance(f, Func):
                    mod = self.prog.loaded(f.module)
                    node = definition_at(mod, f.start) if mod is not None else None
                    if node is not None:
                        found |= compared_literals(node)
        return sorted(found, key=lambda x: (isinstance(x, str), x))

    def test(self, cond: Node, fr: Frame) -> frozenset:
        """The truth of a condition, noted as tested: a scan reports a tested condition that
        depends on the arch even where it is not truth-valued."""
        self.conditions.add(cond.id)
        return truth(self.eval(cond, fr))

    def with_items(self, s: Node, st: State, fr: Frame) -> State:
        """Evaluate the items of a ``with`` statement, binding their ``as`` names."""
        fr.env = st.env
        for item in s.named_children:
            if item.type == "with_clause":
                for w in item.named_children:
                    self._with_item(w, st, fr)
        return st

    def _with_item(self, w: Node, st: State, fr: Frame) -> None:
        value = w.child_by_field_name("value")
        if value is None:
            return
        if value.type == "as_pattern":
            kids = value.named_children
            if kids:
                self.eval(kids[0], fr)
            alias = value.child_by_field_name("alias")
            if alias is not None:
                for n, _ in destructure(alias.named_children[0] if alias.named_children else None):
                    st.env[n] = ANY
        else:
            self.eval(value, fr)

    def assign(self, node: Node, st: State, fr: Frame) -> None:
        """An assignment: in call mode the value carries the path taint (a flag set in an
        arch-dependent branch depends on the arch)."""
        targets = []
        rhs: Node | None = node
        if node.type == "augmented_assignment":
            left = child(node, "left")
            v = binary(
                child(node, "operator").type.rstrip("="),
                self.eval(left, fr),
                self.eval(child(node, "right"), fr),
            )
            self.bind(left, v.with_taint(st.path if not self.recording else None), st.env)
            return
        while rhs is not None and rhs.type == "assignment":
            targets.append(child(rhs, "left"))
            rhs = rhs.child_by_field_name("right")
        if rhs is None:
            return
        v = self.eval(rhs, fr)
        if not self.recording:
            v = along(v, st.path)
        elif v.taint is not None and fr.env is not None and is_boolish(v):
            v = self._flag(node, targets, v, fr)
        for target in targets:
            self.bind(target, v, st.env)

    def _flag(self, node: Node, targets: list, v: Val, fr: Frame) -> Val:
        """A local flag (``use_gdc = is_sm90_supported() or ...``) remembers where it is
        defined: the gates at its uses name that one definition as their root cause."""
        names = [text_of(t) for t in targets if t is not None and t.type == "identifier"]
        if not names:
            return v
        res = Resolution(names[0], fr.mod.path, line_of(node), one_line(fr.mod.text(node), 400))
        assert v.taint is not None
        return Val(v.elems, v.taint.merge(Taint(resolutions=frozenset({res}))))

    def bind(self, target: Node | None, v: Val, env: dict) -> None:
        """Names of an assignment target bound to the parts of ``v`` they receive; ``self.x``
        too, under its dotted name, so that a flag a method sets on its instance
        (``self._supports_tc = arch in (…)``) is known at the method's later tests."""
        if target is not None and target.type == "attribute" and self_attribute(target):
            env[text_of(target)] = v
            return
        for name, path in destructure(target):
            env[name] = pick(v, path)

    def s_if(self, s: Node, st: State, fr: Frame, rets: list) -> State:
        clauses, other = if_clauses(s)
        outs: list[State] = []
        cur = st
        decided: Taint | None = None
        for cond, body in clauses:
            self.conditions.add(cond.id)
            fr.env = cur.env
            c = self.eval(cond, fr)
            tr = truth(c)
            decided = merge(decided, c.taint)
            branch = State(dict(cur.env), cur.live and True in tr, merge(cur.path, c.taint))
            if branch.live:
                branch = self.walk(body.named_children if body is not None else [], branch, fr, rets)
            outs.append(branch)
            cur = State(cur.env, cur.live and False in tr, merge(cur.path, c.taint))
        if len(clauses) == 1 and other is None and cur.live and not self.recording and _raises(clauses[0][1]):
            cur = self.narrow(clauses[0][0], cur, fr, False)
        if other is not None:
            cur = self.walk(other.named_children, State(dict(cur.env), cur.live, cur.path), fr, rets)
        outs.append(cur)
        out = self.join_states(outs)
        if decided is not None and any(not o.live for o in outs):
            out.path = merge(out.path, decided)
        return out

    def join_states(self, outs: list[State]) -> State:
        """Where branches meet: the live ones' variables joined (all of them, in dead code).
        An instance attribute (``self.x``) set on some of them only is dropped: on the others
        it is whatever the instance holds. A scan keeps no path taint: a gate is judged as
        written."""
        live = [o for o in outs if o.live]
        pick = live or outs
        first = pick[0].env
        env = dict(first)
        others = [o.env for o in pick[1:] if o.env is not first]
        changed = {k for e in others for k, v in e.items() if first.get(k, _NOPE) is not v}
        partial = {k for e in (first, *others) for k in e if "." in k and not all(k in x for x in (first, *others))}
        for k in partial:
            env.pop(k, None)
        for k in changed - partial:
            vs = [o.env[k] for o in pick if k in o.env]
            env[k] = vs[0] if all(v is vs[0] for v in vs) else join(*vs)
        path = None
        for o in outs:
            path = merge(path, o.path)
        return State(env, bool(live), path if not self.recording else None)

    def s_loop(self, s: Node, st: State, fr: Frame, rets: list) -> State:
        entry = self.loop_entry(s, st, fr)
        after = self.walk(child(s, "body").named_children, State(dict(entry.env), entry.live, entry.path), fr, rets)
        out = self.loop_exit(entry, after)
        alt = s.child_by_field_name("alternative")
        if alt is not None:
            out = self.walk(child(alt, "body").named_children, out, fr, rets)
        return out

    def loop_entry(self, s: Node, st: State, fr: Frame) -> State:
        """The state a loop body starts from: what the body assigns is unknown (it may have run
        before), the loop variable is any item of the iterable."""
        body = child(s, "body")
        env = dict(st.env)
        for name in assigned_in(fr.mod, body):
            env[name] = ANY
        fr.env = env
        if s.type == "for_statement":
            it = self.eval(child(s, "right"), fr)
            items = items_of(it)
            item = join(*items) if items else Val(ANY.elems, it.taint)
            self.bind(child(s, "left"), item, env)
        else:
            cond = child(s, "condition")
            self.conditions.add(cond.id)
            self.eval(cond, fr)
        return State(env, st.live, st.path)

    def loop_exit(self, entry: State, after: State) -> State:
        """After a loop: it ran zero times or some."""
        return self.join_states([entry, State(after.env, entry.live, after.path)])

    def s_try(self, s: Node, st: State, fr: Frame, rets: list) -> State:
        body = self.walk(child(s, "body").named_children, State(dict(st.env), st.live, st.path), fr, rets)
        handlers, other, final = try_parts(s)
        outs = [self.walk(clause_body(c), self.handler_entry(c, st, body), fr, rets) for c in handlers]
        body = self.walk(other, body, fr, rets)
        return self.walk(final, self.join_states([body, *outs]), fr, rets)

    def handler_entry(self, clause: Node, st: State, body: State) -> State:
        """An ``except`` handler starts where the ``try`` began or anywhere in its body."""
        start = self.join_states([State(dict(st.env), st.live, st.path), State(dict(body.env), st.live, body.path)])
        start.live = st.live
        for v in clause.named_children:
            if v.type == "as_pattern":
                alias = v.child_by_field_name("alias")
                if alias is not None:
                    for n, _ in destructure(alias.named_children[0] if alias.named_children else None):
                        start.env[n] = ANY
        return start


def _raises(body: Node | None) -> bool:
    """A block that ends by raising (``if not ok: raise ValueError(...)``)."""
    kids = [c for c in body.named_children if c.type != "comment"] if body is not None else []
    return bool(kids) and kids[-1].type == "raise_statement"

"""Scan mode: walk a scope for every device capability at once.

A scan evaluates every statement and operand, dead branches too (a condition is judged as
written, not by whether earlier code lets it run), and logs what each node evaluated to on
each capability for :mod:`gates` to read. Walking a scope once per capability would repeat
almost all the work: most statements do not depend on the arch. So the walk keeps, per
capability, the local variables and whether the code is live, and evaluates a statement
(with the evaluator of :mod:`interp`) once for all the capabilities whose variables the
statement reads are the same; only when that evaluation read the capability itself is it
repeated for each of them. Compound statements are walked here, their bodies once.

Whether code is live only decides which branches' variables meet after an ``if``: a
statement evaluates the same in live and dead code. Path taint plays no part in a scan.

The CUDA toolkit is a second coordinate, read by few scopes: a scope is walked with every
capability under the newest chosen toolkit, and only when that walk read the toolkit is it
walked again, in its place, with every capability under every known toolkit (an
:class:`Older` point for each of the evaluator's ``others``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from tree_sitter import Node

from auditor.python.core import Frame, State
from auditor.python.interp import Interp
from auditor.python.models import names_probe
from auditor.python.symbols import Module
from auditor.python.syntax import case_bodies, child, clause_body, if_clauses, try_parts
from auditor.python.values import (
    ANY,
    Cap,
    ClassRef,
    ExtRef,
    Func,
    Method,
    ModRef,
    Opaque,
    Props,
    SelfRef,
    Taint,
    Val,
    Wrapper,
    is_boolish,
    merge,
    truth,
)

States = dict
"""``{point: State}`` in point order; points with the same variables and liveness share one
State (and one variables dict, which is never changed once made)."""


class Older(NamedTuple):
    """A point of a scan: a capability under another toolkit than the verdicts'. A capability alone is a point
    too: under the newest chosen toolkit, whose answers are the verdicts."""

    cap: Cap
    toolkit: str


def with_toolkits(caps, others: Sequence[str]) -> list:
    """Every capability under every toolkit (the ``others``, then the one of the verdicts), in point order."""
    return [p for c in caps for p in (*(Older(c, r) for r in others), c)]


_WORD = re.compile(r"\w+")
_MISSING = object()


@dataclass(slots=True)
class Rec:
    """What one node evaluated to: truth values per point, taint and truth-valuedness over all."""

    node: Node
    truths: dict = field(default_factory=dict)
    taint: Taint | None = None
    boolish: bool = True
    chosen: frozenset = frozenset()
    """The capabilities on which the value depends on the arch only as a value chosen upstream
    (:attr:`Taint.chosen`): ``fa_version == 4``, or a predicate's answer that such a test decided."""


class Scanner:
    """One scan: the walk over a module's relevant scopes for all capabilities, and its log."""

    def __init__(self, it: Interp, caps: tuple[Cap, ...]) -> None:
        self.it = it
        self.caps = caps
        self.order = {p: i for i, p in enumerate(with_toolkits(caps, it.others))}
        self.log: list[tuple[tuple, list]] = []
        """(points, [(node, value), ...]) of each evaluation, in walk order."""
        self.read_toolkit = False
        """Whether the scope being walked read the toolkit so far."""
        self.read_cap = False
        """Whether a :meth:`run` read the capability since this was last cleared."""
        self.states: dict = {}
        self.words: dict[int, tuple[str, ...]] = {}

    # ------------------------------------------------------------------ scopes
    def body(self, mod: Module, stmts, cls: str | None = None) -> None:
        """Module or class-level statements (definitions only bound: they are scopes of their own)."""
        self._per_toolkit(self.caps, lambda points: self._body(mod, stmts, cls, points))

    def _body(self, mod: Module, stmts, cls: str | None, points) -> None:
        states = self.start(points)
        fr = Frame(mod, None, cls)
        for s in stmts:
            inner = child(s, "definition") if s.type == "decorated_definition" else s
            if inner is not None and inner.type in ("function_definition", "class_definition"):
                if s.type == "decorated_definition":
                    states = self.run(states, s, lambda st: self._decorators(s, st, fr))  # noqa: B023 (called at once)
                continue
            states = self.stmt(s, states, fr)
            states = self.each(states, lambda st: self.state(st.env, True))

    def function(
        self, mod: Module, node: Node, caps: Sequence[Cap], parent: Frame | None, cls: str | None = None
    ) -> None:
        """A function body with unknown arguments (``self`` known)."""
        if cls is None:
            cls = self.it.class_of(mod, node)
        self._per_toolkit(caps, lambda points: self._function(mod, node, points, parent, cls))

    def _function(self, mod: Module, node: Node, points, parent: Frame | None, cls: str | None) -> None:
        states = self.run(self.start(points), node, lambda st: self._parameters(mod, node, cls, st))
        self.walk(child(node, "body").named_children, states, Frame(mod, None, cls, parent))

    def _per_toolkit(self, points: Sequence, walk) -> None:
        """``walk(points)``; when that read the toolkit and the points are capabilities alone,
        again under every toolkit, in place of the first walk. A nested scope's reads are its own."""
        outer, self.read_toolkit = self.read_toolkit, False
        mark = len(self.log)
        walk(points)
        if self.read_toolkit and self.it.others and not any(type(p) is Older for p in points):
            del self.log[mark:]
            walk(with_toolkits(points, self.it.others))
        self.read_toolkit = outer

    def _parameters(self, mod: Module, node: Node, cls: str | None, st: State) -> State:
        it = self.it
        env = st.env
        it.bind_params(node, env, (), {}, mod, cls, False)
        for name, v in env.items():
            if not any(isinstance(x, SelfRef) for x in v.elems):
                env[name] = ANY
        env.update(it.capability_arguments(mod, node))
        params = node.child_by_field_name("parameters")
        for p in params.named_children if params is not None else ():
            if p.type in ("default_parameter", "typed_default_parameter"):
                it.eval(child(p, "value"), Frame(mod, None))
        return st

    # ------------------------------------------------------------------ statements
    def walk(self, stmts, states: States, fr: Frame) -> States:
        for s in stmts:
            states = self.stmt(s, states, fr)
        return states

    def stmt(self, s: Node, states: States, fr: Frame) -> States:
        it = self.it
        t = s.type
        if t == "if_statement":
            return self.s_if(s, states, fr)
        if t in ("for_statement", "while_statement"):
            entry = self.run(states, s, lambda st: it.loop_entry(s, st, fr))
            after = self.walk(child(s, "body").named_children, entry, fr)
            out = self.combine([entry, after], it.loop_exit)
            alt = s.child_by_field_name("alternative")
            return self.walk(child(alt, "body").named_children, out, fr) if alt is not None else out
        if t == "try_statement":
            return self.s_try(s, states, fr)
        if t == "with_statement":
            states = self.run(states, s, lambda st: it.with_items(s, st, fr))
            return self.walk(child(s, "body").named_children, states, fr)
        if t == "decorated_definition":
            states = self.run(states, s, lambda st: self._decorators(s, st, fr))  # noqa: B023 (called at once)
            return self.stmt(child(s, "definition"), states, fr)
        if t == "match_statement":
            states = self.run(states, s, lambda st: self._subject(s, st, fr))
            outs = [self.walk(body.named_children, states, fr) for body in case_bodies(s)]
            return self.combine([states, *outs], lambda *sts: it.join_states(list(sts)))
        states = self.run(states, s, lambda st: it.simple(s, st, fr, []))
        if t == "function_definition" and (it.relevant(fr.mod, s) or it.parametric(fr.mod, s)):
            for env, caps in self.partition(states, s):
                self.function(fr.mod, s, caps, Frame(fr.mod, dict(env)))
        return states

    def s_if(self, s: Node, states: States, fr: Frame) -> States:
        it = self.it
        clauses, other = if_clauses(s)
        outs = []
        cur = states
        skip_other = False  # a clause the device always takes: no later one runs
        for cond, body in clauses:
            self.read_cap = False
            tested = self.run(cur, cond, lambda st: self._test(cond, st, fr))  # noqa: B023 (called at once)
            branch = self.each(tested, lambda r: self.state(r[0].env, r[0].live and True in r[1]))
            cur = self.each(tested, lambda r: self.state(r[0].env, r[0].live and False in r[1]))
            # a backend probe that decides the test without the capability (``if is_musa():``)
            # leaves another backend's code, which no NVIDIA device runs: no gate of this device
            off_device = not self.read_cap and names_probe(cond.text or b"")
            if off_device and not any(True in r[1] for r in tested.values()):
                outs.append(branch)
            else:
                outs.append(self.walk(body.named_children if body is not None else [], branch, fr))
            skip_other = off_device and not any(False in r[1] for r in tested.values())
            if skip_other:
                break
        if other is not None and not skip_other:
            cur = self.walk(other.named_children, cur, fr)
        outs.append(cur)
        return self.combine(outs, lambda *sts: it.join_states(list(sts)))

    def s_try(self, s: Node, states: States, fr: Frame) -> States:
        it = self.it
        body = self.walk(child(s, "body").named_children, states, fr)
        handlers, other, final = try_parts(s)
        outs = []
        for c in handlers:
            start = self.combine([states, body], lambda st, b, c=c: it.handler_entry(c, st, b))
            outs.append(self.walk(clause_body(c), start, fr))
        body = self.walk(other, body, fr)
        return self.walk(final, self.combine([body, *outs], lambda *sts: it.join_states(list(sts))), fr)

    def _test(self, cond: Node, st: State, fr: Frame):
        fr.env = st.env
        return st, self.it.test(cond, fr)

    def _decorators(self, s: Node, st: State, fr: Frame) -> State:
        fr.env = st.env
        for d in s.named_children:
            if d.type == "decorator" and d.named_children:
                self.it.eval(d.named_children[0], fr)
        return st

    def _subject(self, s: Node, st: State, fr: Frame) -> State:
        fr.env = st.env
        subj = s.child_by_field_name("subject")
        if subj is not None:
            self.it.eval(subj, fr)
        return st

    # ------------------------------------------------------------------ states
    def state(self, env: dict, live: bool) -> State:
        """The one State for these variables and liveness (so that sharing can be seen by identity)."""
        key = (id(env), live)
        st = self.states.get(key)
        if st is None:
            st = self.states[key] = State(env, live, None)
        return st

    def start(self, caps) -> States:
        st = self.state({}, True)
        return {c: st for c in caps}

    def partition(self, states: States, node: Node) -> list[tuple[dict, list[Cap]]]:
        """Capabilities whose variables agree on every name ``node`` mentions (so evaluating it
        reads and writes the same values for all of them), with the variables of the first."""
        envs: dict = {}
        for c, st in states.items():
            entry = envs.get(id(st.env))
            if entry is None:
                envs[id(st.env)] = (st.env, [c])
            else:
                entry[1].append(c)
        if len(envs) == 1:
            return list(envs.values())
        words = self._words(node)
        parts: dict = {}
        for env, caps in envs.values():
            key = tuple(id(env.get(w, _MISSING)) for w in words)
            entry = parts.get(key)
            if entry is None:
                parts[key] = (env, caps)
            else:
                entry[1].extend(caps)
                entry[1].sort(key=self.order.__getitem__)
        return list(parts.values())

    def _words(self, node: Node) -> tuple[str, ...]:
        words = self.words.get(node.id)
        if words is None:
            words = self.words[node.id] = tuple(set(_WORD.findall((node.text or b"").decode("utf-8", "replace"))))
        return words

    def run(self, states: States, node: Node, fn) -> States:
        """``fn(state)`` on a copy of the variables, once per :meth:`partition` of the capabilities
        by what ``node`` mentions, logging what it evaluated; again for each capability when it
        read the capability. ``fn`` returns a State or (State, extra); what it wrote to the
        variables is written to each capability's own, and its liveness joins theirs."""
        it = self.it
        results: dict = {}
        for env, caps in self.partition(states, node):
            outs: list = []
            for i, cap in enumerate(caps):
                if type(cap) is Older:
                    r, dep, tdep, recorded = it.observe(cap.cap, fn, State(dict(env), True, None), cap.toolkit)
                else:
                    r, dep, tdep, recorded = it.observe(cap, fn, State(dict(env), True, None))
                self.read_toolkit = self.read_toolkit or tdep
                self.read_cap = self.read_cap or dep
                whole = i == 0 and not dep and not tdep
                share = caps if whole else (cap,)
                if recorded:
                    self.log.append((tuple(share), recorded))
                _place(outs, r, share)
                if whole:
                    break
            for r, cs in outs:
                for c in cs:
                    results[c] = (env, r)
        return self._rebase(states, results, node)

    def _rebase(self, states: States, results: dict, node: Node) -> States:
        done: dict = {}
        out = {}
        for c, st in states.items():
            env, r = results[c]
            key = (id(st), id(r))
            new = done.get(key)
            if new is None:
                res = r[0] if isinstance(r, tuple) else r
                written = res.env
                if st.env is not env:
                    written = dict(st.env)
                    for w in self._words(node):
                        v = res.env.get(w, _MISSING)
                        if v is not _MISSING:
                            written[w] = v
                new = self.state(written, st.live and res.live)
                if isinstance(r, tuple):
                    new = (new, *r[1:])
                done[key] = new
            out[c] = new
        return out

    def each(self, states: States, fn) -> States:
        """``fn`` once per distinct state."""
        done: dict = {}
        out = {}
        for c, st in states.items():
            r = done.get(id(st))
            if r is None:
                r = done[id(st)] = fn(st)
            out[c] = r
        return out

    def combine(self, many: list[States], fn) -> States:
        """``fn(*states)`` per capability over several state maps (branches that meet), once per
        distinct combination; identical variables are shared."""
        done: dict = {}
        envs: list[dict] = []
        out = {}
        for c in many[0]:
            sts = [m[c] for m in many]
            key = tuple(map(id, sts))
            st = done.get(key)
            if st is None:
                r = fn(*sts)
                env = next((e for e in envs if identical(e, r.env)), None)
                if env is None:
                    env = r.env
                    envs.append(env)
                st = done[key] = self.state(env, r.live)
            out[c] = st
        return out

    # ------------------------------------------------------------------ records
    def records(self) -> dict[int, Rec]:
        """Per node evaluated to a tainted value (or tested as a condition), what every
        evaluation of it gave, per point; taints joined in capability order, the newest
        toolkit's first (what another toolkit decides depends on the arch too)."""
        conditions = self.it.conditions
        marked = {node.id for _, log in self.log for node, v in log if v.taint is not None or node.id in conditions}
        recs: dict[int, Rec] = {}
        taints: dict[int, dict] = {}
        for caps, log in self.log:
            for node, v in log:
                if node.id not in marked:
                    continue
                r = recs.get(node.id)
                if r is None:
                    r = recs[node.id] = Rec(node)
                    taints[node.id] = {}
                tr = truth(v)
                per_cap = taints[node.id]
                for c in caps:
                    r.truths[c] = r.truths.get(c, frozenset()) | tr
                    per_cap[c] = merge(per_cap.get(c), v.taint)
                r.boolish = r.boolish and is_boolish(v)
        for nid, r in recs.items():
            per_point = taints[nid]
            for c in self.caps:
                r.taint = merge(r.taint, per_point.get(c))
            r.chosen = frozenset(c for c in self.caps if (t := per_point.get(c)) is not None and t.chosen)
            if len(per_point) > len(self.caps):  # evaluated under the other toolkits too
                for p, t in per_point.items():
                    if type(p) is Older:
                        r.taint = merge(r.taint, t)
        return recs


def _place(results: list, r, caps) -> None:
    """Add ``r`` for ``caps`` to ``results``, sharing an identical result already there."""
    for entry in results:
        if identical(entry[0], r):
            entry[1].extend(caps)
            return
    results.append((r, list(caps)))


def identical(a, b) -> bool:
    """Equal, and of the same types all the way down: ``True == 1`` and a capability equals the
    plain tuple it holds, but they do not evaluate alike."""
    return a is b or (type(a) is type(b) and a == b and _typed_alike(a, b))


_PLAIN = {str, type(None), Opaque, ExtRef, ModRef, ClassRef, SelfRef, Wrapper, Props}
"""Types whose values equal only values of the same type."""


def _typed_alike(a, b) -> bool:
    """For ``a == b`` of one type: whether their parts are of the same types too (a taint is
    compared by equality: it does not take part in evaluation)."""
    if isinstance(a, dict):
        return all(v is b[k] or _typed_alike(v, b[k]) for k, v in a.items())
    if isinstance(a, State):
        return _typed_alike(a.env, b.env)
    if isinstance(a, Val):
        return _typed_alike(a.elems, b.elems)
    if isinstance(a, frozenset):
        if all(type(x) in _PLAIN for x in a):
            return True
        index = {y: y for y in b}
        return all(identical(x, index[x]) for x in a)
    if isinstance(a, tuple):
        return all(identical(x, y) for x, y in zip(a, b))
    if isinstance(a, Func):
        return identical(a.args, b.args) and identical(a.kwargs, b.kwargs)
    if isinstance(a, Method):
        return identical(a.recv, b.recv)
    return True

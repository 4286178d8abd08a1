"""Calls into the input's definitions: arguments bound to parameters, the body run in call
mode (only live paths, within a budget of statements), the result cached by arguments.

A call the input does not resolve by scope is looked up by name among its definitions, then
in the name table; a definition that says nothing about the arch but is named like a
predicate is read by its name.
"""

from __future__ import annotations

from tree_sitter import Node

from auditor.model import GateKind, Resolution, ResolvedBy
from auditor.python.core import FUEL, MAX_DEPTH, Core, Frame, OutOfFuel, State
from auditor.python.models import foreign, models
from auditor.python.parameters import Form, capability_parameters
from auditor.python.resolve import retag
from auditor.python.symbols import Module, definition_at
from auditor.python.syntax import callee_name, child, line_of, method_kind, one_line, text_of
from auditor.python.values import (
    ANY,
    NOTHING,
    UNKNOWN,
    Cap,
    ClassRef,
    ExtRef,
    Func,
    Members,
    Method,
    SelfRef,
    Val,
    Wrapper,
    along,
    capability,
    compare,
    join,
    make,
    taint,
    taints,
    truth,
    val,
)

_PARAMETER = taint(GateKind.CAPABILITY_COMPARE, ResolvedBy.LITERAL)


class Calls(Core):
    """Calls of the input's functions, methods and lambdas, and of names it does not resolve."""

    def e_call(self, node: Node, fr: Frame, run: bool = True) -> Val:
        """A call's value. ``run=False``: a call whose value its statement throws away (scan
        mode), its callee and arguments evaluated (and recorded), no body run."""
        fnode = child(node, "function")
        args, kwargs, splat = self._arguments(child(node, "arguments"), fr)
        name = callee_name(fnode)
        bare = name.lstrip("_")
        if bare in self.toolkit_names:
            return self.toolkit_call(bare, args)
        if fnode.type == "attribute" and (name in self.table.sources or name in self.table.tests):
            recv = self.eval(child(fnode, "object"), fr)
            if all(isinstance(x, (SelfRef, ExtRef)) or x is UNKNOWN for x in recv.elems) and not any(
                isinstance(x, ExtRef) and foreign(x.path) for x in recv.elems
            ):
                return self.api(name, args, kwargs)
        callee = self.eval(fnode, fr)
        if not run:
            return ANY
        outs = [self.call_elem(x, args, kwargs, name, splat) for x in callee.elems]
        return join(*outs).with_taint(callee.taint) if outs else NOTHING

    def _arguments(self, node: Node | None, fr: Frame):
        args: list[Val] = []
        kwargs: dict[str, Val] = {}
        splat = False
        if node is None:
            return args, kwargs, splat
        if node.type == "generator_expression":
            return [self.eval(node, fr)], kwargs, splat
        for c in node.named_children:
            if c.type == "keyword_argument":
                kwargs[text_of(child(c, "name"))] = self.eval(child(c, "value"), fr)
            elif c.type in ("list_splat", "dictionary_splat"):
                splat = True
                if c.named_children:
                    self.eval(c.named_children[0], fr)
            elif c.type != "comment":
                args.append(self.eval(c, fr))
        return args, kwargs, splat

    def call_elem(self, x, args, kwargs, name: str, splat: bool = False) -> Val:
        """Calling one possible callee: what it is decides who models the call."""
        if isinstance(x, Func):
            return self.call_func(x, args, kwargs)
        if isinstance(x, Wrapper):
            return args[0] if args else ANY
        if isinstance(x, Members):
            return compare("in", args[0], val(x.items)) if len(args) == 1 else ANY
        if isinstance(x, Method):
            return self.method(x, args)
        if isinstance(x, ExtRef):
            return self.external(x, args, kwargs, splat)
        if isinstance(x, (ClassRef, ExtRef)) and _type_name(x) in self.table.capability_types:
            return _constructed(args, kwargs)
        if isinstance(x, ClassRef):
            return ANY
        if x is UNKNOWN and name:
            return self.by_name(name, args, kwargs)
        return ANY

    def by_name(self, name: str, args, kwargs, functions: bool = False) -> Val:
        """A call the input does not resolve by scope: a definition of that name elsewhere in the
        input (methods on an opaque receiver, or a free function), else the name table."""
        if name in self.table.sources or name in self.table.tests:
            return self.api(name, args, kwargs)
        if name in models().probes:
            return val(models().probes[name])
        vals = []
        if functions:
            for mod, b in self.prog.definers(name):
                if b.kind == "def" and b.node is not None:
                    vals.append(self.call_func(Func(mod.name, b.node.start_byte, name), args, kwargs))
                else:
                    v = self.global_value(mod, name)
                    vals.append(join(*[self.call_elem(e, args, kwargs, "") for e in v.elems]).with_taint(v.taint))
        else:
            running = {key[1:3] for key in self.active if key[0] == "c"}  # the definitions being run
            for mod, m in self.prog.method_definers(name):
                f = Func(mod.name, m.start, name, bound=m.kind in ("self", "class"))
                if (mod.name, m.start) in running:  # a guess that leads back into itself
                    vals.append(ANY)
                elif self.prog.loaded(mod.name) is mod and not self.relevant.within(mod, m.start, m.end):
                    vals.append(self._fallback(f, ANY))  # what call_func gives it, without parsing its module
                else:
                    vals.append(self.call_func(f, args, kwargs))
        v = join(*vals) if vals else ANY
        if v.taint is None:
            byname = self.name_table(name)
            if byname.taint is not None:
                return byname
        return v

    def call_func(self, f: Func, args, kwargs) -> Val:
        """A definition's result on these arguments, cached per capability only when it read it; a
        recursion, a nesting too deep or a definition that may not matter gives an unknown."""
        mod = self.prog.loaded(f.module)
        if mod is None:
            return ANY
        node = definition_at(mod, f.start)
        if node is None:
            return ANY
        if not self.relevant.within(mod, node.start_byte, node.end_byte):
            return self._fallback(f, ANY)
        all_args = f.args + tuple(args)
        all_kwargs = dict(f.kwargs)
        all_kwargs.update(kwargs)
        key = ("c", f.module, f.start, f.bound, all_args, tuple(sorted(all_kwargs.items())))
        hit = self._cached(key)
        if hit is not None:
            return hit
        if key in self.active or self.depth > MAX_DEPTH:
            return ANY
        outer = self._fresh()
        try:
            v = self._call(mod, node, f, all_args, all_kwargs, key)
            self._store(key, v)
            return v
        finally:
            self._restore(outer)

    def _call(self, mod: Module, node: Node, f: Func, all_args, all_kwargs, key) -> Val:
        self.active.add(key)
        outermost = self.fuel is None
        if outermost:
            self.fuel = FUEL
        self.depth += 1
        try:
            with self.quiet():
                v = self._run(mod, node, f, all_args, all_kwargs)
        except OutOfFuel:
            if not outermost:
                raise
            v = ANY
        finally:
            self.depth -= 1
            self.active.discard(key)
            if outermost:
                self.fuel = None
        if v.taint is not None:
            res = Resolution(f.name, mod.path, line_of(node), one_line(mod.text(node).split("\n", 1)[0], 120))
            v = Val(v.elems, retag(v, res, f.name, ("c", f.module, f.start, f.bound, f.args, f.kwargs)))
            for alias in f.alias:
                v = Val(v.elems, retag(v, alias[1], alias[0], alias[2]))
        else:
            v = self._fallback(f, v)
        return v

    def _fallback(self, f: Func, v: Val) -> Val:
        """A definition that says nothing about the arch, named like a predicate: read the name."""
        for name in (f.name, *(a[0] for a in f.alias)):
            byname = self.name_table(name)
            if byname.taint is not None:
                return byname
        return v

    def _run(self, mod: Module, node: Node, f: Func, args, kwargs) -> Val:
        env: dict = {}
        cls = self.class_of(mod, node)
        self.bind_params(node, env, args, kwargs, mod, cls, f.bound)
        fr = Frame(mod, env, cls)
        body = child(node, "body")
        if node.type == "lambda":
            return self.eval(body, fr)
        rets: list[Val] = []
        st = self.walk(body.named_children, State(env), fr, rets)
        if st.live:
            rets.append(along(val(None), st.path))
        return join(*rets) if rets else NOTHING

    def class_of(self, mod: Module, node: Node) -> str | None:
        """The qualified name of the class a function is a method of, if any (its first parameter
        is then ``self``)."""
        p = node.parent
        while p is not None and p.type not in ("class_definition", "function_definition", "module"):
            p = p.parent
        if p is not None and p.type == "class_definition":
            return self.qual_of(mod, p)
        return None

    def bind_params(self, node: Node, env: dict, args, kwargs, mod: Module, cls: str | None, bound: bool) -> None:
        """The parameters of a definition bound in ``env``: ``self`` to the class, then positional
        and keyword arguments, then defaults; the rest unknown."""
        params = node.child_by_field_name("parameters")
        if params is None:
            return
        pos = list(args)
        first = True
        for p in params.named_children:
            t = p.type
            if t in ("list_splat_pattern", "dictionary_splat_pattern"):
                inner = p.named_children
                if inner:
                    env[text_of(inner[0])] = ANY
                if t == "list_splat_pattern":
                    pos = []
                first = False
                continue
            if t in ("keyword_separator", "positional_separator", "comment"):
                continue
            name_node = (
                p if t == "identifier" else child(p, "name") or (p.named_children[0] if p.named_children else None)
            )
            if name_node is None or name_node.type != "identifier":
                continue
            name = text_of(name_node)
            if first and cls is not None and node.type == "function_definition" and method_kind(node) != "static":
                first = False
                env[name] = val(SelfRef(mod.name, cls))
                if not bound and pos:
                    pos.pop(0)
                continue
            first = False
            if pos:
                env[name] = pos.pop(0)
            elif name in kwargs:
                env[name] = kwargs[name]
            elif t in ("default_parameter", "typed_default_parameter"):
                with self.quiet():
                    env[name] = self.eval(child(p, "value"), Frame(mod, None))
            else:
                env[name] = ANY

    def function_attr(self, f: Func, attr: str, depth: int = 0) -> Val:
        """An attribute a decorator attached to a function of the input: the check that
        ``@supported_compute_capability([...])`` adds (its list flows to the call), directly or
        passed on by another decorator's keyword (``common_check=``); else unknown."""
        entry = next((e for e in self.table.lists if e.get("check") == attr), None)
        mod = self.prog.loaded(f.module)
        node = definition_at(mod, f.start) if mod is not None and entry is not None else None
        if entry is None or mod is None or node is None or depth > 4:
            return ANY
        decorated = node.parent if node.parent is not None and node.parent.type == "decorated_definition" else None
        for d in decorated.named_children if decorated is not None else ():
            call = d.named_children[0] if d.type == "decorator" and d.named_children else None
            if call is None or call.type != "call":
                continue
            with self.quiet():
                args, kwargs, _ = self._arguments(child(call, "arguments"), Frame(mod, None))
            if callee_name(child(call, "function")) == entry["call"] and args:
                items = args[0].only()
                if isinstance(items, (tuple, frozenset)) and all(type(i) is int for i in items):
                    return val(Members(frozenset(items)))
            for kw in entry.get("via", ()):
                for g in kwargs.get(kw, NOTHING).elems:
                    if isinstance(g, Func):
                        return self.function_attr(g, attr, depth + 1)
        return ANY

    def parametric(self, mod: Module, node: Node) -> dict[str, Form]:
        """The capability parameters of a definition and their forms (:mod:`parameters`); a
        definition with some is worth a scan whatever words it uses (``def ok(cc): ...``)."""
        key = (mod.name, node.start_byte)
        forms = self.forms.get(key)
        if forms is None:
            forms = self.forms[key] = capability_parameters(node, self.table)
        return forms

    def capability_arguments(self, mod: Module, node: Node) -> dict[str, Val]:
        """The parameters of ``node`` that hold the device capability, bound to the capability
        being evaluated in the form the body reads: a scan of the function is then a scan of
        the predicate it is of its parameter."""
        forms = self.parametric(mod, node)
        if not forms:
            return {}
        self.dep = True
        cap = self.cap
        return {name: val(_in_form(cap, form), taint=_PARAMETER) for name, form in forms.items()}

    def admits(self, key: tuple, labels: tuple[str, ...]) -> frozenset[str]:
        """Where a resolved predicate (by its definition) can be true, over all capabilities,
        with the newest chosen toolkit: what its name promises is checked against this."""
        hit = self.cache.get(("admits", key))
        if hit is not None:
            return hit
        saved = self.cap, self.toolkit
        self.toolkit = self.newest  # whichever evaluation asks first, the same answer
        out = set()
        try:
            with self.quiet():
                for label in labels:
                    self.cap = capability(label)
                    if key[0] == "g":
                        v = self.global_value(self.prog.loaded(key[1]) or self.prog.modules[key[1]], key[2])
                        v = join(*[self.call_func(x, [], {}) if isinstance(x, Func) else val(x) for x in v.elems])
                    else:
                        _, module, start, bound, args, kwargs = key
                        v = self.call_func(Func(module, start, "", args, kwargs, bound), [], {})
                    if True in truth(v):
                        out.add(label)
        finally:
            self.cap, self.toolkit = saved
        result = frozenset(out)
        self.cache[("admits", key)] = result
        return result


def _in_form(cap: Cap, form: Form):
    if form is Form.NUMBER:
        return cap[0] * 10 + cap[1]
    if form is Form.MAJOR:
        return cap[0]
    return cap


def _type_name(x: ClassRef | ExtRef) -> str:
    return (x.qualname if isinstance(x, ClassRef) else x.path).rsplit(".", 1)[-1]


def _constructed(args, kwargs) -> Val:
    """``DeviceCapability(8, 0)``, ``DeviceCapability(major=m, minor=n)``: a capability value,
    compared as one (it is the device's when its parts are)."""
    args = list(args) + [kwargs[k] for k in ("major", "minor")[len(args) :] if k in kwargs]
    if len(args) != 2:
        return ANY
    out = [
        Cap((a, b)) if isinstance(a, int) and isinstance(b, int) else UNKNOWN
        for a in args[0].elems
        for b in args[1].elems
    ]
    return make(out, taints(args))

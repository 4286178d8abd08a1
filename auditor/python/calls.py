"""Calls into the input's definitions: arguments bound to parameters, the body run in call
mode (only live paths, within a budget of statements), the result cached by arguments.

A call the input does not resolve by scope is looked up by name among its definitions, then
in the name table; a definition that says nothing about the arch but is named like a
predicate is read by its name.
"""

from __future__ import annotations

from tree_sitter import Node

from auditor.model import Resolution
from auditor.python.core import FUEL, MAX_DEPTH, Core, Frame, OutOfFuel, State
from auditor.python.models import foreign, models
from auditor.python.resolve import retag
from auditor.python.symbols import Binding, Module, definition_at
from auditor.python.syntax import callee_name, child, line_of, method_kind, one_line, text_of
from auditor.python.values import (
    ANY,
    NOTHING,
    UNKNOWN,
    ClassRef,
    ExtRef,
    Func,
    Method,
    SelfRef,
    Val,
    Wrapper,
    capability,
    join,
    truth,
    val,
)


class Calls(Core):
    """Calls of the input's functions, methods and lambdas, and of names it does not resolve."""

    def e_call(self, node: Node, fr: Frame) -> Val:
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
        if isinstance(x, Method):
            return self.method(x, args)
        if isinstance(x, ExtRef):
            return self.external(x, args, kwargs, splat)
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
        cands: list[tuple[Module, Node | None, Binding | None]] = []
        if functions:
            for m, binding in self.prog.functions.get(name, ())[:8]:
                cands.append((m, binding.node if binding.kind == "def" else None, binding))
        else:
            for m, _qual, method in self.prog.methods.get(name, ())[:8]:
                cands.append((m, method, None))
        vals = []
        for mod, fn, b in cands:
            if fn is not None:
                bound = not functions and method_kind(fn) in ("self", "class")
                vals.append(self.call_func(Func(mod.name, fn.start_byte, name, bound=bound), args, kwargs))
            elif b is not None:
                v = self.global_value(mod, name)
                vals.append(join(*[self.call_elem(e, args, kwargs, "") for e in v.elems]).with_taint(v.taint))
        v = join(*vals) if vals else ANY
        if v.taint is None:
            byname = self.name_table(name)
            if byname.taint is not None:
                return byname
        return v

    def call_func(self, f: Func, args, kwargs) -> Val:
        """A definition's result on these arguments, cached per capability only when it read it; a
        recursion, a nesting too deep or a definition that may not matter gives an unknown."""
        mod = self.prog.modules.get(f.module)
        if mod is None:
            return ANY
        node = definition_at(mod, f.start)
        if node is None:
            return ANY
        if not self.relevant(mod, node):
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
            rets.append(val(None).with_taint(st.path))
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

    def admits(self, key: tuple, labels: tuple[str, ...]) -> frozenset[str]:
        """Where a resolved predicate (by its definition) can be true, over all capabilities:
        what its name promises is checked against this."""
        hit = self.cache.get(("admits", key))
        if hit is not None:
            return hit
        saved = self.cap
        out = set()
        try:
            with self.quiet():
                for label in labels:
                    self.cap = capability(label)
                    if key[0] == "g":
                        v = self.global_value(self.prog.modules[key[1]], key[2])
                        v = join(*[self.call_func(x, [], {}) if isinstance(x, Func) else val(x) for x in v.elems])
                    else:
                        _, module, start, bound, args, kwargs = key
                        v = self.call_func(Func(module, start, "", args, kwargs, bound), [], {})
                    if True in truth(v):
                        out.add(label)
        finally:
            self.cap = saved
        result = frozenset(out)
        self.cache[("admits", key)] = result
        return result

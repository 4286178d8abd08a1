"""The evaluator: expressions and function bodies, one device capability at a time.

*Call* mode runs a definition to learn what it returns (following only live paths,
tainting what a tainted branch decides). *Scan* mode (:mod:`scan`) walks a scope to find
gates with this evaluator's expressions and simple statements, recording every evaluated
node's value.

The evaluator notes when it reads the capability (``dep``): a result that did not read it
is the same on every capability, so it is cached once, not once per capability, and a scan
evaluates such a statement once for all of them.

Locals are flow-sensitive (the environment at each statement); module globals are the join
of all their bindings (they are read after import, whatever branch bound them).
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from tree_sitter import Node

from auditor import arch
from auditor.facts import names as names_mod
from auditor.model import Resolution
from auditor.python.symbols import Binding, ClassInfo, Module, Program, assigned_in, definition_at, destructure, imports
from auditor.python.values import (
    ANY,
    BOOL,
    NOTHING,
    UNKNOWN,
    Cap,
    ClassRef,
    ExtRef,
    Func,
    Method,
    ModRef,
    Props,
    SelfRef,
    Taint,
    Val,
    Wrapper,
    binary,
    bool_and,
    bool_not,
    bool_or,
    compare,
    is_boolish,
    is_data,
    join,
    make,
    merge,
    product,
    taint,
    truth,
    unary,
    val,
)

MAX_DEPTH = 40
FUEL = 3000
"""Statements one outermost call may run: a predicate is short, a long function is not one."""
MAX_ITEMS = 32
_CAP_TAINT = taint("capability-compare", "literal")
_API_TAINT = taint("platform-api", "literal")
_BUILTINS = {
    "int",
    "float",
    "str",
    "bool",
    "tuple",
    "list",
    "set",
    "frozenset",
    "len",
    "min",
    "max",
    "any",
    "all",
    "sum",
    "abs",
    "sorted",
    "range",
    "map",
    "isinstance",
    "hasattr",
    "getattr",
    "print",
    "reversed",
}
_STR_METHODS = {
    "startswith",
    "endswith",
    "split",
    "lower",
    "upper",
    "strip",
    "lstrip",
    "rstrip",
    "replace",
    "isdigit",
    "removeprefix",
    "removesuffix",
    "count",
    "index",
    "rsplit",
}


def capability(label: str) -> Cap:
    c = arch.Capability.parse(label)
    return Cap((c.major, c.minor))


def line_of(node: Node) -> int:
    return node.start_point[0] + 1


def one_line(text: str, limit: int = 160) -> str:
    """The text on one line without its layout: no space inside brackets, no trailing comma."""
    s = " ".join(text.split())
    s = _OPEN_SPACE.sub(r"\1", s)
    s = _CLOSE_SPACE.sub(r"\1", s)
    return s if len(s) <= limit else s[: limit - 1] + "…"


_OPEN_SPACE = re.compile(r"([(\[{]) ")
_CLOSE_SPACE = re.compile(r",? ([)\]}])")


@dataclass(slots=True)
class Frame:
    mod: Module
    env: dict | None
    cls: str | None = None
    parent: Frame | None = None


@dataclass(slots=True)
class State:
    env: dict
    live: bool = True
    path: Taint | None = None


class Interp:
    def __init__(self, prog: Program, relevant) -> None:
        self.prog = prog
        self.relevant = relevant
        """``relevant(mod, node) -> bool``: whether a definition may matter (mentions arch tokens
        or known predicates); others are not run, their calls are unknown."""
        self.table = names_mod.table()
        self.cap: Cap = Cap((0, 0))
        self.dep = False
        """Whether ``cap`` was read since this was last cleared (see :meth:`_cached`)."""
        self.cache: dict = {}
        """Results that did not read the capability, by key; ``per_cap`` those that did."""
        self.per_cap: dict = {}
        self.active: set = set()
        self.depth = 0
        self.recording = False
        self.recorded: list = []
        """Scan mode: (node, value) of each evaluation, in order."""
        self.conditions: set[int] = set()
        self.globals_read: dict[int, tuple[Node, Module, str]] = {}
        """Identifiers a scan read from module globals (for the gates' resolutions)."""
        self.fuel: int | None = None

    # ------------------------------------------------------------------ caching
    def _cached(self, key) -> Val | None:
        """A result computed before on this capability, or on any when it did not read it."""
        hit = self.per_cap.get((self.cap, key))
        if hit is not None:
            self.dep = True
            return hit
        return self.cache.get(key)

    def _store(self, key, v: Val) -> None:
        if self.dep:
            self.per_cap[(self.cap, key)] = v
        else:
            self.cache[key] = v

    def quiet(self):
        """Context for evaluating definitions: nothing recorded, nothing walked as dead code."""
        return _Quiet(self)

    # ------------------------------------------------------------------ expressions
    def eval(self, node: Node, fr: Frame) -> Val:
        fn = _DISPATCH.get(node.type)
        v = fn(self, node, fr) if fn is not None else ANY
        if self.recording:
            self.recorded.append((node, v))
        return v

    def e_identifier(self, node: Node, fr: Frame) -> Val:
        name = node.text.decode()
        f = fr
        while f is not None:
            if f.env is not None and name in f.env:
                return f.env[name]
            f = f.parent
        if self.recording:
            self.globals_read[node.id] = (node, fr.mod, name)
        return self.global_value(fr.mod, name)

    def e_paren(self, node: Node, fr: Frame) -> Val:
        inner = [c for c in node.named_children if c.type != "comment"]
        if len(inner) == 1:
            return self.eval(inner[0], fr)
        return product([self.eval(c, fr) for c in inner])

    def e_integer(self, node: Node, fr: Frame) -> Val:
        text = node.text.decode().replace("_", "").rstrip("lLjJ")
        try:
            return val(int(text, 0))
        except ValueError:
            return ANY

    def e_float(self, node: Node, fr: Frame) -> Val:
        try:
            return val(float(node.text.decode().replace("_", "")))
        except ValueError:
            return ANY

    def e_true(self, node, fr):
        return val(True)

    def e_false(self, node, fr):
        return val(False)

    def e_none(self, node, fr):
        return val(None)

    def e_string(self, node: Node, fr: Frame) -> Val:
        parts: list[Val] = []
        start = node.child(0)
        prefix = start.text.decode().lower() if start is not None else ""
        if "b" in prefix.replace('"', "").replace("'", ""):
            return ANY
        for c in node.children:
            if c.type == "string_content":
                parts.append(val(_unescape(c.text.decode("utf-8", "replace"), "r" in prefix)))
            elif c.type == "escape_sequence":
                parts.append(val(_unescape(c.text.decode("utf-8", "replace"), "r" in prefix)))
            elif c.type == "interpolation":
                expr = c.child_by_field_name("expression")
                v = self.eval(expr, fr) if expr is not None else ANY
                if (
                    c.child_by_field_name("format_specifier") is not None
                    or c.child_by_field_name("type_conversion") is not None
                ):
                    parts.append(Val(ANY.elems, v.taint))
                else:
                    parts.append(
                        make(
                            (
                                str(x) if is_data(x) and not isinstance(x, (tuple, frozenset)) else UNKNOWN
                                for x in v.elems
                            ),
                            v.taint,
                        )
                    )
        return _concat(parts)

    def e_concat(self, node: Node, fr: Frame) -> Val:
        return _concat([self.eval(c, fr) for c in node.named_children if c.type == "string"])

    def e_tuple(self, node: Node, fr: Frame) -> Val:
        items = [c for c in node.named_children if c.type != "comment"]
        if any(c.type in ("list_splat", "parenthesized_list_splat", "dictionary_splat") for c in items):
            vals = [self.eval(c, fr) for c in items]
            return Val(ANY.elems, _taints(vals))
        return product([self.eval(c, fr) for c in items])

    def e_set(self, node: Node, fr: Frame) -> Val:
        v = self.e_tuple(node, fr)
        return make((frozenset(x) if isinstance(x, tuple) else UNKNOWN for x in v.elems), v.taint)

    def e_dict(self, node: Node, fr: Frame) -> Val:
        return ANY

    def e_bool(self, node: Node, fr: Frame) -> Val:
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        op = node.child_by_field_name("operator").type
        a = self.eval(left, fr)
        box: list[Val] = []

        def rhs() -> Val:
            if not box:
                box.append(self.eval(right, fr))
            return box[0]

        if self.recording:
            rhs()
        out = bool_and(a, rhs) if op == "and" else bool_or(a, rhs)
        return self._note_unknowns(out, (left, a), (right, box[0] if box else None))

    def _note_unknowns(self, out: Val, *operands) -> Val:
        """A tainted result that an untainted unknown operand may decide lists that operand."""
        if out.taint is None:
            return out
        notes = []
        for n, v in operands:
            if v is not None and v.taint is None and len(truth(v)) == 2:
                notes.append(_short(n))
        if not notes:
            return out
        return Val(out.elems, out.taint.merge(Taint(unknowns=tuple(notes))))

    def e_not(self, node: Node, fr: Frame) -> Val:
        return bool_not(self.eval(node.child_by_field_name("argument"), fr))

    def e_compare(self, node: Node, fr: Frame) -> Val:
        operands: list[Node] = []
        ops: list[str] = []
        for i, c in enumerate(node.children):
            if node.field_name_for_child(i) == "operators":
                ops.append(" ".join(c.text.decode().split()))
            elif c.is_named and c.type != "comment":
                operands.append(c)
        vals = [self.eval(c, fr) for c in operands]
        out = compare(ops[0], vals[0], vals[1])
        for i in range(1, len(ops)):
            nxt = compare(ops[i], vals[i], vals[i + 1])
            out = bool_and(out, lambda nxt=nxt: nxt)
        return out

    def e_binary(self, node: Node, fr: Frame) -> Val:
        a = self.eval(node.child_by_field_name("left"), fr)
        b = self.eval(node.child_by_field_name("right"), fr)
        return binary(node.child_by_field_name("operator").type, a, b)

    def e_unary(self, node: Node, fr: Frame) -> Val:
        return unary(node.child_by_field_name("operator").type, self.eval(node.child_by_field_name("argument"), fr))

    def e_conditional(self, node: Node, fr: Frame) -> Val:
        kids = [c for c in node.named_children if c.type != "comment"]
        if len(kids) != 3:
            return ANY
        body, cond, alt = kids
        c = self.eval(cond, fr)
        tr = truth(c)
        if self.recording:
            a, b = self.eval(body, fr), self.eval(alt, fr)
            chosen = [v for v, t in ((a, True), (b, False)) if t in tr]
        else:
            chosen = [self.eval(n, fr) for n, t in ((body, True), (alt, False)) if t in tr]
        return join(*chosen).with_taint(c.taint) if chosen else NOTHING

    def e_subscript(self, node: Node, fr: Frame) -> Val:
        base = self.eval(node.child_by_field_name("value"), fr)
        subs = [c for c in node.children_by_field_name("subscript")]
        if len(subs) != 1:
            return Val(ANY.elems, base.taint)
        sub = subs[0]
        if sub.type == "slice":
            key = self._slice(sub, fr)
        else:
            key = self.eval(sub, fr)
        out: set = set()
        for x in base.elems:
            for k in key.elems:
                if isinstance(x, (tuple, str)) and isinstance(k, (int, _Slice)) and not isinstance(k, bool):
                    try:
                        r = x[slice(*k.parts)] if isinstance(k, _Slice) else x[k]
                    except Exception:
                        continue
                    out.add(tuple(r) if isinstance(r, tuple) else r)
                else:
                    out.add(UNKNOWN)
        return make(out, merge(base.taint, key.taint))

    def _slice(self, node: Node, fr: Frame) -> Val:
        parts: list = [None]
        for c in node.children:
            if c.type == ":":
                parts.append(None)
            elif c.is_named:
                v = self.eval(c, fr).only()
                parts[-1] = v if isinstance(v, int) else UNKNOWN
        if any(p is UNKNOWN for p in parts) or len(parts) > 3:
            return ANY
        return Val(frozenset({_Slice(tuple(parts))}))

    def e_lambda(self, node: Node, fr: Frame) -> Val:
        return val(Func(fr.mod.name, node.start_byte, "<lambda>"))

    def e_walrus(self, node: Node, fr: Frame) -> Val:
        v = self.eval(node.child_by_field_name("value"), fr)
        if fr.env is not None:
            fr.env[node.child_by_field_name("name").text.decode()] = v
        return v

    def e_await(self, node: Node, fr: Frame) -> Val:
        kids = node.named_children
        return self.eval(kids[0], fr) if kids else ANY

    def e_comprehension(self, node: Node, fr: Frame) -> Val:
        body = node.child_by_field_name("body")
        clauses = [c for c in node.named_children if c.type in ("for_in_clause", "if_clause")]
        fors = [c for c in clauses if c.type == "for_in_clause"]
        if body is None or len(fors) != 1 or body.type == "pair":
            return ANY
        it = self.eval(fors[0].child_by_field_name("right"), fr)
        target = fors[0].child_by_field_name("left")
        items = _items(it)
        env = dict(fr.env or {})
        sub = Frame(fr.mod, env, fr.cls, fr)
        results: list[Val] = []
        t = it.taint
        definite = items is not None
        for item in items if items is not None else [ANY]:
            self._bind(target, item, env)
            keep = True
            for c in clauses[1:]:
                if c.type == "if_clause" and c.named_children:
                    cv = self.eval(c.named_children[0], sub)
                    t = merge(t, cv.taint)
                    tr = truth(cv)
                    if tr == {False} or not tr:
                        keep = False
                    elif len(tr) == 2:
                        definite = False
            v = self.eval(body, sub)
            t = merge(t, v.taint)
            if keep:
                results.append(v)
        if not definite:
            return Val(ANY.elems, t)
        out = product(results)
        if node.type == "set_comprehension":
            out = make((frozenset(x) if isinstance(x, tuple) else UNKNOWN for x in out.elems), out.taint)
        return out.with_taint(t)

    # ------------------------------------------------------------------ names
    def global_value(self, mod: Module, name: str, seen: frozenset = frozenset()) -> Val:
        key = ("g", mod.name, name)
        hit = self._cached(key)
        if hit is not None:
            return hit
        bindings = mod.bindings.get(name)
        if bindings and (key in self.active or self.depth > MAX_DEPTH):
            return ANY
        outer, self.dep = self.dep, False
        try:
            v = self._global_value(mod, name, seen, key, bindings) if bindings else self._from_stars(mod, name, seen)
            self._store(key, v)
            return v
        finally:
            self.dep = outer or self.dep

    def _global_value(self, mod: Module, name: str, seen: frozenset, key, bindings) -> Val:
        self.active.add(key)
        self.depth += 1
        try:
            with self.quiet():
                vals = [self.binding_value(mod, b, name) for b in bindings]
        finally:
            self.depth -= 1
            self.active.discard(key)
        v = join(*vals)
        values = [b for b in bindings if b.kind == "value"]
        if values:
            site = values[-1].node
            res = Resolution(name, mod.path, line_of(site), one_line(mod.text(site)))
            if v.taint is not None:
                v = Val(v.elems, _retag(v, res, name, ("g", mod.name, name)))
            else:
                v = make((_alias(x, res, name, ("g", mod.name, name)) for x in v.elems), None)
        return v

    def _from_stars(self, mod: Module, name: str, seen: frozenset) -> Val:
        for star in mod.stars:
            other = self.prog.module(star)
            if other is not None and other.name not in seen and other is not mod:
                v = self.global_value(other, name, seen | {mod.name})
                if not (len(v.elems) == 1 and isinstance(v.only(), ExtRef) and v.only().free):
                    return v
        return val(ExtRef(name, free=True))

    def binding_value(self, mod: Module, b: Binding, name: str) -> Val:
        if b.kind == "def":
            return val(Func(mod.name, b.node.start_byte, name))
        if b.kind == "class":
            return val(ClassRef(mod.name, self._qual_of(mod, b.node)))
        if b.kind == "import":
            return self.import_value(b.target)
        if b.kind == "value":
            v = self.eval(b.node, Frame(mod, None))
            return _pick(v, b.path)
        return ANY

    def _qual_of(self, mod: Module, node: Node) -> str:
        for qual, info in mod.classes.items():
            if info.node.id == node.id:
                return qual
        return node.child_by_field_name("name").text.decode()

    def import_value(self, target: str) -> Val:
        m = self.prog.module(target)
        if m is not None:
            return val(ModRef(m.name))
        base, _, attr = target.rpartition(".")
        if base:
            owner = self.prog.module(base)
            if owner is not None:
                return self.attr_of_module(owner, attr)
        return val(ExtRef(target))

    def attr_of_module(self, mod: Module, attr: str) -> Val:
        if attr in mod.bindings or mod.stars:
            v = self.global_value(mod, attr)
            if not (len(v.elems) == 1 and isinstance(v.only(), ExtRef) and v.only().free):
                return v
        sub = self.prog.module(f"{mod.name}.{attr}")
        if sub is not None:
            return val(ModRef(sub.name))
        return ANY

    # ------------------------------------------------------------------ attributes
    def e_attribute(self, node: Node, fr: Frame) -> Val:
        base = self.eval(node.child_by_field_name("object"), fr)
        return self.attribute(base, node.child_by_field_name("attribute").text.decode())

    def attribute(self, base: Val, attr: str) -> Val:
        out: list[Val] = []
        for x in base.elems:
            out.append(self._attr_elem(x, attr))
        return join(*out).with_taint(base.taint) if out else NOTHING

    def _attr_elem(self, x, attr: str) -> Val:
        if isinstance(x, ModRef):
            mod = self.prog.modules.get(x.name)
            if mod is not None:
                return self.attr_of_module(mod, attr)
            return ANY
        if isinstance(x, ExtRef):
            path = f"{x.path}.{attr}"
            return val(self.table.constants[path]) if path in self.table.constants else val(ExtRef(path))
        if isinstance(x, (ClassRef, SelfRef)):
            return self.class_attr(x, attr)
        if isinstance(x, Cap):
            if attr == "major":
                return val(x[0])
            if attr == "minor":
                return val(x[1])
            return val(Method(x, attr))
        if isinstance(x, Props):
            if attr in ("major", "minor"):
                return val(x.cap[0] if attr == "major" else x.cap[1], taint=_CAP_TAINT)
            return ANY
        if isinstance(x, str) and attr in _STR_METHODS:
            return val(Method(x, attr))
        return ANY

    def class_attr(self, ref, attr: str, depth: int = 0) -> Val:
        mod = self.prog.modules.get(ref.module)
        info = mod.classes.get(ref.qualname) if mod is not None else None
        if info is None or depth > 8:
            return ANY
        bs = info.bindings.get(attr)
        if bs:
            vals = []
            for b in bs:
                if b.kind == "def":
                    kind = _method_kind(b.node)
                    f = Func(
                        mod.name,
                        b.node.start_byte,
                        attr,
                        bound=kind == "class" or (kind == "self" and isinstance(ref, SelfRef)),
                    )
                    if kind == "property":
                        vals.append(self.call_func(Func(mod.name, b.node.start_byte, attr, bound=True), [], {}))
                    else:
                        vals.append(val(f))
                elif b.kind == "value":
                    with self.quiet():
                        vals.append(_pick(self.eval(b.node, Frame(mod, None)), b.path))
                else:
                    vals.append(ANY)
            return join(*vals)
        for base in info.bases:
            bref = self._resolve_class(mod, base)
            if bref is not None:
                kind = SelfRef if isinstance(ref, SelfRef) else ClassRef
                v = self.class_attr(kind(bref.module, bref.qualname), attr, depth + 1)
                if v is not ANY:
                    return v
        if isinstance(ref, SelfRef) and depth == 0:
            return self.instance_attr(mod, ref, attr)
        return ANY

    def instance_attr(self, mod: Module, ref: SelfRef, attr: str) -> Val:
        """``self.x`` that the class's methods assign (``self.use_fp8 = is_sm90_supported()``):
        the assigned values joined, each read where it is written, the method's other
        arguments and locals unknown. Assignments from outside the class are not seen."""
        info = mod.classes[ref.qualname]
        sites = [site for site in info.instance_attrs().get(attr, ()) if self._may_matter(mod, site[0], info)]
        if not sites:
            return ANY
        key = ("i", ref.module, ref.qualname, attr)
        hit = self._cached(key)
        if hit is not None:
            return hit
        if key in self.active:
            return ANY
        outer, self.dep = self.dep, False
        self.active.add(key)
        try:
            vals = []
            with self.quiet():
                for rhs, path, fn in sites:
                    vals.append(_pick(self.eval(rhs, Frame(mod, self._method_env(mod, fn, ref), ref.qualname)), path))
            v = join(*vals)
            self._store(key, v)
            return v
        finally:
            self.active.discard(key)
            self.dep = outer or self.dep

    def _may_matter(self, mod: Module, rhs: Node, info: ClassInfo) -> bool:
        """Whether an assigned value may depend on the arch: it mentions an arch token or
        predicate, or an attribute or method of the class that does (``self.major =
        self.cap[0]``, ``self.sm = self._sm()``). Others are not evaluated: wrapper classes
        assign dozens of attributes."""
        if self.relevant(mod, rhs):
            return True
        attrs = info.instance_attrs()
        for name in map(bytes.decode, _SELF_ATTR.findall(rhs.text)):
            if any(self.relevant(mod, other) for other, _, _ in attrs.get(name, ())):
                return True
            if any(b.node is not None and self.relevant(mod, b.node) for b in info.bindings.get(name, ())):
                return True
        return False

    def _method_env(self, mod: Module, fn: Node, ref: SelfRef) -> dict:
        """``self`` and the names a method imports (a local import is common in ``__init__``)."""
        me = next(c for c in fn.child_by_field_name("parameters").named_children if c.type == "identifier")
        env = {me.text.decode(): val(ref)}
        stack = list(fn.child_by_field_name("body").named_children)
        while stack:
            n = stack.pop()
            if n.type in ("import_statement", "import_from_statement"):
                for name, target in imports(mod, n):
                    if name != "*":
                        env[name] = self.import_value(target)
            elif n.type in (
                "block",
                "if_statement",
                "try_statement",
                "with_statement",
                "else_clause",
                "elif_clause",
                "except_clause",
                "finally_clause",
            ):
                stack.extend(n.named_children)
        return env

    def _resolve_class(self, mod: Module, text: str) -> ClassRef | None:
        with self.quiet():
            head, *rest = text.split(".")
            v = self.global_value(mod, head)
            for a in rest:
                v = self.attribute(v, a)
        x = v.only()
        return x if isinstance(x, ClassRef) else None

    # ------------------------------------------------------------------ calls
    def e_call(self, node: Node, fr: Frame) -> Val:
        fnode = node.child_by_field_name("function")
        args, kwargs, splat = self._arguments(node.child_by_field_name("arguments"), fr)
        name = _last_name(fnode)
        if fnode.type == "attribute" and (name in self.table.sources or name in self.table.tests):
            recv = self.eval(fnode.child_by_field_name("object"), fr)
            if all(isinstance(x, (SelfRef, ExtRef)) or x is UNKNOWN for x in recv.elems):
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
                kwargs[c.child_by_field_name("name").text.decode()] = self.eval(c.child_by_field_name("value"), fr)
            elif c.type in ("list_splat", "dictionary_splat"):
                splat = True
                if c.named_children:
                    self.eval(c.named_children[0], fr)
            elif c.type != "comment":
                args.append(self.eval(c, fr))
        return args, kwargs, splat

    def call_elem(self, x, args, kwargs, name: str, splat: bool = False) -> Val:
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

    def external(self, x: ExtRef, args, kwargs, splat: bool) -> Val:
        last = x.last
        t = self.table
        if x.path in t.returns:
            return val(t.returns[x.path])
        if last in t.partial and args:
            fn = args[0]
            out = [
                Func(
                    f.module,
                    f.start,
                    f.name,
                    f.args + tuple(args[1:]),
                    f.kwargs + tuple(sorted(kwargs.items())),
                    f.bound,
                    f.alias,
                )
                if isinstance(f, Func)
                else UNKNOWN
                for f in fn.elems
            ]
            return make(out, fn.taint)
        if last in t.wrappers:
            if args and any(isinstance(f, Func) for f in args[0].elems):
                return args[0]
            return val(Wrapper())
        if last in t.sources or last in t.tests:
            return self.api(last, args, kwargs)
        if x.free and x.path in _BUILTINS and not splat:
            return self.builtin(x.path, args)
        if x.free:
            return self.by_name(last, args, kwargs, functions=True)
        return self.name_table(last)

    def by_name(self, name: str, args, kwargs, functions: bool = False) -> Val:
        """A call the input does not resolve by scope: a definition of that name elsewhere in the
        input (methods on an opaque receiver, or a free function), else the name table."""
        if name in self.table.sources or name in self.table.tests:
            return self.api(name, args, kwargs)
        cands = []
        if functions:
            for mod, b in self.prog.functions.get(name, ())[:8]:
                cands.append((mod, b.node if b.kind == "def" else None, b))
        else:
            for mod, _qual, fn in self.prog.methods.get(name, ())[:8]:
                cands.append((mod, fn, None))
        vals = []
        for mod, fn, b in cands:
            if fn is not None:
                bound = not functions and _method_kind(fn) in ("self", "class")
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

    def name_table(self, name: str) -> Val:
        caps = names_mod.promised(name)
        if caps is None:
            return ANY
        self.dep = True
        label = _label(self.cap)
        t = Taint(frozenset({"predicate-call"}), frozenset({"name"}))
        return Val(BOOL.elems if label in caps else frozenset({False}), t)

    def api(self, name: str, args, kwargs) -> Val:
        self.dep = True
        kind = self.table.sources.get(name)
        if kind == "capability":
            return val(self.cap, taint=_CAP_TAINT)
        if kind == "properties":
            return val(Props(self.cap))
        op = self.table.tests.get(name)
        arg = args[0] if args else kwargs.get("capability", ANY)
        cap = self.cap
        out: set = set()
        for a in arg.elems:
            if isinstance(a, int) and not isinstance(a, bool):
                out |= compare(op, val(cap[0] * 10 + cap[1]), val(a)).elems
            elif isinstance(a, tuple):
                out |= compare(op, val(tuple(cap)), val(tuple(a))).elems
            else:
                out |= {True, False}
        return make(out, merge(_API_TAINT, arg.taint))

    def builtin(self, name: str, args) -> Val:
        if name in ("isinstance", "hasattr"):
            return Val(BOOL.elems, _taints(args))
        if name in ("getattr", "print"):
            return ANY if name == "getattr" else val(None)
        fn = {
            "int": int,
            "float": float,
            "str": str,
            "bool": bool,
            "tuple": tuple,
            "list": tuple,
            "set": frozenset,
            "frozenset": frozenset,
            "len": len,
            "min": min,
            "max": max,
            "any": any,
            "all": all,
            "sum": sum,
            "abs": abs,
            "sorted": lambda x: tuple(sorted(x)),
            "reversed": lambda x: tuple(reversed(x)),
            "range": lambda *a: tuple(range(*a)) if len(range(*a)) <= MAX_ITEMS else UNKNOWN,
            "map": lambda f, xs: UNKNOWN,
        }[name]
        if name == "map" and len(args) == 2:
            return self._map(args)
        return _apply(fn, args)

    def _map(self, args) -> Val:
        f, xs = args
        out: set = set()
        t = merge(f.taint, xs.taint)
        for seq in xs.elems:
            if not isinstance(seq, tuple) or len(seq) > MAX_ITEMS:
                out.add(UNKNOWN)
                continue
            results = [join(*[self.call_elem(fe, [val(item)], {}, "") for fe in f.elems]) for item in seq]
            r = product(results)
            out |= r.elems
            t = merge(t, r.taint)
        return make(out, t)

    def method(self, m: Method, args) -> Val:
        recv = m.recv
        if isinstance(recv, Cap):
            if m.name == "to_int":
                return val(recv[0] * 10 + recv[1])
            if m.name == "as_version_str":
                return val(f"{recv[0]}.{recv[1]}")
            return ANY
        return _apply(getattr(recv, m.name), args)

    def call_func(self, f: Func, args, kwargs) -> Val:
        mod = self.prog.modules.get(f.module)
        node = definition_at(mod, f.start) if mod is not None else None
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
        outer, self.dep = self.dep, False
        try:
            v = self._call(mod, node, f, all_args, all_kwargs, key)
            self._store(key, v)
            return v
        finally:
            self.dep = outer or self.dep

    def _call(self, mod: Module, node: Node, f: Func, all_args, all_kwargs, key) -> Val:
        self.active.add(key)
        outermost = self.fuel is None
        if outermost:
            self.fuel = FUEL
        self.depth += 1
        try:
            with self.quiet():
                v = self._run(mod, node, f, all_args, all_kwargs)
        except _OutOfFuel:
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
            v = Val(v.elems, _retag(v, res, f.name, ("c", f.module, f.start, f.bound, f.args, f.kwargs)))
            for alias in f.alias:
                v = Val(v.elems, _retag(v, alias[1], alias[0], alias[2]))
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
        cls = self._class_of(mod, node)
        self.bind_params(node, env, args, kwargs, mod, cls, f.bound)
        fr = Frame(mod, env, cls)
        body = node.child_by_field_name("body")
        if node.type == "lambda":
            return self.eval(body, fr)
        rets: list[Val] = []
        st = self.walk(body.named_children, State(env), fr, rets)
        if st.live:
            rets.append(val(None).with_taint(st.path))
        return join(*rets) if rets else NOTHING

    def _class_of(self, mod: Module, node: Node) -> str | None:
        p = node.parent
        while p is not None and p.type not in ("class_definition", "function_definition", "module"):
            p = p.parent
        if p is not None and p.type == "class_definition":
            return self._qual_of(mod, p)
        return None

    def bind_params(self, node: Node, env: dict, args, kwargs, mod: Module, cls: str | None, bound: bool) -> None:
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
                    env[inner[0].text.decode()] = ANY
                if t == "list_splat_pattern":
                    pos = []
                first = False
                continue
            if t in ("keyword_separator", "positional_separator", "comment"):
                continue
            name_node = (
                p
                if t == "identifier"
                else p.child_by_field_name("name") or (p.named_children[0] if p.named_children else None)
            )
            if name_node is None or name_node.type != "identifier":
                continue
            name = name_node.text.decode()
            if first and cls is not None and node.type == "function_definition" and _method_kind(node) != "static":
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
                    env[name] = self.eval(p.child_by_field_name("value"), Frame(mod, None))
            else:
                env[name] = ANY

    # ------------------------------------------------------------------ statements
    def walk(self, stmts, st: State, fr: Frame, rets: list) -> State:
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
                raise _OutOfFuel
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
            return self.walk(s.child_by_field_name("body").named_children, st, fr, rets)
        if t == "decorated_definition":
            return self.stmt(s.child_by_field_name("definition"), st, fr, rets)
        if t == "match_statement":
            subj = s.child_by_field_name("subject")
            if subj is not None:
                self.eval(subj, fr)
            outs = [
                self.walk(body.named_children, State(dict(st.env), st.live, st.path), fr, rets)
                for body in case_bodies(s)
            ]
            return self._merge([st, *outs])
        return self.simple(s, st, fr, rets)

    def simple(self, s: Node, st: State, fr: Frame, rets: list) -> State:
        """A statement without a body of statements (both modes); a ``def`` only binds its name."""
        t = s.type
        fr.env = st.env
        if t == "expression_statement":
            for c in s.named_children:
                if c.type in ("assignment", "augmented_assignment"):
                    self.assign(c, st, fr)
                elif self.recording:
                    self.eval(c, fr)
            return st
        if t == "return_statement":
            kids = [c for c in s.named_children if c.type != "comment"]
            v = self.eval(kids[0], fr) if kids else val(None)
            if st.live:
                rets.append(v.with_taint(st.path))
            return State(st.env, False, st.path)
        if t == "raise_statement":
            if self.recording:
                for c in s.named_children:
                    self.eval(c, fr)
            return State(st.env, False, st.path)
        if t == "function_definition":
            name = s.child_by_field_name("name").text.decode()
            st.env[name] = val(Func(fr.mod.name, s.start_byte, name))
            return st
        if t == "class_definition":
            st.env[s.child_by_field_name("name").text.decode()] = ANY
            return st
        if t in ("import_statement", "import_from_statement"):
            for name, target in imports(fr.mod, s):
                if name != "*":
                    st.env[name] = self.import_value(target)
            return st
        if t == "assert_statement":
            kids = [c for c in s.named_children if c.type != "comment"]
            if kids:
                c = self.eval(kids[0], fr)
                if True not in truth(c):
                    return State(st.env, False, merge(st.path, c.taint))
                if c.taint is not None and not self.recording:
                    return State(st.env, st.live, merge(st.path, c.taint))
            return st
        return st

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
        targets = []
        rhs = node
        if node.type == "augmented_assignment":
            left = node.child_by_field_name("left")
            v = binary(
                node.child_by_field_name("operator").type.rstrip("="),
                self.eval(left, fr),
                self.eval(node.child_by_field_name("right"), fr),
            )
            self._bind(left, v.with_taint(st.path if not self.recording else None), st.env)
            return
        while rhs is not None and rhs.type == "assignment":
            targets.append(rhs.child_by_field_name("left"))
            rhs = rhs.child_by_field_name("right")
        if rhs is None:
            return
        v = self.eval(rhs, fr)
        if not self.recording:
            v = v.with_taint(st.path)
        for target in targets:
            self._bind(target, v, st.env)

    def _bind(self, target: Node, v: Val, env: dict) -> None:
        for name, path in destructure(target):
            env[name] = _pick(v, path)

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
        if other is not None:
            cur = self.walk(other.named_children, State(dict(cur.env), cur.live, cur.path), fr, rets)
        outs.append(cur)
        out = self._merge(outs)
        if decided is not None and any(not o.live for o in outs):
            out.path = merge(out.path, decided)
        return out

    def _merge(self, outs: list[State]) -> State:
        """Where branches meet: the live ones' variables joined (all of them, in dead code).
        A scan keeps no path taint: a gate is judged as written."""
        live = [o for o in outs if o.live]
        pick = live or outs
        first = pick[0].env
        env = dict(first)
        others = [o.env for o in pick[1:] if o.env is not first]
        changed = {k for e in others for k, v in e.items() if first.get(k, _NOPE) is not v}
        for k in changed:
            vs = [o.env[k] for o in pick if k in o.env]
            env[k] = vs[0] if all(v is vs[0] for v in vs) else join(*vs)
        path = None
        for o in outs:
            path = merge(path, o.path)
        return State(env, bool(live), path if not self.recording else None)

    def s_loop(self, s: Node, st: State, fr: Frame, rets: list) -> State:
        entry = self.loop_entry(s, st, fr)
        after = self.walk(
            s.child_by_field_name("body").named_children, State(dict(entry.env), entry.live, entry.path), fr, rets
        )
        out = self.loop_exit(entry, after)
        alt = s.child_by_field_name("alternative")
        if alt is not None:
            out = self.walk(alt.child_by_field_name("body").named_children, out, fr, rets)
        return out

    def loop_entry(self, s: Node, st: State, fr: Frame) -> State:
        """The state a loop body starts from: what the body assigns is unknown (it may have run
        before), the loop variable is any item of the iterable."""
        body = s.child_by_field_name("body")
        env = dict(st.env)
        for name in assigned_in(fr.mod, body):
            env[name] = ANY
        fr.env = env
        if s.type == "for_statement":
            it = self.eval(s.child_by_field_name("right"), fr)
            items = _items(it)
            item = join(*items) if items else Val(ANY.elems, it.taint)
            self._bind(s.child_by_field_name("left"), item, env)
        else:
            cond = s.child_by_field_name("condition")
            self.conditions.add(cond.id)
            self.eval(cond, fr)
        return State(env, st.live, st.path)

    def loop_exit(self, entry: State, after: State) -> State:
        """After a loop: it ran zero times or some."""
        return self._merge([entry, State(after.env, entry.live, after.path)])

    def s_try(self, s: Node, st: State, fr: Frame, rets: list) -> State:
        body = self.walk(s.child_by_field_name("body").named_children, State(dict(st.env), st.live, st.path), fr, rets)
        outs = []
        final = None
        other = None
        for c in s.named_children:
            if c.type == "except_clause" or c.type == "except_group_clause":
                outs.append(self.walk(handler_body(c), self.handler_entry(c, st, body), fr, rets))
            elif c.type == "else_clause":
                other = c.child_by_field_name("body")
            elif c.type == "finally_clause":
                final = next((b for b in c.named_children if b.type == "block"), None)
        if other is not None:
            body = self.walk(other.named_children, body, fr, rets)
        out = self._merge([body, *outs])
        if final is not None:
            out = self.walk(final.named_children, out, fr, rets)
        return out

    def handler_entry(self, clause: Node, st: State, body: State) -> State:
        """An ``except`` handler starts where the ``try`` began or anywhere in its body."""
        start = self._merge([State(dict(st.env), st.live, st.path), State(dict(body.env), st.live, body.path)])
        start.live = st.live
        for v in clause.named_children:
            if v.type == "as_pattern":
                alias = v.child_by_field_name("alias")
                if alias is not None:
                    for n, _ in destructure(alias.named_children[0] if alias.named_children else None):
                        start.env[n] = ANY
        return start


class _OutOfFuel(Exception):
    pass


class _Quiet:
    __slots__ = ("it", "saved")

    def __init__(self, it: Interp):
        self.it = it

    def __enter__(self):
        self.saved = self.it.recording
        self.it.recording = False

    def __exit__(self, *exc):
        self.it.recording = self.saved


def if_clauses(s: Node):
    """``[(condition, block), ...]`` of an ``if``/``elif`` chain, and the ``else`` block or None."""
    clauses = [(s.child_by_field_name("condition"), s.child_by_field_name("consequence"))]
    other = None
    for alt in s.children_by_field_name("alternative"):
        if alt.type == "elif_clause":
            clauses.append((alt.child_by_field_name("condition"), alt.child_by_field_name("consequence")))
        else:
            other = alt.child_by_field_name("body")
    return clauses, other


def case_bodies(s: Node) -> list[Node]:
    body = s.child_by_field_name("body")
    return [
        c.child_by_field_name("consequence")
        for c in (body.named_children if body is not None else [])
        if c.type == "case_clause" and c.child_by_field_name("consequence") is not None
    ]


def handler_body(clause: Node) -> list[Node]:
    block = next((b for b in clause.named_children if b.type == "block"), None)
    return block.named_children if block is not None else []


def _label(cap: Cap) -> str:
    return f"{cap[0]}.{cap[1]}"


def _retag(v: Val, res: Resolution, name: str, key) -> Taint:
    """A tainted value reached through a definition: say so, and call it a predicate when it is
    a truth value."""
    t = v.taint
    kinds = frozenset({"predicate-call"}) if is_boolish(v) else t.kinds
    named = frozenset({(name, key)}) if names_mod.promised(name) is not None else frozenset()
    return Taint(kinds, t.via | {"definition"}, t.resolutions | {res}, t.names | named, t.unknowns)


def _alias(x, res: Resolution, name: str, key):
    """A function reached through an assignment (``is_sm100_supported = lru_cache(...)(partial(...))``)
    remembers the assignment, so the call can name it."""
    if isinstance(x, Func):
        return Func(x.module, x.start, x.name, x.args, x.kwargs, x.bound, x.alias + ((name, res, key),))
    return x


def _pick(v: Val, path: tuple) -> Val:
    """Destructure ``v`` along an assignment path; an element that cannot be unpacked drops out."""
    if not path:
        return v
    out: set = set()
    for x in v.elems:
        y = x
        for i in path:
            if i is None or not is_data(y):
                y = UNKNOWN
                break
            if not isinstance(y, (tuple, str)) or i >= len(y):
                y = _NOPE
                break
            y = y[i]
        if y is not _NOPE:
            out.add(y)
    return make(out, v.taint)


_NOPE = object()


@dataclass(frozen=True, slots=True)
class _Slice:
    parts: tuple


def _items(v: Val) -> list[Val] | None:
    """The items of an iterable value, when it is one small known sequence."""
    if len(v.elems) != 1:
        return None
    x = v.only()
    if isinstance(x, (tuple, frozenset, str)) and len(x) <= MAX_ITEMS:
        return [Val(frozenset({i}), v.taint) for i in (sorted(x, key=repr) if isinstance(x, frozenset) else x)]
    return None


def _method_kind(fn: Node) -> str:
    """``self`` (plain method), ``class`` (classmethod), ``static`` or ``property``."""
    p = fn.parent
    kind = "self"
    if p is not None and p.type == "decorated_definition":
        for d in p.named_children:
            if d.type != "decorator":
                continue
            text = d.text.decode()
            if "staticmethod" in text:
                return "static"
            if "classmethod" in text:
                kind = "class"
            elif text.rstrip().endswith("property"):
                kind = "property"
    return kind


def _last_name(fnode: Node) -> str:
    if fnode.type == "identifier":
        return fnode.text.decode()
    if fnode.type == "attribute":
        return fnode.child_by_field_name("attribute").text.decode()
    return ""


def _short(node: Node) -> str:
    n = node
    while n.type == "parenthesized_expression" and n.named_children:
        n = n.named_children[0]
    if n.type == "not_operator":
        return "not " + _short(n.child_by_field_name("argument"))
    if n.type == "call":
        return one_line(n.child_by_field_name("function").text.decode(), 60) + "()"
    return one_line(n.text.decode("utf-8", "replace"), 60)


def _apply(fn, args: list[Val]) -> Val:
    """A pure builtin or str method on every combination of known arguments; one that raises
    drops out."""
    combos = product(args) if args else val(())
    out: set = set()
    for combo in combos.elems:
        if not isinstance(combo, tuple) or not all(is_data(c) for c in combo):
            out.add(UNKNOWN)
            continue
        try:
            r = fn(*combo)
        except Exception:
            continue
        out.add(tuple(r) if isinstance(r, (tuple, list)) else r)
    return make(out, _taints(args))


def _taints(vals) -> Taint | None:
    t = None
    for v in vals:
        t = merge(t, v.taint)
    return t


def _concat(parts: list[Val]) -> Val:
    out = product(parts) if parts else val("")
    return make(
        ("".join(x) if isinstance(x, tuple) and all(isinstance(p, str) for p in x) else UNKNOWN for x in out.elems),
        out.taint,
    )


def _unescape(text: str, raw: bool) -> str:
    if raw or "\\" not in text:
        return text
    try:
        return codecs.decode(text, "unicode_escape")
    except Exception:
        return text


_SELF_ATTR = re.compile(rb"\bself\.(\w+)")

_DISPATCH = {
    "identifier": Interp.e_identifier,
    "attribute": Interp.e_attribute,
    "call": Interp.e_call,
    "integer": Interp.e_integer,
    "float": Interp.e_float,
    "true": Interp.e_true,
    "false": Interp.e_false,
    "none": Interp.e_none,
    "string": Interp.e_string,
    "concatenated_string": Interp.e_concat,
    "tuple": Interp.e_tuple,
    "expression_list": Interp.e_tuple,
    "list": Interp.e_tuple,
    "set": Interp.e_set,
    "dictionary": Interp.e_dict,
    "parenthesized_expression": Interp.e_paren,
    "boolean_operator": Interp.e_bool,
    "not_operator": Interp.e_not,
    "comparison_operator": Interp.e_compare,
    "binary_operator": Interp.e_binary,
    "unary_operator": Interp.e_unary,
    "conditional_expression": Interp.e_conditional,
    "subscript": Interp.e_subscript,
    "lambda": Interp.e_lambda,
    "named_expression": Interp.e_walrus,
    "await": Interp.e_await,
    "list_comprehension": Interp.e_comprehension,
    "generator_expression": Interp.e_comprehension,
    "set_comprehension": Interp.e_comprehension,
}

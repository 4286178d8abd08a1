"""Name resolution: local and global names, imports, module and class attributes, ``self.x``.

Module globals are the join of all their bindings (they are read after import, whatever
branch bound them), cached per capability only when they read it. A value reached through
an assignment or a definition remembers where (its resolution), so that a gate can say what
it was resolved by.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tree_sitter import Node

from auditor.facts import names as names_mod
from auditor.model import GateKind, Resolution, ResolvedBy
from auditor.python import models as models_mod
from auditor.python.core import MAX_DEPTH, Core, Frame
from auditor.python.symbols import Binding, ClassInfo, Module, imports
from auditor.python.syntax import child, line_of, method_kind, one_line, self_attribute, text_of
from auditor.python.values import (
    ANY,
    BOOL,
    NOTHING,
    ClassRef,
    ExtRef,
    Func,
    ModRef,
    SelfRef,
    Taint,
    Val,
    is_boolish,
    join,
    make,
    pick,
    val,
)

_SELF_ATTR = re.compile(rb"\bself\.(\w+)")
_PREDICATE = frozenset({GateKind.PREDICATE_CALL})
_DEFINITION = frozenset({ResolvedBy.DEFINITION})


def _top(mod: Module, name: str) -> Sequence[Binding] | None:
    """A top-level name's bindings (None if it has none), from :attr:`Module.tops` where they
    need no tree: each as a :class:`Binding` with no node but the start of a definition."""
    if name not in mod.tops:
        return None
    bare = mod.tops[name]
    if bare is None:
        return mod.bindings[name]
    return [
        Binding("def", start=b)
        if isinstance(b, int)
        else Binding("import", target=b)
        if b is not None
        else Binding("opaque")
        for b in bare
    ]


class Names(Core):
    """Names and attributes, resolved through the program's symbol tables."""

    def e_identifier(self, node: Node, fr: Frame) -> Val:
        name = text_of(node)
        f: Frame | None = fr
        while f is not None:
            if f.env is not None and name in f.env:
                return f.env[name]
            f = f.parent
        if self.recording:
            self.globals_read[node.id] = (node, fr.mod, name)
        return self.global_value(fr.mod, name)

    def global_value(self, mod: Module, name: str, seen: frozenset = frozenset()) -> Val:
        """A module global: its bindings joined, or what a star import gives, or a free name."""
        bindings = _top(mod, name)
        modelled = self.modelled(mod, name, bindings)
        if modelled is not None:
            return modelled
        key = ("g", mod.name, name)
        hit = self._cached(key)
        if hit is not None:
            return hit
        if bindings and (key in self.active or self.depth > MAX_DEPTH):
            return ANY
        outer = self._fresh()
        try:
            v = self._global_value(mod, name, seen, key, bindings) if bindings else self._from_stars(mod, name, seen)
            self._store(key, v)
            return v
        finally:
            self._restore(outer)

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
                v = Val(v.elems, retag(v, res, name, ("g", mod.name, name)))
            else:
                v = make((alias(x, res, name, ("g", mod.name, name)) for x in v.elems), None)
        return v

    def modelled(self, mod: Module, name: str, bindings: Sequence[Binding] | None) -> Val | None:
        """What the API model says a module global is, whatever the input defines there: a
        name the model owns (``torch.cuda.get_device_capability``), the platform object (the
        CUDA platform), a backend probe (``is_rocm``); None for everything else. A name the
        module imports is followed to where it is defined."""
        dotted = models_mod.owned(mod.name, name)
        if dotted is not None:
            owner, _, attr = dotted.rpartition(".")
            return self.external_attr(ExtRef(owner), attr)
        dotted = models_mod.foreign_name(mod.name, name)
        if dotted is not None:
            return val(ExtRef(dotted))
        m = models_mod.models()
        if name in m.probes and (not bindings or all(b.kind == "def" for b in bindings)):
            return val(ExtRef(f"{mod.name}.{name}"))
        if name in m.objects and not any(b.kind == "import" for b in bindings or ()):
            return self.platform(mod)
        return None

    def platform(self, mod: Module) -> Val | None:
        """The running platform of the package ``mod`` belongs to, on the audited device: an
        instance of each most derived CUDA platform class in its platform module (their
        overrides win over the interface's defaults); None when the input has none."""
        key = ("platform", mod.package)
        if key in self.cache:
            return self.cache[key]
        m = models_mod.models()
        where = self.prog.module(f"{mod.package}.{m.platform_module}" if mod.package else m.platform_module)
        classes = [q for q in where.classes if m.platform_classes.search(q.rsplit(".", 1)[-1])] if where else []
        bases = {b.rsplit(".", 1)[-1] for q in classes for b in where.classes[q].bases} if where else set()
        leaves = [q for q in classes if q.rsplit(".", 1)[-1] not in bases]
        v = join(*[val(SelfRef(where.name, q)) for q in leaves]) if where and leaves else None
        self.cache[key] = v
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
        """The value one binding gives a name."""
        node = b.node
        if b.kind == "def" and b.start >= 0:  # what the module's index holds of it
            return val(Func(mod.name, b.start, name))
        if b.kind == "import" and node is None:
            return self.import_value(b.target)
        if node is None:  # opaque
            return ANY
        if b.kind == "def":
            return val(Func(mod.name, node.start_byte, name))
        if b.kind == "class":
            return val(ClassRef(mod.name, self.qual_of(mod, node)))
        if b.kind == "import":
            return self.import_value(b.target)
        if b.kind == "value":
            if _type_checking_only(node):
                # ``if TYPE_CHECKING: FLAG: bool = False`` declares a type, not the value
                ann = node.parent.child_by_field_name("type") if node.parent is not None else None
                return BOOL if ann is not None and text_of(ann) == "bool" else ANY
            return pick(self.eval(node, Frame(mod, None)), b.path)
        return ANY

    def qual_of(self, mod: Module, node: Node) -> str:
        """The qualified name of a class definition (nested classes are ``Outer.Inner``)."""
        for qual, info in mod.classes.items():
            if info.node.id == node.id:
                return qual
        return text_of(child(node, "name"))

    def import_value(self, target: str) -> Val:
        """What an import binds: a module of the input, an attribute of one, or an external name."""
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
        """An attribute of a module: what the API model says it is, else a global of it, else a
        submodule, else unknown."""
        modelled = self.modelled(mod, attr, _top(mod, attr))
        if modelled is not None:
            return modelled
        if attr in mod.tops or mod.stars:
            v = self.global_value(mod, attr)
            if not (len(v.elems) == 1 and isinstance(v.only(), ExtRef) and v.only().free):
                return v
        sub = self.prog.module(f"{mod.name}.{attr}")
        if sub is not None:
            return val(ModRef(sub.name))
        return ANY

    def e_attribute(self, node: Node, fr: Frame) -> Val:
        if fr.env is not None and self_attribute(node) and text_of(node) in fr.env:
            return fr.env[text_of(node)]  # set earlier in this method
        base = self.eval(child(node, "object"), fr)
        return self.attribute(base, text_of(child(node, "attribute")))

    def attribute(self, base: Val, attr: str) -> Val:
        """An attribute of every possible object; the object's taint carries over."""
        out: list[Val] = []
        for x in base.elems:
            out.append(self._attr_elem(x, attr))
        return join(*out).with_taint(base.taint) if out else NOTHING

    def _attr_elem(self, x, attr: str) -> Val:
        if isinstance(x, ModRef):
            mod = self.prog.loaded(x.name)
            if mod is not None:
                return self.attr_of_module(mod, attr)
            return ANY
        if isinstance(x, (ClassRef, SelfRef)):
            return self.class_attr(x, attr)
        if isinstance(x, Func):
            return self.function_attr(x, attr)
        return self.external_attr(x, attr)

    def class_attr(self, ref, attr: str, depth: int = 0) -> Val:
        """An attribute of a class or instance: its own bindings (a property is called), else the
        bases', else what the methods assign to ``self``."""
        mod = self.prog.loaded(ref.module)
        info = mod.classes.get(ref.qualname) if mod is not None else None
        if mod is None or info is None or depth > 8:
            return ANY
        bs = info.bindings.get(attr)
        if attr in models_mod.models().probes and bs and all(b.kind == "def" for b in bs):
            if all(b.node is not None and method_kind(b.node) != "property" for b in bs):
                return val(ExtRef(f"{ref.module}.{ref.qualname}.{attr}"))
        if bs:
            vals = []
            for b in bs:
                if b.node is None:
                    vals.append(ANY)
                elif b.kind == "def":
                    kind = method_kind(b.node)
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
                        v = pick(self.eval(b.node, Frame(mod, None)), b.path)
                    # a field's default (``dtype: Optional[str] = None`` in a dataclass) is not
                    # what an instance holds: the user sets it (#15, cause 5)
                    vals.append(ANY if isinstance(ref, SelfRef) and v.taint is None and _field(b.node) else v)
                else:
                    vals.append(ANY)
            return join(*vals)
        for base in info.bases:
            bref = self._resolve_class(mod, base)
            if bref is not None:
                ref_type = SelfRef if isinstance(ref, SelfRef) else ClassRef
                v = self.class_attr(ref_type(bref.module, bref.qualname), attr, depth + 1)
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
        outer = self._fresh()
        self.active.add(key)
        try:
            vals = []
            with self.quiet():
                for rhs, path, fn in sites:
                    vals.append(pick(self.eval(rhs, Frame(mod, self._method_env(mod, fn, ref), ref.qualname)), path))
            v = join(*vals)
            self._store(key, v)
            return v
        finally:
            self.active.discard(key)
            self._restore(outer)

    def _may_matter(self, mod: Module, rhs: Node, info: ClassInfo) -> bool:
        """Whether an assigned value may depend on the arch: it mentions an arch token or
        predicate, or an attribute or method of the class that does (``self.major =
        self.cap[0]``, ``self.sm = self._sm()``). Others are not evaluated: wrapper classes
        assign dozens of attributes."""
        if self.relevant(mod, rhs):
            return True
        attrs = info.instance_attrs()
        for name in map(bytes.decode, _SELF_ATTR.findall(rhs.text or b"")):
            if any(self.relevant(mod, other) for other, _, _ in attrs.get(name, ())):
                return True
            if any(b.node is not None and self.relevant(mod, b.node) for b in info.bindings.get(name, ())):
                return True
        return False

    def _method_env(self, mod: Module, fn: Node, ref: SelfRef) -> dict:
        """``self`` and the names a method imports (a local import is common in ``__init__``)."""
        me = next(c for c in child(fn, "parameters").named_children if c.type == "identifier")
        env = {name: ANY for name, _ in _parameter_names(fn)}  # the method's other arguments: unknown
        env[text_of(me)] = val(ref)
        stack = list(child(fn, "body").named_children)
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


def _parameter_names(fn: Node):
    """The names a ``def`` binds as parameters (``sm_version`` in ``sm_version: int | None = None``)."""
    for p in child(fn, "parameters").named_children:
        n = p if p.type == "identifier" else p.child_by_field_name("name")
        if n is None and p.named_children:
            n = p.named_children[0]
        if n is not None and n.type == "identifier":
            yield text_of(n), p


def _type_checking_only(node: Node) -> bool:
    """Inside ``if TYPE_CHECKING:``: read by type checkers only (vllm's ``envs`` declares every
    environment setting there, with a default the environment overrides)."""
    p = node.parent
    while p is not None and p.type not in ("module", "function_definition", "class_definition"):
        if p.type == "block" and p.parent is not None and p.parent.type == "if_statement":
            cond = p.parent.child_by_field_name("condition")
            if (
                cond is not None
                and text_of(cond).rsplit(".", 1)[-1] == "TYPE_CHECKING"
                and p.parent.child_by_field_name("consequence") == p
            ):
                return True
        p = p.parent
    return False


def _field(value: Node) -> bool:
    """An annotated class-level assignment: a field whose default an instance overrides."""
    p = value.parent
    return p is not None and p.type == "assignment" and p.child_by_field_name("type") is not None


def retag(v: Val, res: Resolution, name: str, key) -> Taint:
    """A tainted value reached through a definition: say so, and call it a predicate when it is
    a truth value."""
    t = v.taint
    assert t is not None
    kinds = _PREDICATE if is_boolish(v) else t.kinds
    named = frozenset({(name, key)}) if names_mod.promised(name) is not None else frozenset()
    return Taint(kinds, t.via | _DEFINITION, t.resolutions | {res}, t.names | named, t.unknowns, t.chosen)


def alias(x, res: Resolution, name: str, key):
    """A function reached through an assignment (``is_sm100_supported = lru_cache(...)(partial(...))``)
    remembers the assignment, so the call can name it."""
    if isinstance(x, Func):
        return Func(x.module, x.start, x.name, x.args, x.kwargs, x.bound, x.alias + ((name, res, key),))
    return x

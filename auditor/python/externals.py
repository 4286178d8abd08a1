"""What the evaluator knows of code outside the input: the platform APIs that report the
device capability and what reads the CUDA toolkit (as data in the name table), the predicates
known by name, the builtins and ``str`` methods that are pure, versions, ``functools.partial``
and caching wrappers.

Reading the capability here is what makes a value arch-dependent: it sets ``dep`` (the result
is cached per capability) and taints the value with how it was read. Reading the toolkit sets
``tdep`` only: the toolkit is a coordinate a gate is evaluated over, not what makes it a gate.
"""

from __future__ import annotations

from auditor import arch
from auditor.facts import names as names_mod
from auditor.model import GateKind, ResolvedBy
from auditor.python import models as models_mod
from auditor.python.core import Core
from auditor.python.values import (
    ANY,
    BOOL,
    MAX_ITEMS,
    UNKNOWN,
    Cap,
    ExtRef,
    Func,
    Method,
    Props,
    Table,
    Taint,
    Val,
    Ver,
    Wrapper,
    compare,
    is_data,
    join,
    make,
    merge,
    product,
    taint,
    taints,
    val,
    version,
)

_CAP_TAINT = taint(GateKind.CAPABILITY_COMPARE, ResolvedBy.LITERAL)
_API_TAINT = taint(GateKind.PLATFORM_API, ResolvedBy.LITERAL)
_NAME_TAINT = Taint(frozenset({GateKind.PREDICATE_CALL}), frozenset({ResolvedBy.NAME}))
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


class Externals(Core):
    """Models of what lies outside the input, as the name table describes it."""

    def external(self, x: ExtRef, args, kwargs, splat: bool) -> Val:
        """Calling something outside the input: a platform API, a known return value, ``partial``, a
        caching wrapper, a pure builtin; else a definition of that name, else the name table."""
        last = x.last
        t = self.table
        if x.path in t.returns:
            return val(t.returns[x.path])
        probes = models_mod.models().probes
        if last in probes:
            return val(probes[last])
        if models_mod.foreign(x.path):
            return ANY
        if x.path in t.toolkit.parse and args:
            return make((x if isinstance(x, Ver) else version(x) for x in args[0].elems), args[0].taint)
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

    def external_attr(self, x: object, attr: str) -> Val:
        """An attribute of something the input does not define: a capability, device properties, a str."""
        if isinstance(x, ExtRef):
            path = f"{x.path}.{attr}"
            if path in self.table.toolkit.constants:
                return self.toolkit_value(self.table.toolkit.constants[path])
            return val(self.table.constants[path]) if path in self.table.constants else val(ExtRef(path))
        if isinstance(x, Ver):
            if attr in _VERSION_PARTS:
                i = _VERSION_PARTS[attr]
                return val(x[i] if i < len(x) else 0)
            return val(tuple(x)) if attr == "release" else ANY
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
        if isinstance(x, Table) and attr == "get":
            return val(Method(x, attr))
        return ANY

    def name_table(self, name: str) -> Val:
        """What a predicate's name promises (its definition not being in reach): possibly true where
        it promises, false elsewhere."""
        caps = names_mod.promised(name)
        if caps is None:
            return ANY
        self.dep = True
        label = _label(self.cap)
        return Val(BOOL.elems if label in caps else frozenset({False}), _NAME_TAINT)

    def toolkit_value(self, form: str) -> Val:
        """The toolkit's version in one of the forms the data names (the toolkit is read)."""
        self.tdep = True
        major, minor = arch.version_key(self.toolkit)[:2]
        if form == "string":
            return val(self.toolkit)
        if form == "number":
            return val(major * 1000 + minor * 10)
        return val(Ver((major, minor)))

    def toolkit_call(self, name: str, args) -> Val:
        """A call the toolkit table knows by name (one of ``toolkit_names``): the toolkit's
        version, a test of it against the argument, or a comparison of two versions."""
        tk = self.table.toolkit
        if name in tk.calls:
            return self.toolkit_value(tk.calls[name])
        if name in tk.tests:
            return _versions(tk.tests[name], self.toolkit_value("version"), args[0] if args else ANY)
        return _versions(tk.compare[name], *args) if len(args) == 2 else ANY

    def api(self, name: str, args, kwargs) -> Val:
        """A platform API: the capability itself, the device properties, or a test of the capability
        against its argument."""
        self.dep = True
        kind = self.table.sources.get(name)
        if kind == "capability":
            return val(self.cap, taint=_CAP_TAINT)
        if kind == "properties":
            return val(Props(self.cap))
        op = self.table.tests[name]  # a source is a capability or its properties
        arg = args[0] if args else kwargs.get("capability", ANY)
        cap = self.cap
        out: set = set()
        for a in arg.elems:
            if op == "family" and isinstance(a, (int, tuple)) and not isinstance(a, bool):
                out.add(cap[0] == (a[0] if isinstance(a, tuple) else a // 10))
            elif isinstance(a, int) and not isinstance(a, bool):
                out |= compare(op, val(cap[0] * 10 + cap[1]), val(a)).elems
            elif isinstance(a, tuple):
                out |= compare(op, val(tuple(cap)), val(tuple(a))).elems
            else:
                out |= {True, False}
        return make(out, merge(_API_TAINT, arg.taint))

    def builtin(self, name: str, args) -> Val:
        """A builtin on every combination of known arguments (``isinstance`` and ``hasattr`` are
        unknown truths)."""
        if name in ("isinstance", "hasattr"):
            return Val(BOOL.elems, taints(args))
        if name == "getattr":
            return self.named_attribute(args)
        if name == "print":
            return val(None)
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

    def named_attribute(self, args) -> Val:
        """``getattr(obj, "name")``: with the name known, the attribute itself (``getattr(common,
        probe)`` of a probe looked up by name)."""
        name = args[1].only() if len(args) >= 2 and len(args[1].elems) == 1 else None
        if not isinstance(name, str) or not name.isidentifier():
            return ANY
        return self.attribute(args[0], name)

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
        """A method of a capability (``to_int``) or of a concrete str or tuple."""
        recv = m.recv
        if isinstance(recv, Cap):
            if m.name == "to_int":
                return val(recv[0] * 10 + recv[1])
            if m.name == "as_version_str":
                return val(f"{recv[0]}.{recv[1]}")
            return ANY
        return _apply(getattr(recv, m.name), args)


_VERSION_PARTS = {"major": 0, "minor": 1, "micro": 2}


def _versions(op: str, a: Val, b: Val) -> Val:
    """``parse(a) OP parse(b)`` of two versions given as strings or versions."""

    def parsed(v: Val) -> Val:
        return make((x if isinstance(x, Ver) else version(x) for x in v.elems), v.taint)

    return compare(op, parsed(a), parsed(b))


def _label(cap: Cap) -> str:
    return f"{cap[0]}.{cap[1]}"


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
    return make(out, taints(args))

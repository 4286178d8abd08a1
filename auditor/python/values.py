"""The abstract values the evaluator computes with, for one device capability at a time.

A value is the *set* of concrete values an expression may have (so ``major, minor = None, None``
followed by a branch that reads the capability gives ``{None, 12}``), plus a taint that says
whether — and through what — it depends on the device architecture. Operations apply
Python's own semantics element by element; an element whose operation raises drops out (that
path raises), so ``(8, 0) <= (None, None)`` contributes nothing. Opaque elements stand for
what static reading cannot know: ``UNKNOWN`` (anything), ``TRUTHY`` and ``FALSY`` (an unknown
value whose truth is known, as ``x and y`` yields when ``x`` is unknown), and ``Other`` (an
unknown known to be none of some literals). A taint can also say that the value depends on the
arch only as a choice made on arch-dependent paths (``Taint.chosen``): a test of it repeats that
choice.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from auditor import arch
from auditor.model import Resolution

MAX_ELEMS = 24
"""Beyond this many possibilities a value is UNKNOWN: precision is not worth the time."""
MAX_ITEMS = 32
"""Longer sequences are not iterated item by item."""


class Opaque:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


UNKNOWN = Opaque("UNKNOWN")
TRUTHY = Opaque("TRUTHY")
FALSY = Opaque("FALSY")


@dataclass(frozen=True, slots=True)
class Other:
    """An unknown value known to be none of ``excluded``: what is left of UNKNOWN once each
    literal a test compares it with has been tried on its own (see ``Statements.narrow``)."""

    excluded: frozenset


class Cap(tuple):
    """A device capability ``(major, minor)``: a tuple as torch returns it, with the
    ``.major``/``.minor``/``.to_int()`` of the platform ``DeviceCapability`` wrappers."""

    __slots__ = ()


class Ver(tuple):
    """A version's release numbers (``packaging.version.Version("12.9")``, a toolkit's version
    as a helper returns it): compared with another version as packaging compares them
    (``12.0 == 12``), with a plain tuple as the tuple of ints some helpers return."""

    __slots__ = ()

    def _key(self) -> tuple:
        n = len(self)
        while n > 1 and self[n - 1] == 0:
            n -= 1
        return tuple(self[:n])

    def __hash__(self) -> int:
        return hash(self._key())


def _version_op(name: str):
    plain = getattr(tuple, name)

    def op(self, other):
        if isinstance(other, Ver):
            return plain(self._key(), other._key())
        return plain(self, other)

    return op


for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
    setattr(Ver, _name, _version_op(_name))

_RELEASE = re.compile(r"v?(\d+(?:\.\d+)*)")


def version(text) -> object:
    """``Version(text)`` of a release like ``12.9``; UNKNOWN for anything else (a pre-release,
    a string the reading does not know)."""
    m = _RELEASE.fullmatch(text.strip()) if isinstance(text, str) else None
    return UNKNOWN if m is None else Ver(int(x) for x in m.group(1).split("."))


@dataclass(frozen=True, slots=True)
class Props:
    """``get_device_properties(...)``: only ``major`` and ``minor`` are about the arch."""

    cap: Cap


@dataclass(frozen=True, slots=True)
class ExtRef:
    """Something outside the scanned input, by dotted name (``torch.cuda``)."""

    path: str
    free: bool = False
    """Bound by no import or assignment in the input: a builtin, or a name from a star import."""

    @property
    def last(self) -> str:
        return self.path.rsplit(".", 1)[-1]


@dataclass(frozen=True, slots=True)
class ModRef:
    name: str


@dataclass(frozen=True, slots=True)
class ClassRef:
    module: str
    qualname: str


@dataclass(frozen=True, slots=True)
class SelfRef:
    """``self``/``cls`` inside a method of the class."""

    module: str
    qualname: str


@dataclass(frozen=True, slots=True)
class Func:
    """A function defined in the input (``def`` or ``lambda``), with arguments bound so far."""

    module: str
    start: int
    """Byte offset of the definition: with ``module`` it finds the node."""
    name: str
    args: tuple = ()
    kwargs: tuple = ()
    bound: bool = False
    """A method reached through an instance or class: its first parameter is taken."""
    alias: tuple = ()
    """Assignments it was reached through: (name, Resolution, key) each."""


@dataclass(frozen=True, slots=True)
class Members:
    """A check that its argument is one of ``items``: ``f.is_compute_capability_supported`` of
    a function decorated with ``@supported_compute_capability([100, 103])``."""

    items: frozenset


@dataclass(frozen=True, slots=True)
class Table:
    """A dict literal of constants (``{(12, 0): "sm_120a"}``, or ``{}``): read by a known key
    (``.get``, ``[key]``, ``in``) it gives what the literal holds, so that a lookup keyed by the
    capability is a test of it, and an override table that starts empty lets the probe run."""

    items: tuple[tuple[Any, Any], ...]

    def get(self, key, default=None):
        return next((v for k, v in self.items if k == key), default)

    def __getitem__(self, key):
        for k, v in self.items:
            if k == key:
                return v
        raise KeyError(key)

    def __contains__(self, key) -> bool:
        return any(k == key for k, _ in self.items)


@dataclass(frozen=True, slots=True)
class Wrapper:
    """``lru_cache(maxsize=1)``: calling it with a function returns the function."""


@dataclass(frozen=True, slots=True)
class Method:
    """A method of a concrete str/tuple value, e.g. ``arch.startswith``."""

    recv: object
    name: str


@dataclass(frozen=True, slots=True)
class Taint:
    """How a value depends on the architecture."""

    kinds: frozenset = frozenset()
    """Gate kinds the dependence came through: capability-compare, predicate-call, platform-api."""
    via: frozenset = frozenset()
    """literal, definition or name."""
    resolutions: frozenset = frozenset()
    names: frozenset = frozenset()
    """Predicates resolved by definition whose names promise something (for name_implies)."""
    unknowns: tuple = ()
    chosen: bool = False
    """The value depends on the arch only as a choice: constants assigned or returned on
    arch-dependent paths (``fa_version = 3`` under ``if major == 9``), and what is computed from
    them alone. A test of such a value repeats a decision made where it was chosen."""

    def merge(self, other: Taint | None) -> Taint:
        if other is None or other is self:
            return self
        return Taint(
            self.kinds | other.kinds,
            self.via | other.via,
            self.resolutions | other.resolutions,
            self.names | other.names,
            _dedupe(self.unknowns + other.unknowns),
            _chosen(self, other),
        )


def _chosen(a: Taint, b: Taint) -> bool:
    """Chosen when every part that depends on the arch is; a taint of no kind only annotates
    (an unknown operand's note, a flag's definition)."""
    parts = [t for t in (a, b) if t.kinds]
    return bool(parts) and all(t.chosen for t in parts)


def _dedupe(items: tuple) -> tuple:
    return tuple(dict.fromkeys(items))[:12]


def merge(a: Taint | None, b: Taint | None) -> Taint | None:
    if a is None:
        return b
    return a.merge(b)


def along(v: Val, path: Taint | None) -> Val:
    """``v`` assigned or returned on a path the arch decides (``path``): a value that does not
    depend on the arch itself and is no truth value, or a value already chosen, is a value
    chosen there (:attr:`Taint.chosen`)."""
    if path is None:
        return v
    if (v.taint is None and v.elems and all(_constant(x) for x in v.elems)) or (v.taint is not None and v.taint.chosen):
        return Val(v.elems, replace(path if v.taint is None else v.taint.merge(path), chosen=True))
    return v.with_taint(path)


def _constant(x) -> bool:
    """Not computed from the capability, and no verdict: a truth value set on an arch path is a
    flag, and ``(False, "needs 9.x")`` a predicate's answer, whose tests are the gates."""
    if isinstance(x, tuple):
        return not any(isinstance(e, bool) for e in x) and all(_constant(e) for e in x)
    return (is_data(x) and not isinstance(x, bool)) or x is UNKNOWN


def taint(kind: str, via: str, resolution: Resolution | None = None) -> Taint:
    return Taint(frozenset({kind}), frozenset({via}), frozenset({resolution}) if resolution else frozenset())


@dataclass(frozen=True, slots=True)
class Val:
    elems: frozenset
    taint: Taint | None = field(default=None)

    def with_taint(self, t: Taint | None) -> Val:
        return self if t is None else Val(self.elems, merge(self.taint, t))

    def only(self):
        """The single element, or UNKNOWN."""
        return next(iter(self.elems)) if len(self.elems) == 1 else UNKNOWN


def val(*elems, taint: Taint | None = None) -> Val:
    return make(elems, taint)


def make(elems, taint: Taint | None = None) -> Val:
    s = frozenset(elems)
    if len(s) > MAX_ELEMS:
        s = frozenset({UNKNOWN})
    return Val(s, taint)


NOTHING = Val(frozenset())
ANY = val(UNKNOWN)
BOOL = val(True, False)


def join(*vals: Val) -> Val:
    elems: set = set()
    t = None
    for v in vals:
        elems |= v.elems
        t = merge(t, v.taint)
    return make(elems, t)


DATA = (type(None), bool, int, float, str, tuple, frozenset)


def is_data(x) -> bool:
    return isinstance(x, DATA)


def _known(x) -> bool:
    """Data all the way down: ``(UNKNOWN, 128) != (128, 128)`` may go either way, although
    Python would call the tuples unequal."""
    if isinstance(x, (tuple, frozenset)):
        return all(_known(e) for e in x)
    return isinstance(x, DATA)


def truths(x) -> frozenset:
    """The truth values an element may have."""
    if x is UNKNOWN or isinstance(x, Other):
        return frozenset({True, False})
    if x is TRUTHY:
        return frozenset({True})
    if x is FALSY:
        return frozenset({False})
    if isinstance(x, Table):
        return frozenset({bool(x.items)})
    if is_data(x):
        try:
            return frozenset({bool(x)})
        except Exception:
            return frozenset({True, False})
    return frozenset({True})


def truth(v: Val) -> frozenset:
    out: set = set()
    for x in v.elems:
        out |= truths(x)
    return frozenset(out)


def is_boolish(v: Val) -> bool:
    """A truth value (``None`` allowed beside it: a predicate may fall off its end)."""
    return any(x is not None for x in v.elems) and all(
        x is None or isinstance(x, bool) or x is TRUTHY or x is FALSY for x in v.elems
    )


def _short_circuit(a: Val, b_thunk, stop: bool) -> Val:
    """``a and b`` (stop=False) / ``a or b`` (stop=True): elements of ``a`` whose truth is
    ``stop`` are the result; the others give way to ``b`` (evaluated only if needed)."""
    out: set = set()
    t = a.taint
    need_b = False
    for x in a.elems:
        tr = truths(x)
        if stop in tr:
            out.add(x if is_data(x) else (TRUTHY if stop else FALSY))
        if (not stop) in tr:
            need_b = True
    if need_b:
        b = b_thunk()
        out |= b.elems
        t = merge(t, b.taint)
    return make(out, t)


def bool_and(a: Val, b_thunk) -> Val:
    return _short_circuit(a, b_thunk, False)


def bool_or(a: Val, b_thunk) -> Val:
    return _short_circuit(a, b_thunk, True)


def bool_not(a: Val) -> Val:
    out: set = set()
    for x in a.elems:
        out |= {not t for t in truths(x)}
    return make(out, a.taint)


_OPAQUE = (UNKNOWN, TRUTHY, FALSY)
_COMPARE = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "in": lambda a, b: a in b,
    "not in": lambda a, b: a not in b,
    "is": operator.is_,
    "is not": operator.is_not,
}
_BINARY = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "/": operator.truediv,
    "%": operator.mod,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "<<": operator.lshift,
    ">>": operator.rshift,
}


def _pairs(a: Val, b: Val):
    if len(a.elems) * len(b.elems) > MAX_ELEMS * 4:
        return None
    return [(x, y) for x in a.elems for y in b.elems]


def compare(op: str, a: Val, b: Val) -> Val:
    """A comparison is a bool or raises; anything opaque makes it either bool."""
    t = merge(a.taint, b.taint)
    if op in ("is", "is not"):
        # Whether a capability "is None" is about availability, not the arch: keep it unknown.
        t = None
    pairs = _pairs(a, b)
    if pairs is None:
        return Val(BOOL.elems, t)
    fn = _COMPARE[op]
    out: set = set()
    for x, y in pairs:
        if op in ("is", "is not") and (isinstance(x, (Cap, Props)) or isinstance(y, (Cap, Props))):
            # a capability query on the audited (CUDA) device never gives None: a helper's
            # ``-1 if cap is None else cap.to_int()`` fallback is unreachable there
            out.add(op == "is not" if (x is None or y is None) else (op == "is") == (x is y))
            continue
        if op in ("is", "is not") and (isinstance(x, ExtRef) or isinstance(y, ExtRef)):
            # an external object may be None (``torch.version.hip``, an optional import)
            out |= {True, False}
            continue
        if type(x) is Other or type(y) is Other:
            settled = _other(op, x, y)
            if settled is not None:
                out.add(settled)
                continue
        if op in ("in", "not in") and isinstance(y, Table) and _known(x):
            out.add((x in y) == (op == "in"))
            continue
        if not (_known(x) and _known(y)) and (op not in ("is", "is not") or x in _OPAQUE or y in _OPAQUE):
            # an object the reading does not model (``torch.version.cuda``, an unbound name):
            # its comparisons may go either way, never raise as ``object() >= "12.3"`` would
            out |= {True, False}
            continue
        if op in ("in", "not in") and not isinstance(y, (tuple, frozenset, str)):
            out |= {True, False}
            continue
        try:
            out.add(bool(fn(x, y)))
        except Exception:
            pass
    return make(out, t)


def _other(op: str, x, y) -> bool | None:
    """A comparison of an :class:`Other` that its exclusions settle: ``== 4`` when 4 is excluded."""
    if op in ("==", "!="):
        o, k = (x, y) if isinstance(x, Other) else (y, x)
        if isinstance(o, Other) and _known(k) and k in o.excluded:
            return op == "!="
    elif op in ("in", "not in") and isinstance(x, Other) and isinstance(y, (tuple, frozenset)):
        if all(_known(k) and k in x.excluded for k in y):
            return op == "not in"
    return None


def binary(op: str, a: Val, b: Val) -> Val:
    t = merge(a.taint, b.taint)
    pairs = _pairs(a, b)
    fn = _BINARY.get(op)
    if pairs is None or fn is None:
        return Val(ANY.elems, t)
    out: set = set()
    for x, y in pairs:
        if not (is_data(x) and is_data(y)):
            out.add(UNKNOWN)
            continue
        if op in ("*", "<<") and (isinstance(x, (str, tuple)) or isinstance(y, (str, tuple)) or op == "<<"):
            if abs(y if isinstance(y, int) else x if isinstance(x, int) else 0) > 64:
                out.add(UNKNOWN)
                continue
        try:
            r = fn(x, y)
        except Exception:
            continue
        if isinstance(r, tuple) and not isinstance(r, Cap) and isinstance(x, Cap):
            r = tuple(r)
        out.add(r)
    return make(out, t)


_UNARY: dict[str, Callable[[Any], Any]] = {"-": operator.neg, "+": operator.pos, "~": operator.invert}


def unary(op: str, a: Val) -> Val:
    fn = _UNARY.get(op)
    out: set = set()
    for x in a.elems:
        if fn is None or not is_data(x):
            out.add(UNKNOWN)
            continue
        try:
            out.add(fn(x))
        except Exception:
            pass
    return make(out, a.taint)


def product(vals: list[Val], build=tuple) -> Val:
    """The tuple (or list) of several values: every combination, while that stays small."""
    combos: list[tuple] = [()]
    t = None
    for v in vals:
        t = merge(t, v.taint)
        combos = [c + (x,) for c in combos for x in v.elems]
        if len(combos) > MAX_ELEMS:
            return Val(ANY.elems, t)
    return make((build(c) for c in combos), t)


def capability(label: str) -> Cap:
    """The value a platform API gives on the capability ``label`` names (``"9.0"``)."""
    c = arch.Capability.parse(label)
    return Cap((c.major, c.minor))


def pick(v: Val, path: tuple) -> Val:
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


def items_of(v: Val) -> list[Val] | None:
    """The items of an iterable value, when it is one small known sequence."""
    if len(v.elems) != 1:
        return None
    x = v.only()
    if isinstance(x, (tuple, frozenset, str)) and len(x) <= MAX_ITEMS:
        return [Val(frozenset({i}), v.taint) for i in (sorted(x, key=repr) if isinstance(x, frozenset) else x)]
    return None


def taints(vals) -> Taint | None:
    t = None
    for v in vals:
        t = merge(t, v.taint)
    return t

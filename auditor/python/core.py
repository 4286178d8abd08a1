"""What the evaluator's concerns share: the frames and states they pass around, the caches,
the capability and CUDA toolkit being evaluated, and the switches between call mode and scan mode.

The concerns (:mod:`expressions`, :mod:`resolve`, :mod:`calls`, :mod:`externals`,
:mod:`statements`) are mixins over :class:`Core`, combined in :class:`auditor.python.interp.Interp`:
one object, so that evaluating a node costs one method call, not a hop between objects. What
one concern asks of another is declared here, for the type checker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tree_sitter import Node

from auditor import arch
from auditor.facts import names as names_mod
from auditor.python.symbols import Module, Program
from auditor.python.values import Cap, ExtRef, Func, Method, Taint, Val

R = TypeVar("R")

MAX_DEPTH = 40
FUEL = 3000
"""Statements one outermost call may run: a predicate is short, a long function is not one."""


class Relevant(Protocol):
    """Whether a definition may matter (mentions an arch token or a known predicate): others are
    not run, and calling them gives an unknown."""

    def __call__(self, mod: Module, node: Node) -> bool: ...

    def within(self, mod: Module, start: int, end: int) -> bool:
        """The same for the bytes ``start:end`` of ``mod``: asked before a tree is needed."""
        ...


@dataclass(slots=True)
class Frame:
    """Where an expression is evaluated: its module, its local variables (None at module or
    class level, where names are globals) and the class a method belongs to."""

    mod: Module
    env: dict | None
    cls: str | None = None
    parent: Frame | None = None


@dataclass(slots=True)
class State:
    """The local variables before a statement, whether it can run, and what decided that (a
    result reached on an arch-dependent path carries that dependence)."""

    env: dict
    live: bool = True
    path: Taint | None = None


NEWEST = arch.toolkits()[-1].release
"""The newest known toolkit: what everything is evaluated with when a scan chooses none."""
_BY_TOOLKIT = Val(frozenset())
"""Cached in place of a result that read the toolkit: that result is in ``per_toolkit``."""


class OutOfFuel(Exception):
    """An outermost call ran out of statements: its result is unknown."""


class Core:
    """The evaluator's state. Fields are set only here and by the concerns; outside code goes
    through :meth:`on`, :meth:`observe`, :meth:`scanning` and :meth:`quiet`."""

    def __init__(self, prog: Program, relevant: Relevant, toolkits: tuple[str, ...] = ()) -> None:
        self.prog = prog
        self.relevant = relevant
        self.table = names_mod.table()
        tk = self.table.toolkit
        self.toolkit_names = frozenset(tk.calls) | frozenset(tk.tests) | frozenset(tk.compare)
        """Calls the toolkit table models by their bare name."""
        self.cap: Cap = Cap((0, 0))
        self.dep = False
        """Whether ``cap`` was read since this was last cleared (see :meth:`_cached`)."""
        self.newest = arch.releases_of(toolkits)[-1]
        """The newest chosen toolkit: its answers are the verdicts."""
        self.others = tuple(k.release for k in arch.toolkits() if k.release != self.newest)
        """Every other known toolkit, oldest first: a scope that reads the toolkit is walked under
        each too, so that a gate says which toolkits admit a capability, chosen or not."""
        self.toolkit = self.newest
        """The CUDA toolkit's release (``12.9``): a second coordinate, read far more rarely."""
        self.tdep = False
        """Whether ``toolkit`` was read since this was last cleared."""
        self.cache: dict = {}
        """Results that did not read the capability, by key; ``per_cap`` those that did;
        ``per_toolkit`` those that read the toolkit, by (capability, toolkit, key)."""
        self.per_cap: dict = {}
        self.per_toolkit: dict = {}
        self.active: set = set()
        """Keys being computed: a recursion gives an unknown."""
        self.depth = 0
        """Nested evaluations of globals and calls: past :data:`MAX_DEPTH` a value is unknown."""
        self.recording = False
        """Scan mode: every evaluation is kept in ``recorded``, both arms of a choice evaluated."""
        self.recorded: list = []
        self.conditions: set[int] = set()
        """Ids of the nodes a scan tested as conditions (gates even when not arch-dependent)."""
        self.globals_read: dict[int, tuple[Node, Module, str]] = {}
        """Identifiers a scan read from module globals (for the gates' resolutions)."""
        self.forms: dict = {}
        """Capability parameters of each definition, by (module, offset) (see ``capability_arguments``)."""
        self.fuel: int | None = None
        """Statements the outermost call in progress may still run (None outside calls)."""

    # ------------------------------------------------------------------ the interface
    def on(self, cap: Cap) -> None:
        """Evaluate on ``cap`` from now on (results that do not read it are shared by all)."""
        self.cap = cap

    def observe(
        self, cap: Cap, fn: Callable[[State], R], st: State, toolkit: str | None = None
    ) -> tuple[R, bool, bool, list]:
        """``fn(st)`` on ``cap`` and ``toolkit`` in scan mode, with whether it read the capability
        and the toolkit (if neither, its result holds on every one) and the (node, value) of
        each evaluation. ``toolkit``: the newest chosen one unless given."""
        self.cap, self.dep, self.tdep, self.recorded = cap, False, False, []
        self.toolkit = toolkit or self.newest
        r = fn(st)
        return r, self.dep, self.tdep, self.recorded

    @contextmanager
    def scanning(self) -> Iterator[None]:
        """Scan mode for one module: conditions and globals read are noted afresh."""
        self.conditions, self.globals_read = set(), {}
        self.recording = True
        try:
            yield
        finally:
            self.recording = False

    def quiet(self) -> _Quiet:
        """Context for evaluating definitions: nothing recorded, nothing walked as dead code."""
        return _Quiet(self)

    # ------------------------------------------------------------------ caching
    def _cached(self, key) -> Val | None:
        """A result computed before on this capability, or on any when it did not read it (on
        this capability and toolkit when it read the toolkit)."""
        hit = self.per_cap.get((self.cap, key))
        if hit is not None:
            self.dep = True
        else:
            hit = self.cache.get(key)
        if hit is _BY_TOOLKIT:
            self.dep = self.tdep = True
            return self.per_toolkit.get((self.cap, self.toolkit, key))
        return hit

    def _store(self, key, v: Val) -> None:
        if self.tdep:
            self.per_toolkit[(self.cap, self.toolkit, key)] = v
            v = _BY_TOOLKIT
        if self.dep:
            self.per_cap[(self.cap, key)] = v
        else:
            self.cache[key] = v

    def _fresh(self) -> tuple[bool, bool]:
        """Note reads afresh for one result to cache; :meth:`_restore` adds the outer ones back."""
        outer = self.dep, self.tdep
        self.dep = self.tdep = False
        return outer

    def _restore(self, outer: tuple[bool, bool]) -> None:
        self.dep = outer[0] or self.dep
        self.tdep = outer[1] or self.tdep

    if TYPE_CHECKING:  # what the concerns ask of each other (defined in the mixins)

        def eval(self, node: Node, fr: Frame) -> Val: ...
        def e_call(self, node: Node, fr: Frame, run: bool = True) -> Val: ...
        def global_value(self, mod: Module, name: str, seen: frozenset = frozenset()) -> Val: ...
        def import_value(self, target: str) -> Val: ...
        def qual_of(self, mod: Module, node: Node) -> str: ...
        def call_func(self, f: Func, args: Any, kwargs: Any) -> Val: ...
        def call_elem(self, x: Any, args: Any, kwargs: Any, name: str, splat: bool = False) -> Val: ...
        def by_name(self, name: str, args: Any, kwargs: Any, functions: bool = False) -> Val: ...
        def bind(self, target: Node | None, v: Val, env: dict) -> None: ...
        def walk(self, stmts: Any, st: State, fr: Frame, rets: list) -> State: ...
        def api(self, name: str, args: Any, kwargs: Any) -> Val: ...
        def name_table(self, name: str) -> Val: ...
        def external(self, x: ExtRef, args: Any, kwargs: Any, splat: bool) -> Val: ...
        def external_attr(self, x: object, attr: str) -> Val: ...
        def attribute(self, base: Val, attr: str) -> Val: ...
        def toolkit_call(self, name: str, args: Any) -> Val: ...
        def function_attr(self, f: Func, attr: str, depth: int = 0) -> Val: ...
        def method(self, m: Method, args: Any) -> Val: ...


class _Quiet:
    """Recording off for the extent of a ``with`` (cheaper than a generator context)."""

    __slots__ = ("it", "saved")

    def __init__(self, it: Core) -> None:
        self.it = it

    def __enter__(self):
        self.saved = self.it.recording
        self.it.recording = False

    def __exit__(self, *exc):
        self.it.recording = self.saved

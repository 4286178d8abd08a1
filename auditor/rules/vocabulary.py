"""The vocabulary a rule's ``when`` and ``message`` may use: named predicates and fields over one gate.

Rules are data (``rules/*.yaml``); this module is the only place their words get meaning.
Every predicate reads the gate's *evaluation* (its admitted set against the requested
targets, and the facts found in its guarded region), never the text of its condition. For
a gate that guards a rejection (``if cap not in [9, 10]: raise``) the set that matters is
the one the rejection lets through (:func:`allowed`).
``PREDICATES`` take no argument; ``PARAMETRIC`` ones take the value written after the
name (``classification: conservative``). ``FIELDS`` are the ``{placeholders}`` of a message.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property, lru_cache

from auditor import arch
from auditor.arch import HOST, Capability
from auditor.cuda import cexpr
from auditor.cuda.macros import Evaluator, MacroTable, parse_condition
from auditor.facts import causes, lowering, names, platform, ptx
from auditor.facts.binaries import evidence, prebuilt_packages
from auditor.facts.features import is_around
from auditor.model import (
    Classification,
    Domain,
    Feature,
    Gate,
    GateKind,
    Guards,
    Language,
    Resolution,
    ResolvedBy,
    Target,
)
from auditor.python import roles
from auditor.rules.decisions import TABLE_KINDS, Decision, own_branch
from auditor.verdicts import allowed, availability, capabilities_of, classify, domain_capabilities, turns_away

_cap = Capability.parse
"""Capability labels are compared as numbers (10.0 > 9.0)."""
HOPPER = Capability.parse("9.0")
"""Where the binary rules start to look: shipped 12.x code says nothing about a gate for older devices."""


@dataclass(frozen=True, slots=True)
class Relatives:
    """Gates around one gate in the same file, found through the condition chains."""

    earlier: tuple[Gate, ...] = ()
    """Earlier branches of its ``if``/``elif`` chain, and of every enclosing chain."""
    enclosing: tuple[Gate, ...] = ()
    """Gates whose guarded region holds it, outermost first."""


_NEGATED = re.compile(r"^(?:!|not )\((.*)\)$", re.S)
"""How the extractors write an earlier sibling in a chain: ``!(cond)`` (C) or ``not (cond)`` (Python)."""


def relatives(gates: Iterable[Gate]) -> dict[str, Relatives]:
    """For each gate, its earlier sibling branches and its enclosing gates.

    A gate's chain is its enclosing conditions, its negated earlier siblings, then its own
    condition. A gate whose chain is a proper prefix of ``G``'s encloses ``G``; sibling ``S``
    with chain ``P + (s,)`` precedes ``G`` when ``G``'s chain continues ``P`` with ``not s``.
    """
    by_chain: dict[tuple[str, tuple[str, ...]], list[Gate]] = {}
    for g in sorted(gates, key=lambda g: g.line):
        by_chain.setdefault((g.file, g.chain), []).append(g)

    lines = {key: [g.line for g in group] for key, group in by_chain.items()}

    def before(key: tuple[str, tuple[str, ...]], line: int) -> Gate | None:
        i = bisect.bisect_left(lines.get(key, ()), line)
        return by_chain[key][i - 1] if i else None

    out: dict[str, Relatives] = {}
    for group in by_chain.values():
        for g in group:
            earlier, enclosing = [], []
            for i, cond in enumerate(g.chain):
                outer = before((g.file, g.chain[:i]), g.line) if i else None
                if outer is not None and outer.body_lines[0] <= g.line <= outer.body_lines[1]:
                    enclosing.append(outer)
                m = _NEGATED.match(cond)
                sibling = before((g.file, g.chain[:i] + (m.group(1),)), g.line) if m else None
                if sibling is not None:
                    earlier.append(sibling)
            if earlier or enclosing:
                out[g.id] = Relatives(tuple(earlier), tuple(enclosing))
    return out


@dataclass(frozen=True)
class GateView:
    """One gate seen against the requested targets; what predicates and fields read (computed once)."""

    gate: Gate
    targets: tuple[Target, ...]
    relatives: Relatives = Relatives()
    binaries: Mapping[str, str] = field(default_factory=dict)
    """The gate's package's shipped GPU code: best loadability per target label
    (``native``, ``jit``, ``none``); empty when the package ships no binary with GPU code."""
    decision: Decision | None = None
    """The decision the gate is a branch of (None: a decision of its own)."""
    shipped: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Every shipped binary's loadability per target label, for the branches of the decision."""
    for_speed: frozenset[tuple[str, str]] = frozenset()
    """(file, function) of the functions holding a speed choice (:func:`speed_choices`)."""

    @cached_property
    def branches(self) -> Decision:
        """The gate's decision, itself alone when none was given."""
        return self.decision or Decision((self.gate,))

    @cached_property
    def routes(self) -> dict[str, Gate | None]:
        """Per excluded target label, the branch of the decision it takes (None: none)."""
        return {t.label: self.branches.route(t) for t in self.excluded}

    @cached_property
    def excluded(self) -> tuple[Target, ...]:
        """Requested targets the gate turns away."""
        return tuple(t for t in self.targets if turns_away(self.gate, t))

    @cached_property
    def allowed(self) -> tuple[str, ...]:
        """See :func:`allowed`."""
        return allowed(self.gate)

    @cached_property
    def capabilities(self) -> tuple[str, ...]:
        """See :func:`capabilities_of`."""
        return capabilities_of(self.gate)

    @property
    def domain_capabilities(self) -> tuple[str, ...]:
        """Every capability the gate's domain can express, ascending."""
        return domain_capabilities(self.gate.domain)

    @cached_property
    def classification(self) -> Classification:
        """See :func:`classify`."""
        return classify(self.gate, self.targets)


Predicate = Callable[[GateView], bool]


def excludes_target(v: GateView) -> bool:
    """At least one requested target is turned away."""
    return bool(v.excluded)


def admits_below_target(v: GateView) -> bool:
    """Some admitted capability is older than an excluded target."""
    return any(_cap(c) < _cap(t.capability) for t in v.excluded for c in v.capabilities)


def admits_above_target(v: GateView) -> bool:
    """Some admitted capability is newer than an excluded target."""
    return any(_cap(c) > _cap(t.capability) for t in v.excluded for c in v.capabilities)


def upper_bound_cuts_target(v: GateView) -> bool:
    """The admitted range ends right below an excluded target's major.

    Everything admitted is of an older major, and the newest of them is the domain's
    nearest major below the target (``< 1200`` admits 11.0): the bound sits exactly at the
    target, as when it was written before the target existed. A legacy fallback such as
    ``__CUDA_ARCH__ < 800`` does not qualify.
    """
    if not v.capabilities:
        return False
    newest = _cap(v.capabilities[-1]).major
    for t in v.excluded:
        major = _cap(t.capability).major
        older = [_cap(c).major for c in v.domain_capabilities if _cap(c).major < major]
        if older and newest == max(older):
            return True
    return False


def admits_target_major(v: GateView) -> bool:
    """An excluded target's major is admitted through another minor (``sm_121a`` alone for 12.0):
    the gate is about the target's own generation, not another family's."""
    return any(
        c != t.capability and _cap(c).major == _cap(t.capability).major for t in v.excluded for c in v.capabilities
    )


def minor_trap(v: GateView) -> bool:
    """An older minor of an excluded target's major is admitted, the target not (12.0 in, 12.1
    out): code written for one part and never revisited. Not when the condition names the
    excluded minor (``__CUDA_ARCH__ != 1210``, ``assert(sm != 121)`` keep GB10 out on
    purpose). The mirror image, 12.0 singled out and 12.1 sent with the rest, is
    :func:`minor_singled_out`."""
    return any(
        _cap(c).major == _cap(t.capability).major and _cap(c) < _cap(t.capability)
        for t in v.excluded
        if not _names_minor(v.gate.expression, t.capability)
        for c in v.capabilities
    )


def minor_singled_out(v: GateView) -> bool:
    """An older minor goes one way and a newer requested sibling of the same major the other:
    a rejection of the older one (``if sm_version == 120: return False`` lets 12.1 into
    DeepGEMM), a branch for everyone but it (``if not is_device_capability((12, 0)): split_k =
    1`` leaves 12.1 without 12.0's tuning), or a flag set from either. What 12.0 is kept from
    or given most likely holds for 12.1, which shares its instruction set. Not when the
    condition names the newer minor (``is_gb10 = capability == (12, 1)`` detects that part on
    purpose)."""
    return bool(_sent_apart(v))


def _sent_apart(v: GateView) -> tuple[Target, ...]:
    """Requested targets admitted beside an older excluded target of their major: sent the other
    way. Not a target the gate admits alone (a predicate that tests for 12.1 and nothing else is
    about that part, whatever its name)."""
    return tuple(
        t
        for t in v.targets
        if t not in v.excluded
        and not _names_minor(v.gate.expression, t.capability)
        and v.capabilities != (t.capability,)
        and any(
            _cap(n.capability).major == _cap(t.capability).major and _cap(n.capability) < _cap(t.capability)
            for n in v.excluded
        )
    )


def minor_only(v: GateView) -> bool:
    """The condition decides by the minor alone, the same way under every major (``minor ==
    0`` admits 7.0, 8.0, … 12.0): the major was settled elsewhere, by a caller or an earlier
    check (``GetRouterKernels(minor)`` after ``major == 10``), so what it says about the
    target's minor is unknown."""
    admitted = [_cap(c) for c in v.capabilities]
    minors = {c.minor for c in admitted}
    if len({c.major for c in admitted}) < 2:
        return False
    return set(v.capabilities) == {c for c in v.domain_capabilities if _cap(c).minor in minors}


def minor_by_convention(v: GateView) -> bool:
    """A host value known only by its name (``sm_version``, ``profile.sm_version``): an SM
    number, but whether the device's own or its family's tag (every 12.x tactic carries 120)
    the input does not say, so it cannot tell one minor from another."""
    return v.gate.kind == GateKind.RUNTIME_CHECK and v.gate.resolved_by == ResolvedBy.NAME


def remarked(v: GateView) -> bool:
    """A comment beside the gate names an excluded target and leaves nothing open (``# SM121
    (GB10) is intentionally excluded``): the author decided about that part
    (:mod:`auditor.facts.remarks`)."""
    return any(t.capability in v.gate.remarks for t in v.excluded)


def states_scope(v: GateView) -> bool:
    """A comment beside the gate, or beside the flag or predicate it reads, states what exists for
    a part it admits (``# The SM100 mega kernels exist for compute capability 10.x only``): the gate
    restates the kernels' scope, not a list that forgot the target (:mod:`auditor.facts.remarks`).
    Not when it names a part of a turned-away target's own major that the gate lets through
    (``requires compute capability 12.0``, ``requires SM80, SM90, SM100 or SM120`` where 12.1 is
    turned away): written for the part the author had, it says nothing of its sibling, which is
    the trap itself. A statement that names the turned-away major as lacking (``SM12x lacks
    tcgen05 MMA required by this kernel``) is about the target, and stands."""
    if not v.gate.scope:
        return False
    stated = names.stated_architectures(v.gate.scope)
    admitted = set(v.capabilities)
    return not any(_cap(c).major == _cap(t.capability).major and c in admitted for c in stated for t in v.excluded)


SHAPE_PINS = 2
"""How many problem-shape parameters a condition pins to numbers to choose for one shape."""
_PINNED = re.compile(r"\b([A-Za-z_][\w.]*(?:\[\d+\]|\(\d+\))?)\)?\s*(?:==|\bin\b)\s*[(\[]?\s*\d+\b")
"""A name compared with a number (``int(num_q_heads) == 36``, ``plan.page_size in (64, 128)``), or
a tensor's dimension (``scores.shape[1] == 512``, ``x.size(0) == 1``)."""
_PINNED_ROW = re.compile(r"\(\s*([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)+)\s*,?\s*\)\s*in\b")
"""Names looked up together in a table of rows (``(m, k, n) in _PRODUCTION_SHAPES``): each is pinned
to the table's numbers."""


def speed_choices(gates: Iterable[Gate]) -> frozenset[tuple[str, str]]:
    """(file, function) of every function holding a test that is a speed choice (a shape pinned,
    a measurement given), or a call of such a function: a call of it makes the same choice."""
    gates = [g for g in gates if g.context]
    chosen = {_home(g) for g in gates if g.measured or len(shape_pinned(g)) >= SHAPE_PINS}
    grown = True
    while grown:
        more = {_home(g) for g in gates if _home(g) not in chosen and any(_at(r) in chosen for r in causes.through(g))}
        chosen |= more
        grown = bool(more)
    return frozenset(chosen)


def _home(gate: Gate) -> tuple[str, str]:
    return gate.file, gate.context.rpartition(".")[2]


def _at(r: Resolution) -> tuple[str, str]:
    return r.file, r.name


def shape_pinned(gate: Gate) -> tuple[str, ...]:
    """The problem-shape parameters the condition around the gate pins to numbers, by name, as
    far as its recorded text shows (the enclosing condition, the unknowns beside the test)."""
    text = " ".join((gate.expression, *gate.chain[-1:], *gate.unknowns))
    rows = (name.strip() for m in _PINNED_ROW.finditer(text) for name in m.group(1).split(","))
    found = (name.rpartition(".")[2] for name in (*(m.group(1) for m in _PINNED.finditer(text)), *rows))
    return tuple(dict.fromkeys(name for name in found if roles.shape_name(name)))


def shape_specialized(v: GateView) -> bool:
    """The condition pins problem-shape parameters to numbers beside its architecture test
    (``num_q_heads == 36 and head_dim_qk == 128 and capability == (12, 0)``): a schedule or
    kernel choice for one shape, measured on the parts it names; every other part runs the
    general path of the same code for that shape."""
    return bool(v.excluded) and len(shape_pinned(v.gate)) >= SHAPE_PINS


def measured(v: GateView) -> bool:
    """A comment beside the gate, in its function's docstring or beside what it reads gives a
    measurement (``those k ~ 1000 cells run 2-5 % faster``): a speed choice made on the parts it
    was measured on; the others run the general path (:mod:`auditor.facts.remarks`)."""
    return bool(v.excluded and v.gate.measured)


def sibling_shares_the_limit(v: GateView) -> bool:
    """A comment gives a shared-memory size as the reason for what the gate gives a part
    (``"num_stages": 3 if is_sm121() else 4`` beside ``# sm_121 caps shared memory at 99 KB per
    block``), and an excluded target of that part's major has the same size
    (``devices.json``): the reason holds for it too, and the other branch's setting, written
    for more shared memory, may not fit there."""
    return bool(_sharing(v))


def _sharing(v: GateView) -> tuple[Target, ...]:
    """The excluded targets whose shared memory per block is the size the gate's comment gives
    (to the KB) and that of a capability it admits of the same major."""
    stated = _KB.search(v.gate.limit.lower()) if v.gate.limit else None
    if stated is None:
        return ()
    size = float(stated.group(1))
    return tuple(
        t
        for t in v.excluded
        if (kb := arch.shared_memory_kb(t.capability)) is not None
        and abs(kb - size) <= 1
        and any(_cap(c).major == _cap(t.capability).major and arch.shared_memory_kb(c) == kb for c in v.capabilities)
    )


_KB = re.compile(r"\b(\d+(?:\.\d+)?)\s*(?:kb|kib|k)\b")
"""A size in KB as a comment gives it (``99 KB``, ``227KiB``, ``100k``)."""


def _sharers(v: GateView) -> str:
    """The admitted capabilities of the excluded targets' majors that share their size."""
    shared = {(_cap(t.capability).major, arch.shared_memory_kb(t.capability)) for t in _sharing(v)}
    return ", ".join(c for c in v.capabilities if (_cap(c).major, arch.shared_memory_kb(c)) in shared) or "none"


def calls_a_speed_choice(v: GateView) -> bool:
    """The condition calls a function that holds a speed choice (``if _is_laguna_decode(...)``,
    ``fused_block = _fuse_block_tail(...)``): it makes that choice too."""
    return bool(v.excluded) and _called_choice(v) is not None


def _called_choice(v: GateView) -> str | None:
    return next((r.name for r in causes.through(v.gate) if _at(r) in v.for_speed), None)


def _choice(v: GateView) -> str:
    """What makes the gate a speed choice, in words."""
    shape = shape_pinned(v.gate)
    if len(shape) >= SHAPE_PINS:
        return "for one problem shape: " + ", ".join(shape)
    if v.gate.measured:
        return f'measured: "{v.gate.measured}"'
    return f"as `{_called_choice(v)}`, which it calls"


def settled_upstream(v: GateView) -> bool:
    """Every target the gate turns away is ruled out by a value chosen upstream by the arch, even
    were the gate's own capability tests to pass (``fa_version == 4 and is_family(100)`` where
    12.x is always given FA2): the decision is where that value is chosen, and widening this
    test gives the targets nothing."""
    return bool(v.excluded) and all(t.capability in v.gate.settled for t in v.excluded)


def remarked_sent_apart(v: GateView) -> bool:
    """A comment beside the gate names a target it sends apart from its older sibling (``# GB10
    (12.1) keeps DeepGEMM: it has tcgen05`` beside ``if sm_version == 120: return False``): that
    part was decided about. A comment that names only the excluded minor explains its exclusion,
    which holds for the sibling too."""
    return any(t.capability in v.gate.remarks for t in _sent_apart(v))


def own_architecture(v: GateView) -> bool:
    """The gate sits in code written for other architectures: the file's path or its
    function's name names architectures (``sm90_gemm_tma.hpp``, ``fmha_sm100/``,
    ``gen_gemm_sm100_module``; ``data/predicate-names.json``) and no excluded target is of
    their generations. Its compile guards, flags and asserts keep such code to the parts it was
    written for; which code a device gets is decided where the implementation is chosen."""
    function = v.gate.context.partition(":")[0]
    named = names.path_architectures(v.gate.file) or names.path_architectures(function)
    if not named or not v.excluded:
        return False
    generations = {arch.generation(c) for c in named}
    return not any(arch.generation(t.capability) in generations for t in v.excluded)


@lru_cache(maxsize=4096)
def _names_minor(expression: str, capability: str) -> bool:
    """Whether a condition writes out one capability (``(12, 1)``, ``121``, ``1210``, ``sm_121``,
    ``major == 12 and minor == 1``, ``is_sm121_supported()``), or puts a bound right at it
    (``sm > 120`` and ``major == 12 and minor >= 1`` start at 12.1: written about that minor;
    ``major == 9 and minor >= 0`` is about 9.x alone)."""
    c = _cap(capability)
    major, minor = c.major, c.minor
    forms = (
        rf"\b{major}\s*,\s*{minor}\b",
        rf"\b{major}{minor}0?\b",
        rf"sm_?{major}{minor}",
    )
    if any(re.search(f, expression) for f in forms) or capability in _named(expression):
        return True
    if re.search(rf"\b{major}\b", expression) and re.search(rf"minor\s*[=!]=\s*{minor}\b", expression):
        return True
    return any(
        _bound_at(m, c) and (not m.group(1).endswith("minor") or re.search(rf"\b{major}\b", expression))
        for m in _BOUND.finditer(expression)
    )


_BOUND = re.compile(r"(\w+)\s*(>=|>|<=|<)\s*(\d+)\b")
"""An inequality with a number: ``sm > 120``, ``__CUDA_ARCH__ >= 1210``, ``minor >= 1``."""


def _bound_at(m: re.Match, c: Capability) -> bool:
    """Whether the first value an inequality lets through is capability ``c``: ``sm > 120`` and
    ``sm >= 121`` start at 12.1; ``minor >= 1`` at every ``x.1``."""
    name, op, number = m.group(1), m.group(2), int(m.group(3))
    step = {">": 1, ">=": 0, "<": -1, "<=": 0}[op]
    if name.endswith("minor"):
        return number + step == c.minor
    if number >= 1000:
        return number + 10 * step == c.major * 100 + c.minor * 10
    if number >= 100:
        return number + step == c.major * 10 + c.minor
    return False


def several_generations(v: GateView) -> bool:
    """The admitted capabilities span more than one generation (``data/devices.json``): an
    enumeration, not one generation's feature gate (``major in (10, 11)`` is datacenter
    Blackwell's tcgen05, ``major >= 9 and major < 12`` spans Hopper and Blackwell)."""
    return len({arch.generation(c) for c in v.capabilities}) > 1


def feature_family(v: GateView) -> bool:
    """Only arch- or family-specific nvcc targets (``sm_90a``, ``sm_100f``) are admitted, no portable one."""
    devices = [t for t in v.allowed if t != HOST]
    return v.gate.domain == Domain.TARGET and bool(devices) and all(t.endswith(("a", "f")) for t in devices)


def dead(v: GateView) -> bool:
    """The branch's own condition leaves no device target (the host alone does not count).

    Not when an enclosing gate is already dead (that one is reported); nor when some CUDA
    toolkit admits a target (code for 12.9's sm_101, or under a toolkit test, needs that
    toolkit: it is not dead); nor when the branch is the host path: earlier branches take
    every device target (a host-only ``#else``), or its own condition selects the host
    (CCCL's ``NV_IS_HOST`` arm of a dispatch).
    """
    if v.capabilities or v.gate.toolkits or any(not capabilities_of(e) for e in v.relatives.enclosing):
        return False
    if v.gate.domain == Domain.DEVICE and not _names_a_known_generation(v.gate.expression):
        return False
    if v.gate.chain and _selects_host(v.gate.chain[-1]):
        return False
    taken = {c for e in v.relatives.earlier for c in capabilities_of(e)}
    return not taken or not taken >= set(v.domain_capabilities)


_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


@lru_cache(maxsize=4096)
def _names_a_known_generation(expression: str) -> bool:
    """Whether a Python condition names a capability of the domain's generations or newer
    (``major == 12``, ``cc == 90``, ``(10, 7)``): ``capability is None`` names none, and
    ``major == 6`` names a pre-Volta part the domain leaves out, not an architecture nobody has."""
    oldest = _cap(arch.capabilities()[0]).major
    return any((n // 10 if n >= 20 else n) >= oldest for n in map(int, _NUMBER.findall(expression)))


@cache
def _selects_host(condition: str) -> bool:
    """Whether a C condition is a host test: it asks only whether ``__CUDA_ARCH__`` is defined,
    and holds on the host alone (``__CUDA_ARCH__ < 500`` holds on the host too, but asks a value)."""
    try:
        node = parse_condition(condition)
    except cexpr.ConditionError:
        return False
    if cexpr.identifiers(node) != {"__CUDA_ARCH__"} or cexpr.value_identifiers(node):
        return False
    values = _plain().evaluate(condition).values
    return values[0] is True and not any(values[1:])


@cache
def _plain() -> Evaluator:
    """An evaluator with no derived macros, for conditions on nvcc's own macros alone."""
    return Evaluator(MacroTable())


def admits_beyond_name(v: GateView) -> bool:
    """A predicate admits everything its name promises and a major it does not (``is_sm100_supported`` taking 12.x).

    Another minor of a promised major (10.3 for ``sm100``) reads as the family and does not
    count; nor does a negated test (``not is_sm100_supported()``), which lets in less than
    the name, not more.
    """
    return bool(_beyond_name(v))


def defines_its_name(v: GateView) -> bool:
    """The gate is the body of a predicate whose name promises exactly what it lets through
    (``major == 12 and minor == 0`` in ``is_sm120a_supported``): the decision is where the
    predicate is called, and each call is a gate of its own."""
    gate = v.gate
    if gate.language != Language.PYTHON or not gate.context:
        return False
    promise = names.promised(gate.context.rpartition(".")[2])
    return promise is not None and set(v.capabilities) == promise


def earlier_branch_takes_target(v: GateView) -> bool:
    """Every excluded target takes an earlier branch of the same chain: this one is its fallback, not its gate."""
    return bool(v.excluded) and all(any(not turns_away(e, t) for e in v.relatives.earlier) for t in v.excluded)


def target_has_own_branch(v: GateView) -> bool:
    """Every excluded target takes another branch of the decision written for its generation
    (``elif major == 12 and minor == 1``, ``elif is_sm120_supported()``, the ``sm121a`` row
    beside the ``sm120a`` one), or a later branch written for newer parts than this one (a Turing arm
    before ``else if (sm >= 90)``): the decision gives it its own path and excludes nothing."""
    gate = v.gate
    return bool(v.excluded) and all(
        ((r := v.routes[t.label]) is not None and r.id != gate.id and own_branch(r, t))
        or v.branches.newer_branch_takes(gate, t)
        for t in v.excluded
    )


def negates_a_test_for_target(v: GateView) -> bool:
    """The branch's condition is the negation of a test that holds on every excluded target
    (``not self.is_xqa_impl`` where ``is_xqa_impl = is_sm90_supported() or
    is_sm120_supported()``): the target takes the other path on purpose; this is the path for
    the rest, not an allow-list that forgot it. Not for a rejection, whose ``not`` is the check."""
    gate = v.gate
    if gate.guards != Guards.TAKE or not v.excluded:
        return False
    return any(_bare_negation(c) for c in (gate.expression, *gate.chain[-1:]))


def _bare_negation(condition: str) -> bool:
    """Whether a condition is one negated operand: ``not self.is_xqa_impl``, ``!(a || b)``,
    ``not (platform.is_cuda() and platform.is_device_capability((12, 0)))``."""
    c = condition.strip()
    m = re.match(r"not\s+|!\s*(?!=)", c)
    return m is not None and _operand(c, m.end()) == c[m.end() :].strip() != ""


def guards_is(v: GateView, value: object) -> bool:
    """The branch's role read from its body is one of the given ones (``reject``, ``log``,
    ``define``): a log-only or definition-only branch is no code path of its own."""
    return v.gate.guards in _one_of(value)


def names_the_target(v: GateView) -> bool:
    """A predicate named in the condition, or in the flags it goes through, promises an excluded
    target (``not is_sm120_supported()``, the ``else`` of ``is_blackwell()``, ``if self.is_xqa:``
    where ``self.is_xqa = is_sm90_supported() or is_sm120_supported()``), or a negated test names
    the target's major as its argument (``not is_device_capability_family(120)``, ``!= 120``) — in
    the condition, its effective form, or the definition of a flag it tests (``if use_topk:`` where
    ``use_topk = … and not is_device_capability_family(120)``): the condition is written about the
    target, not a list that forgot it."""
    gate = v.gate
    texts = [gate.expression, *gate.chain[-1:]]
    words = set(_WORD.findall(gate.expression))
    texts += [r.detail for r in gate.resolutions if r.name in words]
    through = _named(" ".join([gate.expression, *(r.name for r in gate.resolutions)]))
    majors = {_cap(c).major for c in through}.union(*(_negated_majors(t) for t in texts))
    if gate.guards == Guards.REJECT:  # `if major == 12: return False` turns 12.x away by name
        majors |= {_cap(t.capability).major for t in v.excluded if _names_major(gate.expression, t.capability)}
    return any(_cap(t.capability).major in majors for t in v.excluded)


@lru_cache(maxsize=4096)
def _names_major(expression: str, capability: str) -> bool:
    """Whether a condition compares with a capability's major or one of its minors (``major ==
    12``, ``in (12,)``, ``sm == 120``, ``(12, 0)``)."""
    major = _cap(capability).major
    return re.search(rf"(?:[=!]=|\bin\b|[(,\[])\s*\(?\s*{major}\d?\d?\b", expression) is not None or any(
        _names_minor(expression, c) for c in arch.capabilities() if _cap(c).major == major
    )


_NEGATION = re.compile(r"\bnot\b|!(?!=)")
_INEQUALITY = re.compile(r"!=\s*\(?\s*(\d+)")
_ARGUMENT = re.compile(r"[\w.]+\(\s*\(?\s*(\d+)")


@lru_cache(maxsize=4096)
def _negated_majors(expression: str) -> frozenset[int]:
    """The majors named by the negated tests of a condition (120 and 12 both name 12): the first
    number of each call inside a negated operand (``not f(120)``, ``not (a and f((12, 0)))``), and
    ``!= 120``, and the first number of each entry of a ``not in`` collection (``not in ((12,
    0), (12, 1))``, ``not in [120, 121]``)."""
    numbers = [int(n) for n in _INEQUALITY.findall(expression)]
    for m in _NEGATION.finditer(expression):
        numbers += map(int, _ARGUMENT.findall(_operand(expression, m.end())))
    for m in _NOT_IN.finditer(expression):
        numbers += _entries(_operand(expression, m.end()))
    return frozenset(n // 10 if n >= 20 else n for n in numbers)


_NOT_IN = re.compile(r"\bnot\s+in\s*(?=[(\[{])")


def _entries(collection: str) -> list[int]:
    """The first number of each top-level entry of a written collection: ``12`` of ``(12, 0)``
    in ``((12, 0), (12, 1))``, ``120`` in ``[120, 121]``."""
    out, depth, start = [], 0, 1
    for i, ch in enumerate(collection):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if (ch == "," and depth == 1) or (depth == 0 and i > 0):
            m = re.search(r"\d+", collection[start:i])
            if m:
                out.append(int(m.group()))
            start = i + 1
            if depth == 0:
                break
    return out


def _operand(text: str, start: int) -> str:
    """The operand a ``not`` at ``start`` applies to: a balanced parenthesis, or a call."""
    i = start
    while i < len(text) and text[i] == " ":
        i += 1
    depth, j = 0, i
    while j < len(text):
        ch = text[j]
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                break
            depth -= 1
            if depth == 0:
                return text[i : j + 1]
        elif depth == 0 and ch == " ":
            break
        j += 1
    return text[i:j]


def fallback_below(v: GateView) -> bool:
    """The gate admits every capability below a bound and none above it (``not
    (self.cutlass_fp8_supported)``): for a test, the complement of one for the newer devices,
    the path older GPUs take, not an allow-list."""
    caps = v.capabilities
    return bool(caps) and tuple(caps) == tuple(v.domain_capabilities[: len(caps)])


def rejects(v: GateView) -> bool:
    """The gate guards a rejection (a failing check, a branch that throws): what matters is what it lets through."""
    return v.gate.guards == Guards.REJECT


def has_unknowns(v: GateView) -> bool:
    """The verdict depends on identifiers that are neither arch macros nor resolved."""
    return bool(v.gate.unknowns)


def binaries_cannot_load(v: GateView) -> bool:
    """The gate lets a requested target in, yet no binary its guarded code reaches runs there
    (no SASS for it, no PTX to JIT): that code fails to load on the target. Only for a gate
    that decides something from 9.0 up (:func:`decides_from_hopper`)."""
    return decides_from_hopper(v) and any(v.binaries.get(t.label) == "none" for t in v.targets if t not in v.excluded)


def binaries_behind_excluding_gate(v: GateView) -> bool:
    """A binary the guarded code reaches carries SASS for a requested target, and the gate turns
    that target away. Only for a gate that decides something from 9.0 up."""
    return decides_from_hopper(v) and any(v.binaries.get(t.label) == "native" for t in v.excluded)


def binaries_agree(v: GateView) -> bool:
    """The shipped binaries the guarded code reaches hold nothing that runs on any excluded
    target (no SASS for it, no PTX to JIT): the gate agrees with the build. Widening it leads
    to a kernel image that is not there; a build for the target comes first."""
    return bool(v.excluded and v.gate.extensions) and all(v.binaries.get(t.label) == "none" for t in v.excluded)


def built_for_admitted_only(v: GateView) -> bool:
    """The code behind the gate is built for targets of the parts it admits that no excluded part
    runs (``data/devices.json`` ``runs``: an ``a`` target on its part alone), one of them a
    sibling of each excluded part (``SM120_CODE_TARGET = "sm_120a"``,
    a JIT spec with ``sm120a_nvcc_flags``, where 12.1 is turned away): the excluded part cannot
    run that build, so the test agrees with it; a build for the part comes first (``Gate.builds``)."""
    builds = v.gate.builds
    built = {arch.capability_of(b) for b in builds}
    return (
        bool(v.excluded and builds)
        and built <= set(v.capabilities)
        and not any(arch.runs_on("sass", b, _cap(t.capability)) for b in builds for t in v.excluded)
        and all(any(_cap(c).major == _cap(t.capability).major for c in built) for t in v.excluded)
    )


def prebuilt_elsewhere(v: GateView) -> bool:
    """The guarded code runs kernels prebuilt in a package the scan does not hold
    (``sgl_kernel``), and no binary of the input: that package's build, which this scan cannot
    read, decides whether a turned-away target could run it."""
    return bool(v.gate.prebuilt_elsewhere)


def platform_lacks(v: GateView) -> bool:
    """The code behind the gate needs a system feature that no system of any turned-away target
    has (``Gate.platform``: NVLink multicast, and no 12.x machine has NVSwitch): the gate agrees
    with the platform, and widening it gives those targets nothing that runs."""
    return bool(v.excluded) and all(_lacked(v.gate, t) for t in v.excluded)


def _lacked(gate: Gate, target: Target) -> tuple[platform.Fact, ...]:
    """The facts behind the gate that ``target``'s systems lack."""
    ids = {need.partition(" ")[0] for need in gate.platform}
    return tuple(f for f in platform.facts() if f.id in ids and target.capability in f.lacking)


def fallback_same_code(v: GateView) -> bool:
    """Every turned-away target takes another branch of the decision whose CUDA intrinsic calls
    compile, on each of its build targets that can assemble them, to every instruction this
    branch's ``asm`` uses (``#else`` ``__nv_cvt_float_to_e8m0(v, __NV_SATFINITE,
    cudaRoundPosInf)`` is ``cvt.rp.satfinite.ue8m0x2.f32`` on sm_121a, as nvcc says in
    ``data/intrinsic-lowering.json``): the target gets the same code, nothing is lost."""
    used = [f.token for f in v.gate.features if not is_around(f)]
    if not v.excluded or not used or not all(ptx.accepting(op) for op in used):
        return False
    for t in v.excluded:
        route = v.routes[t.label]
        if route is None or route.id == v.gate.id:
            return False
        emitted = lowering.by_target(route)
        for op in used:
            variants = [x for x in ptx.accepting(op) if arch.capability_of(x) == t.capability]
            if not variants or any(op not in emitted.get(x, ()) for x in variants):
                return False
    return True


def route_loads_native_binary(v: GateView) -> bool:
    """Every excluded target takes another branch of the decision whose guarded code reaches a
    binary with SASS for it (``if cc == 90: load sm90/… elif …: load sm100/…``): it is turned
    away from one build to another, not from native code."""
    return bool(v.excluded) and all(
        (r := v.routes[t.label]) is not None
        and r.id != v.gate.id
        and evidence(v.shipped, r.extensions).get(t.label) == "native"
        for t in v.excluded
    )


def decides_from_hopper(v: GateView) -> bool:
    """The gate's answer changes somewhere from 9.0 up (the last older capability included, so
    that ``>= 9`` counts): a gate that treats every capability from 9.0 on alike (``major >= 8``,
    ``major < 8``) concerns older devices, and a binary built for 12.x says nothing about it."""
    caps = v.domain_capabilities
    newer = [c for c in caps if _cap(c) >= HOPPER]
    older = [c for c in caps if _cap(c) < HOPPER]
    let_in = set(v.capabilities)
    answers = {c in let_in for c in older[-1:] + newer}
    return len(answers) > 1


def _one_of(value: object) -> tuple[str, ...]:
    return tuple(value) if isinstance(value, (list, tuple)) else (str(value),)


def classification_is(v: GateView, value: object) -> bool:
    """The guarded code's classification is one of the given ones."""
    return v.classification in _one_of(value)


def kind_is(v: GateView, value: object) -> bool:
    """The gate is of one of the given kinds (``predicate-call``, ``major-list``, ...)."""
    return v.gate.kind in _one_of(value)


def resolved_by(v: GateView, value: object) -> bool:
    """The gate was resolved this way (``definition``, ``name``, ``literal``)."""
    return v.gate.resolved_by in _one_of(value)


PREDICATES: dict[str, Predicate] = {
    "excludes_target": excludes_target,
    "admits_below_target": admits_below_target,
    "admits_above_target": admits_above_target,
    "upper_bound_cuts_target": upper_bound_cuts_target,
    "minor_trap": minor_trap,
    "minor_singled_out": minor_singled_out,
    "own_architecture": own_architecture,
    "remarked": remarked,
    "remarked_sent_apart": remarked_sent_apart,
    "states_scope": states_scope,
    "settled_upstream": settled_upstream,
    "minor_only": minor_only,
    "minor_by_convention": minor_by_convention,
    "admits_target_major": admits_target_major,
    "several_generations": several_generations,
    "feature_family": feature_family,
    "dead": dead,
    "admits_beyond_name": admits_beyond_name,
    "defines_its_name": defines_its_name,
    "earlier_branch_takes_target": earlier_branch_takes_target,
    "target_has_own_branch": target_has_own_branch,
    "names_the_target": names_the_target,
    "negates_a_test_for_target": negates_a_test_for_target,
    "fallback_below": fallback_below,
    "has_unknowns": has_unknowns,
    "rejects": rejects,
    "binaries_cannot_load": binaries_cannot_load,
    "binaries_behind_excluding_gate": binaries_behind_excluding_gate,
    "decides_from_hopper": decides_from_hopper,
    "route_loads_native_binary": route_loads_native_binary,
    "binaries_agree": binaries_agree,
    "prebuilt_elsewhere": prebuilt_elsewhere,
    "platform_lacks": platform_lacks,
    "fallback_same_code": fallback_same_code,
    "shape_specialized": shape_specialized,
    "measured": measured,
    "calls_a_speed_choice": calls_a_speed_choice,
    "sibling_shares_the_limit": sibling_shares_the_limit,
    "built_for_admitted_only": built_for_admitted_only,
}
"""Predicates written as a bare name in ``when``."""

PARAMETRIC: dict[str, Callable[[GateView, object], bool]] = {
    "classification": classification_is,
    "resolved_by": resolved_by,
    "kind": kind_is,
    "guards": guards_is,
}
"""Predicates written as ``name: value`` (a value or a list of values) in ``when``."""

PARAMETRIC_VALUES: dict[str, tuple[str, ...]] = {
    "classification": tuple(c.value for c in Classification if c is not Classification.NONE),
    "resolved_by": tuple(r.value for r in ResolvedBy),
    "kind": tuple(k.value for k in GateKind),
    "guards": tuple(g.value for g in Guards if g is not Guards.TAKE),
}
"""The values each parametric predicate accepts (the rule schema lists them)."""


# Message fields -------------------------------------------------------------------------


def _beyond_name(v: GateView) -> tuple[str, ...]:
    """What the gate admits of majors its names do not promise; nothing when a promising name is
    one the scan could not read (``get_platform().is_sm100`` left unknown): what it would admit
    is not known, and the extra majors are the unknown's, not the definition's."""
    promised = _promised(v.gate)
    if not promised or not promised <= set(v.capabilities) or len(v.capabilities) == len(v.domain_capabilities):
        return ()
    if any(_named(u) for u in v.gate.unknowns):
        return ()
    majors = {_cap(c).major for c in promised}
    return tuple(c for c in v.capabilities if _cap(c).major not in majors)


def _promised(gate: Gate) -> set[str]:
    """What the predicate names a reader sees in the condition promise, together.

    Only when the extractor found a name whose definition differs from its promise
    (``name_implies``); read from the names table for every name in the condition, so that
    ``is_sm90_supported() or is_sm100_supported()`` promises 9.0 and 10.0, and a wrapper
    whose own name promises nothing promises nothing. A flag beside them promises what its value
    names (``sm90 or is_sm12x_supported()`` where ``sm90 = is_sm90a_supported()``: 9.0 and 12.x);
    a condition that reads a name promising nothing promises nothing as a whole.
    """
    if not gate.name_implies:
        return set()
    out = set(_named(gate.expression))
    by_name = {r.name: r for r in gate.resolutions}
    named = set(causes.named_definitions(gate))
    for r in causes.through(gate):
        if names.promised(r.name) or (r not in named and not _is_flag(r)):
            continue  # a predicate speaks by its name; below the condition, only flags are read
        # a flag: what its value names promises (``sm90 = is_sm90a_supported()``), with the flags
        # it names in turn (``use = is_blackwell or hopper_ok`` where ``hopper_ok = is_sm90 and …``)
        value = _named(r.detail)
        flags = any(w != r.name and (d := by_name.get(w)) is not None and _is_flag(d) for w in _WORD.findall(r.detail))
        if not (value or flags) or (_is_flag(r) and _COMPARES.search(r.detail)):
            # a name that promises nothing, or a value that also tests the capability itself
            # (``is_sm100 or get_device_sm() == 120``): what it admits is its own
            return set()
        out |= value
    return out


def _is_flag(r: Resolution) -> bool:
    """A value (``use_fp8 = …``), not a function."""
    return not r.detail.startswith(("def ", "async def "))


@lru_cache(maxsize=4096)
def _named(expression: str) -> frozenset[str]:
    """Every capability the predicate names in a condition promise (``is_sm90_supported() or
    is_sm100_supported()``: 9.0 and 10.0); names that promise nothing add nothing."""
    return frozenset(c for word in set(_WORD.findall(expression)) for c in names.promised(word) or ())


_WORD = re.compile(r"[A-Za-z_]\w*")
_COMPARES = re.compile(r"[<>!=]=|[<>]|\bin\b")


def _labels(targets: Iterable[Target]) -> str:
    return ", ".join(t.label for t in targets) or "none"


def _support(f: Feature, targets: Iterable[Target]) -> str:
    on = dict(f.on_target)
    status = ", ".join(f"{t.label}: {on.get(t.capability, 'not in fact table')}" for t in targets)
    return f"{status}; {f.source}" if f.source else status


def _features(v: GateView) -> str:
    if not v.gate.features:
        return "no fact-table feature"
    shown = v.excluded or v.targets
    return "; ".join(f"`{f.token}` ({_support(f, shown)}{_where(f)})" for f in v.gate.features)


def _where(f: Feature) -> str:
    """Where a feature of the code around the gate was found (``; around the gate, in `k`, line 312``)."""
    return f"; {f.notes}, line {f.line}" if is_around(f) else ""


_NOTHING_KNOWN = "nothing the fact tables know in its own lines (the functions it calls are not read)"
"""What ARCH005 says when the guarded lines show nothing a turned-away target lacks: a call to
a helper whose ``asm`` needs the arch-specific target (``cvt_rs_f16x2_f32(…)``) is not followed,
so "lacks nothing" would be a claim the scan cannot make."""


def _missing(v: GateView) -> str:
    lacking = [
        f
        for f in v.gate.features
        if any(availability(dict(f.on_target).get(t.capability, "")) == "no" for t in v.excluded)
    ]
    return "; ".join(f"`{f.token}` ({_support(f, v.excluded)}{_where(f)})" for f in lacking) or _NOTHING_KNOWN


def _same_major(v: GateView) -> str:
    majors = {_cap(t.capability).major for t in v.excluded}
    return ", ".join(c for c in v.capabilities if _cap(c).major in majors) or "none"


def _tuned_apart(v: GateView) -> tuple[tuple[Target, ...], str]:
    """For a tuning-only branch: the requested targets run with other values than the devices
    that get the tuned ones, and those devices. A branch for everyone but an older minor
    (``if not is_device_capability((12, 0)): split_k = 1``) keeps that minor's values from its
    siblings; otherwise the excluded targets miss the values the branch gives what it admits."""
    apart = _sent_apart(v)
    if apart:
        return apart, _labels(v.excluded)
    return v.excluded, arch.compact(v.gate.domain, v.allowed)


def _root_cause(v: GateView) -> str:
    """The macro definitions a C/CUDA gate's own condition goes through: where its verdict is decided."""
    if v.gate.language != Language.CUDA or not v.gate.resolutions:
        return ""
    named = set(_WORD.findall(v.gate.expression))
    direct = [r for r in v.gate.resolutions if r.name in named]
    if not direct:
        return ""
    shown = "; ".join(f"`{r.name}` at {r.file}:{r.line} ({r.detail})" for r in direct[:3])
    more = f" and {len(direct) - 3} more" if len(direct) > 3 else ""
    return f"; decided where its macros are defined: {shown}{more}"


def _built_by(v: GateView) -> str:
    """Where the build flags are that keep the excluded targets from compiling this code at all:
    they are the first thing to widen, and the gate what the targets meet next."""
    if not v.gate.built_by or not v.excluded:
        return ""
    sites = ", ".join(v.gate.built_by[:3]) + (
        f" and {len(v.gate.built_by) - 3} more" if len(v.gate.built_by) > 3 else ""
    )
    return f"; {_labels(v.excluded)} {_verb(v.excluded, 'is', 'are')} not built here yet: the build flags at {sites} leave {_verb(v.excluded, 'it', 'them')} out and come first, this gate next"


def _few(caps: tuple[str, ...]) -> str:
    return ", ".join(caps) if len(caps) <= 4 else f"{caps[0]}…{caps[-1]}"


def _route(v: GateView) -> str:
    """Which branch each excluded target takes, against what this branch admits: the decision
    in words (``on 12.1 the decision takes the fallback `else` at line 224, while 12.0 takes
    this branch``)."""
    gate, decision = v.gate, v.branches
    value = gate.kind in TABLE_KINDS
    groups: dict[str, tuple[Gate | None, list[str]]] = {}
    for label, r in v.routes.items():
        groups.setdefault(r.id if r is not None else "", (r, []))[1].append(label)
    parts = []
    for r, labels in groups.values():
        who = ", ".join(labels)
        if r is None or r.id == gate.id:
            if gate.guards == Guards.REJECT:
                parts.append(f"on {who} this check rejects")
            elif value:
                parts.append(f"{who} {_verb(labels, 'is', 'are')} left out")
            else:
                parts.append(f"on {who} the decision takes none of its architecture branches")
        elif r.guards == Guards.REJECT:
            parts.append(f"on {who} the decision takes the rejection at line {r.line}")
        elif decision.is_else(r):
            parts.append(f"on {who} the decision takes the fallback `else` at line {r.line}")
        else:
            parts.append(f"on {who} the decision takes `{r.expression}` at line {r.line}")
    caps = v.capabilities
    if gate.guards == Guards.REJECT:
        side = _verb(caps, "passes", "pass")
    elif value:
        side = _verb(caps, "is", "are") + " in"
    else:
        side = _verb(caps, "takes", "take") + " this branch"
    tail = f", while {_few(caps)} {side}" if caps else ""
    return "; ".join(parts) + tail if parts else "no requested target is turned away"


def _verb(items: object, one: str, many: str) -> str:
    return one if len(items) == 1 else many  # type: ignore[arg-type]


FIELDS: dict[str, Callable[[GateView], str]] = {
    "expression": lambda v: v.gate.expression,
    "file": lambda v: v.gate.file,
    "line": lambda v: str(v.gate.line),
    "kind": lambda v: v.gate.kind,
    "admits": lambda v: arch.compact(v.gate.domain, v.allowed),
    "capabilities": lambda v: ", ".join(v.capabilities) or "none",
    "targets": lambda v: _labels(v.targets),
    "targets_excluded": lambda v: _labels(v.excluded),
    "route": _route,
    "features": _features,
    "missing": _missing,
    "classification": lambda v: v.classification or "n/a",
    "same_major": _same_major,
    "targets_sent_apart": lambda v: _labels(_sent_apart(v)),
    "scope": lambda v: v.gate.scope or "none",
    "limit": lambda v: v.gate.limit or "none",
    "limit_kb": lambda v: (
        ", ".join(f"{t.label}: {arch.shared_memory_kb(t.capability)} KB" for t in _sharing(v)) or "none"
    ),
    "limit_sharers": _sharers,
    "choice": _choice,
    "builds": lambda v: ", ".join(v.gate.builds) or "none",
    "untuned": lambda v: _labels(_tuned_apart(v)[0]),
    "tuned_like": lambda v: _tuned_apart(v)[1],
    "name_implies": lambda v: ", ".join(sorted(_promised(v.gate), key=Capability.parse)) or "none",
    "beyond_name": lambda v: ", ".join(_beyond_name(v)) or "none",
    "unknowns": lambda v: ", ".join(v.gate.unknowns) or "none",
    "root_cause": _root_cause,
    "built_by": _built_by,
    "binaries": lambda v: ", ".join(f"{label}: {verdict}" for label, verdict in v.binaries.items()) or "no GPU code",
    "extensions": lambda v: ", ".join(v.gate.extensions) or "none",
    "platform": lambda v: "; ".join(need.partition(" ")[2] for need in v.gate.platform) or "none",
    "platform_why": lambda v: "; ".join(dict.fromkeys(f.why for t in v.excluded for f in _lacked(v.gate, t))) or "none",
    "prebuilt": lambda v: ", ".join(prebuilt_packages().get(m, m) for m in v.gate.prebuilt_elsewhere) or "none",
    "targets_unloadable": lambda v: _labels(
        t for t in v.targets if t not in v.excluded and v.binaries.get(t.label) == "none"
    ),
    "targets_native_excluded": lambda v: _labels(t for t in v.excluded if v.binaries.get(t.label) == "native"),
}
"""``{placeholders}`` a rule's message may use, each rendered as one line of text."""

CLAUSES = frozenset({"root_cause", "built_by"})
"""Fields that render as a trailing clause of a message: empty when there is nothing to add."""

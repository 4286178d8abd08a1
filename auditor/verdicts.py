"""What a gate means for a target: where the code it protects may run, whether it turns a
target away, and what that code needs (hardware, conservative, unknown).

Every report, the rules, ``explain`` and ``diff`` ask these questions; they live here, at the
core, so that none of them reaches into another's module for the answer. For a gate that
guards a rejection (``if cap not in [9, 10]: raise``) the set that matters is the one the
rejection lets through (:func:`allowed`).

Availability (``classify``): the fact table says per capability ``yes``, ``no`` or
``sm_120a-only``. A feature available only with an arch-specific (``a``/``f``) build target
is still *available* on that GPU: widening then also needs the ``a``/``f`` target in the
build, which the ``{features}`` field shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache, lru_cache

from auditor import arch
from auditor.arch import HOST, Capability
from auditor.model import Classification, Domain, Gate, Guards, Target, Verdict


def availability(status: str) -> str:
    """A fact-table cell as ``yes``, ``no`` or ``unknown``; ``sm_120a-only`` counts as ``yes``."""
    if status == "yes" or status.endswith("-only"):
        return "yes"
    return "no" if status == "no" else "unknown"


def allowed(gate: Gate) -> tuple[str, ...]:
    """Archs on which the code the gate protects may run.

    Its admitted set; for a gate that guards a rejection (``if not ok: raise``, or a branch
    that only gives up), whose admitted set says where the rejection *may* happen, everything
    but where it is certain (``surely``): ``if not is_sm100_supported(): raise`` with a
    toolkit check inside the predicate still rejects 12.0 for sure; ``if cap != 12 or
    dtype != fp8: raise`` rejects nothing for sure, and neither does a condition on a value
    the evaluator could not pin down on any capability.
    """
    if gate.guards != Guards.REJECT:
        return gate.admits
    return _let_through(gate.domain, gate.surely)


@lru_cache(maxsize=4096)
def _let_through(domain: str, taken: tuple[str, ...]) -> tuple[str, ...]:
    """What a rejection taken on ``taken`` lets through. Cached, as is :func:`_keeps_out`: a
    report asks about 40,000 gates that share a few hundred sets."""
    rejected = set(taken)
    return tuple(a for a in arch.domain_order(domain) if a not in rejected)


def turns_away(gate: Gate, target: Target) -> bool:
    """Whether the gate keeps ``target`` from the code it protects."""
    return _keeps_out(gate.domain, allowed(gate), target)


@lru_cache(maxsize=4096)
def _keeps_out(domain: str, let_in: tuple[str, ...], target: Target) -> bool:
    return not arch.admits_target(domain, let_in, target)


def verdicts(gate: Gate, targets: Iterable[Target]) -> dict[str, Verdict]:
    """``{"12.0": admits | excludes, ...}``: whether the code the gate protects may run on
    each target (for a rejection guard, what the rejection lets through)."""
    return {t.label: Verdict.EXCLUDES if turns_away(gate, t) else Verdict.ADMITS for t in targets}


def classify(gate: Gate, targets: Iterable[Target]) -> Classification:
    """What the code behind a gate that excludes a target needs there; :attr:`Classification.NONE`
    for a gate that excludes none."""
    excluded = [t for t in targets if turns_away(gate, t)]
    if not excluded:
        return Classification.NONE
    if not gate.features:
        return Classification.UNKNOWN
    found = {availability(dict(f.on_target).get(t.capability, "")) for f in gate.features for t in excluded}
    if "no" in found:
        return Classification.HARDWARE
    return Classification.CONSERVATIVE if found == {"yes"} else Classification.UNKNOWN


def capabilities_of(gate: Gate) -> tuple[str, ...]:
    """Device capabilities the gate lets through, ascending (a target-domain set counts a
    capability when any of its variants is in)."""
    let_in = allowed(gate)
    caps = {_capability(t) for t in let_in if t != HOST} if gate.domain == Domain.TARGET else set(let_in)
    return tuple(sorted(caps, key=Capability.parse))


@cache
def _capability(target: str) -> str:
    return arch.capability_of(target)


@cache
def domain_capabilities(domain: str) -> tuple[str, ...]:
    """Every capability a domain can express, ascending."""
    if domain == Domain.TARGET:
        return tuple(sorted({_capability(t) for t in arch.device_targets()}, key=Capability.parse))
    return arch.capabilities()


def toolkit_notes(gate: Gate, targets: Iterable[Target], toolkits: tuple[str, ...] = ()) -> dict[str, str]:
    """Per requested target whose answer depends on the CUDA toolkit, which toolkits admit it
    (``{"12.1": "CUDA ≥ 12.9"}``); empty for a gate every toolkit answers alike.

    ``toolkits``: the releases the scan chose (empty: every known one). Where the chosen ones
    disagree, the note places the admitting ones among them; where none of them admits the
    target and another toolkit does, among every toolkit ("needs" that CUDA: not dead). A
    target none of them builds (12.1 under 12.8) is judged by the nearest toolkit that does
    (the command line says so once: :func:`arch.unbuilt`), and placed among those that do."""
    noted = dict(gate.toolkits)
    if not noted:
        return {}
    chosen = set(arch.releases_of(toolkits))
    out = {}
    for t in targets:
        members = t.variants if gate.domain == Domain.TARGET else (t.capability,)
        if not any(m in noted for m in members):
            continue
        having = _in_order({r for m in members for r in _having(m, gate.domain)})
        admitting = {
            r for m in members if m in noted or m in gate.admits for r in noted.get(m) or _having(m, gate.domain)
        }
        judged = [r for r in having if r in chosen]
        judged_admitting = [r for r in judged if r in admitting]
        if not judged:  # no chosen toolkit builds it: the nearest that does judges it (arch.nearest)
            if admitting and set(having) - admitting:
                out[t.label] = _releases(_in_order(admitting), having)
        elif judged_admitting and len(judged_admitting) != len(judged):  # some chosen toolkit turns it away
            out[t.label] = _releases(judged_admitting, judged)
        elif not judged_admitting and admitting:  # only toolkits not chosen admit it: placed
            # among every release (sm_101 of 12.9 alone is "CUDA 12.9", not "CUDA ≥ 12.9")
            out[t.label] = _releases(_in_order(admitting), list(arch.releases_of()))
    return out


@cache
def _having(member: str, domain: str) -> tuple[str, ...]:
    """The releases that have a target (every toolkit serves every device capability)."""
    return tuple(k.release for k in arch.toolkits() if domain != Domain.TARGET or member in k.targets)


def _in_order(releases: set[str]) -> list[str]:
    return [k.release for k in arch.toolkits() if k.release in releases]


def _releases(admitting: list[str], having: list[str]) -> str:
    """``CUDA ≥ 12.9``, ``CUDA ≤ 12.9`` or the list, as the admitting toolkits lie among those that have the target."""
    if not admitting:
        return "no CUDA toolkit"
    if admitting == having[len(having) - len(admitting) :]:
        return f"CUDA ≥ {admitting[0]}"
    if admitting == having[: len(admitting)]:
        return f"CUDA ≤ {admitting[-1]}"
    return "CUDA " + ", ".join(admitting)

"""The architecture catalogue: nvcc compile targets and device capabilities, read from data.

Two finite domains (see docs/json-contract.md): the *target* domain (every nvcc ``-arch`` target of
every known toolkit with exactly the macros nvcc defines for it, plus ``host``) and the *device* domain (compute
capabilities seen by Python runtime checks). Nothing here knows a particular architecture;
everything comes from ``data/toolkits.json`` and ``data/devices.json``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from auditor import datafiles
from auditor.model import Domain, Target

HOST = "host"
_TARGET_NAME = re.compile(r"^(?:sm_|compute_)?(\d+)([af]?)$")


@dataclass(frozen=True, order=True, slots=True)
class Capability:
    """A compute capability as a number pair, so that 10.0 sorts after 9.0; reports keep the
    ``12.0`` label, and every reading of one goes through :meth:`parse`."""

    major: int
    minor: int

    @staticmethod
    @cache
    def parse(label: str) -> Capability:
        """``12.0`` -> (12, 0); a bare major (``12``) is minor 0."""
        major, _, minor = label.partition(".")
        return Capability(int(major), int(minor or 0))

    @staticmethod
    def of_target(target: str) -> Capability:
        """The capability an nvcc target runs on: ``sm_120a`` and ``compute_120`` -> 12.0."""
        return Capability.parse(capability_of(target))

    @property
    def number(self) -> int:
        """The number nvcc writes in target names: 12.0 -> 120."""
        return self.major * 10 + self.minor

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


_RELATIONS = {
    "exact": lambda code, device: device == code,
    "family": lambda code, device: device.major == code.major and device.minor >= code.minor,
    "at_least": lambda code, device: device >= code,
}


def runs_on(kind: str, target: str, device: Capability) -> bool:
    """Whether code of ``kind`` (``sass`` or ``ptx``) built for an nvcc target runs on a device:
    SASS as is, PTX through the driver's JIT, as ``data/devices.json`` says per target suffix."""
    m = _TARGET_NAME.match(target)
    relation = _runs().get(kind, {}).get(m.group(2)) if m else None
    return relation is not None and _RELATIONS[relation](Capability.of_target(target), device)


@cache
def _runs() -> dict[str, dict[str, str]]:
    return datafiles.read_json("devices.json")["runs"]


def jit_targets(ptx: str) -> set[str]:
    """The nvcc targets of the same suffix that PTX built for ``ptx`` (``compute_90``) can be
    JIT-compiled for: the same or newer plain targets, its own ``a`` target, its ``f`` family."""
    m = _TARGET_NAME.match(ptx)
    if not m:
        return set()
    return {t for t in device_targets() if _suffix(t) == m.group(2) and runs_on("ptx", ptx, Capability.of_target(t))}


def _suffix(target: str) -> str:
    """``sm_120a`` -> ``a``; a plain target has none."""
    m = _TARGET_NAME.match(target)
    return m.group(2) if m else ""


def version_key(version: str) -> tuple[int, ...]:
    """``13.0.88`` -> (13, 0, 88): toolkit versions compare as numbers, not text."""
    return tuple(int(x) for x in version.split("."))


@dataclass(frozen=True, slots=True)
class Toolkit:
    """One CUDA toolkit: its nvcc targets with the macros nvcc defines for each (the device pass)."""

    version: str
    """As released: ``13.0.88``."""
    targets: dict[str, dict[str, int]]

    @property
    def release(self) -> str:
        """``13.0``: how people and version macros name it."""
        return ".".join(self.version.split(".")[:2])

    @property
    def macros(self) -> dict[str, int]:
        """What nvcc and the CUDA headers it includes define for this toolkit in both passes."""
        major, minor, build = version_key(self.version)
        return {
            "__CUDACC_VER_MAJOR__": major,
            "__CUDACC_VER_MINOR__": minor,
            "__CUDACC_VER_BUILD__": build,
            "CUDA_VERSION": major * 1000 + minor * 10,
            "CUDART_VERSION": major * 1000 + minor * 10,
        }


TOOLKIT_MACROS = frozenset(Toolkit("0.0.0", {}).macros)
"""Macros whose value is the toolkit's, not the target's."""


@cache
def toolkits() -> tuple[Toolkit, ...]:
    """Every toolkit the tables know, oldest first (``data/toolkits.json``, made from real compilers)."""
    raw = datafiles.read_json("toolkits.json")["toolkits"]
    out = [
        Toolkit(version, {name: {k: int(v) for k, v in m.items()} for name, m in entry["targets"].items()})
        for version, entry in raw.items()
    ]
    return tuple(sorted(out, key=lambda k: version_key(k.version)))


def chosen_toolkits(releases: Iterable[str] = ()) -> tuple[Toolkit, ...]:
    """The toolkits a scan evaluates, oldest first: those named (``12.8`` or ``12.8.93``), or
    every known one when none is. A release no table knows is a ValueError naming the known ones."""
    known = toolkits()
    wanted = [r.strip() for r in releases if r.strip()]
    if not wanted:
        return known
    by_name = {name: k for k in known for name in (k.release, k.version)}
    unknown = [r for r in wanted if r not in by_name]
    if unknown:
        raise ValueError(f"unknown CUDA toolkit {unknown[0]!r} (known: {', '.join(k.release for k in known)})")
    chosen = {by_name[r].version for r in wanted}
    return tuple(k for k in known if k.version in chosen)


def releases_of(chosen: Iterable[str] = ()) -> tuple[str, ...]:
    """The releases :func:`chosen_toolkits` names (every known one for an empty selection)."""
    return tuple(k.release for k in chosen_toolkits(chosen))


def nearest(building: Iterable[str], chosen: Iterable[str] = ()) -> str:
    """The toolkit that judges a capability no chosen one builds: of the releases that build it,
    the first after the newest chosen one (12.1 under 12.8: 12.9), else the last (sm_101, which
    13.0 renamed: 12.9)."""
    newest = version_key(releases_of(chosen)[-1])
    ordered = sorted(building, key=version_key)
    return next((r for r in ordered if version_key(r) > newest), ordered[-1])


def unbuilt(targets: Iterable[Target], chosen: Iterable[str] = ()) -> dict[str, str]:
    """Requested targets no chosen toolkit builds (12.1 under CUDA 12.8), each with the release
    that judges it instead (:func:`nearest`, as :class:`auditor.cuda.macros.Axis` does)."""
    kits = chosen_toolkits(chosen)
    out = {}
    for t in targets:
        if t.variants and not any(v in k.targets for k in kits for v in t.variants):
            building = [k.release for k in toolkits() if any(v in k.targets for v in t.variants)]
            out[t.label] = nearest(building, chosen)
    return out


@cache
def target_macros() -> dict[str, dict[str, int]]:
    """Macros (name -> integer value) that each nvcc target defines, as the newest toolkit that
    has the target defines them; ``host`` defines none. The target domain is every target of
    every known toolkit, so that code for an architecture one toolkit lacks is not dead."""
    table: dict[str, dict[str, int]] = {HOST: {}}
    for k in toolkits():
        table.update(k.targets)
    return table


@cache
def target_order() -> tuple[str, ...]:
    """All targets, ``host`` first, then nvcc targets by number and variant (plain, a, f)."""
    names = [n for n in target_macros() if n != HOST]
    return (HOST, *sorted(names, key=_target_key))


def device_targets() -> tuple[str, ...]:
    """Every target except ``host``."""
    return target_order()[1:]


@cache
def capabilities() -> tuple[str, ...]:
    """The device domain, ascending."""
    return tuple(datafiles.read_json("devices.json")["capabilities"])


@cache
def _generations() -> dict[str, str]:
    return {c: name for name, caps in datafiles.read_json("devices.json")["generations"].items() for c in caps}


def generation(capability: str) -> str:
    """The generation a capability's code is written for (``data/devices.json``): 10.x and 11.0
    share datacenter Blackwell's tcgen05, 12.x has its own. A capability not listed is its own."""
    return _generations().get(capability, capability)


def shared_memory_kb(capability: str) -> int | None:
    """The most shared memory a thread block may use on a capability, in KB; None where unknown."""
    return _shared_memory().get(capability)


@cache
def _shared_memory() -> dict[str, int]:
    table = datafiles.read_json("devices.json")["shared_memory_per_block_kb"]
    return {c: kb for c, kb in table.items() if isinstance(kb, int)}


def _target_key(name: str) -> tuple[int, int]:
    m = _TARGET_NAME.match(name)
    assert m, name
    return int(m.group(1)), "af".find(m.group(2)) + 1 if m.group(2) else 0


def capability_of(target: str) -> str:
    """``sm_120a`` -> ``12.0``; ``compute_90`` -> ``9.0``."""
    m = _TARGET_NAME.match(target)
    if not m:
        raise ValueError(f"not an nvcc target: {target!r}")
    number = int(m.group(1))
    return f"{number // 10}.{number % 10}"


def parse_target(text: str) -> Target:
    """Read ``12.0``, ``12.1``, ``120``, ``sm_120``, ``sm_120a`` as a requested target.

    A capability (``12.0``, ``120``, ``sm_120``) counts every nvcc variant of it; a variant
    with a suffix (``sm_120a``) counts only itself.
    """
    t = text.strip().lower()
    if re.fullmatch(r"\d+\.\d", t):
        cap = t
        label = t
        suffix = ""
    else:
        m = _TARGET_NAME.match(t)
        if not m:
            raise ValueError(f"unknown target {text!r} (use e.g. 12.0, 120, sm_120a)")
        cap = capability_of(t)
        suffix = m.group(2)
        label = f"sm_{m.group(1)}{suffix}" if suffix else cap
    variants = tuple(v for v in device_targets() if capability_of(v) == cap and (not suffix or v == label))
    if not variants and cap not in capabilities():
        raise ValueError(f"unknown target {text!r}: neither an nvcc target nor a known capability")
    return Target(label=label, capability=cap, variants=variants)


def parse_targets(text: str) -> tuple[Target, ...]:
    """A comma list of targets, in the order given, without repeats."""
    seen: dict[str, Target] = {}
    for part in text.split(","):
        if part.strip():
            t = parse_target(part)
            seen.setdefault(t.label, t)
    if not seen:
        raise ValueError("no target given")
    return tuple(seen.values())


DEFAULT_TARGETS = "12.0,12.1"


def admits_target(domain: str, admits: Iterable[str], target: Target) -> bool:
    """Whether a gate's admitted set lets ``target`` in.

    In the target domain a capability is admitted when any of its nvcc variants is; in the
    device domain the capability itself must be admitted.
    """
    admitted = admits if isinstance(admits, (tuple, list, frozenset, set)) else tuple(admits)
    if domain == Domain.TARGET:
        return any(v in admitted for v in target.variants)
    return target.capability in admitted


def admitting_variants(admits: Iterable[str], target: Target) -> tuple[str, ...]:
    """Which nvcc variants of ``target`` a target-domain set admits (for the report)."""
    admitted = set(admits)
    return tuple(v for v in target.variants if v in admitted)


def domain_order(domain: str) -> tuple[str, ...]:
    """The ordered universe of a domain."""
    return target_order() if domain == Domain.TARGET else capabilities()


def sort_archs(domain: str, archs: Iterable[str]) -> tuple[str, ...]:
    """Order a set of archs as its domain orders them (unknown names last, by name)."""
    order = {a: i for i, a in enumerate(domain_order(domain))}
    return tuple(sorted(set(archs), key=lambda a: (order.get(a, len(order)), a)))


def compact(domain: str, admits: Iterable[str]) -> str:
    """A short human form: runs of consecutive archs as ``first…last``; host last.

    ``sm_90, sm_90a, …, sm_110f`` -> ``sm_90…sm_110f``; the empty set -> ``none``.
    """
    universe = [a for a in domain_order(domain) if a != HOST]
    admitted = set(admits)
    if not admitted:
        return "none"
    if admitted >= set(domain_order(domain)):
        return "all"
    runs: list[list[str]] = []
    prev_in = False
    for a in universe:
        if a in admitted:
            if prev_in:
                runs[-1].append(a)
            else:
                runs.append([a])
        prev_in = a in admitted
    parts = [r[0] if len(r) == 1 else (f"{r[0]}, {r[1]}" if len(r) == 2 else f"{r[0]}…{r[-1]}") for r in runs]
    if HOST in admitted:
        parts.append(HOST)
    return ", ".join(parts)

"""The data table ``data/predicate-names.json``: what names and known APIs mean.

Architecture facts live there, not in code; this module only compiles them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import re2

from auditor import arch, datafiles


@dataclass(frozen=True, slots=True)
class Table:
    predicates: tuple[tuple[re.Pattern, dict], ...]
    sources: dict[str, str]
    """Capability sources: API name -> ``capability`` or ``properties``."""
    tests: dict[str, str]
    """Capability tests: API name -> comparison operator applied as ``device OP argument``."""
    parameters: re.Pattern
    """Names of parameters that hold a device capability (whole-name match)."""
    capability_types: frozenset[str]
    """Types of a device capability: a parameter annotated with one holds it, calling one makes it."""
    partial: frozenset[str]
    wrappers: frozenset[str]
    """Callables that return the function they wrap (``lru_cache(maxsize=1)(f)``)."""
    reject_calls: re.Pattern
    """Names of calls that turn the caller away (``skip``, ``_value_error_if``), whole-name match."""
    constants: dict
    """External dotted names with a known value on a CUDA build (``torch.version.hip``: None)."""
    returns: dict
    """External calls with a known result on an NVIDIA device (``torch.cuda.is_available``: True)."""
    paths: tuple[tuple[re.Pattern, dict], ...]
    """Patterns of architecture names in a file's path."""
    comments: tuple[tuple[re.Pattern, dict], ...]
    """Patterns of architecture names in a comment's text."""
    open_words: re.Pattern
    """Words that leave a comment's question open (a TODO)."""
    floor: re.Pattern
    """What a kernel needs from below (``sm90 or newer``): a statement of no scope."""
    measured: re.Pattern
    """A line that gives a measurement (``run 2-5 % faster``): the gate is a speed choice."""
    limit: re.Pattern
    """A line that gives a shared-memory size as a reason (``caps shared memory at 99 KB``)."""
    scope: re.Pattern
    """A comment line that states what exists (``the sm100 kernels exist for 10.x only``)."""
    scope_messages: re.Pattern
    """A rejection's message that does (``FA4 is only supported on 9.x, 10.x, or 11.x``)."""
    lists: tuple[dict, ...]
    tokens: Any
    """Bytes pattern (:func:`bytes_re2`): a file without a match holds no gate and no predicate
    definition."""
    toolkit: Toolkit
    relevant: Any
    """Bytes pattern (:func:`bytes_re2`): a definition without a match is not evaluated when
    called (``tokens`` or a toolkit read: a helper that only reads the toolkit decides a gate
    that calls it)."""


@dataclass(frozen=True, slots=True)
class Toolkit:
    """What reads the CUDA toolkit (``toolkit`` in the data): a coordinate beside the capability."""

    constants: dict[str, str]
    """External dotted names holding the toolkit's release, with its form (``string``)."""
    calls: dict[str, str]
    """Calls by bare name (leading underscores dropped) returning it, with its form
    (``version``: a comparable version; ``number``: 12090)."""
    tests: dict[str, str]
    """Calls by bare name comparing the toolkit with their argument: ``toolkit OP argument``."""
    compare: dict[str, str]
    """Calls by bare name comparing two versions: ``first OP second``."""
    parse: frozenset[str]
    """External constructors of a comparable version from a string (``packaging.version.Version``)."""


def bytes_re2(pattern: str) -> Any:
    """A bytes pattern in RE2, each byte a character (Latin-1), so that it matches where
    Python's bytes pattern does (ASCII ``\\d`` and ``\\b``): one pass over every Python file of
    an input, seven times faster than Python's (194 MB: 2.7 → 0.3 s)."""
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    return re2.compile(pattern.encode(), options)


@cache
def _raw() -> dict:
    return datafiles.read_json("predicate-names.json")


@cache
def table() -> Table:
    raw = _raw()
    api = raw["api"]
    tk = raw["toolkit"]
    return Table(
        predicates=tuple((re.compile(p["pattern"]), p) for p in raw["predicates"]),
        sources=dict(api["sources"]),
        tests=dict(api["tests"]),
        parameters=re.compile("|".join(f"(?:{p})" for p in api["parameters"]["names"])),
        capability_types=frozenset(api["parameters"]["types"]),
        partial=frozenset(api["partial"]),
        wrappers=frozenset(api["wrappers"]),
        reject_calls=re.compile("|".join(f"(?:{p})" for p in api["reject_calls"])),
        constants=dict(api["constants"]),
        returns=dict(api["returns"]),
        paths=tuple((re.compile(p["pattern"]), p) for p in raw["paths"]["patterns"]),
        comments=tuple((re.compile(p["pattern"]), p) for p in raw["comments"]["patterns"]),
        open_words=re.compile(r"\b(?:" + "|".join(map(re.escape, raw["comments"]["open"])) + r")\b"),
        floor=re.compile("|".join(f"(?:{p})" for p in raw["comments"]["floor"])),
        measured=re.compile("|".join(f"(?:{p})" for p in raw["comments"]["measured"])),
        limit=re.compile("|".join(f"(?:{p})" for p in raw["comments"]["limit"])),
        scope=re.compile("|".join(f"(?:{p})" for p in raw["comments"]["scope"])),
        scope_messages=re.compile(
            "|".join(f"(?:{p})" for p in raw["comments"]["scope"] + raw["comments"]["scope_messages"])
        ),
        lists=tuple(raw["lists"]),
        tokens=bytes_re2("|".join(raw["tokens"])),
        toolkit=Toolkit(
            constants=dict(tk["constants"]),
            calls=dict(tk["calls"]),
            tests=dict(tk["tests"]),
            compare=dict(tk["compare"]),
            parse=frozenset(tk["parse"]),
        ),
        relevant=bytes_re2("|".join(raw["tokens"] + tk["tokens"])),
    )


def rejects(name: str) -> bool:
    """Whether a call of this name turns the caller away (a rejection, like ``raise``)."""
    return table().reject_calls.fullmatch(name) is not None


@cache
def promised(name: str) -> frozenset[str] | None:
    """The capabilities a predicate's name promises (``is_sm100a_supported`` -> 10.0), or None."""
    for pattern, entry in table().predicates:
        m = pattern.match(name)
        if m:
            return _named(entry, m)
    return None


@cache
def build_keywords() -> tuple[str, ...]:
    """Keywords whose list says which architectures a JIT build compiles for
    (``supported_major_versions``): the ``lists`` entries marked ``builds``."""
    return tuple(e["keyword"] for e in table().lists if e.get("builds") and "keyword" in e)


def implementation_architectures(name: str) -> frozenset[str]:
    """The capabilities an implementation's name says it is written for: a class or function
    named like a path that names architectures (``FlashAttentionForwardSm90``, ``run_gemm_sm100``),
    not a predicate (``is_sm90_supported`` tests, it does not implement)."""
    if promised(name) is not None or _TESTS.match(name):
        return frozenset()
    return path_architectures(_CAMEL.sub("_", name))


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_TESTS = re.compile(r"_*(?:is|has|can|supports?|use|enable)_", re.I)


def comment_architectures(text: str) -> frozenset[str]:
    """The capabilities a comment names when it closes the question (``SM121 (GB10) is
    excluded on purpose``); none when it leaves it open (``TODO: enable on sm121``)."""
    lower = text.lower()
    if table().open_words.search(lower):
        return frozenset()
    found: set[str] = set()
    for pattern, entry in table().comments:
        for m in pattern.finditer(lower):
            found |= _named(entry, m)
    return frozenset(found)


def scope_statements(text: str, messages: bool = False) -> list[tuple[str, frozenset[str]]]:
    """The comment lines that state what exists (``# The SM100 mega kernels exist for 10.x
    only``), or with ``messages`` the rejection messages that do (``only supported on 9.x``), each
    with the capabilities it names; none from one that leaves the question open or states a floor."""
    out = []
    scope = table().scope_messages if messages else table().scope
    for line in text.split("\n"):
        lower = line.lower()
        if scope.search(lower) and not table().open_words.search(lower) and not table().floor.search(lower):
            named = comment_architectures(line) | _capability_list(lower)
            if named:
                out.append((line.strip().lstrip("#/* ").strip(), named))
    return out


def measurements(text: str) -> list[str]:
    """The lines that give a measurement (``those cells run 2-5 % faster``); none from one that
    leaves the question open (``TODO: benchmark on sm_121``)."""
    return _lines(table().measured, text)


def limits(text: str) -> list[str]:
    """The lines that give a shared-memory size as a reason (``sm_121 caps shared memory at 99 KB
    per block``); none from one that leaves the question open."""
    return _lines(table().limit, text)


def _lines(pattern: re.Pattern, text: str) -> list[str]:
    """The comment lines of a text the pattern finds, bare, but not one that leaves the question open."""
    return [
        line.strip().strip("\"'").lstrip("#/* ").strip()
        for line in text.split("\n")
        if pattern.search(line.lower()) and not table().open_words.search(line.lower())
    ]


def stated_architectures(text: str) -> frozenset[str]:
    """The capabilities statements of what exists name (``compute capability 9.x, 10.x``, ``SM100``)."""
    return frozenset().union(*(caps for _, caps in scope_statements(text, messages=True)))


_CAPABILITY_LIST = re.compile(r"\bcompute capabilit(?:y|ies)\b(.*)")
_CAPABILITY = re.compile(r"\b([1-9]\d?)\.(x|\d)\b")


def _capability_list(lower: str) -> frozenset[str]:
    """What a list after "compute capability" names (``compute capability 9.x, 10.x, or 11.x``,
    ``>= 8.0``): only there is ``10.x`` a capability rather than a release of something."""
    m = _CAPABILITY_LIST.search(lower)
    if m is None:
        return frozenset()
    named = _CAPABILITY.findall(m.group(1))
    return frozenset(
        c
        for c in arch.capabilities()
        for cap in [arch.Capability.parse(c)]
        if any(cap.major == int(major) and minor in ("x", str(cap.minor)) for major, minor in named)
    )


def path_architectures(path: str) -> frozenset[str]:
    """The capabilities a file's path names (``cutlass/gemm/kernel/sm90_gemm_tma.hpp`` -> 9.0)."""
    found: set[str] = set()
    for pattern, entry in table().paths:
        for m in pattern.finditer(path.lower()):
            found |= _named(entry, m)
    return frozenset(found)


def _named(entry: dict, m: re.Match) -> frozenset[str]:
    """What one match of a name pattern names: a capability, every capability of a major, or a list."""
    groups = (m.group(0), *m.groups())
    if "capabilities" in entry:
        caps = set(entry["capabilities"])
    elif "capability" in entry:
        caps = {entry["capability"].format(*groups)}
    else:
        major = entry["major"].format(*groups)
        caps = {c for c in arch.capabilities() if arch.Capability.parse(c).major == int(major)}
    return frozenset(c for c in caps if c in arch.capabilities())

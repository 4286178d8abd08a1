"""The data model: frozen records that flow one way, sources -> gates -> findings -> reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Word(str, Enum):
    """A word of a closed vocabulary: it compares, hashes, serialises and formats as its text, so
    reports stay plain strings, while a misspelt word fails where it is written."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


class GateKind(Word):
    """What shape of code a gate is (rules select on it with ``applies_to.kinds``)."""

    PREPROCESSOR = "preprocessor"
    """``#if``/``#elif`` on ``__CUDA_ARCH__`` and its family macros."""
    DERIVED_MACRO = "derived-macro"
    """``#if`` on a macro that headers define under arch conditions (CUTLASS ``*_ENABLED``)."""
    CCCL_TARGET = "cccl-target"
    """A CCCL ``NV_IF_TARGET``/``NV_DISPATCH_TARGET`` arm."""
    PREDICATE_CALL = "predicate-call"
    """A Python call of a capability predicate (``is_sm90_supported()``)."""
    PLATFORM_API = "platform-api"
    """A Python test through a platform API (``current_platform.has_device_capability(90)``)."""
    CAPABILITY_COMPARE = "capability-compare"
    """A Python comparison of a device capability (``major >= 9``)."""
    MAJOR_LIST = "major-list"
    """A list of capabilities or majors (``supported_major_versions=[9, 10]``)."""
    GENCODE_FLAGS = "gencode-flags"
    """nvcc flags or an arch list in Python (``-gencode=arch=compute_90a,code=sm_90a``)."""


class Language(Word):
    """How a gate's file is read."""

    PYTHON = "python"
    CUDA = "cuda"
    """C, C++, CUDA and their templates."""


class Domain(Word):
    """The finite universe a gate's condition is enumerated over."""

    TARGET = "target"
    """nvcc compile targets plus ``host``."""
    DEVICE = "device"
    """Device compute capabilities."""


class ResolvedBy(Word):
    """How a gate's meaning was found."""

    LITERAL = "literal"
    DEFINITION = "definition"
    """Through a definition in the input (a macro, a predicate's body)."""
    NAME = "name"
    """From a predicate's name alone (its definition is not in the input)."""


class Guards(Word):
    """What a gate's branch does, where that changes what it means."""

    TAKE = ""
    """The branch is the code the condition admits."""
    REJECT = "reject"
    """The branch is an exit (raise, a bare return): the code that matters is what it lets through."""


class Verdict(Word):
    """Whether the code a gate protects may run on one target."""

    ADMITS = "admits"
    EXCLUDES = "excludes"


class Classification(Word):
    """What an excluding gate guards."""

    NONE = ""
    """The gate excludes no requested target."""
    HARDWARE = "hardware"
    """Something the target lacks."""
    CONSERVATIVE = "conservative"
    """Only what the target has."""
    UNKNOWN = "unknown"
    """Nothing known either way."""


class Severity(Word):
    """How much a finding matters, lowest first (``--fail-on`` counts from one up)."""

    INFO = "info"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return SEVERITIES.index(self)


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file to scan, already read into memory."""

    path: str
    """Relative to the input root, '/'-separated."""
    data: bytes
    """The raw bytes; decoding is the extractor's job, so a bad encoding is reported there."""
    language: str
    """``python`` or ``cuda`` (C, C++, CUDA and their templates)."""
    input: str = ""
    """The input this file came from, as the user named it."""


@dataclass(frozen=True, slots=True)
class InputInfo:
    """One scanned input, as the JSON contract lists it."""

    path: str
    kind: str
    """``dir``, ``wheel``, ``sdist``, ``installed`` or ``git``."""


@dataclass(frozen=True, slots=True)
class FileError:
    """A file (or input) that could not be scanned, and why, in one line."""

    file: str
    reason: str
    input: str = ""


@dataclass(frozen=True, slots=True)
class Feature:
    """A token with known arch requirements found inside a gate's guarded region."""

    token: str
    """The text as found (``cudaGridDependencySynchronize``, ``wgmma.mma_async``)."""
    line: int
    feature: str
    """What it is, from the fact table."""
    min_arch: str
    on_target: tuple[tuple[str, str], ...] = ()
    """Per capability ``(12.0, yes|no|sm_120a-only)`` from the fact table."""
    notes: str = ""


@dataclass(frozen=True, slots=True)
class Resolution:
    """A derived macro or predicate that the evaluation went through, with where it is defined."""

    name: str
    file: str
    line: int
    detail: str = ""
    """How it was used: the definition's condition, or a predicate's admitted set."""


@dataclass(frozen=True, slots=True)
class Gate:
    """One architecture gate and its evaluation: the set of archs on which its code is taken."""

    id: str
    """Stable fingerprint: survives line moves (file, kind, context, normalised condition, ordinal)."""
    file: str
    line: int
    end_line: int
    language: Language
    kind: GateKind
    expression: str
    """The condition as written, on one line."""
    domain: Domain
    admits: tuple[str, ...]
    """Ordered as the domain orders it."""
    unknowns: tuple[str, ...] = ()
    resolved_by: ResolvedBy = ResolvedBy.LITERAL
    features: tuple[Feature, ...] = ()
    resolutions: tuple[Resolution, ...] = ()
    chain: tuple[str, ...] = ()
    """The effective condition, outermost first: enclosing branches, negated earlier siblings, own."""
    context: str = ""
    """The enclosing function or macro, when known."""
    guards: Guards = Guards.TAKE
    """:attr:`Guards.REJECT` when the gate guards an exit: Python ``if not ok: raise``, or a branch that only
    returns (nothing, None or False) while the function goes on."""
    surely: tuple[str, ...] = ()
    """For a rejection guard, where its condition is certainly true: the rejection is certain
    there even when other inputs (a toolkit version) decide it elsewhere."""
    name_implies: tuple[str, ...] = ()
    """Archs a predicate's name promises, when that differs from what it admits."""
    body_lines: tuple[int, int] = (0, 0)
    """First and last line of the guarded region (0, 0 when none)."""
    input: str = ""
    """The input the file came from."""
    package: str = ""
    """Top-level package or folder the file belongs to."""


SEVERITIES: tuple[Severity, ...] = tuple(Severity)
"""Finding severities, lowest first (``--fail-on`` counts from one of them up)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """Why a person should care about a gate: a rule that matched it."""

    rule: str
    severity: Severity
    gate: str
    file: str
    line: int
    message: str
    confidence: str = "high"
    classification: Classification = Classification.NONE
    input: str = ""


@dataclass(frozen=True, slots=True)
class AuditResult:
    """Everything a report needs; renderers are pure functions of this."""

    tool_version: str
    targets: tuple  # tuple[arch.Target, ...]
    inputs: tuple[InputInfo, ...]
    gates: tuple[Gate, ...]
    findings: tuple[Finding, ...] = ()
    errors: tuple[FileError, ...] = ()
    extras: tuple[tuple[str, object], ...] = field(default=())
    """Named additions from later stages (binary listings, suppressions) as (key, value)."""
    key: str = ""
    """Digest of all the result was computed from (the inputs' contents, the tool, the options),
    when every part of it came through the result cache; "" otherwise. Reports are cached by it."""

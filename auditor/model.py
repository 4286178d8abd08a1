"""The data model: frozen records that flow one way, sources -> gates -> findings -> reports."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from enum import Enum
from operator import attrgetter


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
    RUNTIME_CHECK = "runtime-check"
    """A host C++ test of the device's capability (``if (sm >= 100 && sm < 120)``, ``TORCH_CHECK(major >= 9)``)."""


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
    LOG = "log"
    """The branch only logs or warns: no code path depends on it."""
    DEFINE = "define"
    """The branch only defines macros or per-arch constants: its effect is where they are used."""
    TUNE = "tune"
    """The branch only sets tuning values (tile sizes, warps, splits): the same code runs either
    way, at another speed."""


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


class Reach(Word):
    """Whether the package can run a gate's code at all (:mod:`auditor.pipeline.reach`)."""

    REACHED = ""
    """Its own code, or vendored code it builds or imports."""
    UNINCLUDED = "unincluded"
    """A vendored header no translation unit or JIT source of the input includes."""
    UNIMPORTED = "unimported"
    """A module of a vendored Python tree that nothing outside the tree imports."""
    TEST = "test"
    """A test of the package (under ``tests/``, ``test_*.py``): it skips, the package does not."""
    UNBUILT = "unbuilt"
    """A source the package builds only for other architectures (a JIT spec's flags list 10.x
    alone), or a header only such sources include: no requested target compiles it."""
    UNCALLED = "uncalled"
    """A function of reached vendored code that no file able to see its definition calls
    (:mod:`auditor.pipeline.calls`)."""
    PROGRAM = "program"
    """A C/C++ source of a Python package with a ``main()`` of its own (a test or benchmark
    driver), or a header only such sources include: the package loads a library, not a program."""


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
class Target:
    """A target the user asked about: a capability, or one exact nvcc variant of it."""

    label: str
    """What the user wrote, normalised: ``12.0`` or ``sm_120a``."""
    capability: str
    """The device capability it runs on, ``12.0``."""
    variants: tuple[str, ...]
    """nvcc targets that count for it: all of ``sm_120, sm_120a, sm_120f`` for ``12.0``."""


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
    """Something with known arch requirements used inside a gate's guarded region."""

    token: str
    """The text as found: an identifier (``cudaGridDependencySynchronize``) or a PTX opcode with its qualifiers."""
    line: int
    feature: str
    """What it is: the curated row's name, or the PTX variant that matched."""
    min_arch: str
    on_target: tuple[tuple[str, str], ...] = ()
    """Per capability ``(12.0, yes|no|sm_120a-only|unknown)``."""
    notes: str = ""
    source: str = ""
    """For a PTX instruction, the ptxas fact it rests on (toolkit, variant, accepting targets, a rejection's error);
    a curated row's reference is in ``data/api-facts.csv``."""


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
    toolkits: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """Targets that only some CUDA toolkits admit, each with the releases that do (``sm_101f``
    with ``12.9``; ``sm_120`` with ``13.0 … 13.5`` under a ``__CUDACC_VER_MAJOR__ >= 13`` test).
    ``admits`` holds the newest toolkit's answer for each target."""
    input: str = ""
    """The input the file came from."""
    package: str = ""
    """Top-level package or folder the file belongs to."""
    extensions: tuple[str, ...] = ()
    """Shipped binaries (paths) the guarded code reaches: the module it imports, the ``torch.ops``
    namespace it calls. The binary rules judge only these."""
    prebuilt_elsewhere: tuple[str, ...] = ()
    """Top-level modules of packages with prebuilt kernels that the guarded code calls and the
    scan does not hold (``sgl_kernel``): their build, not this gate, decides whether a
    turned-away target could run that code."""
    builds: tuple[str, ...] = ()
    """Arch- and family-specific build targets (``sm_120a``) the gate's file names, or the code it
    guards compiles for through what it calls (a JIT spec with ``sm120a_nvcc_flags``): where the
    package pins the build of the code behind the gate (:func:`auditor.facts.binaries.with_extensions`)."""
    emits: tuple[str, ...] = ()
    """(C/C++) What the tabled CUDA intrinsic calls in the guarded code compile to, as ``target
    instruction`` (``sm_121a cvt.rp.satfinite.ue8m0x2.f32``; :mod:`auditor.facts.lowering`)."""
    platform: tuple[str, ...] = ()
    """System features the code behind the gate needs that no system of some requested target
    has, each as ``fact-id description`` (``nvlink-multicast NVLink multicast …: `cuMulticastCreate`
    (flashinfer/comm/mixed_comm.py:691)``; :mod:`auditor.pipeline.platforms`)."""
    reach: Reach = Reach.REACHED
    """Unreached code (a vendored header nothing includes) is listed, not judged by the rules."""
    built_by: tuple[str, ...] = ()
    """Where the build flags are (``flashinfer/jit/comm.py:60``) when only sources those flags
    build for other architectures reach the gate: a requested target meets it once they are widened."""
    remarks: tuple[str, ...] = ()
    """Capabilities the comments beside the gate name (``# SM121 (GB10) is excluded on purpose``)
    when they close the question: the author wrote about that part (:mod:`auditor.facts.remarks`)."""
    settled: tuple[str, ...] = ()
    """Capabilities the branch turns away even were its own capability tests to pass: a value
    chosen upstream by the arch (``fa_version == 4`` where 12.x is always given FA2) rules them
    out, so widening this test gives them nothing; the decision is where the value is chosen."""
    scope: str = ""
    """A comment line beside the gate or in the predicate it reads, or a rejection's message,
    that states what exists for a part it lets through (``The SM100 mega kernels exist for 10.x
    only``): the gate restates the kernels' scope, so widening it alone gives a turned-away
    target nothing to run (:mod:`auditor.facts.remarks`)."""
    measured: str = ""
    """A comment line beside the gate, in its function's docstring or beside the flag or
    predicate it reads, that gives a measurement (``those k ~ 1000 cells run 2-5 % faster``,
    ``no graph-replay A/B recorded``): the gate is a speed choice made on the parts it names,
    not a kernel switched off elsewhere (:mod:`auditor.facts.remarks`)."""
    limit: str = ""
    """A comment line beside the gate or beside what it reads that gives a shared-memory size as
    the reason for the setting (``sm_121 caps shared memory at 99 KB per block``): a fact about
    every part with that size, not about the part it names (:mod:`auditor.facts.remarks`)."""


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
    also: tuple[tuple[str, int], ...] = ()
    """Other sites of the same root cause (file, line), folded into this finding."""
    root: str = ""
    """The definition the finding's sites share (``name (file:line)``), when that is the cause."""
    vendored: str = ""
    """The vendored tree the file belongs to (``cutlass``, ``third_party``); "" for the package's own code."""
    decision: str = ""
    """For a rule that judges routes (``routes_away``), the decision the gate is a branch of (its
    first branch's gate id): the headline counts decisions, not lines."""


class Loadability(Word):
    """Whether a device can run a binary's GPU code, best first (``rank`` orders them)."""

    NATIVE = "native"
    """Some SASS runs on it as is."""
    JIT = "jit"
    """Only PTX fits: the driver compiles it at load time."""
    NONE = "none"
    """Nothing in the binary runs on it."""

    @property
    def rank(self) -> int:
        return LOADABILITIES.index(self)


LOADABILITIES: tuple[Loadability, ...] = tuple(reversed(Loadability))
"""Worst first, so that a better verdict ranks higher."""


@dataclass(frozen=True, slots=True)
class EmbeddedCode:
    """One kind of GPU code found in a binary (identical entries are listed once)."""

    kind: str
    """``sass`` or ``ptx``."""
    target: str
    """``sm_90a``, ``sm_120``; ``compute_120f`` for PTX."""
    compressed: bool
    note: str = ""
    """What could not be determined, or where the entry came from, when that matters."""


@dataclass(frozen=True, slots=True)
class Binary:
    """A shared object of an input: the GPU code it embeds and, per target, whether it loads."""

    path: str
    package: str
    input: str
    entries: tuple[EmbeddedCode, ...]
    verdicts: tuple[tuple[str, Loadability], ...]
    """(target label, loadability) in the order the targets were asked; empty without GPU code."""


@dataclass(frozen=True, slots=True)
class RuleInfo:
    """What reports say about a rule (its id, texts and references), not how it matches."""

    id: str
    name: str
    severity: Severity
    message: str
    rationale: str
    remediation: str
    references: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Excerpt:
    """The source lines of one file a report shows (renderers read no files)."""

    input: str
    file: str
    lines: tuple[tuple[int, str], ...]
    """(line number, text), ascending: only the lines of :func:`excerpt_windows` of its gates."""


def held_once(gates: Iterable[Gate]) -> list[Gate]:
    """The gates, each field's equal strings and tuples held as one object. Thousands of gates
    repeat a few features, toolkits and paths: BIG's 38,824 judged C/CUDA gates take 46 MB so,
    150 MB otherwise, and as little to pickle (with the memo) as to hold. Enum members are left
    alone: a member equals its value as a string, and must stay a member."""
    pool: dict = {}
    one = pool.setdefault
    values = attrgetter(*(f.name for f in fields(Gate)))
    return [Gate(*[one(v, v) if type(v) in (str, tuple) else v for v in values(g)]) for g in gates]


EXCERPT_BEFORE = 1
"""Lines of context shown above a gate."""
EXCERPT_HEAD = 6
"""Lines of the guarded region shown after the condition."""
EXCERPT_FEATURES = 4
"""Features whose lines are shown in the excerpt."""


def excerpt_windows(gate: Gate) -> list[tuple[int, int]]:
    """Line ranges a gate's excerpt shows: context, condition, head and end of the region, features.

    Here rather than in a renderer: the scan reads these lines while it holds the files."""
    first, last = gate.body_lines
    spans = [(gate.line - EXCERPT_BEFORE, max(gate.end_line, gate.line))]
    if last >= first > 0:
        head_end = min(last, gate.end_line + EXCERPT_HEAD)
        spans.append((first, head_end))
        spans.append((last, last + 1) if last > head_end else (last + 1, last + 1))
    else:
        spans.append((gate.end_line + 1, gate.end_line + EXCERPT_BEFORE))
    spans += [(f.line, f.line) for f in gate.features[:EXCERPT_FEATURES]]
    runs: list[list[int]] = []
    for n in sorted({n for a, b in spans for n in range(max(a, 1), b + 1)}):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return [(a, b) for a, b in runs]


@dataclass(frozen=True, slots=True)
class AuditResult:
    """Everything a report needs; renderers are pure functions of this."""

    tool_version: str
    targets: tuple[Target, ...]
    """The requested targets, in the order asked."""
    inputs: tuple[InputInfo, ...]
    gates: tuple[Gate, ...]
    findings: tuple[Finding, ...] = ()
    errors: tuple[FileError, ...] = ()
    binaries: tuple[Binary, ...] = ()
    """Shared objects, by input and path."""
    failed_inputs: tuple[str, ...] = ()
    """Inputs that could not be read at all (each also has an error without a file)."""
    rules: tuple[RuleInfo, ...] = ()
    """The rules the scan applied, for the reports that describe them."""
    excerpts: tuple[Excerpt, ...] = ()
    """Source lines for the HTML report, when the scan was asked to gather them."""
    link_base: str = ""
    """Base URL that file links in Markdown point under ("" for no links)."""
    key: str = ""
    """Digest of all the result was computed from (the inputs' contents, the tool, the options),
    when every part of it came through the result cache; "" otherwise. Reports are cached by it."""
    toolkits: tuple[str, ...] = ()
    """The CUDA toolkits the scan evaluated, oldest first (``12.8``, ``13.0``); empty: every known one."""


class Status(Word):
    """What happened to a gate between the two sides of a diff."""

    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


class How(Word):
    """How a matched gate changed."""

    NONE = ""
    """Not a change (added and removed gates)."""
    ADMITS = "admits"
    """Same condition, another admitted set (a definition it resolves through changed)."""
    REWRITTEN = "rewritten"
    """The condition itself was edited in place."""


@dataclass(frozen=True, slots=True)
class VerdictDelta:
    """One requested target's verdict before and after."""

    target: str
    """The target's label (``12.0``, ``sm_120a``)."""
    before: Verdict | None
    """None when the gate did not exist (its code ran everywhere)."""
    after: Verdict | None
    """Likewise after the change; None when the gate is gone."""

    @property
    def newly_excludes(self) -> bool:
        """The target is turned away now and was not before."""
        return self.after == Verdict.EXCLUDES and self.before != Verdict.EXCLUDES

    @property
    def now_admits(self) -> bool:
        """The target was turned away before and a gate that still stands lets it in now (a
        removed gate admits nothing: its code may be gone with it)."""
        return self.before == Verdict.EXCLUDES and self.after == Verdict.ADMITS

    @property
    def phrase(self) -> str:
        """``newly excludes 12.1``, ``now admits 12.0``, or ``""`` when the verdict holds."""
        if self.newly_excludes:
            return f"newly excludes {self.target}"
        if self.now_admits:
            return f"now admits {self.target}"
        return ""


@dataclass(frozen=True, slots=True)
class GateChange:
    """One gate added, removed, or changed between the two sides."""

    status: Status
    old: Gate | None
    """The gate before (None when added)."""
    new: Gate | None
    """The gate after (None when removed)."""
    how: How = How.NONE
    verdicts: tuple[VerdictDelta, ...] = ()
    """Per requested target, in the order asked."""
    definition: str = ""
    """Key of the definition change this gate belongs to (a condition inside a predicate)."""
    causes: tuple[str, ...] = ()
    """Keys of the changed definitions this gate resolves through."""
    findings: tuple[Finding, ...] = ()
    """Findings on the new gate that the old one did not have."""
    resolved: tuple[Finding, ...] = ()
    """Findings on the old gate that the new one (or its absence) no longer has."""

    @property
    def gate(self) -> Gate:
        """The gate as it stands after the change (before, when removed)."""
        gate = self.new or self.old
        assert gate is not None
        return gate

    @property
    def delta(self) -> tuple[str, ...]:
        """The verdict changes in words."""
        return tuple(v.phrase for v in self.verdicts if v.phrase)

    @property
    def newly_excludes(self) -> bool:
        """Some requested target is turned away by this change."""
        return any(v.newly_excludes for v in self.verdicts)

    @property
    def explained(self) -> bool:
        """Shown under a definition change rather than on its own."""
        return bool(self.definition) or (self.how == How.ADMITS and bool(self.causes))


@dataclass(frozen=True, slots=True)
class DefinitionChange:
    """A predicate or derived macro whose meaning changed: the root cause of call-site changes."""

    name: str
    file: str
    """Where it is defined after the change (before, when it is gone)."""
    old_line: int
    new_line: int
    old_file: str = ""
    """Set when the name resolved to a definition in another file before (a macro defined twice)."""
    old_detail: str = ""
    """The definition as the scan recorded it (a macro's defining condition, a ``def`` line)."""
    new_detail: str = ""
    body: tuple[GateChange, ...] = ()
    """Changes among the conditions inside the definition (Python predicates)."""
    call_sites: tuple[GateChange, ...] = ()
    """Gates added, removed or changed that resolve through it."""
    unchanged_call_sites: int = 0
    """How many gates resolve through it on both sides and admit the same set."""

    @property
    def key(self) -> str:
        """Identity within one diff: ``name@file``."""
        return f"{self.name}@{self.file}"


@dataclass(frozen=True, slots=True)
class DiffResult:
    """Everything a diff report needs; renderers are pure functions of this."""

    tool_version: str
    targets: tuple[Target, ...]
    """The requested targets, in the order asked."""
    old_inputs: tuple[InputInfo, ...]
    new_inputs: tuple[InputInfo, ...]
    changes: tuple[GateChange, ...]
    """Sorted by (file, line, status)."""
    definitions: tuple[DefinitionChange, ...] = ()
    unchanged: int = 0
    """Gates matched on both sides with the same admitted set."""
    errors: tuple[FileError, ...] = ()
    """Files either side could not scan (``input`` tells which)."""
    mode: str = "diff"
    """``diff`` (two releases) or ``pr`` (two revisions of a pull request)."""
    rules: tuple[RuleInfo, ...] = ()
    """The rules the scans applied (SARIF describes them)."""
    toolkits: tuple[str, ...] = ()
    """The CUDA toolkits both scans evaluated, oldest first; empty: every known one."""

    @property
    def findings(self) -> tuple[Finding, ...]:
        """New findings on gates that newly exclude a target (what ``--fail-on`` and SARIF see)."""
        return tuple(f for c in self.changes if c.newly_excludes for f in c.findings)

    def by_status(self, status: Status, explained: bool = False) -> tuple[GateChange, ...]:
        """Changes of one status; without ``explained``, those shown under a definition are left out."""
        return tuple(c for c in self.changes if c.status == status and (explained or not c.explained))

"""Which C/CUDA sources the package builds only for other architectures.

A JIT spec names its sources and its flags in one function::

    def gen_softmax_module():
        flags = get_nvcc_flags_list(supported_major_versions=[10])
        return gen_jit_spec("softmax", [CSRC / "softmax.cu"], extra_cuda_cflags=flags)

The flags build ``softmax.cu`` for one generation (datacenter Blackwell): code written for
it. A gate inside it, or in a header only such sources include, decides nothing on 12.x, which
never compiles it; widening the gate changes nothing there. A program compiled at run time
(NVRTC) with a fixed ``--gpu-architecture=sm_90a`` is the same, and so is a JSON build manifest
shipped beside the sources (``{"libraries": [{"gencode": "-gencode=arch=compute_103a,…",
"sources": ["csrc/k.cu"]}]}``), or a Python call that declares one in its literal arguments
(``CakeProgram(sources=("k.cu",), targets=("sm_100a", "sm_103a"))``). Flags of several generations
that leave 12.x out (``[9, 10]``) are a list to judge where it is written, and the gates behind
it are what 12.x meets once the list is widened: those stay judged. A source that the package
names anywhere else (another function, a module-level list) may be built for any device.
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from auditor import arch
from auditor.cuda.includes import Lookup
from auditor.facts import names
from auditor.facts.binaries import build_targets
from auditor.model import Gate, GateKind, Target
from auditor.python.symbols import parser
from auditor.sources.files import BUILD_TARGET, quoted_path
from auditor.verdicts import capabilities_of

_SOURCE = re.compile(quoted_path("cu", "cpp", "cc", "cxx", "c").encode())
"""A C/CUDA source file named in a Python string (``"softmax.cu"``, ``f"moe_{arch}.cu"``)."""


_SOURCE_END = re.compile(rb"\.(?:cu|cpp|cc|cxx|c)[\"']")
"""Where :data:`_SOURCE` can end: found first, so that only the lines holding one are searched."""


def _sources_named(data: bytes) -> list[tuple[int, str]]:
    """Each C/CUDA source name a Python file writes, with its line. A name never spans lines, so
    only the lines where one can end are searched (a tenth of the time of searching the file)."""
    out: list[tuple[int, str]] = []
    pos = counted = 0
    line = 1
    while (m := _SOURCE_END.search(data, pos)) is not None:
        start = data.rfind(b"\n", 0, m.start()) + 1
        pos = len(data) if (end := data.find(b"\n", m.end())) < 0 else end
        line += data.count(b"\n", counted, start)
        counted = start
        out += [(line, n.group(1).decode("utf-8", "replace")) for n in _SOURCE.finditer(data, start, pos)]
    return out


@dataclass(frozen=True, slots=True)
class Restrictions:
    """What the package's JIT specs say about where its sources are built."""

    unbuilt: frozenset[str] = frozenset()
    """Source names built for one generation that no requested target is of: not judged."""
    behind: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Source names built by flags of several generations that leave every requested target out,
    with where those flags are (``flashinfer/jit/comm.py:60``): judged, and what a target meets
    once those flags are widened."""
    pinned: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Source names whose every naming Python module names arch- or family-specific build
    targets (``sm120a_nvcc_flags``), with those targets: what its host checks agree with."""


def restrictions(
    gates: Iterable[Gate],
    python: Mapping[str, bytes],
    targets: Sequence[Target],
    manifests: Mapping[str, bytes] | None = None,
) -> Restrictions:
    """Per C/CUDA source name that the package's Python writes only inside functions whose build
    flags serve no requested target (``{name}`` placeholders kept), or that its build manifests
    build for one generation no target is of, how it is restricted. ``python``: the package's
    own modules (path -> bytes); ``manifests``: its JSON build manifests."""
    flags: dict[str, list[Gate]] = {}
    for g in gates:
        if is_build_flag(g):
            flags.setdefault(g.file, []).append(g)
    one: set[str] = set()
    several: dict[str, set[str]] = {}
    anywhere: set[str] = set()
    pins: dict[str, set[str]] = {}
    unpinned: set[str] = set()
    for path, data in python.items():
        found = _sources_named(data)
        if not found:
            continue
        spans = _unserving(data, flags.get(path, []), targets)
        declared = _declared(data)
        pinned = build_targets(data.decode("utf-8", "replace"))
        for _, name in found:
            if pinned:
                pins.setdefault(name, set()).update(pinned)
            else:
                unpinned.add(name)
        for line, name in found:
            span = next(((caps, sites) for (a, b), caps, sites in spans if a <= line <= b), None)
            built = next((built[name] for a, b, built in declared if a <= line <= b and built.get(name)), None)
            if built is not None:
                (
                    one if len({arch.generation(c) for c in built}) == 1 and not _serves(built, targets) else anywhere
                ).add(name)
            elif span is None:
                anywhere.add(name)
            elif len({arch.generation(c) for c in span[0]}) == 1:
                one.add(name)
            else:
                several.setdefault(name, set()).update(span[1])
    for path, data in (manifests or {}).items():
        for name, caps in manifest_builds(path, data).items():
            if not caps:
                anywhere.add(name)
            elif len({arch.generation(c) for c in caps}) == 1 and not _serves(caps, targets):
                one.add(name)
    return Restrictions(
        frozenset(one - anywhere - set(several)),
        {n: tuple(sorted(sites)) for n, sites in several.items() if n not in anywhere},
        {n: tuple(sorted(t)) for n, t in pins.items() if n not in unpinned},
    )


_MANIFEST_TARGET = re.compile(BUILD_TARGET)
"""A build target a manifest names: ``sm_103a``, ``-gencode=arch=compute_90,code=sm_90``."""
_MANIFEST_TARGET_BYTES = re.compile(_MANIFEST_TARGET.pattern.encode())
_MANIFEST_SOURCE = re.compile(r"[^\s\"'{}]+\.(?:cu|cpp|cc|cxx|c)")


def manifest_builds(path: str, data: bytes) -> dict[str, set[str]]:
    """Per C/CUDA source a JSON build manifest names (as a path of the input, beside the
    manifest), the capabilities it is built for: those named by the innermost object around it
    whose own values name build targets (a library entry's ``"gencode"`` or ``"arch"``); none
    when no object does. A manifest that does not parse says nothing."""
    try:
        doc = json.loads(data)
    except ValueError:
        return {}
    here = posixpath.dirname(path)
    return {posixpath.normpath(posixpath.join(here, name)): caps for name, caps in _built_for(doc).items()}


def _declared(data: bytes) -> list[tuple[int, int, dict[str, set[str]]]]:
    """The calls of a Python module that declare a build in their literal arguments, as a
    manifest entry does (``CakeProgram(sources=("k.cu",), targets=("sm_100a", "sm_103a"))``):
    first and last line, and what each source they name is built for."""
    if not (_SOURCE.search(data) and _MANIFEST_TARGET_BYTES.search(data)):
        return []
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            literal = {k.arg or "": _literal(k.value) for k in node.keywords} | {"": [_literal(a) for a in node.args]}
            built = _built_for(literal)
            if any(built.values()):
                out.append((node.lineno, node.end_lineno or node.lineno, built))
    return out


def _literal(node: ast.expr) -> object:
    """A literal argument's value (strings, tuples and lists of them); None for anything else."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return list(value) if isinstance(value, tuple) else value


def _built_for(doc: object) -> dict[str, set[str]]:
    """Per source name a document names, the capabilities the innermost object around it whose
    own values name build targets builds it for."""
    found: dict[str, set[str]] = {}
    work: list[tuple[object, frozenset[str]]] = [(doc, frozenset())]
    while work:
        node, caps = work.pop()
        if isinstance(node, dict):
            own = " ".join(_strings(node.values()))
            caps = frozenset(arch.capability_of(f"sm_{m.group(1)}") for m in _MANIFEST_TARGET.finditer(own)) or caps
            work += [(v, caps) for v in node.values()]
        elif isinstance(node, list):
            work += [(v, caps) for v in node]
        elif isinstance(node, str) and _MANIFEST_SOURCE.fullmatch(node):
            found.setdefault(node, set()).update(caps)
    return found


def _strings(values: Iterable[object]) -> Iterator[str]:
    """The strings among an object's values, and in its lists of strings (not deeper)."""
    for v in values:
        if isinstance(v, str):
            yield v
        elif isinstance(v, list):
            yield from (x for x in v if isinstance(x, str))


def with_pins(gates: list[Gate], pinned: Mapping[str, tuple[str, ...]]) -> list[Gate]:
    """Host checks of a source whose JIT specs pin its build (``sm120a_nvcc_flags``) carry those
    targets (``Gate.builds``): a ``major == 12 && minor == 0`` check there agrees with it. A
    source name finds its file as a JIT source's ``#include`` of it would (:meth:`.includes.Lookup.named`)."""
    files = sorted({g.file for g in gates if g.kind == GateKind.RUNTIME_CHECK})
    if not pinned or not files:
        return gates
    names = sorted(pinned)
    lookup = Lookup(files)
    found = [lookup.named([n]) for n in names]
    builds = {files[i]: pinned[name] for name, hits in zip(names, found) for i in hits}
    return [
        replace(g, builds=builds[g.file]) if g.kind == GateKind.RUNTIME_CHECK and g.file in builds else g for g in gates
    ]


def serves(fixed: Iterable[str], targets: Sequence[Target]) -> bool:
    """Whether a C file's run-time compiled programs may be built for a requested target: no
    fixed architecture in its compile options (``FileScan.compiles_for``), architectures of
    several generations (a list to judge where it is written), or one of a target's generation."""
    built = {arch.capability_of(t) for t in fixed if t in arch.target_order()}
    return not built or len({arch.generation(c) for c in built}) > 1 or _serves(built, targets)


def _serves(built: set[str], targets: Sequence[Target]) -> bool:
    """Whether a build serves a target: one of its target's generation."""
    return any(arch.generation(c) == arch.generation(t.capability) for c in built for t in targets)


def is_build_flag(g: Gate) -> bool:
    """A build flag: an nvcc flag or arch list, or a call's list of majors to build for."""
    return g.kind == GateKind.GENCODE_FLAGS or (
        g.kind == GateKind.MAJOR_LIST and any(k in g.expression for k in names.build_keywords())
    )


def _unserving(
    data: bytes, flags: list[Gate], targets: Sequence[Target]
) -> list[tuple[tuple[int, int], set[str], set[str]]]:
    """The functions whose build flags (their innermost function's) serve no target: line span,
    the capabilities built, where the flags are."""
    if not flags:
        return []
    functions: list[tuple[int, int]] = []
    stack = [parser().parse(data).root_node]
    while stack:
        n = stack.pop()
        if n.type == "function_definition":
            functions.append((n.start_point[0] + 1, n.end_point[0] + 1))
        stack.extend(n.children)
    built: dict[tuple[int, int], tuple[set[str], set[str]]] = {}
    for g in flags:
        around = [f for f in functions if f[0] <= g.line <= f[1]]
        if around:
            caps, sites = built.setdefault(max(around), (set(), set()))
            caps.update(capabilities_of(g))
            sites.add(f"{g.file}:{g.line}")
    return [(span, caps, sites) for span, (caps, sites) in built.items() if caps and not _serves(caps, targets)]

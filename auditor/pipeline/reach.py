"""Which vendored code the package can reach: the copies it builds or imports, not the rest.

Packages ship whole trees of other projects (CUTLASS with its CuTe-DSL Python, DeepGEMM,
TensorRT-LLM kernels) of which they use a part. A gate in a header that no translation unit
includes, or in a module that nothing imports, decides nothing on any device: reporting it
sends a user after code that never runs. Reach is decided over the whole input:

- C/C++: from every translation unit (a source file, a template) and every ``#include`` a
  Python file of the package's own code writes into a JIT source, along the include graph
  (:func:`auditor.cuda.includes.resolve`) and the includes reached C files write into the
  programs they compile at run time (NVRTC); ``{name}`` placeholders match any file name. A
  vendored tree that ships a shared object of its own is reached whole: its extension may
  compile its headers at run time.
- Python: a vendored module is imported when the package's own modules import it, directly
  or through vendored modules they import (absolute names from the input root, relative ones
  from the importing file; importing ``a.b`` imports ``a`` too); a reached vendored module that
  touches ``sys.path`` reaches every module of its folder.

Only vendored files (``data/vendored.json``) can be unreached: the package's own headers
and modules are its interface, used from outside the input. One exception: in a Python package a
C/C++ source with a ``main()`` of its own is a test or benchmark driver (TensorRT-LLM's
standalone fmha runner), not the library the package loads; it and what only it includes are
:attr:`Reach.PROGRAM`. Tests are not judged either: a
test that skips on 12.x decides nothing for the package (:func:`in_tests`). An input with no
translation unit and no JIT include says nothing about its headers: they all count as reached.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from auditor.cuda.includes import Lookup
from auditor.facts.code import line_matches
from auditor.model import Reach
from auditor.rules.roots import vendored
from auditor.sources.files import C_EXTENSIONS, TEMPLATE_EXTENSIONS, suffix_of

HEADERS = frozenset({".h", ".hpp", ".hh", ".cuh", ".inl"})
"""C extensions that are included, not compiled; every other C file or template starts a unit."""
_MAIN = re.compile(rb"^[ \t]*(?:int|auto|void)[ \t]+main[ \t]*\(", re.M)
"""A ``main()`` defined at the start of a line: the file is a program of its own."""
_JIT_INCLUDE = re.compile(rb"#\s*include\s*[<\"]([^<>\"\s]+)[>\"]")
_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[\w., \t]+)|import[ \t]+([\w., \t]+))", re.M
)


def headers(
    paths: Sequence[str],
    includes: Sequence[Sequence[str]],
    python: Iterable[tuple[str, bytes]],
    read: Callable[[str], bytes] = lambda _: b"",
    binaries: Iterable[str] = (),
    unbuilt: Iterable[str] = (),
    fixed: Iterable[str] = (),
    behind: Mapping[str, tuple[str, ...]] | None = None,
) -> Reached:
    """Per unreached vendored C/C++ file of ``paths`` (with their ``#include`` names), why:
    :attr:`Reach.UNINCLUDED`. ``python``: (path, bytes) of the package's own Python files, for
    the includes their JIT sources write; ``read`` gives a C file's bytes, for the includes its
    own JIT sources write in string literals (NVRTC programs); ``binaries``: the shared objects
    of the input, each of which may compile the headers of its vendored tree at run time
    (DeepGEMM's extension does).

    ``unbuilt``: the source names the package builds only for other architectures
    (:attr:`.builds.Restrictions.unbuilt`); ``fixed`` the C files whose run-time compiled programs
    are built for no requested target (:func:`.builds.serves`): what their strings include
    (raw strings too, which the directive scan takes for includes of the file) is built for that
    architecture alone. What only those reach is :attr:`Reach.UNBUILT`, the package's own code
    too. ``behind``: source names built only by flags that leave the targets out, with where
    the flags are (:attr:`.builds.Restrictions.behind`); what only those reach is judged, with
    those flags named (:attr:`Reached.behind`). :attr:`Reached.sight` says which files can see
    each file's definitions (:mod:`.calls`)."""
    lookup = Lookup(paths)
    edges = [lookup.of(i, names) for i, names in enumerate(includes)]
    written_by: dict[int, set[int]] = {}  # per C file, the files its run-time programs include
    others = set(_named(lookup, set(unbuilt))) if unbuilt else set()
    compiled = set(fixed)
    stuck = {i for i, p in enumerate(paths) if p in compiled}
    held = {i: lookup.of(i, sorted(_string_includes(read(paths[i])))) for i in sorted(stuck)}
    for i in stuck:
        written_by.setdefault(i, set()).update(held[i])
        others |= set(held[i])
        edges[i] = [j for j in edges[i] if j not in held[i]]
    own = [(path, _jit_includes(data)) for path, data in python if not vendored(path)[0]]
    drivers = {i for i, p in enumerate(paths) if own and _unit(p) and i not in others and _program(read(p))}
    roots = [i for i, p in enumerate(paths) if _unit(p) and i not in others and i not in drivers]
    jit = {name for _, names in own for name in names}
    roots += _named(lookup, {n for n in jit if "{" not in n})
    patterns = _named(lookup, {n for n in jit if "{" in n})  # ``#include "{name}"``: any file but the restricted
    if not roots and not patterns and not others:
        return Reached()
    built = {_inner(b) for b in binaries} - {""}
    whole = [i for i, p in enumerate(paths) if any(p.startswith(t + "/") for t in built)]
    roots += whole
    seen = closure(roots + [i for i in patterns if i not in others], edges)
    done: set[int] = set()
    while any(vendored(p)[0] for i, p in enumerate(paths) if i not in seen):
        todo = sorted(seen - done)
        if not todo:
            break
        done |= set(todo)
        programs = [i for i in todo if i not in stuck]
        includes_of = {
            i: sorted(_jit_includes(read(paths[i])) - set(includes[i])) for i in programs
        }  # one file's bytes at a time
        extra = {i: lookup.of(i, names) for i, names in includes_of.items()}
        for i in programs:
            if extra[i]:
                written_by.setdefault(i, set()).update(extra[i])
        roots += [j for i in programs for j in extra[i]]
        again = closure(roots + [i for i in patterns if i not in others], edges)
        if again == seen:
            break
        seen = again
    elsewhere = closure(others, edges) - seen
    alone = closure(drivers, edges) - seen - elsewhere
    reach = (
        {p: Reach.UNBUILT for i, p in enumerate(paths) if i in elsewhere}
        | {p: Reach.PROGRAM for i, p in enumerate(paths) if i in alone}
        | {p: Reach.UNINCLUDED for i, p in enumerate(paths) if i not in seen | elsewhere | alone and vendored(p)[0]}
    )
    named = {n for n in jit if "{" in n and _PLACEHOLDER.sub("", posixpath.basename(n))}  # not a bare "{file}"
    return Reached(
        reach,
        _behind(lookup, edges, roots, _named(lookup, named), others, behind or {}),
        _sight(lookup, edges, written_by, [path for path, _ in own], jit, whole),
    )


@dataclass(frozen=True, slots=True)
class Sight:
    """Which files can see the definitions of which: the include graph, with the files that
    write programs (the package's Python, a C file's NVRTC string) as includers of what those
    programs include."""

    files: tuple[str, ...]
    """The C files, then the package's own Python files."""
    edges: tuple[tuple[int, ...], ...]
    """Per C file of :attr:`files`, the files it includes (or its programs include)."""
    programs: tuple[int, ...] = ()
    """What any JIT source includes: every own Python file's programs may include it (held
    once: per Python file, it made tens of millions of edges of flashinfer's)."""
    written: frozenset[int] = frozenset()
    """Files whose programs are string literals: their strings are code too."""
    opaque: frozenset[int] = frozenset()
    """Files a shipped binary may compile at run time, with code the input does not hold."""
    c_files: int = 0
    """How many of :attr:`files` are C files (the rest are Python)."""


def _sight(
    lookup: Lookup,
    edges: Sequence[Sequence[int]],
    written_by: Mapping[int, set[int]],
    python: Sequence[str],
    jit: set[str],
    whole: Iterable[int],
) -> Sight:
    """Each own Python file can see what any JIT source includes: a program's text is put
    together from strings anywhere in the package's Python."""
    paths = lookup.paths
    n = len(paths)
    targets = tuple(dict.fromkeys(_named(lookup, jit))) if python else ()
    out = [tuple(dict.fromkeys([*edges[i], *sorted(written_by.get(i, ()))])) for i in range(n)]
    return Sight(
        (*paths, *python),
        tuple(out),
        targets,
        frozenset(written_by) | frozenset(range(n, n + len(python))),
        frozenset(whole),
        n,
    )


_PLACEHOLDER = re.compile(r"\{[^}]*\}")


@dataclass(frozen=True, slots=True)
class Reached:
    """What the include graph says about the input's C/CUDA files."""

    reach: dict[str, Reach] = field(default_factory=dict)
    """Per file that is not judged, why."""
    behind: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Per file that only sources built by flags leaving the targets out reach, where those flags are."""
    sight: Sight | None = None
    """Who can see each file's definitions; None when the input has no unit and no JIT source
    (its headers are used from outside it)."""


def _behind(
    lookup: Lookup,
    edges: Sequence[Sequence[int]],
    roots: list[int],
    patterns: list[int],
    others: set[int],
    lists: Mapping[str, tuple[str, ...]],
) -> dict[str, tuple[str, ...]]:
    """Per file reached only through sources that ``lists`` restrict, the flags' places. An
    include a JIT source writes with a name of its own reaches it too; a bare ``"{file}"``
    names no file in particular."""
    if not lists:
        return {}
    units = {i: sites for name, sites in lists.items() for i in _named(lookup, {name})}
    front = closure([i for i in roots + patterns if i not in units and i not in others], edges)
    out: dict[int, set[str]] = {}
    for i, sites in units.items():
        for j in closure([i], edges) - front:
            out.setdefault(j, set()).update(sites)
    return {lookup.paths[j]: tuple(sorted(sites)) for j, sites in out.items()}


def _named(lookup: Lookup, names: set[str]) -> list[int]:
    """The files include names written in a JIT source reach (``{name}`` matches any name)."""
    found = lookup.named(sorted(n for n in names if "{" not in n))
    patterns = [_placeholder_pattern(n) for n in names if "{" in n]
    return found + [i for i, p in enumerate(lookup.paths) for pattern in patterns if pattern.search(p)]


def closure(roots: Iterable[int], edges: Sequence[Sequence[int]]) -> set[int]:
    """Every node reachable from ``roots`` along ``edges`` (the roots included)."""
    seen = set(roots)
    work = list(seen)
    while work:
        for j in edges[work.pop()]:
            if j not in seen:
                seen.add(j)
                work.append(j)
    return seen


def _inner(path: str) -> str:
    """The innermost vendored folder of a path, as a path ("" for the package's own)."""
    parts = path.split("/")
    inner = [k for k, part in enumerate(parts[:-1]) if vendored(part + "/x")[0]]
    return "/".join(parts[: inner[-1] + 1]) if inner else ""


def modules(paths: Iterable[str], read: Callable[[str], bytes]) -> dict[str, Reach]:
    """Per vendored Python file that the package's own modules do not import, directly or
    through vendored modules they import: :attr:`Reach.UNIMPORTED`. ``read`` gives a file's
    bytes; an own module is read only when it names a vendored folder (it must, to import one)."""
    paths = set(paths)
    trees = {p: t for p in paths if (t := _tree(p))}
    if not trees:
        return {}
    folders = {posixpath.basename(t).encode() for t in trees.values()}
    seen = {p for p in paths if p not in trees}
    work = sorted(seen)
    while work:
        path = work.pop()
        data = read(path)
        if path not in trees and not any(f in data for f in folders):
            continue
        targets = _imports(path, data.decode("utf-8", "replace"))
        if path in trees and b"sys.path" in data:  # its folder's modules are imported by bare names
            folder = posixpath.dirname(path)
            targets |= {p[:-3] for p in trees if p.startswith(folder + "/")}
        for target in targets:
            for found in (f"{target}.py", f"{target}/__init__.py"):
                if found in trees and found not in seen:
                    seen.add(found)
                    work.append(found)
    return {p: Reach.UNIMPORTED for p in trees if p not in seen}


def in_tests(paths: Iterable[str]) -> dict[str, Reach]:
    """Per Python file that is a test of the package (a folder ``test``/``tests``, a
    ``test_*.py`` or ``*_test.py`` file, ``conftest.py``): :attr:`Reach.TEST`. A test's skip is
    no decision of the package's; what it tests is judged where it is written."""
    return {p: Reach.TEST for p in paths if _TEST.search(p)}


_TEST = re.compile(r"(?:^|/)(?:tests?/|test_[^/]*\.py$|[^/]*_test\.py$|conftest\.py$)")


def _unit(path: str) -> bool:
    suffix = suffix_of(path)
    if suffix in TEMPLATE_EXTENSIONS:
        return True
    return suffix in C_EXTENSIONS and suffix not in HEADERS


def _program(data: bytes) -> bool:
    """Whether a C/C++ source defines ``main()``: a program of its own."""
    return next(line_matches(_MAIN, data, b"main"), None) is not None


def _jit_includes(data: bytes) -> set[str]:
    if b"include" not in data:
        return set()
    return {m.group(1).decode("utf-8", "replace") for m in _JIT_INCLUDE.finditer(data)}


_RAW = re.compile(rb'R"([^()\\\s]{0,16})\((.*?)\)\1"', re.S)
_QUOTED_INCLUDE = re.compile(rb'"\s*#\s*include\s*(?:<([^<>"\s]+)>|\\"([^"\\\s]+)\\")')


def _string_includes(data: bytes) -> set[str]:
    """The includes a C file writes inside its string literals: raw strings
    (``R"(#include <x.cuh> …)"``) and quoted lines (``"#include <x.cuh>\\n"``)."""
    found = {name for m in _RAW.finditer(data) for name in _jit_includes(m.group(2))}
    found |= {(m.group(1) or m.group(2)).decode("utf-8", "replace") for m in _QUOTED_INCLUDE.finditer(data)}
    return found


@lru_cache(maxsize=1024)
def _placeholder_pattern(name: str) -> re.Pattern[str]:
    """The files an include with ``{placeholders}`` can name (a path suffix), compiled once."""
    return re.compile("(?:^|/)" + re.sub(r"\\\{[^}]*\\\}", "[^/]*", re.escape(name)) + "$")


def _tree(path: str) -> str:
    """The vendored tree of a file, as the path of its outermost vendored folder ("" for own code)."""
    name, _ = vendored(path)
    if not name:
        return ""
    parts = path.split("/")
    return "/".join(parts[: parts.index(name) + 1])


def _imports(path: str, text: str) -> set[str]:
    """The '/'-paths (from the input root) of the modules and packages a file imports, and of
    their parents."""
    package = posixpath.dirname(path)
    out: set[str] = set()
    for m in _IMPORT.finditer(text):
        source, names, plain = m.groups()
        if plain is not None:
            out.update(_dotted(n.split(" as ")[0].strip()) for n in plain.split(","))
            continue
        dots = len(source) - len(source.lstrip("."))
        base = _dotted(source[dots:])
        if dots:
            up = package
            for _ in range(dots - 1):
                up = posixpath.dirname(up)
            base = posixpath.join(up, base) if base else up
        out.add(base)
        for n in re.sub(r"#[^\n]*", "", names).strip("()").split(","):
            n = n.split(" as ")[0].strip()
            if n and n != "*":
                out.add(posixpath.join(base, n))
    return {"/".join(parts[:k]) for o in out if o for parts in [o.split("/")] for k in range(1, len(parts) + 1)}


def _dotted(name: str) -> str:
    return name.replace(".", "/")

"""Which macro definitions of the input each C/CUDA file can see: the include graph within it.

A definition in one file reaches a use in another only where a translation unit can hold
both: the using file includes the defining one (directly or not), or some file that includes
the using file does (a header sees what its includer included before it). Files nobody
includes (the ``.cu`` files; headers a build includes from outside) each start a translation
unit; a file's *context* is every file of every unit it can be part of. ``ENABLE_PDL`` defined
in one generated kernel therefore does not decide ``xqa/mha.cu``, which includes ``defines.h``.

Files are grouped by the definitions that can matter to them (those of the derived macros
their conditions name, and of the macros those depend on, within their context), and each
group is evaluated with a macro table of those definitions alone.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from typing import Protocol

from auditor.cuda import cexpr
from auditor.cuda.macros import Axis, MacroTable, parse_condition
from auditor.cuda.structure import Structure


class _Scanned(Protocol):
    """A file's scan (:class:`auditor.cuda.gates.FileScan`), as far as scopes read it."""

    @property
    def path(self) -> str: ...

    @property
    def structure(self) -> Structure: ...

    @property
    def cccl(self) -> tuple: ...


def resolve(paths: Sequence[str], includes: Sequence[Sequence[str]]) -> list[list[int]]:
    """Per file, the files of the input its ``#include``s name (by index into ``paths``): see
    :class:`Lookup`."""
    lookup = Lookup(paths)
    return [lookup.of(i, names) for i, names in enumerate(includes)]


class Lookup:
    """Where the ``#include`` names of the input's files lead.

    A name is looked up beside the including file first, then as a path suffix anywhere in the
    input (include directories are not known); of several suffix matches, those nearest the
    including file (the longest common directory) win, so a vendored copy includes its own
    tree's headers. Names found nowhere (system and toolkit headers) are left out. Built once
    for callers that resolve a few files' names at a time."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = paths
        self.index = {p: i for i, p in enumerate(paths)}
        self.by_base: dict[str, list[int]] = {}
        for i, p in enumerate(paths):
            self.by_base.setdefault(posixpath.basename(p), []).append(i)

    def of(self, i: int, names: Sequence[str]) -> list[int]:
        """The files the names included by file ``i`` lead to (never ``i`` itself)."""
        found = self._found(self.paths[i], names)
        found.pop(i, None)
        return list(found)

    def named(self, names: Sequence[str]) -> list[int]:
        """The files the names lead to from outside every folder of the input (a JIT source's
        includes, whose file is written at run time)."""
        return list(self._found("<outside>", names))

    def _found(self, includer: str, names: Sequence[str]) -> dict[int, None]:
        paths = self.paths
        here = posixpath.dirname(includer)
        found: dict[int, None] = {}
        for name in names:
            near = self.index.get(posixpath.normpath(posixpath.join(here, name)))
            if near is not None:
                found[near] = None
                continue
            tail = "/".join(part for part in name.split("/") if part not in ("", ".", ".."))
            matches = [
                j for j in self.by_base.get(posixpath.basename(tail), ()) if ("/" + paths[j]).endswith("/" + tail)
            ]
            if matches:
                depth = {j: _common(includer, paths[j]) for j in matches}
                best = max(depth.values())
                found.update((j, None) for j in matches if depth[j] == best)
        return found


def _common(a: str, b: str) -> int:
    """Directories two paths share from the root."""
    n = 0
    for x, y in zip(a.split("/")[:-1], b.split("/")[:-1]):
        if x != y:
            break
        n += 1
    return n


def _components(edges: list[list[int]]) -> tuple[list[int], int]:
    """Strongly connected components (an include cycle is one unit), numbered so that every
    component comes after the ones it includes (Tarjan's order), without recursion."""
    n = len(edges)
    index = [-1] * n
    low = [0] * n
    comp = [-1] * n
    on_stack = [False] * n
    stack: list[int] = []
    counter = 0
    count = 0
    for root in range(n):
        if index[root] != -1:
            continue
        work = [(root, 0)]
        while work:
            v, k = work.pop()
            if k == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            if k < len(edges[v]):
                work.append((v, k + 1))
                w = edges[v][k]
                if index[w] == -1:
                    work.append((w, 0))
                elif on_stack[w]:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp[w] = count
                    if w == v:
                        break
                count += 1
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return comp, count


def contexts(edges: list[list[int]], own: Sequence[int]) -> list[int]:
    """Per file, the union (a bit set) of ``own`` over every translation unit it can be part of.

    ``own[i]`` is file ``i``'s bits. A unit is what a file nobody includes reaches; a file's
    context is the union of its includers' contexts, or what it reaches when nobody includes it."""
    comp, count = _components(edges)
    reach = [0] * count
    succ: list[set[int]] = [set() for _ in range(count)]
    pred: list[set[int]] = [set() for _ in range(count)]
    for v, ws in enumerate(edges):
        reach[comp[v]] |= own[v]
        for w in ws:
            if comp[w] != comp[v]:
                succ[comp[v]].add(comp[w])
                pred[comp[w]].add(comp[v])
    for c in range(count):  # included components first
        for d in succ[c]:
            reach[c] |= reach[d]
    context = [0] * count
    for c in reversed(range(count)):  # includers first
        context[c] = reach[c] if not pred[c] else _union(context[p] for p in pred[c])
    return [context[comp[v]] for v in range(len(edges))]


def _union(bits) -> int:
    out = 0
    for b in bits:
        out |= b
    return out


class Scopes:
    """Per file, the macro table and evaluator of the derived-macro definitions it can see."""

    def __init__(self, scans: Sequence[_Scanned], table: MacroTable, toolkits: Sequence[str] = ()):
        self.table = table
        self._toolkits = toolkits
        paths = [s.path for s in scans]
        self._position = {p: i for i, p in enumerate(paths)}
        defined_in: dict[str, set[str]] = {}
        for name in table.derived:
            for path, _ in table.definitions.get(name, ()):
                defined_in.setdefault(path, set()).add(name)
        self._definers = sorted(defined_in)
        """Files that define a derived macro; bit ``k`` of a scope stands for the ``k``-th."""
        self._bits = {p: 1 << k for k, p in enumerate(self._definers)}
        self._names = [defined_in[p] for p in self._definers]
        edges = resolve(paths, [s.structure.includes for s in scans])
        self._context = contexts(edges, [self._bits.get(p, 0) for p in paths])
        self._files_of: dict[str, int] = {}
        self._mentions = [self._mentioned(s) for s in scans]
        self._keys = [self._context[i] & self._cone(m) for i, m in enumerate(self._mentions)]
        self._made: dict[int, tuple[MacroTable, Axis]] = {}

    def _mentioned(self, s: _Scanned) -> frozenset[str]:
        """Derived macros a file's conditions name."""
        names: set[str] = set()
        texts = {c for b in s.structure.branches + s.cccl for c, _ in b.inherited + b.local}
        for text in texts:
            try:
                names |= cexpr.identifiers(parse_condition(text))
            except cexpr.ConditionError:
                continue
        return frozenset(names & self.table.derived)

    def _cone(self, names: frozenset[str]) -> int:
        """The files defining these macros or any derived macro their definitions use."""
        bits = 0
        seen = set(names)
        work = list(names)
        while work:
            name = work.pop()
            hit = self._files_of.get(name)
            if hit is None:
                hit = self._files_of[name] = _union(self._bits[p] for p, _ in self.table.definitions.get(name, ()))
            bits |= hit
            for used in self.table.uses.get(name, ()):
                if used not in seen:
                    seen.add(used)
                    work.append(used)
        return bits

    def of(self, path: str) -> tuple[MacroTable, Axis]:
        """The table and evaluator for one scanned file."""
        key = self._keys[self._position[path]]
        hit = self._made.get(key)
        if hit is None:
            chosen = [k for k in range(key.bit_length()) if key >> k & 1]
            names: set[str] = set().union(*(self._names[k] for k in chosen)) if chosen else set()
            sub = self.table.within({self._definers[k] for k in chosen}, names)
            hit = self._made[key] = (sub, Axis(sub, self._toolkits))
        return hit

    @property
    def groups(self) -> int:
        """Distinct scopes evaluated so far (for measurements)."""
        return len(self._made)

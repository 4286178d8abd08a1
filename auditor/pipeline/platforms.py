"""The system features the code behind a gate needs (:mod:`auditor.facts.platform`).

A ``file`` fact is read in the gate's whole file: a file whose code is a collective over
other GPUs' memory (``pcie_ipc_all_reduce``, ``cudaIpcOpenMemHandle``) needs several GPUs in
one machine wherever its gates are. A ``guarded`` fact is read in what counts as the code
behind a Python gate that turns a requested target away:

- its guarded lines (for a rejection, what follows it), and the classes of its file those
  lines name (``handler: MixedCommHandler``: the object the guarded op works on; its methods
  create the multicast objects the op's kernels reduce through);
- for build flags (``get_nvcc_flags_list(supported_major_versions=[9, 10])``), the sources and
  templates their function names (``"mixed_comm.cu"``, ``"mixed_comm_kernel_inst.jinja"``) and
  the headers those include, two levels down: the code those flags compile.

Only what a fact says no system of a turned-away target has is looked for, so the reading
costs nothing where no gate is in front of such code.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property, lru_cache

from auditor import verdicts
from auditor.cuda.includes import Lookup
from auditor.facts import platform
from auditor.facts.features import guarded_lines
from auditor.model import Gate, Language, SourceFile, Target
from auditor.pipeline.builds import is_build_flag
from auditor.sources.files import quoted_path

_CLASS = re.compile(r"^class\s+([A-Za-z_]\w*)", re.M)
_NAMED_FILE = re.compile(quoted_path("cu", "cuh", "cpp", "cc", "h", "hpp", "jinja"))
"""A C/CUDA source, header or template named in a Python string (``"mixed_comm.cu"``)."""
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"]', re.M)
_WORD = re.compile(r"\w+")
"""A run of word characters: a class's name is named in a region where it is one."""
HELD_FILES = 64
"""Files whose text is held while the gates are read (the least recently used beyond it go)."""
INCLUDE_DEPTH = 2
"""How many ``#include`` levels below a built source are read."""


def with_platform(gates: Sequence[Gate], files: Sequence[SourceFile], targets: Sequence[Target]) -> list[Gate]:
    """The gates, each that turns a target away with the system features no system of some
    requested target has that the code behind it needs (``Gate.platform``): read behind a
    Python gate for a ``guarded`` fact, in the gate's whole file for a ``file`` one."""
    wanted = [f for f in platform.facts() if any(t.capability in f.lacking for t in targets)]
    if not wanted:
        return list(gates)
    behind = [f for f in wanted if f.reach == platform.Reach.GUARDED]
    whole = [f for f in wanted if f.reach == platform.Reach.FILE]
    read = _Reader(files, behind)
    file_needs: dict[str, list[platform.Need]] = {}

    def in_file(g: Gate) -> list[platform.Need]:
        if g.file not in file_needs:
            file_needs[g.file] = platform.needs(read.text(g.file), str(g.language), g.file, 1, whole)
        return file_needs[g.file]

    out = list(gates)
    for i, g in enumerate(gates):
        if g.file not in read.by_path or not any(verdicts.turns_away(g, t) for t in targets):
            continue
        found = in_file(g) if whole else []
        if g.language == Language.PYTHON and behind:
            found = found + _behind(g, read)
        if found:
            out[i] = replace(g, platform=tuple(dict.fromkeys(f"{n.fact.id} {n.describe()}" for n in found)))
    return out


class _Reader:
    """The input's files as :func:`with_platform` reads them for the ``guarded`` facts
    (``wanted``). Every gate of a file (and every build flag of a function) asks the same of it
    again, so the answers are kept (a file's classes, what a span needs, what a build's sources
    need); the text and lines of the last :data:`HELD_FILES` files read are kept too."""

    def __init__(self, files: Sequence[SourceFile], wanted: list[platform.Fact]) -> None:
        self.by_path = {f.path: f for f in files}
        self.wanted = wanted
        self.c_paths = [f.path for f in files if f.language == "cuda"]
        # held all, the texts of the C files with gates took hundreds of MB
        self.text = lru_cache(maxsize=HELD_FILES)(self._text)
        self.lines = lru_cache(maxsize=HELD_FILES)(self._lines)
        self._classes: dict[str, list[tuple[str, int, int]]] = {}
        self._needs: dict[tuple[str, int, int], list[platform.Need]] = {}
        self._sources: dict[frozenset[str], list[platform.Need]] = {}

    @cached_property
    def lookup(self) -> Lookup:
        """Where the C/CUDA files' includes lead."""
        return Lookup(self.c_paths)

    def _text(self, path: str) -> str:
        return self.by_path[path].data.decode("utf-8", "replace")

    def _lines(self, path: str) -> list[str]:
        return self.text(path).split("\n")

    def classes(self, path: str) -> list[tuple[str, int, int]]:
        """The file's top-level classes: (name, first line, end line), 0-based, end excluded."""
        if path not in self._classes:
            text, lines = self.text(path), self.lines(path)
            found = []
            for m in _CLASS.finditer(text):
                start = text.count("\n", 0, m.start())
                found.append((m.group(1), start, _block_end(lines, start)))
            self._classes[path] = found
        return self._classes[path]

    def needs(self, path: str, language: str, start: int = 0, end: int | None = None) -> list[platform.Need]:
        """What lines ``start..end`` (0-based, end excluded; the whole file by default) need."""
        key = (path, start, -1 if end is None else end)
        if key not in self._needs:
            text = self.text(path) if end is None else "\n".join(self.lines(path)[start:end])
            self._needs[key] = platform.needs(text, language, path, start + 1, self.wanted)
        return self._needs[key]

    def sources(self, names: frozenset[str]) -> list[platform.Need]:
        """What the C/CUDA files of these names, and the headers they include, need
        (:func:`_in_sources`)."""
        if names not in self._sources:
            self._sources[names] = _in_sources(names, self)
        return self._sources[names]


def _behind(g: Gate, read: _Reader) -> list[platform.Need]:
    """What the code behind a Python gate needs (the module docstring says what counts)."""
    lines = read.lines(g.file)
    first, last = guarded_lines(g, lines)
    if is_build_flag(g):
        first, last = _function(lines, g.line)
    if not first or last < first:
        return []
    region = "\n".join(lines[first - 1 : last])
    found = platform.needs(region, "python", g.file, first, read.wanted)
    found = found or _in_classes(region, g.file, read)
    if not found and is_build_flag(g):
        found = read.sources(frozenset(posixpath.basename(m.group(1)) for m in _NAMED_FILE.finditer(region)))
    return found


def _in_classes(region: str, path: str, read: _Reader) -> list[platform.Need]:
    """What the classes of the file that the region names need (one level: their own bodies)."""
    classes = read.classes(path)
    words = set(_WORD.findall(region)) if classes else set()
    for name, start, end in classes:
        if name in words:
            found = read.needs(path, "python", start, end)
            if found:
                return found
    return []


def _in_sources(names: frozenset[str], read: _Reader) -> list[platform.Need]:
    """What the C/CUDA files of these names (by file name, as a JIT spec names them), and the
    headers they include, need."""
    lookup = read.lookup
    level = [lookup.paths[j] for j in sorted(j for name in names for j in lookup.by_base.get(name, ()))]
    seen: set[str] = set()
    for _ in range(INCLUDE_DEPTH + 1):
        level = [p for p in level if p not in seen]
        seen.update(level)
        for p in level:
            found = read.needs(p, "cuda")
            if found:
                return found
        if not level:
            break
        level = sorted(
            {
                lookup.paths[j]
                for p in level
                for j in lookup.of(lookup.index[p], [m.group(1) for m in _INCLUDE.finditer(read.text(p))])
            }
        )
    return []


def _function(lines: list[str], line: int) -> tuple[int, int]:
    """The lines of the innermost ``def`` that holds ``line`` (1-based), by indentation."""
    for start in range(line - 1, -1, -1):
        stripped = lines[start].lstrip()
        if stripped.startswith(("def ", "async def ")) and _indent(lines[start]) < _indent(lines[line - 1]):
            return start + 1, _block_end(lines, start)
    return 0, 0


def _block_end(lines: list[str], start: int) -> int:
    """The last line (1-based) of the block opened at ``lines[start]``."""
    indent = _indent(lines[start])
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > indent):
        end += 1
    return end


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())

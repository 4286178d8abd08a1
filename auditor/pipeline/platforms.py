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
from collections.abc import Callable, Sequence
from dataclasses import replace

from auditor import verdicts
from auditor.cuda.includes import resolve
from auditor.facts import platform
from auditor.facts.features import guarded_lines
from auditor.model import Gate, Language, SourceFile, Target
from auditor.pipeline.builds import is_build_flag
from auditor.sources.files import quoted_path

_CLASS = re.compile(r"^class\s+([A-Za-z_]\w*)", re.M)
_NAMED_FILE = re.compile(quoted_path("cu", "cuh", "cpp", "cc", "h", "hpp", "jinja"))
"""A C/CUDA source, header or template named in a Python string (``"mixed_comm.cu"``)."""
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"\n]+)[>"]', re.M)
INCLUDE_DEPTH = 2
"""How many ``#include`` levels below a built source are read."""


def with_platform(gates: Sequence[Gate], files: Sequence[SourceFile], targets: Sequence[Target]) -> list[Gate]:
    """The gates, each that turns a target away with the system features no system of some
    requested target has that the code behind it needs (``Gate.platform``): read behind a
    Python gate for a ``guarded`` fact, in the gate's whole file for a ``file`` one."""
    wanted = [f for f in platform.facts() if any(t.capability in f.lacking for t in targets)]
    if not wanted:
        return list(gates)
    by_path = {f.path: f for f in files}
    texts: dict[str, str] = {}

    def text(path: str) -> str:
        if path not in texts:
            texts[path] = by_path[path].data.decode("utf-8", "replace")
        return texts[path]

    behind = [f for f in wanted if f.reach == platform.Reach.GUARDED]
    whole = [f for f in wanted if f.reach == platform.Reach.FILE]
    file_needs: dict[str, list[platform.Need]] = {}

    def in_file(g: Gate) -> list[platform.Need]:
        if g.file not in file_needs:
            file_needs[g.file] = platform.needs(text(g.file), str(g.language), g.file, 1, whole)
        return file_needs[g.file]

    c_paths = [f.path for f in files if f.language == "cuda"]
    out = list(gates)
    for i, g in enumerate(gates):
        if g.file not in by_path or not any(verdicts.turns_away(g, t) for t in targets):
            continue
        found = in_file(g) if whole else []
        if g.language == Language.PYTHON and behind:
            found = found + _behind(g, text, c_paths, behind)
        if found:
            out[i] = replace(g, platform=tuple(dict.fromkeys(f"{n.fact.id} {n.describe()}" for n in found)))
    return out


def _behind(
    g: Gate, text: Callable[[str], str], c_paths: list[str], wanted: list[platform.Fact]
) -> list[platform.Need]:
    """What the code behind a Python gate needs (the module docstring says what counts)."""
    lines = text(g.file).split("\n")
    first, last = guarded_lines(g, lines)
    if is_build_flag(g):
        first, last = _function(lines, g.line)
    if not first or last < first:
        return []
    region = "\n".join(lines[first - 1 : last])
    found = platform.needs(region, "python", g.file, first, wanted)
    found = found or _in_classes(region, lines, g.file, wanted)
    if not found and is_build_flag(g):
        found = _in_sources(region, c_paths, text, wanted)
    return found


def _in_classes(region: str, lines: list[str], path: str, wanted: list[platform.Fact]) -> list[platform.Need]:
    """What the classes of the file that the region names need (one level: their own bodies)."""
    text = "\n".join(lines)
    for m in _CLASS.finditer(text):
        if not re.search(rf"\b{m.group(1)}\b", region):
            continue
        start = text.count("\n", 0, m.start())
        end = _block_end(lines, start)
        found = platform.needs("\n".join(lines[start:end]), "python", path, start + 1, wanted)
        if found:
            return found
    return []


def _in_sources(
    region: str, c_paths: list[str], text: Callable[[str], str], wanted: list[platform.Fact]
) -> list[platform.Need]:
    """What the C/CUDA files the region names (by file name, as a JIT spec does), and the headers
    they include, need."""
    names = {posixpath.basename(m.group(1)) for m in _NAMED_FILE.finditer(region)}
    level = [p for p in c_paths if posixpath.basename(p) in names]
    seen: set[str] = set()
    at = {p: k for k, p in enumerate(c_paths)}
    for _ in range(INCLUDE_DEPTH + 1):
        level = [p for p in level if p not in seen]
        seen.update(level)
        for p in level:
            found = platform.needs(text(p), "cuda", p, 1, wanted)
            if found:
                return found
        if not level:
            break
        includes: list[list[str]] = [[] for _ in c_paths]
        for p in level:
            includes[at[p]] = [m.group(1) for m in _INCLUDE.finditer(text(p))]
        hits = resolve(c_paths, includes)
        level = sorted({c_paths[j] for p in level for j in hits[at[p]]})
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

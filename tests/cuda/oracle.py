"""The real preprocessor as an oracle: which branches g++ keeps for each nvcc target.

Every file's conditional directives (defines dropped) are written, with a marker after each
branch opener, into one translation unit; ``g++ -E -undef`` runs once per target with exactly
the macros nvcc defines for it (from the packaged table) and the kept markers are read back.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from auditor import arch
from auditor.cuda import cexpr
from auditor.cuda.directives import scan
from auditor.cuda.macros import is_arch_macro, parse_condition
from auditor.cuda.structure import structure

GXX = shutil.which("g++") or shutil.which("cpp")
_OPENERS = ("if", "ifdef", "ifndef", "elif", "elifdef", "elifndef", "else")


def unit(files: dict[str, str]) -> tuple[str, dict[str, tuple[str, int]]]:
    """One translation unit of all files' conditionals; marker -> (path, directive line)."""
    out: list[str] = []
    markers: dict[str, tuple[str, int]] = {}
    for fi, (path, text) in enumerate(sorted(files.items())):
        for d in scan(text):
            if d.keyword in ("define", "undef", "include"):
                continue
            out.append(f"#{d.keyword} {d.text}".rstrip())
            if d.keyword in _OPENERS:
                marker = f"@@B_{fi}_{d.line}"
                markers[marker] = (path, d.line)
                out.append(marker)
    return "\n".join(out) + "\n", markers


def admitted(files: dict[str, str], workdir: Path) -> dict[tuple[str, int], set[str]]:
    """(path, line) of every branch -> the targets on which g++ compiles its body."""
    source, markers = unit(files)
    src = workdir / "oracle.cpp"
    src.write_text(source)
    result: dict[tuple[str, int], set[str]] = {v: set() for v in markers.values()}
    for target, macros in arch.target_macros().items():
        defines = [f"-D{k}={v}" for k, v in macros.items()]
        proc = subprocess.run(
            [GXX, "-E", "-P", "-undef", "-x", "c++", *defines, str(src)], capture_output=True, text=True
        )
        # Conditions calling undefined function-like macros are errors to g++; their branches
        # (and everything under them) are never compared, since they are not arch-only.
        assert proc.stdout, proc.stderr[:500]
        for line in proc.stdout.split():
            if line in markers:
                result[markers[line]].add(target)
    return result


def arch_only(text: str) -> bool:
    """Whether every identifier of a condition is an arch macro (so g++ and archaudit agree on meaning)."""
    try:
        ids = cexpr.identifiers(parse_condition(text))
    except cexpr.ConditionError:
        return False
    return all(is_arch_macro(i) for i in ids)


def comparable_branches(path: str, text: str):
    """Branches whose whole chain (enclosing, siblings, own) uses only arch macros."""
    s = structure(scan(text), 0)
    for b in s.branches:
        if all(arch_only(c) for c, _ in b.inherited + b.local) and not re.search(r"\bdefined\s*$", b.expression):
            yield b

"""What a branch's CUDA intrinsic calls compile to, per target (``data/intrinsic-lowering.json``).

``#if … defined(__CUDA_ARCH_FEAT_SM120_ALL)`` around ``asm("cvt.rp.satfinite.ue8m0x2.f32 …")``,
``#else`` ``__nv_cvt_float_to_e8m0(v, __NV_SATFINITE, cudaRoundPosInf)``: nvcc lowers the call to
that same instruction on sm_121a, so the branch that turns 12.1 away takes nothing from it. The
table is nvcc's answer per target (``scripts/gen_intrinsic_lowering.py``); a C/CUDA gate whose
guarded code calls such an intrinsic records what it emits (``Gate.emits``), and the rules ask
it of the branch a turned-away target takes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache

from auditor import datafiles
from auditor.facts import code
from auditor.model import Gate, Language, SourceFile


@dataclass(frozen=True, slots=True)
class Intrinsic:
    """One tabled call: how to find it in code, and what it compiles to."""

    pattern: re.Pattern
    emits: tuple[tuple[str, tuple[str, ...]], ...]
    """Per target, the instructions a call compiles to."""


@cache
def intrinsics() -> tuple[Intrinsic, ...]:
    """The rows of ``data/intrinsic-lowering.json``, patterns compiled."""
    raw = datafiles.read_json("intrinsic-lowering.json")["intrinsics"]
    return tuple(
        Intrinsic(re.compile(r["pattern"]), tuple((t, tuple(ops)) for t, ops in r["emits"].items())) for r in raw
    )


@cache
def _prefilter() -> re.Pattern:
    """Any tabled call: a file with none is not read further."""
    return re.compile("|".join(f"(?:{i.pattern.pattern})" for i in intrinsics()))


def with_lowering(gates: Sequence[Gate], files: Sequence[SourceFile]) -> list[Gate]:
    """The gates, each C/CUDA gate whose guarded code calls a tabled intrinsic with what the
    calls emit, as ``target instruction`` (``sm_121a cvt.rp.satfinite.ue8m0x2.f32``)."""
    by_path = {f.path: f for f in files if f.language != Language.PYTHON}
    out = list(gates)
    texts: dict[str, tuple[str, list[int]] | None] = {}
    for i, g in enumerate(gates):
        first, last = g.body_lines
        if g.language == Language.PYTHON or g.file not in by_path or not 0 < first <= last:
            continue
        if g.file not in texts:
            text = by_path[g.file].data.decode("utf-8", "replace")
            found = _prefilter().search(text)
            blanked = code.blank(text, "cuda")[0] if found else ""
            texts[g.file] = (blanked, [0, *(m.end() for m in re.finditer("\n", blanked))]) if found else None
        held = texts[g.file]
        if held is None:
            continue
        blanked, starts = held
        region = blanked[starts[first - 1] : starts[last] if last < len(starts) else len(blanked)]
        emits = sorted(
            {f"{t} {op}" for n in intrinsics() if n.pattern.search(region) for t, ops in n.emits for op in ops}
        )
        if emits:
            out[i] = replace(g, emits=tuple(emits))
    return out


def by_target(gate: Gate) -> dict[str, set[str]]:
    """What the gate's guarded intrinsic calls emit, per target."""
    out: dict[str, set[str]] = {}
    for e in gate.emits:
        target, _, op = e.partition(" ")
        out.setdefault(target, set()).add(op)
    return out

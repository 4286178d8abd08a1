"""Whether a target can assemble one PTX instruction, from ``data/ptx-facts.json`` (what ptxas said).

The rules of the table (``docs/facts.md``): every row whose pattern matches the opcode must
accept the target, and the most specific row names the variant. One rule is added: a
qualifier that no matching row requires or was probed with makes the variant one the table
lacks, so the instruction is ``unknown`` where the rows accept it (never ``yes``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache, lru_cache

from auditor import arch, datafiles

_ANY = r"(?:\.[^\s.]+)*"
"""How a generated pattern stands for "any other qualifiers"."""
_END = r"(?=[\s;]|$)"


@dataclass(frozen=True, slots=True)
class Row:
    """One probed instruction variant under the verdict toolkit."""

    id: str
    family: str
    pattern: re.Pattern
    specificity: int
    required: tuple[re.Pattern, ...]
    """The pattern's tokens (opcode first), for matching them in any order."""
    qualifiers: tuple[re.Pattern, ...]
    """The tokens the pattern requires and those of the probed instruction: what the row vouches for."""
    accepted: frozenset[str]
    errors: dict[str, str]
    """Target -> ptxas's first error there."""


@dataclass(frozen=True, slots=True)
class Judgement:
    variant: str
    """The most specific matching row's id, ``""`` when none matches."""
    family: str
    on_target: tuple[tuple[str, str], ...]
    min_arch: str
    source: str
    """The fact cited: toolkit, variant, accepting targets, the first rejection's error."""


def _required(pattern: str) -> list[str]:
    """The tokens of a generated pattern (``^cp\\.async…(?:\\.[^\\s.]+)*?\\.cta_group::2…``), in order."""
    body = pattern.removeprefix("^").removesuffix(_ANY + _END)
    return [t for chunk in body.split(_ANY + "?") for t in chunk.split(r"\.") if t]


@cache
def table() -> tuple[str, tuple[str, ...], tuple[Row, ...]]:
    """The newest toolkit of the facts, its targets (architecture order), and its rows."""
    data = datafiles.read_json("ptx-facts.json")
    toolkit = max(data["toolkits"], key=arch.version_key)
    rows = []
    for p in data["probes"]:
        result = p["results"][toolkit]
        errors = {
            t: e.removeprefix("error : ").replace("{target}", t) for e, ts in result["errors"].items() for t in ts
        }
        required = _required(p["pattern"])
        probed = [re.escape(t) for t in re.split(r"[\s;]", p["ptx"])[0].split(".")]
        rows.append(
            Row(
                p["id"],
                p["family"],
                re.compile(p["pattern"]),
                p["specificity"],
                tuple(re.compile(t) for t in required),
                tuple(re.compile(t) for t in dict.fromkeys(required + probed)),
                frozenset(result["accepted"]),
                errors,
            )
        )
    return toolkit, tuple(data["toolkits"][toolkit]["targets"]), tuple(rows)


def _compact(accepted: list[str], order: tuple[str, ...]) -> str:
    """A contiguous run of the toolkit's targets as ``first…last``, anything else listed."""
    if not accepted:
        return "no target"
    first, last = order.index(accepted[0]), order.index(accepted[-1])
    if len(accepted) > 2 and list(order[first : last + 1]) == accepted:
        return f"{accepted[0]}…{accepted[-1]}"
    return ", ".join(accepted)


def _matches(row: Row, opcode: str) -> bool:
    """The row's pattern matches, or its tokens all occur in the opcode's qualifiers in another order.

    ptxas takes qualifiers in any order (CUTLASS writes ``.cta_group::2`` before the state
    spaces), the generated patterns in one. A row matched out of order can only reject more.
    """
    if row.pattern.match(opcode):
        return True
    tokens = opcode.split(".")
    return bool(row.required[0].fullmatch(tokens[0])) and all(
        any(p.fullmatch(t) for t in tokens[1:]) for p in row.required[1:]
    )


@lru_cache(maxsize=4096)
def accepting(opcode: str) -> frozenset[str]:
    """The targets whose ptxas accepts ``opcode`` (the newest toolkit's); empty when no probed
    variant matches it."""
    _, targets, rows = table()
    matching = _matching(rows, opcode)
    return frozenset(t for t in targets if all(t in r.accepted for r in matching)) if matching else frozenset()


def _matching(rows, opcode: str) -> list:
    """The rows matching ``opcode``, most specific first."""
    return sorted((r for r in rows if _matches(r, opcode)), key=lambda r: (-r.specificity, not r.pattern.match(opcode)))


@lru_cache(maxsize=65536)
def judge(opcode: str, capabilities: tuple[str, ...]) -> Judgement:
    """What the facts say about ``opcode`` (dotted opcode and qualifiers) on each capability."""
    toolkit, targets, rows = table()
    matching = _matching(rows, opcode)
    if not matching:
        unknown = tuple((c, "unknown") for c in capabilities)
        return Judgement("", "", unknown, "", f"ptxas {toolkit}: no probed variant matches this instruction")
    accepted = [t for t in targets if all(t in r.accepted for r in matching)]
    unvouched = [q for q in opcode.split(".") if not any(p.fullmatch(q) for r in matching for p in r.qualifiers)]
    on: list[tuple[str, str]] = []
    rejected = ""
    for cap in capabilities:
        variants = [t for t in targets if arch.capability_of(t) == cap]
        ok = [t for t in variants if t in accepted]
        if not variants:
            continue
        if not ok:
            on.append((cap, "no"))
            refusing = next(r for r in matching if variants[0] in r.errors)
            rejected = rejected or f"; {variants[0]} rejects {refusing.id}: {refusing.errors[variants[0]]}"
        elif unvouched:
            on.append((cap, "unknown"))
        else:
            on.append((cap, "yes" if ok[0] == variants[0] else f"{ok[0]}-only"))
    variant = matching[0].id
    source = f"ptxas {toolkit}, variant {variant}: accepted on {_compact(accepted, targets)}{rejected}"
    if unvouched:
        source += f"; not probed with .{', .'.join(unvouched)}"
    return Judgement(variant, matching[0].family, tuple(on), accepted[0] if accepted else "", source)

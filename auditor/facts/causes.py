"""What a gate's condition rests on: the definitions it names, and the ones at the end of their chain.

``is_sm90_supported() or is_sm100_supported()`` and ``_is_sm90 or _is_sm100`` (where ``_is_sm90 =
is_cuda() and is_sm90_supported()``) are one test written two ways: both rest on the two predicates.
Findings fold by it (:mod:`auditor.rules.roots`), and what one rejection of that test says about
the kernels behind it speaks for the others (:mod:`auditor.facts.remarks`).
"""

from __future__ import annotations

import re

from auditor.model import Gate, Resolution, ResolvedBy

_WORD = re.compile(r"[A-Za-z_]\w*")


def named_definitions(gate: Gate) -> tuple[Resolution, ...]:
    """The definitions a condition names and resolves through (``is_sm100_supported``, a
    derived macro), in order; none for a literal condition."""
    if gate.resolved_by != ResolvedBy.DEFINITION:
        return ()
    found = {r for r in gate.resolutions if re.search(rf"\b{re.escape(r.name)}\b", gate.expression)}
    return tuple(sorted(found, key=lambda r: (r.name, r.file, r.line)))


def through(gate: Gate) -> list[Resolution]:
    """The definitions a gate's condition names, then those their values name, nearest first
    (``ENABLE = _compute_enable()``): the chain a use's verdict comes down, not every helper
    the evaluation passed (``fa_version`` in ``x and fa_version == 4`` is not the cause)."""
    by_name = {r.name: r for r in gate.resolutions}
    out = list(named_definitions(gate))
    for r in out:
        out += [d for word in _WORD.findall(r.detail) if (d := by_name.get(word)) is not None and d not in out]
    return out


def leaves(gate: Gate) -> tuple[Resolution, ...]:
    """The definitions at the end of the chain: those whose value names no other of it."""
    chain = through(gate)
    named = {r.name for r in chain}
    return tuple(r for r in chain if not any(w in named for w in _WORD.findall(r.detail) if w != r.name))


_USE = re.compile(r"([A-Za-z_][\w.]*)\s*(\()?")


def tests(gate: Gate) -> frozenset[Resolution]:
    """The predicates a condition calls, through the flags it reads (``_is_sm90 or _is_sm100``
    where ``_is_sm90 = is_cuda() and is_sm90_supported()`` tests what ``is_sm90_supported() or
    is_sm100_supported()`` tests); a called name is where the test is, whatever its own value."""
    by_name = {r.name: r for r in gate.resolutions}
    found: set[Resolution] = set()
    seen: set[Resolution] = set()
    texts = [gate.expression] if gate.resolved_by == ResolvedBy.DEFINITION else []
    while texts:
        for m in _USE.finditer(texts.pop()):
            r = by_name.get(m.group(1).rpartition(".")[2])
            if r is None or r in seen:
                continue
            seen.add(r)
            if m.group(2):
                found.add(r)
            else:
                texts.append(r.detail)
    return frozenset(found)

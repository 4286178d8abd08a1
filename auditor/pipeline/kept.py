"""Reports kept for a result, so that a re-scan of unchanged inputs writes them again as they were.

A scan's result is named by its key (:attr:`AuditResult.key`: the inputs' contents, the tool,
the options) before it is built. Each rendered format is kept in the result cache with the
scan's :class:`Outcome`, in one slot per format and set of inputs, so that the cache does not
grow with every scan. A slot is reused only under the same key and link base; anything else
in it, or anything of the wrong shape, is a miss.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from auditor.model import SEVERITIES, AuditResult
from auditor.pipeline.cache import Cache, json_digest

F = TypeVar("F", bound=str)
"""A report format (any string names one here)."""


@dataclass(frozen=True)
class Outcome:
    """What a scan tells besides its reports: error lines for stderr, finding severities for
    the exit code, and whether an input could not be read at all."""

    errors: tuple[str, ...]
    severities: tuple[str, ...]
    failed: bool

    @classmethod
    def of(cls, result: AuditResult) -> Outcome:
        lines = tuple(
            f"archaudit: {e.input + ': ' if e.input else ''}{e.file + ': ' if e.file else ''}{e.reason}"
            for e in result.errors
        )
        return cls(lines, tuple(sorted({f.severity for f in result.findings})), bool(result.failed_inputs))


def _slots(key: str, inputs: Sequence[str], link_base: str, formats: Iterable[F]) -> dict[F, tuple[str, str]]:
    """Per format: the slot its text is kept in, and the key the kept text must carry."""
    return {f: ("report:" + json_digest([f, sorted(inputs)]), json_digest([key, f, link_base])) for f in formats}


def _strings(v: object) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def find(
    store: Cache, key: str, inputs: Sequence[str], link_base: str, formats: Collection[F]
) -> tuple[dict[F, str], Outcome] | None:
    """The texts kept for the result named ``key`` and its outcome; None unless every format is there."""
    if not key or not formats:
        return None
    texts: dict[F, str] = {}
    outcomes: list[Outcome] = []
    for fmt, (slot, want) in _slots(key, inputs, link_base, formats).items():
        hit = store.get(slot)
        if (
            not isinstance(hit, dict)
            or hit.get("key") != want
            or not isinstance(hit.get("text"), str)
            or not _strings(hit.get("errors"))
            or not _strings(hit.get("severities"))
            or not set(hit["severities"]) <= set(SEVERITIES)
            or not isinstance(hit.get("failed"), bool)
        ):
            return None
        texts[fmt] = hit["text"]
        outcomes.append(Outcome(tuple(hit["errors"]), tuple(hit["severities"]), hit["failed"]))
    return texts, outcomes[-1]


def keep(
    store: Cache, key: str, inputs: Sequence[str], link_base: str, texts: Mapping[F, str], outcome: Outcome
) -> None:
    """Keep each format's text for the next scan of the result named ``key``."""
    if not key:
        return
    store.put_many(
        [
            (
                slot,
                {
                    "key": want,
                    "text": texts[f],
                    "errors": list(outcome.errors),
                    "severities": list(outcome.severities),
                    "failed": outcome.failed,
                },
            )
            for f, (slot, want) in _slots(key, inputs, link_base, texts).items()
        ]
    )

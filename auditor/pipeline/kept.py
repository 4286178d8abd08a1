"""Reports kept for a result, so that a re-scan of unchanged inputs writes them again as they
were; and each file's first read, kept by the file's metadata, so that such a re-scan reads
no file (:func:`first_reads`).

A scan's result is named by its key (:attr:`AuditResult.key`: the inputs' contents, the tool,
the options) before it is built. Each rendered format is kept in the result cache with the
scan's :class:`Outcome`, in one slot per format and set of inputs, so that the cache does not
grow with every scan. A slot is reused only under the same key and link base; anything else
in it, or anything of the wrong shape, is a miss.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from auditor.fingerprint import json_bytes, json_value
from auditor.model import SEVERITIES, AuditResult
from auditor.pipeline.cache import Cache, json_digest, tool_digest
from auditor.pipeline.workers import FileRead, Read
from auditor.sources import LazyFile
from auditor.sources.files import stat_key

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
        data = store.get_raw(slot)
        if data is None:
            return None
        head, _, text = data.partition(b"\n")
        try:
            hit = json_value(head)
            texts[fmt] = text.decode("utf-8", "surrogatepass")
        except (ValueError, RecursionError):  # no JSON first line, or a text that is not UTF-8
            return None
        if (
            not isinstance(hit, dict)
            or hit.get("key") != want
            or not _strings(hit.get("errors"))
            or not _strings(hit.get("severities"))
            or not set(hit["severities"]) <= set(SEVERITIES)
            or not isinstance(hit.get("failed"), bool)
        ):
            return None
        outcomes.append(Outcome(tuple(hit["errors"]), tuple(hit["severities"]), hit["failed"]))
    return texts, outcomes[-1]


def keep(
    store: Cache, key: str, inputs: Sequence[str], link_base: str, texts: Mapping[F, str], outcome: Outcome
) -> None:
    """Keep each format's text for the next scan of the result named ``key``: a line of JSON
    (the key it is kept for, the outcome), then the text as it is. Held in JSON, the text of
    BIG's report (77 MB) was escaped into another copy of itself and parsed out of it again."""
    if not key:
        return
    outcome_of = {"errors": list(outcome.errors), "severities": list(outcome.severities), "failed": outcome.failed}
    store.put_raw_many(
        [
            (slot, (json_bytes({"key": want, **outcome_of}) + b"\n", texts[f].encode("utf-8", "surrogatepass")))
            for f, (slot, want) in _slots(key, inputs, link_base, texts).items()
        ]
    )


# --- first reads kept by where a file is and its metadata ------------------------------

SETTLED_NS = 2 * 10**9
"""A file changed less than this long ago is read, not recalled: a change within the clock's
granularity could leave its metadata as it was (git's "racily clean" entries)."""


def identities(files: Sequence) -> list[str | None]:
    """Per file, what names its bytes without reading them: the path and metadata of the file
    on disk (of the archive, with the member's place and size, for a member); None for a file
    in memory, or one changed too recently (:data:`SETTLED_NS`) or not there."""
    now = time.time_ns()
    seen: dict[str, list[int] | None] = {}

    def stat(path: str, listed: tuple[int, ...]) -> list[int] | None:
        """The file's metadata: as it was listed, else stated now."""
        if path not in seen:
            try:
                key = list(listed or stat_key(os.stat(path)))
                seen[path] = key if max(key[3], key[4]) < now - SETTLED_NS else None
            except OSError:
                seen[path] = None
        return seen[path]

    out: list[str | None] = []
    for f in files:
        o = f.origin if isinstance(f, LazyFile) else None
        meta = stat(os.path.abspath(o.archive or o.name), o.listed) if o is not None else None
        out.append(
            None
            if o is None or meta is None
            else "stat:"
            + json_digest([tool_digest(), os.path.abspath(o.archive or o.name), meta, o.name, o.index, o.size])
        )
    return out


def first_reads(store: Cache | None, files: Sequence, read: Callable[[list], list[Read]]) -> list[Read]:
    """Each file's first read (digest and suppression marker), recalled for a file whose
    identity (:func:`identities`) is unchanged since it was last read, else ``read`` (the
    workers) for the others, which are then kept. This makes a re-scan of an unchanged tree
    or wheel cost its listing, not a read of every byte."""
    if store is None:
        return read(list(files))
    keys = identities(files)
    found = store.get_many([k for k in keys if k])
    out: list[Read | None] = [None] * len(files)
    todo: list[int] = []
    for i, key in enumerate(keys):
        hit = found.get(key) if key else None
        if isinstance(hit, list) and len(hit) == 2 and isinstance(hit[0], str) and isinstance(hit[1], bool):
            out[i] = (FileRead(None, hit[0], hit[1]), None)
        else:
            todo.append(i)
    if todo:
        fresh = read([files[i] for i in todo])
        for i, r in zip(todo, fresh):
            out[i] = r
        store.put_many(
            [
                (key, [info.digest, info.marker])
                for i, (info, _) in zip(todo, fresh)
                if (key := keys[i]) and info.error is None
            ]
        )
    return [r for r in out if r is not None]

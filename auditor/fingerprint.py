"""Stable gate fingerprints: the same gate keeps its id when lines move around it; and the
digests that cache keys are made of: of a file's bytes, of a JSON-able value."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import orjson

_SPACE = re.compile(r"\s+")


def normalise(expression: str) -> str:
    """Whitespace-insensitive form of a condition."""
    return _SPACE.sub("", expression)


def gate_id(file: str, kind: str, context: str, expression: str, ordinal: int) -> str:
    """Fingerprint of a gate from what identifies it, not from where it sits.

    ``ordinal`` tells apart identical conditions in the same file and context (0, 1, ...),
    counted in source order.
    """
    key = "\0".join((file, kind, context, normalise(expression), str(ordinal)))
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def site_id(kind: str, context: str, expression: str, chain: tuple[str, ...] = ()) -> str:
    """Fingerprint of what a gate decides, without where its file is: kind, enclosing context,
    condition and effective condition (``chain``). A baseline remembers it beside the gate id, so
    a finding whose file was moved or renamed, its decision and context unchanged, still matches."""
    key = "\0".join((kind, context, normalise(expression), *map(normalise, chain)))
    return "site:" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def json_digest(parts: Any) -> str:
    """Digest of a JSON-able value (keys made of options, inputs and other keys)."""
    return hashlib.blake2b(json_bytes(parts), digest_size=16).hexdigest()


def json_bytes(value: Any) -> bytes:
    """A JSON-able value as compact JSON: by orjson, six times faster than the standard library
    on the cache's large entries; where orjson declines (a lone surrogate in a path that is not
    UTF-8, an integer past 64 bits, a key that is no string), by the standard library after one
    space, which :func:`json_value` reads as the mark of its writer. The values are made of
    strings, integers, booleans, lists and dicts: orjson would write a float that is not finite
    as null."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return b" " + json.dumps(value, separators=(",", ":")).encode()


def json_value(data: bytes) -> Any:
    """What :func:`json_bytes` wrote: orjson reads its own output without a string of the whole
    text (which, with one character past Latin-1, takes two or four bytes a character); the
    standard library reads the rest (orjson would read an integer past 64 bits as a float).
    Raises ValueError on anything that is not JSON."""
    return json.loads(data) if data[:1] == b" " else orjson.loads(data)


def content_digest(data: bytes) -> str:
    """Digest of one file's bytes (a kept result is checked against it)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()

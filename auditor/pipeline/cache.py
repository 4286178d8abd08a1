"""Result cache: per-file structure, per-input results and rendered reports, keyed by content and tool digests.

Entries live in one SQLite file at the root of the user cache dir. They are JSON, never
pickle: a cache directory could be shared or tampered with, and loading must not run code.
Each value carries a digest of its key and text, so a damaged entry, or one written under
another key (or by another tool), is a miss; anything that does not decode into the expected
shape is ignored and recomputed, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from auditor import __version__
from auditor.cuda.structure import Branch, Definition, Structure
from auditor.model import Feature, FileError, Finding, Gate, Resolution

SCHEMA = 2


_CODE = ("auditor", "auditor.rules.pack", "auditor.reports")
"""Package roots whose files (walked recursively) decide results or reports."""


@cache
def tool_digest() -> str:
    """Version + the package's code, data and templates: a change to any invalidates every entry."""
    h = hashlib.blake2b(f"{__version__}:{SCHEMA}".encode(), digest_size=16)
    for package in _CODE:
        for rel, p in _files(resources.files(package)):
            if rel.endswith((".py", ".json", ".csv", ".yaml", ".j2")):
                h.update(f"{package}/{rel}".encode())
                h.update(p.read_bytes())
    return h.hexdigest()


def _files(root: Traversable, prefix: str = "") -> Iterator[tuple[str, Traversable]]:
    """Every file under ``root`` as (relative path, file), sorted, ``__pycache__`` left out."""
    for p in sorted(root.iterdir(), key=lambda p: p.name):
        if p.is_dir():
            if p.name != "__pycache__":
                yield from _files(p, f"{prefix}{p.name}/")
        elif p.is_file():
            yield f"{prefix}{p.name}", p


def json_digest(parts: Any) -> str:
    """Digest of a JSON-able value (keys made of options, inputs and other keys)."""
    return hashlib.blake2b(json.dumps(parts).encode(), digest_size=16).hexdigest()


def content_digest(data: bytes) -> str:
    """Digest of one file's bytes."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def input_digest(files: Iterable[tuple[str, str, str, str]]) -> str:
    """Digest of a whole input from its files' (path, language, read error, content digest)."""
    h = hashlib.blake2b(tool_digest().encode(), digest_size=16)
    for path, language, error, digest in sorted(files):
        h.update(f"{path}\0{language}\0{error}\0{digest}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


class Cache:
    """A key/value store of JSON documents; every failure degrades to a miss."""

    def __init__(self, directory: Path | None):
        self.db: sqlite3.Connection | None = None
        if directory is None:
            return
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(directory / "results.sqlite3"), timeout=5)
            self.db.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        except (OSError, sqlite3.Error):
            self.db = None

    def get(self, key: str) -> Any:
        """The decoded entry, or None on a miss or anything unreadable."""
        if self.db is None:
            return None
        try:
            row = self.db.execute("SELECT value FROM entries WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error:
            return None
        return _open(key, row[0]) if row else None

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The decoded entries found among ``keys`` (missing and unreadable ones left out)."""
        out: dict[str, Any] = {}
        if self.db is None:
            return out
        unique = sorted(set(keys))
        try:
            for i in range(0, len(unique), 500):
                part = unique[i : i + 500]
                rows = self.db.execute(
                    f"SELECT key, value FROM entries WHERE key IN ({','.join('?' * len(part))})", part
                ).fetchall()
                for key, value in rows:
                    entry = _open(key, value)
                    if entry is not None:
                        out[key] = entry
        except sqlite3.Error:
            return {}
        return out

    def put_many(self, items: Sequence[tuple[str, Any]]) -> None:
        """Store entries; a read-only or broken cache is silently skipped."""
        if self.db is None or not items:
            return
        try:
            with self.db:
                self.db.executemany(
                    "INSERT OR REPLACE INTO entries VALUES (?, ?)", [(k, _seal(k, v)) for k, v in items]
                )
        except (sqlite3.Error, ValueError, TypeError):
            pass

    def close(self) -> None:
        """Release the database."""
        if self.db is not None:
            self.db.close()


def _check(key: str, text: str) -> str:
    return hashlib.blake2b(f"{key}\0{text}".encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _seal(key: str, value: Any) -> str:
    """An entry's stored text: the digest of key and JSON, a newline, the JSON."""
    text = json.dumps(value, separators=(",", ":"))
    return f"{_check(key, text)}\n{text}"


def _open(key: str, stored: Any) -> Any:
    """The value of a stored entry, or None when it is not what :func:`_seal` wrote for this key."""
    if not isinstance(stored, str):
        return None
    check, _, text = stored.partition("\n")
    if check != _check(key, text):
        return None
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return None


# --- JSON <-> model ---------------------------------------------------------------------

_GATE_FIELDS = tuple(f.name for f in fields(Gate))
_STRING_TUPLES = ("admits", "unknowns", "chain", "name_implies", "surely")
"""Shared through a table: 40,000 gates hold a few hundred distinct admitted sets and chains."""
_INTS = ("line", "end_line")
_STRS = tuple(n for n in _GATE_FIELDS if n not in _STRING_TUPLES + _INTS + ("features", "resolutions", "body_lines"))


def encode_gates(gates: Sequence[Gate]) -> dict:
    """Gates as rows of their fields in declaration order, string tuples as table indices."""
    table: dict[tuple, int] = {}
    rows = []
    for g in gates:
        row: list = []
        for name in _GATE_FIELDS:
            v = getattr(g, name)
            if name in _STRING_TUPLES:
                v = table.setdefault(v, len(table))
            elif name == "features":
                v = [[x.token, x.line, x.feature, x.min_arch, [list(p) for p in x.on_target], x.notes] for x in v]
            elif name == "resolutions":
                v = [[r.name, r.file, r.line, r.detail] for r in v]
            elif name == "body_lines":
                v = list(v)
            row.append(v)
        rows.append(row)
    return {"fields": list(_GATE_FIELDS), "tuples": [list(t) for t in table], "rows": rows}


def _str(v: Any) -> str:
    if type(v) is not str:
        raise ValueError("expected a string")
    return v


def _int(v: Any) -> int:
    if type(v) is not int:
        raise ValueError("expected an integer")
    return v


def decode_gates(d: Any) -> list[Gate]:
    """Inverse of encode_gates; raises ValueError (or TypeError, KeyError) on any unexpected shape."""
    if d["fields"] != list(_GATE_FIELDS):
        raise ValueError("gates of another model")
    tuples = [tuple(_str(s) for s in t) for t in d["tuples"]]
    index = {n: i for i, n in enumerate(_GATE_FIELDS)}
    shared = [index[n] for n in _STRING_TUPLES]
    ints = [index[n] for n in _INTS]
    strs = [index[n] for n in _STRS]
    feats, res, body = index["features"], index["resolutions"], index["body_lines"]
    out = []
    for row in d["rows"]:
        if type(row) is not list or len(row) != len(_GATE_FIELDS):
            raise ValueError("malformed gate")
        v = list(row)
        for i in shared:
            if type(v[i]) is not int or not 0 <= v[i] < len(tuples):
                raise ValueError("malformed gate")
            v[i] = tuples[v[i]]
        for i in ints:
            _int(v[i])
        for i in strs:
            _str(v[i])
        v[feats] = tuple(
            Feature(_str(t), _int(ln), _str(f), _str(m), tuple((_str(c), _str(w)) for c, w in on), _str(n))
            for t, ln, f, m, on, n in v[feats]
        )
        v[res] = tuple(Resolution(_str(n), _str(f), _int(ln), _str(dt)) for n, f, ln, dt in v[res])
        first, last = v[body]
        v[body] = (_int(first), _int(last))
        out.append(Gate(*v))
    return out


def _errors(rows: Any) -> list[FileError]:
    return [FileError(_str(f), _str(r), _str(i)) for f, r, i in rows]


def encode_result(gates: Sequence[Gate], errors: Sequence[FileError]) -> dict:
    """One input's gates and errors."""
    return {"gates": encode_gates(gates), "errors": [[e.file, e.reason, e.input] for e in errors]}


def decode_result(d: Any) -> tuple[list[Gate], list[FileError]] | None:
    """Gates and errors, or None when the entry is not what we wrote."""
    try:
        return decode_gates(d["gates"]), _errors(d["errors"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def encode_final(
    gates: Sequence[Gate], findings: Sequence[Finding], errors: Sequence[FileError], records: Sequence[dict]
) -> dict:
    """One input's finished result: gates with features, findings, errors, binary records."""
    return {
        "gates": encode_gates(gates),
        "findings": [[getattr(f, x.name) for x in fields(Finding)] for f in findings],
        "errors": [[e.file, e.reason, e.input] for e in errors],
        "binaries": [dict(r, entries=[dict(e) for e in r["entries"]]) for r in records],
    }


def decode_final(d: Any) -> tuple[list[Gate], list[Finding], list[FileError], tuple[dict, ...]] | None:
    """Inverse of encode_final, or None when the entry is not what we wrote."""
    try:
        gates = decode_gates(d["gates"])
        findings = [
            Finding(_str(r), _str(s), _str(g), _str(f), _int(ln), _str(m), _str(c), _str(k), _str(i))
            for r, s, g, f, ln, m, c, k, i in d["findings"]
        ]
        errors = _errors(d["errors"])
        records = tuple(
            dict(r, entries=tuple(dict(e) for e in r["entries"]), verdicts=dict(r["verdicts"])) for r in d["binaries"]
        )
        if not all(isinstance(r["path"], str) for r in records):
            return None
        return gates, findings, errors, records
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def encode_structure(s: Structure) -> list:
    """A file's structure as nested lists."""
    return [
        [
            [
                b.keyword,
                b.expression,
                b.line,
                b.end_line,
                list(b.body),
                [list(c) for c in b.inherited],
                [list(c) for c in b.local],
            ]
            for b in s.branches
        ],
        [[d.name, d.body, d.function_like, d.line, [list(c) for c in d.constraints]] for d in s.definitions],
        [[a, b, [list(c) for c in cs]] for a, b, cs in s.enclosing],
    ]


def decode_structure(d: Any) -> Structure:
    """Inverse of encode_structure; raises on any unexpected shape."""
    branches, definitions, enclosing = d

    def constraints(cs: list) -> tuple:
        out = tuple((str(c), bool(p)) for c, p in cs)
        return out

    return Structure(
        tuple(
            Branch(str(k), str(e), int(l1), int(l2), (int(b[0]), int(b[1])), constraints(i), constraints(lc))
            for k, e, l1, l2, b, i, lc in branches
        ),
        tuple(
            Definition(str(n), None if b is None else str(b), bool(f), int(ln), constraints(c))
            for n, b, f, ln, c in definitions
        ),
        tuple((int(a), int(b), constraints(cs)) for a, b, cs in enclosing),
    )

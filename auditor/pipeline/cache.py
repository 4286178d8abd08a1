"""Result cache: per-file structure, per-input results and rendered reports, keyed by content and tool digests.

Entries live in one SQLite file at the root of the user cache dir. They are JSON, never
pickle: a cache directory could be shared or tampered with, and loading must not run code.
Each entry carries a digest of its key and JSON (its seal), so a damaged entry, or one written under
another key (or by another tool), is a miss; anything that does not decode into the expected
shape is ignored and recomputed, never trusted.
"""

from __future__ import annotations

import hashlib
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, get_type_hints

from auditor import __version__
from auditor.fingerprint import content_digest as content_digest
from auditor.fingerprint import json_bytes, json_value
from auditor.fingerprint import json_digest as json_digest
from auditor.model import (
    Binary,
    Classification,
    EmbeddedCode,
    Feature,
    FileError,
    Finding,
    Gate,
    Loadability,
    Resolution,
    Severity,
    Word,
)
from auditor.python.extract import Evaluated

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

T = TypeVar("T")

SCHEMA = 10


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


def stream_digest(chunks: Iterable[bytes]) -> str:
    """:func:`content_digest` of the bytes ``chunks`` make up, without holding them."""
    h = hashlib.blake2b(digest_size=16)
    for chunk in chunks:
        h.update(chunk)
    return h.hexdigest()


def input_digest(files: Iterable[tuple[str, str, str, str]]) -> str:
    """Digest of a whole input from its files' (path, language, read error, content digest)."""
    h = hashlib.blake2b(tool_digest().encode(), digest_size=16)
    for path, language, error, digest in sorted(files):
        h.update(f"{path}\0{language}\0{error}\0{digest}\n".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


DECODE_ERRORS = (KeyError, IndexError, TypeError, ValueError, AttributeError, RecursionError)
"""What decoding an entry of an unexpected shape raises; each means a miss."""


@dataclass(frozen=True)
class Codec(Generic[T]):
    """How a stage's result is kept: as JSON, and back.

    ``decode`` raises (one of :data:`DECODE_ERRORS`) on anything ``encode`` did not write, an
    unknown word included, so that such an entry is a miss and never trusted. ``encode``
    returns None for a result that must not be kept (it depends on more than its key).
    """

    encode: Callable[[T], Any]
    decode: Callable[[Any], T]


DEFAULT_MAX_BYTES = 1 << 30
"""The cache's default size cap (``--cache-max``, ``[tool.archaudit] cache-max``): a few
scans of whole environments."""
_LAYOUT = 4
"""``PRAGMA user_version`` of the database; a file of another layout is emptied, not read.
Layout 3 keeps each entry's size and last use in a table of their own: SQLite rewrites a whole
row to change one column, and a report kept for a whole environment runs to 80 MB. Layout 4
keeps an entry's JSON as UTF-8 bytes, its digest in a column of its own: as a Python string, a
JSON text with one character past Latin-1 takes two or four bytes a character, and the digest
in front of the JSON took one more copy of the whole text (BIG's report: 85 MB) to write."""


@dataclass(frozen=True, slots=True)
class CacheInfo:
    """What ``archaudit cache info`` tells."""

    path: Path
    """The database file."""
    disk_bytes: int
    """The file's size on disk (with SQLite's own pages)."""
    entries: int
    entry_bytes: int
    """The entries' keys and stored texts, what the cap bounds."""
    max_bytes: int


class Cache:
    """A key/value store of JSON documents; every failure degrades to a miss.

    Bounded: every entry records its size and when it was last read or written, and a write
    that takes the entries past ``max_bytes`` evicts the least recently used ones first. An
    entry larger than the cap is not kept at all.
    """

    def __init__(self, directory: Path | None, max_bytes: int = DEFAULT_MAX_BYTES):
        self.db: sqlite3.Connection | None = None
        self.max_bytes = max_bytes
        self.path = directory / "results.sqlite3" if directory is not None else None
        if directory is None:
            return
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(self.path), timeout=5)
            self._layout(self.db)
        except (OSError, sqlite3.Error):
            self.db = None

    @staticmethod
    def _layout(db: sqlite3.Connection) -> None:
        """Create the table, or empty a database of an older layout (a cache: nothing is lost)."""
        (version,) = db.execute("PRAGMA user_version").fetchone()
        if version == _LAYOUT:
            return
        with db:
            db.execute("DROP TABLE IF EXISTS entries")
            db.execute("DROP TABLE IF EXISTS uses")
        db.execute("PRAGMA auto_vacuum = INCREMENTAL")  # evicted pages go back to the file system
        db.execute("VACUUM")
        with db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, seal BLOB NOT NULL, value BLOB NOT NULL)"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS uses (key TEXT PRIMARY KEY, size INTEGER NOT NULL, used INTEGER NOT NULL)"
            )
            db.execute("CREATE INDEX IF NOT EXISTS uses_used ON uses (used)")
            db.execute(f"PRAGMA user_version = {_LAYOUT}")

    def get(self, key: str) -> Any:
        """The decoded entry, or None on a miss or anything unreadable."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The decoded entries found among ``keys`` (missing and unreadable ones left out);
        those found count as used now."""
        out: dict[str, Any] = {}
        for key, data in self.get_raw_many(keys).items():
            try:
                out[key] = json_value(data)
            except (ValueError, TypeError, RecursionError):
                pass
        return out

    def get_raw(self, key: str) -> bytes | None:
        """The bytes kept under ``key`` by :meth:`put_raw_many`, or None."""
        return self.get_raw_many([key]).get(key)

    def get_raw_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The bytes of the entries found among ``keys`` whose seal holds; they count as used now."""
        out: dict[str, bytes] = {}
        if self.db is None:
            return out
        unique = sorted(set(keys))
        try:
            for i in range(0, len(unique), 500):
                part = unique[i : i + 500]
                rows = self.db.execute(
                    f"SELECT key, seal, value FROM entries WHERE key IN ({','.join('?' * len(part))})", part
                ).fetchall()
                for key, seal, value in rows:
                    if isinstance(seal, bytes) and isinstance(value, bytes) and seal == _seal(key, (value,)):
                        out[key] = value
        except sqlite3.Error:
            return {}
        self._touch(list(out))
        return out

    def _touch(self, keys: list[str]) -> None:
        if self.db is None or not keys:
            return
        now = time.time_ns()
        try:
            with self.db:
                self.db.executemany("UPDATE uses SET used = ? WHERE key = ?", [(now, k) for k in keys])
        except sqlite3.Error:
            pass  # a read-only cache still answers

    def put_many(self, items: Sequence[tuple[str, Any]]) -> None:
        """Store JSON-able entries (:meth:`put_raw_many`)."""
        if self.db is None or not items:
            return
        try:
            encoded = [(k, (json_bytes(v),)) for k, v in items]
        except (ValueError, TypeError):
            return
        self.put_raw_many(encoded)

    def put_raw_many(self, items: Sequence[tuple[str, Sequence[bytes]]]) -> None:
        """Store entries as bytes, each given in parts that are written one after the other into
        its row (a kept report is its header and its text: joined, and bound as one value that
        SQLite copies, BIG's 77 MB report took two more copies at the scan's peak); then evict
        the least recently used past the cap. A read-only or broken cache is silently skipped."""
        if self.db is None or not items:
            return
        now = time.time_ns()
        try:
            sized = [(k, parts, sum(len(p) for p in parts)) for k, parts in items]
            fits = [(k, parts, n) for k, parts, n in sized if len(k) + n <= self.max_bytes]
            with self.db:
                for k, parts, n in fits:
                    self._write(self.db, k, parts, n)
                self.db.executemany(
                    "INSERT OR REPLACE INTO uses VALUES (?, ?, ?)", [(k, len(k) + n, now) for k, _, n in fits]
                )
                self._evict(self.db)
        except (sqlite3.Error, ValueError, TypeError):
            pass

    @staticmethod
    def _write(db: sqlite3.Connection, key: str, parts: Sequence[bytes], size: int) -> None:
        """One entry: a row of ``size`` zero bytes, then its parts written into it in place
        (joined first where this Python has no ``blobopen``, before 3.11)."""
        seal = _seal(key, parts)
        if not hasattr(db, "blobopen") or len(parts) == 1:
            db.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", (key, seal, b"".join(parts)))
            return
        row = db.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, zeroblob(?))", (key, seal, size)).lastrowid
        with db.blobopen("entries", "value", row) as blob:
            for part in parts:
                blob.write(part)

    def _evict(self, db: sqlite3.Connection) -> None:
        """Delete the least recently used entries until the rest fit under the cap."""
        (total,) = db.execute("SELECT COALESCE(SUM(size), 0) FROM uses").fetchone()
        excess = total - self.max_bytes
        if excess <= 0:
            return
        doomed = []
        for key, size in db.execute("SELECT key, size FROM uses ORDER BY used, rowid"):
            doomed.append((key,))
            excess -= size
            if excess <= 0:
                break
        db.executemany("DELETE FROM entries WHERE key = ?", doomed)
        db.executemany("DELETE FROM uses WHERE key = ?", doomed)

    def info(self) -> CacheInfo | None:
        """Where the cache is, how large, how many entries, and its cap; None when there is none."""
        if self.db is None or self.path is None:
            return None
        try:
            entries, size = self.db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM uses").fetchone()
            disk = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        except (sqlite3.Error, OSError):
            return None
        return CacheInfo(self.path, disk, entries, size, self.max_bytes)

    def clean(self) -> int:
        """Delete every entry and give the space back; the number deleted."""
        if self.db is None:
            return 0
        with self.db:
            (count,) = self.db.execute("SELECT COUNT(*) FROM entries").fetchone()
            self.db.execute("DELETE FROM entries")
            self.db.execute("DELETE FROM uses")
        self.db.execute("VACUUM")
        return count

    def recall(self, key: str, codec: Codec[T]) -> T | None:
        """The result kept under ``key``, or None. For a stage that runs in the background:
        start it on a miss, and :meth:`keep` what it returns."""
        try:
            return codec.decode(self.get_many([key])[key])
        except DECODE_ERRORS:
            return None

    def keep(self, key: str, codec: Codec[T], value: T) -> None:
        """Keep a stage's result under ``key`` (unless its codec declines it)."""
        if self.db is not None and (entry := codec.encode(value)) is not None:
            self.put_many([(key, entry)])

    def memo(self, key: str, codec: Codec[T], compute: Callable[[], T]) -> T:
        """The result kept under ``key``, else ``compute()``'s, kept there for the next scan."""
        (value,) = self.memo_many([key], codec, lambda _: [compute()])
        return value

    def memo_many(self, keys: Sequence[str], codec: Codec[T], compute: Callable[[list[int]], Sequence[T]]) -> list[T]:
        """One result per key: those kept, and ``compute(indices)`` for the others (in that order),
        which are then kept. A disabled cache computes them all."""
        found = self.get_many(keys)
        out: list[Any] = [None] * len(keys)
        missing: list[int] = []
        for i, key in enumerate(keys):
            try:
                out[i] = codec.decode(found[key])
            except DECODE_ERRORS:  # not there, or not what we wrote
                missing.append(i)
        if missing:
            computed = compute(missing)
            for i, value in zip(missing, computed):
                out[i] = value
            if self.db is not None:
                self.put_many(
                    [(keys[i], e) for i, value in zip(missing, computed) if (e := codec.encode(value)) is not None]
                )
        return out

    def close(self) -> None:
        """Give evicted pages back to the file system and release the database."""
        if self.db is not None:
            try:
                self.db.execute("PRAGMA incremental_vacuum").fetchall()
            except sqlite3.Error:
                pass
            self.db.close()
            self.db = None


def _seal(key: str, parts: Sequence[bytes]) -> bytes:
    """An entry's seal: the digest of its key and its bytes (given in parts)."""
    h = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16)
    h.update(b"\0")
    for part in parts:
        h.update(part)
    return h.digest()


# --- JSON <-> model ---------------------------------------------------------------------

_GATE_FIELDS = tuple(f.name for f in fields(Gate))
_STRING_TUPLES = (
    "admits",
    "unknowns",
    "chain",
    "name_implies",
    "surely",
    "settled",
    "extensions",
    "remarks",
    "built_by",
    "prebuilt_elsewhere",
    "builds",
    "platform",
    "emits",
)
"""Shared through a table: 40,000 gates hold a few hundred distinct admitted sets and chains."""
_INTS = ("line", "end_line")
_WORDS = {n: t for n, t in get_type_hints(Gate).items() if isinstance(t, type) and issubclass(t, Word)}
"""Fields of a closed vocabulary (kind, language, ...), decoded into their enum."""
_STRS = tuple(
    n
    for n in _GATE_FIELDS
    if n not in _STRING_TUPLES + _INTS + tuple(_WORDS) + ("features", "resolutions", "body_lines", "toolkits")
)


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
                v = [
                    [x.token, x.line, x.feature, x.min_arch, [list(p) for p in x.on_target], x.notes, x.source]
                    for x in v
                ]
            elif name == "resolutions":
                v = [[r.name, r.file, r.line, r.detail] for r in v]
            elif name == "body_lines":
                v = list(v)
            elif name == "toolkits":
                v = [[target, list(releases)] for target, releases in v]
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


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        raise ValueError("expected a boolean")
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
    words = [(index[n], word) for n, word in _WORDS.items()]
    feats, res, body, kits = index["features"], index["resolutions"], index["body_lines"], index["toolkits"]
    pool: dict = {}  # equal values held once: a whole environment's gates repeat most of theirs

    def one(value: Any) -> Any:
        return pool.setdefault(value, value)

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
            v[i] = one(_str(v[i]))
        for i, word in words:
            v[i] = word(_str(v[i]))
        v[feats] = one(
            tuple(
                one(
                    Feature(
                        _str(t), _int(ln), _str(f), _str(m), tuple((_str(c), _str(w)) for c, w in on), _str(n), _str(s)
                    )
                )
                for t, ln, f, m, on, n, s in v[feats]
            )
        )
        v[res] = one(tuple(Resolution(_str(n), _str(f), _int(ln), _str(dt)) for n, f, ln, dt in v[res]))
        first, last = v[body]
        v[body] = one((_int(first), _int(last)))
        v[kits] = one(tuple((_str(target), tuple(_str(r) for r in releases)) for target, releases in v[kits]))
        out.append(Gate(*v))
    return out


def _errors(rows: Any) -> list[FileError]:
    return [FileError(_str(f), _str(r), _str(i)) for f, r, i in rows]


def _encode_extracted(value: tuple[list[Gate], list[FileError]]) -> dict:
    gates, errors = value
    return {"gates": encode_gates(gates), "errors": [[e.file, e.reason, e.input] for e in errors]}


def _decode_extracted(d: Any) -> tuple[list[Gate], list[FileError]]:
    return decode_gates(d["gates"]), _errors(d["errors"])


EXTRACTED: Codec[tuple[list[Gate], list[FileError]]] = Codec(_encode_extracted, _decode_extracted)
"""Gates as extracted (before features and rules) and the errors of extracting them."""


def _encode_evaluated(e: Evaluated) -> dict:
    def errors(rows: Sequence[FileError]) -> list:
        return [[x.file, x.reason, x.input] for x in rows]

    return {
        "gates": encode_gates(e.gates),
        "errors": errors(e.errors),
        "loaded": errors(e.loaded),
        "modules": [list(m) for m in e.modules],
        "by_name": [[k, list(paths)] for k, paths in e.by_name],
    }


def _decode_evaluated(d: Any) -> Evaluated:
    return Evaluated(
        tuple(decode_gates(d["gates"])),
        tuple(_errors(d["errors"])),
        tuple(_errors(d["loaded"])),
        tuple((_str(p), _str(h)) for p, h in d["modules"]),
        tuple((_str(k), tuple(_str(p) for p in paths)) for k, paths in d["by_name"]),
    )


EVALUATED: Codec[Evaluated] = Codec(_encode_evaluated, _decode_evaluated)
"""One batch of Python modules evaluated, with what the evaluation read (:class:`Evaluated`)."""


class KeptBatches:
    """The Python pass's batches kept in the result cache (:class:`~auditor.python.extract.Kept`)."""

    def __init__(self, cache: Cache) -> None:
        self.cache = cache

    def recall(self, keys: Sequence[str]) -> dict[str, Evaluated]:
        """The batches found among ``keys``; one that does not decode is a miss."""
        out = {}
        for key, entry in self.cache.get_many(keys).items():
            try:
                out[key] = EVALUATED.decode(entry)
            except DECODE_ERRORS:
                pass
        return out

    def keep(self, items: Sequence[tuple[str, Evaluated]]) -> None:
        """Keep these batches for the next scan."""
        self.cache.put_many([(key, EVALUATED.encode(e)) for key, e in items])

    def get(self, key: str) -> Any:
        """A JSON entry of the pass (what a load did), or None."""
        return self.cache.get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The JSON entries of the pass found among ``keys``."""
        return self.cache.get_many(keys)

    def put_many(self, items: Sequence[tuple[str, Any]]) -> None:
        """Keep these JSON entries of the pass."""
        self.cache.put_many(items)


@dataclass(frozen=True)
class InputResult:
    """One input's finished result under one set of options."""

    gates: list[Gate]
    """With the features they use."""
    findings: list[Finding]
    errors: list[FileError]
    binaries: tuple[Binary, ...]


def _encode_final(r: InputResult) -> dict:
    return {
        "gates": encode_gates(r.gates),
        "findings": [[getattr(f, x.name) for x in fields(Finding)] for f in r.findings],
        "errors": [[e.file, e.reason, e.input] for e in r.errors],
        "binaries": [
            [b.path, b.package, b.input, [[e.kind, e.target, e.compressed, e.note] for e in b.entries], b.verdicts]
            for b in r.binaries
        ],
    }


def _decode_final(d: Any) -> InputResult:
    return InputResult(
        decode_gates(d["gates"]),
        [
            Finding(
                _str(r),
                Severity(s),
                _str(g),
                _str(f),
                _int(ln),
                _str(m),
                _str(c),
                Classification(k),
                _str(i),
                tuple((_str(a), _int(b)) for a, b in also),
                _str(root),
                _str(tree),
                _str(decision),
            )
            for r, s, g, f, ln, m, c, k, i, also, root, tree, decision in d["findings"]
        ],
        _errors(d["errors"]),
        tuple(
            Binary(
                _str(path),
                _str(package),
                _str(inp),
                tuple(EmbeddedCode(_str(k), _str(t), _bool(c), _str(n)) for k, t, c, n in entries),
                tuple((_str(label), Loadability(v)) for label, v in verdicts),
            )
            for path, package, inp, entries, verdicts in d["binaries"]
        ),
    )


FINAL: Codec[InputResult] = Codec(_encode_final, _decode_final)

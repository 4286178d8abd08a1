"""Which GPU code a built shared object carries, and whether a device can run it.

Source gates say what a build *could* contain; the binary says what it *does*. nvcc embeds a
fatbinary in an ELF section: ``.nv_fatbin`` (what the CUDA runtime loads) or
``__nv_relfatbin`` (relocatable code kept for a later device link). This module reads it with
pyelftools and ``struct`` alone, so no CUDA toolkit is needed at run time.

The layout, checked against nvcc 13.0 output and CUDA 12 wheels (all little-endian):

- A section is a run of containers. Container header, 16 bytes: magic ``0xBA55ED50`` (u32),
  version 1 (u16), header size 16 (u16), size of the entries that follow (u64).
- Each entry: a header of at least 64 bytes, then its payload padded to 8 bytes.
  Offsets: 0 kind (u16: 1 PTX, 2 SASS cubin, 8 LTO-IR), 2 version (u16), 4 header size (u32),
  8 padded payload size (u64), 16 compressed size (u32, 0 when stored), 20 unknown (u32),
  24 code version minor, major (u16 each), 28 arch number (u32, 90 for sm_90), 32 name
  offset and length (u32 each), 40 flags (u64), 48 reserved (u64), 56 uncompressed size (u64).
- Flags: ``0x2000`` LZ4 block, ``0x8000`` zstd frame, ``0x100000`` the ``a`` variant,
  ``0x200000`` the ``f`` variant.

The header flags decide the suffix. Where the payload can be read (stored, or decompressed
with ``lz4`` / ``zstandard``) it is checked as well: a cubin's ELF ``e_flags`` accelerator bit,
a PTX module's ``.target`` line. Cubins from nvcc 13 (ELF ABI 8) do not set that bit, and no
cubin says ``f``, so the payload can only add a suffix the flags lack, never remove one.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import importlib
import io
import json
import posixpath
import re
import shutil
import struct
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import accumulate, chain
from types import ModuleType
from typing import IO, Any, TypeVar, overload

from elftools.elf.elffile import ELFFile

from auditor import arch, datafiles, verdicts
from auditor.facts.code import line_matches
from auditor.model import Binary, EmbeddedCode, FileError, Gate, Guards, Language, Loadability, SourceFile, Target


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


_lz4 = _optional("lz4.block")
_zstd = _optional("zstandard")
"""Optional: without them compressed payloads are listed from their headers alone."""


@dataclass(frozen=True, slots=True)
class BinaryListing:
    """The GPU code of one binary file."""

    path: str
    entries: tuple[EmbeddedCode, ...]


class BinaryError(Exception):
    """A file that is not a readable ELF, or whose fatbinary is malformed.

    The message is the reason alone, on one line; the caller knows the path.
    """


FATBIN_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")
_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
_RELOCATABLE_NOTE = "relocatable (__nv_relfatbin): input to a device link"
_SCANNED_NOTE = "found by scanning: no .nv_fatbin section"

_KINDS = {1: ("ptx", "compute_"), 2: ("sass", "sm_")}
"""Entry kinds listed; others (8, LTO-IR) are not code a device loads."""
_SUFFIX_FLAGS = ((0x100000, "a"), (0x200000, "f"))
_COMPRESSION_FLAGS = ((0x2000, "lz4"), (0x8000, "zstd"))
_MAX_UNPACKED = 1 << 30
"""A larger stated size is a damaged header, not a cubin: decompressing it would exhaust memory."""


def _lz4_block(data: bytes, size: int) -> bytes:
    assert _lz4 is not None
    return _lz4.decompress(data, uncompressed_size=size)


def _zstd_frame(data: bytes, size: int) -> bytes:
    assert _zstd is not None
    return _zstd.ZstdDecompressor().decompress(data, max_output_size=size)


_DECOMPRESS: dict[str, tuple[Callable[[bytes, int], bytes], str]] = {
    "lz4": (_lz4_block, "" if _lz4 else "lz4 is not installed"),
    "zstd": (_zstd_frame, "" if _zstd else "zstandard is not installed"),
}
"""Compression name -> (decompressor, why it is unavailable or "")."""

_VERDICTS = (("sass", Loadability.NATIVE), ("ptx", Loadability.JIT))
"""Checked in order: SASS that fits runs as is, PTX that fits is JIT-compiled."""

_TARGET = re.compile(r"^(?:sm|compute)_(\d+)([af]?)$")
_PTX_TARGET = re.compile(rb"^\s*\.target\s+sm_(\d+)([af]?)", re.M)


Opener = Callable[[Any], AbstractContextManager[IO[bytes]]]
"""Opens a scanned file's bytes as a stream (the sources' ``open_file``)."""


def _in_memory(f: Any) -> AbstractContextManager[IO[bytes]]:
    return io.BytesIO(f.data)


CHUNK = 1 << 20
"""Bytes read at a time where a file is read through: copied to a temporary file, or
searched for the fatbin magic or a name."""


def read_embedded(data: bytes | IO[bytes], path: str) -> BinaryListing:
    """List the SASS and PTX in an ELF file's fatbinaries, each distinct entry once, sorted.

    ``data`` is the file's bytes or a binary stream. A stream is read by section: the ELF
    headers, the fatbin sections' container and entry headers, and one payload per distinct
    entry, never the whole file (a kernels library ships shared objects of hundreds of MB). A
    stream that seeks backwards by starting again (a zip member) is first copied to a
    temporary file, a megabyte at a time."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return read_embedded(io.BytesIO(data), path)
    with _seekable(data) as stream:
        if stream.read(4) != b"\x7fELF":
            raise BinaryError("not an ELF file")
        try:
            entries = _classified(_raw_entries(_Blob(stream)))
        except BinaryError:
            raise
        except Exception as exc:  # pyelftools raises many kinds on damaged input
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BinaryError(f"malformed ELF: {reason}") from None
    return BinaryListing(path=path, entries=tuple(sorted(entries, key=_sort_key)))


@contextmanager
def _seekable(stream: IO[bytes]) -> Iterator[IO[bytes]]:
    """The stream itself when it is a file or in memory, else a temporary copy of it."""
    if isinstance(stream, io.BytesIO) or _has_fileno(stream):
        stream.seek(0)
        yield stream
        return
    with tempfile.TemporaryFile(prefix="archaudit-") as copy:
        shutil.copyfileobj(stream, copy, CHUNK)
        copy.seek(0)
        yield copy


def _has_fileno(stream: IO[bytes]) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        return False
    return True


class _Blob:
    """A seekable stream read at offsets."""

    def __init__(self, stream: IO[bytes]):
        self.stream = stream
        self.size = stream.seek(0, io.SEEK_END)

    def read(self, offset: int, n: int) -> bytes:
        self.stream.seek(offset)
        return self.stream.read(n)

    def chunks(self, offset: int, end: int) -> Iterator[tuple[int, bytes]]:
        """(offset, bytes) of ``offset..end`` in pieces of :data:`CHUNK`."""
        size = CHUNK
        while offset < end:
            piece = self.read(offset, min(size, end - offset))
            if not piece:
                return
            yield offset, piece
            offset += len(piece)


def loadability(entries: Iterable[EmbeddedCode], capability: str) -> Loadability:
    """``native`` if some SASS runs on ``capability`` (``12.0``), else ``jit`` if some PTX can be
    compiled for it, else ``none``."""
    device = arch.Capability.parse(capability)
    fitting = {e.kind for e in entries if arch.runs_on(e.kind, e.target, device)}
    return next((verdict for kind, verdict in _VERDICTS if kind in fitting), Loadability.NONE)


def read_binaries(
    files: Sequence[SourceFile], input_name: str, opener: Opener = _in_memory
) -> tuple[list[BinaryListing], list[FileError]]:
    """The GPU code embedded in an input's shared objects, by path; unreadable ones as errors.
    Each is read through ``opener``, as a stream (:func:`read_embedded`).

    A ``binary-listing`` file is a rule example's stand-in for one (``rulebook.Example``): a
    JSON list of the targets it embeds."""
    listings, errors = [], []
    for f in sorted((f for f in files if f.language in ("binary", "binary-listing")), key=lambda f: f.path):
        if f.language == "binary-listing":
            entries = (
                EmbeddedCode("ptx" if t.startswith("compute_") else "sass", t, False, "rule example")
                for t in json.loads(f.data)
            )
            listings.append(BinaryListing(f.path, tuple(entries)))
            continue
        try:
            with opener(f) as stream:
                listings.append(read_embedded(stream, f.path))
        except Exception as exc:  # BinaryError, or the opener's own: the file went away since it was listed
            errors.append(FileError(f.path, f"not a readable shared object: {exc}", input_name))
    return listings, errors


def binary_records(listings: Sequence[BinaryListing], input_name: str, targets: Sequence[Target]) -> tuple[Binary, ...]:
    """Listings as the result records them: package, entries, per-target loadability (none without GPU code)."""
    return tuple(
        Binary(
            b.path,
            b.path.split("/", 1)[0],
            input_name,
            b.entries,
            tuple((t.label, loadability(b.entries, t.capability)) for t in targets) if b.entries else (),
        )
        for b in listings
    )


def package_verdicts(records: Sequence[Binary]) -> dict[str, dict[str, Loadability]]:
    """Per package, the best loadability over its binaries with GPU code, by target label (the rules
    join it with the gates: a package whose binaries cannot load on a target)."""
    out: dict[str, dict[str, Loadability]] = {}
    for r in records:
        if not r.verdicts:
            continue
        best = out.setdefault(r.package, {})
        for label, verdict in r.verdicts:
            if verdict.rank >= best.get(label, Loadability.NONE).rank:
                best[label] = verdict
    return {p: dict(sorted(v.items())) for p, v in sorted(out.items())}


def _sort_key(e: EmbeddedCode) -> tuple:
    m = _TARGET.match(e.target)
    number, suffix = (int(m.group(1)), m.group(2)) if m else (0, e.target)
    return (e.kind != "sass", number, suffix, e.compressed, e.note)


@dataclass(frozen=True, slots=True)
class _Raw:
    """One fatbin entry as its header states it, with where its payload lies."""

    kind: int
    number: int
    flags: int
    unpacked: int
    payload: tuple[int, int]
    """(offset in the file, length): read only for the first entry of each header."""
    note: str


def _classified(raws: Iterable[tuple[_Blob, _Raw]]) -> set[EmbeddedCode]:
    """Name each distinct header once: a binary repeats the same header in one container per
    translation unit, so the first payload of each stands for the rest."""
    named: dict[tuple, EmbeddedCode] = {}
    for blob, raw in raws:
        key = (raw.kind, raw.number, raw.flags, raw.note)
        if key not in named:
            named[key] = _classify(raw, blob.read(*raw.payload))
    return set(named.values())


def _raw_entries(blob: _Blob) -> Iterator[tuple[_Blob, _Raw]]:
    """Every listed entry of every container, from the fatbin sections or, failing those, a scan."""
    elf = ELFFile(blob.stream)
    sections = list(elf.iter_sections())
    fatbins = [s for s in sections if s.name in _SECTIONS]
    for section in fatbins:
        start, size = section["sh_offset"], section["sh_size"]
        if section["sh_type"] == "SHT_NOBITS" or start + size > blob.size:
            raise BinaryError(f"section {section.name} runs past the end of the file (truncated?)")
        note = _RELOCATABLE_NOTE if section.name == "__nv_relfatbin" else ""
        yield from ((blob, r) for r in _walk_section(blob, start, start + size, section.name, note))
    if not fatbins and (not sections or any(s.name == ".nvFatBinSegment" for s in sections)):
        yield from ((blob, r) for r in _scan(blob))


def _walk_section(blob: _Blob, start: int, stop: int, where: str, note: str) -> Iterator[_Raw]:
    """Containers back to back; trailing zero padding is allowed, anything else is an error.
    Offsets in messages are from the section's start."""
    offset = start
    while offset < stop:
        end = _container_end(blob, offset, stop)
        if end is None:
            if all(not piece.strip(b"\0") for _, piece in blob.chunks(offset, stop)):
                return
            raise BinaryError(f"{where}: no valid fatbinary container at offset {offset - start}")
        yield from _container(blob, offset, end, where, note, start)
        offset = end


_MAGIC = struct.pack("<I", FATBIN_MAGIC)


def _scan(blob: _Blob) -> Iterator[_Raw]:
    """Containers anywhere in the file, for binaries whose fatbin is not in its own section."""
    for offset in _occurrences(blob, _MAGIC):
        end = _container_end(blob, offset, blob.size)
        if end is not None:
            try:
                yield from list(_container(blob, offset, end, "scan", _SCANNED_NOTE))
            except BinaryError:
                pass  # the magic by chance, not a container


def _occurrences(blob: _Blob, needle: bytes) -> Iterator[int]:
    """Every offset of ``needle`` in the file, in order, read a chunk at a time."""
    carry, base = b"", 0
    for offset, piece in blob.chunks(0, blob.size):
        window, base = carry + piece, offset - len(carry)
        found = window.find(needle)
        while found >= 0:
            yield base + found
            found = window.find(needle, found + 1)
        carry = window[-(len(needle) - 1) :]


def _container_end(blob: _Blob, offset: int, stop: int) -> int | None:
    """Where the container at ``offset`` ends (at most ``stop``), or None if no valid header is there."""
    if offset + _CONTAINER.size > stop:
        return None
    magic, version, header, size = _CONTAINER.unpack(blob.read(offset, _CONTAINER.size))
    end = offset + header + size
    if magic != FATBIN_MAGIC or version != 1 or header < _CONTAINER.size or end > stop:
        return None
    return end


def _container(blob: _Blob, offset: int, end: int, where: str, note: str, origin: int = 0) -> Iterator[_Raw]:
    """The listed entries of one container (offsets in messages counted from ``origin``)."""
    pos = offset + _CONTAINER.unpack(blob.read(offset, _CONTAINER.size))[2]
    while pos < end:
        if pos + _ENTRY.size > end:
            raise BinaryError(f"{where}: entry header at offset {pos - origin} is cut short")
        kind, _, head, padded, packed, *_, number, _, _, flags, _, unpacked = _ENTRY.unpack(blob.read(pos, _ENTRY.size))
        next_pos = pos + head + padded
        if head < _ENTRY.size or next_pos > end or packed > padded:
            raise BinaryError(f"{where}: entry at offset {pos - origin} overruns its container")
        if kind in _KINDS:
            yield _Raw(kind, number, flags, unpacked, (pos + head, packed or padded), note)
        pos = next_pos


def _classify(raw: _Raw, payload: bytes) -> EmbeddedCode:
    """Name an entry from its header flags, cross-checked with its payload where readable."""
    name, prefix = _KINDS[raw.kind]
    number = raw.number
    suffix = next((s for bit, s in _SUFFIX_FLAGS if raw.flags & bit), "")
    compression = next((c for bit, c in _COMPRESSION_FLAGS if raw.flags & bit), "")
    notes = [raw.note] if raw.note else []
    code, problem = _readable(payload, compression, raw.unpacked)
    if problem:
        notes.append(f"payload not read ({problem}): suffix from the fatbin header flags only")
    else:
        seen = _payload_target(name, code)
        if seen is None:
            notes.append(f"payload names no target (flags {raw.flags:#x}): suffix from the fatbin header flags only")
        else:
            seen_number, seen_suffix = seen
            suffix = suffix or seen_suffix
            if seen_number != number:
                notes.append(f"payload says {prefix}{seen_number}{seen_suffix}")
    return EmbeddedCode(
        kind=name, target=f"{prefix}{number}{suffix}", compressed=bool(compression), note="; ".join(notes)
    )


def _readable(payload: bytes, compression: str, unpacked: int) -> tuple[bytes, str]:
    """The payload as stored or decompressed, or why it could not be read."""
    if not compression:
        return payload, ""
    decompress, missing = _DECOMPRESS[compression]
    if missing:
        return b"", f"{compression}-compressed, {missing}"
    if unpacked > _MAX_UNPACKED:
        return b"", f"{compression}-compressed, claims {unpacked} bytes unpacked"
    try:
        return decompress(payload, unpacked), ""
    except Exception as exc:  # each library has its own error type
        return b"", f"{compression} decompression failed: {type(exc).__name__}"


def _payload_target(kind: str, code: bytes) -> tuple[int, str] | None:
    """(arch number, ``a`` or "") from a cubin's ELF header, (number, suffix) from PTX ``.target``."""
    if kind == "ptx":
        m = _PTX_TARGET.search(code)
        return (int(m.group(1)), m.group(2).decode()) if m else None
    if len(code) < 52 or not code.startswith(b"\x7fELF"):
        return None
    (e_flags,) = struct.unpack_from("<I", code, 48)
    if code[8] >= 8:  # ELF ABI 8 (CUDA 13): arch in bits 8-15, accelerator bit 0x8
        return (e_flags >> 8) & 0xFF, "a" if e_flags & 0x8 else ""
    return e_flags & 0xFF, "a" if e_flags & 0x800 else ""


# --- evidence: which shipped extension a gate's guarded code reaches --------------------

_TORCH_OPS = re.compile(r"\btorch\.ops\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?")
_NAME_LIKE = re.compile(r"[A-Za-z_][\w.-]{0,63}")
_BUILD_TARGET = re.compile(r"\b(?:sm|compute)_?(\d{2,3})([af])(?:_nvcc_flags)?\b")
"""An arch- or family-specific build target a loader or a flag list names (``"sm_120a"``,
``-gencode=arch=compute_120a,code=sm_120a``, ``sm120a_nvcc_flags``)."""


_ANSWER = re.compile(r"\s*return\s+False\s*$")
"""A check that answers ``False`` is a predicate's: what it guards is what its callers run when
it answers ``True``, not the rest of its own body."""
_RETURNED = re.compile(r"\s*return\s")
"""A test a function returns is its answer: its callers guard code with it."""
_IMPORT = re.compile(r"\s*(?:from|import)\s")
"""A line that imports binds a name and runs none of the module's kernels."""


def build_targets(text: str) -> set[str]:
    """The arch- and family-specific nvcc targets a text names, as ``sm_120a``."""
    return {f"sm_{m.group(1)}{m.group(2)}" for m in _BUILD_TARGET.finditer(text)}


def module_of(path: str) -> str:
    """The dotted module a shared object or Python file is imported as (``vllm/_C.abi3.so`` ->
    ``vllm._C``, ``pkg/__init__.py`` -> ``pkg``)."""
    head, _, base = path.rpartition("/")
    stem = base.split(".", 1)[0]
    parts = [p for p in head.split("/") if p]
    return ".".join(parts if stem == "__init__" else parts + [stem])


def evidence(verdicts: Mapping[str, Mapping[str, str]], paths: Iterable[str]) -> dict[str, str]:
    """Per target label, the best loadability over the binaries ``paths`` (a gate's ``extensions``)."""
    best: dict[str, Loadability] = {}
    for path in paths:
        for label, verdict in verdicts.get(path, {}).items():
            v = Loadability(verdict)
            if v.rank >= best.get(label, Loadability.NONE).rank:
                best[label] = v
    return {label: str(v) for label, v in sorted(best.items())}


def binary_verdicts(records: Sequence[Binary]) -> dict[str, dict[str, Loadability]]:
    """Per binary with GPU code, its loadability by target label."""
    return {r.path: dict(r.verdicts) for r in records if r.verdicts}


def with_extensions(
    gates: Sequence[Gate],
    files: Sequence,
    records: Sequence[Binary],
    opener: Opener = _in_memory,
    summaries: MutableMapping[str, Any] | None = None,
) -> list[Gate]:
    """The Python gates, each with the shipped extensions its guarded code reaches.

    Reaching means, in the guarded lines (for a rejection guard, the rest of its block): a
    ``torch.ops.NS`` namespace that a binary registers (its name is in the binary as a C
    string), an import of an extension module or a use of a name bound to one, a function of
    a Python module of the input that does one of these itself, a call of a function of the
    same file whose body does (and the functions of the file those call, a few levels deep:
    a loader behind a loader), or a string naming where binaries of the same package lie (a
    loader's path). A JIT-compiled or CuTe-DSL path reaches no shipped binary: no evidence.

    Where no binary of the input is reached but the code calls a package with prebuilt kernels
    that the input does not hold (:func:`prebuilt_packages`: ``from sgl_kernel.flash_attn import
    …``, ``torch.ops.sgl_kernel.fwd``), the gate records that package instead
    (``Gate.prebuilt_elsewhere``): its build is the evidence, and this scan does not have it.

    ``summaries``: per Python file path, what it holds for the evidence as JSON
    (:func:`source_summary`), from a scan before; the files read here are added to it."""
    gpu = [r for r in records if r.verdicts]
    python = {f.path: f for f in files if f.language == "python"}
    wanted = [i for i, g in enumerate(gates) if g.language == Language.PYTHON and g.file in python]
    if not wanted:
        return list(gates)
    tests: dict[str, dict[int, tuple[int, int]]] = {}
    bodies: dict[str, list[tuple[int, int, frozenset[str]]]] = {}
    for i in wanted:
        g = gates[i]
        body = g.body_lines if g.guards != Guards.REJECT else (0, 0)
        tests.setdefault(g.file, {}).update((n, body) for n in range(g.line, max(g.end_line, g.line) + 1))
        if g.guards != Guards.REJECT and body[0] > g.end_line:
            bodies.setdefault(g.file, []).append((*body, frozenset(g.admits)))
    reach = _Reach(python, gpu, summaries, tests, bodies)
    found = {i: reach.gate(gates[i]) for i in wanted}
    shipped = {f.path: f for f in files if f.language in ("binary", "binary-listing")}
    ops = {op for refs in found.values() for kind, op in refs if kind == "ns"}
    registers = _registrants(ops, gpu, shipped, opener) if gpu else {}
    out = list(gates)
    for i, refs in found.items():
        paths = sorted(
            {p for kind, x in refs for p in (registers.get(x, ()) if kind == "ns" else (x,)) if kind != "far"}
        )
        far = {x for kind, x in refs if kind == "far"}
        far |= {
            ns
            for kind, x in refs
            if kind == "ns" and not registers.get(x) and reach.elsewhere(ns := x.partition(".")[0])
        }
        if paths:
            out[i] = replace(out[i], extensions=tuple(paths))
        elif far:
            out[i] = replace(out[i], prebuilt_elsewhere=tuple(sorted(far)))
        builds = reach.builds(gates[i]) if _splits_a_major(gates[i]) else ()
        if builds:
            out[i] = replace(out[i], builds=tuple(sorted(builds)))
    return out


def prebuilt_packages() -> Mapping[str, str]:
    """Top-level module -> distribution, for the packages whose kernels come prebuilt."""
    return _kernel_packages()["prebuilt"]


@lru_cache(maxsize=1)
def _kernel_packages() -> Mapping[str, Any]:
    return datafiles.read_json("kernel-packages.json")


def _registrants(
    ops: set[str], gpu: Sequence[Binary], shipped: Mapping[str, Any], opener: Opener
) -> dict[str, tuple[str, ...]]:
    """Per ``torch.ops`` operator (``ns.op``) or namespace (``ns``), the binaries that register
    it. An operator is registered by the binaries holding its schema (``fwd(Tensor q, …``, a C
    string that starts with its name): of those, the ones that also hold the namespace's name
    when some do. A namespace, or an operator no schema names, by those holding the
    namespace's name as a C string; of several, those whose module name starts with the same
    word (``_C_cache_ops`` and ``_C_stable_libtorch``), when there are such. Each binary is
    read once, a chunk at a time."""
    needles = {("ns", k.partition(".")[0]): k.partition(".")[0].encode() + b"\0" for k in ops}
    needles |= {("op", k.partition(".")[2]): k.partition(".")[2].encode() + b"(" for k in ops if "." in k}
    needles = {k: b"\0" + n for k, n in needles.items()}
    holding: dict[tuple[str, str], list[str]] = {k: [] for k in needles}
    for r in gpu:
        f = shipped.get(r.path)
        if f is None or not needles:
            continue
        try:
            with opener(f) as stream:
                held = _holds(stream, needles)
        except Exception:  # the file went away since it was listed: it holds nothing
            held = set()
        for k in sorted(held):
            holding[k].append(r.path)
    out = {}
    for key in ops:
        ns, _, op = key.partition(".")
        by_ns = holding[("ns", ns)]
        by_schema = holding.get(("op", op), []) if op else []
        if by_schema:
            out[key] = tuple([p for p in by_schema if p in by_ns] or by_schema)
        else:
            near = [p for p in by_ns if _first_word(module_of(p).rpartition(".")[2]) == _first_word(ns)]
            out[key] = tuple(near or by_ns)
    return out


K = TypeVar("K")


def _holds(stream: IO[bytes], needles: Mapping[K, bytes]) -> set[K]:
    """The keys of ``needles`` whose bytes occur in the stream, read a chunk at a time."""
    found: set[K] = set()
    overlap = max(map(len, needles.values()), default=1) - 1
    carry = b""
    while len(found) < len(needles):
        piece = stream.read(CHUNK)
        if not piece:
            break
        window = carry + piece
        found.update(k for k, n in needles.items() if k not in found and n in window)
        carry = window[-overlap:] if overlap else b""
    return found


def _ops(text: str) -> set[str]:
    """The ``torch.ops`` operators a text calls, as ``ns.op`` (``ns`` when none is named)."""
    return {f"{ns}.{op}" if op else ns for ns, op in _TORCH_OPS.findall(text)}


def _first_word(name: str) -> str:
    return next((w for w in name.split("_") if w), "")


Ref = tuple[str, str]
"""``("ns", "namespace.operator")`` for a ``torch.ops`` call (``"namespace"`` when no operator is
named), ``("bin", path)`` for an extension, ``("far", module)`` for a package with prebuilt
kernels that the input does not hold."""


class Lines(Sequence[str]):
    """A text's lines (as ``text.split("\\n")`` gives them) without a string per line: the
    evidence keeps every Python file it reads, and a tuple of lines costs 2.5 times the text."""

    __slots__ = ("text", "starts")

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = array("I", accumulate((len(line) + 1 for line in text.split("\n")), initial=0))
        """Where each line starts, and one past the end."""

    def __len__(self) -> int:
        return len(self.starts) - 1

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        i %= n
        return self.text[self.starts[i] : self.starts[i + 1] - 1]


@dataclass(frozen=True, slots=True)
class _Source:
    """One Python file as the evidence reads it, indexed by line."""

    module: str
    lines: Lines
    uses: tuple[tuple[int, str], ...]
    """(line, dotted target) of each import statement's modules and each use of a bound name, by line."""
    calls: tuple[tuple[int, str], ...]
    """(line, name) of each call of a function defined in the file, by line."""
    functions: Mapping[str, tuple[int, int]]
    """Name -> (first, last line) of the file's functions and methods (the first of each name)."""
    strings: tuple[tuple[int, str], ...]
    """(line, text) of each short name-like string literal: a path a loader is given (``"sm90"``)."""
    after: tuple[tuple[int, int, int], ...]
    """(line of an ``if``, first and last line of the statements after it in its block), innermost
    first: what a rejection in that ``if`` lets through."""
    imported: Mapping[str, str]
    """Name -> dotted path of what the file's ``from … import`` statements bind: a package's
    ``__init__`` that re-exports ``from .impl import run`` hands ``run`` on."""
    constants: Mapping[str, tuple[int, int, bool]]
    """Name -> (first, last line, whether a call made it) of each module-level assignment to a
    plain name of a call (a program declared with its targets: ``GEMM = CakeProgram(…,
    targets=("sm_120a",))``) or of a table (``_GEMMS = {mode: GEMM, …}``, whose entries count,
    not its text: ``{(12, 0): "sm_120a", …}`` maps parts to targets and builds nothing). A read
    of an upper-case one is in ``uses``."""
    opaque: tuple[int, ...]
    """Lines with a call that may run a build the file does not show: a launch (``k[grid](…)``),
    a call of an import outside the buildless modules, of ``self``'s members or of an unknown
    name. Calls of the file's functions, the builtins and methods of values are not."""


Tests = Mapping[str, Mapping[int, tuple[int, int]]]
"""Per Python file, each line of its gates' conditions -> the lines that gate guards ((0, 0) for a
rejection, whose guarded code is what follows it)."""
Bodies = Mapping[str, Sequence[tuple[int, int, frozenset[str]]]]
"""Per Python file, the lines each of its branches guards, with the capabilities that take it."""

MAX_CALLERS = 8
"""A function called from more modules than this is a shared utility, not one kernel's check;
calls within one module are that module's own (a validation helper of its every entry point)."""

CALL_DEPTH = 3
"""How deep calls within one file are followed from guarded code: a loader that calls a loader
(``_load_kernels()`` -> ``_load_from_sgl()`` -> ``from sgl_kernel.flash_attn import …``)."""


class _Reach:
    """What Python code reaches of the shipped extensions, memoised per file and module.

    ``tests``: per file, the lines of its gates' conditions. A call there is a test, not code
    behind a gate: a predicate that lists every target it knows builds nothing. A caller
    that calls a helper in a test guards that test's body with it. ``bodies``: per file,
    the branches' guarded lines with the capabilities that take them (:meth:`builds`)."""

    def __init__(
        self,
        python: Mapping[str, Any],
        gpu: Sequence[Binary],
        summaries: MutableMapping[str, Any] | None,
        tests: Tests,
        bodies: Bodies,
    ):
        self.python = python
        self.summaries = summaries
        self.tests = tests
        self.bodies = bodies
        self.by_module = {module_of(r.path): r.path for r in gpu}
        self.by_part: dict[tuple[str, str], list[str]] = {}
        """(package, a directory or file stem under it) -> the binaries there: a loader given that
        name (``sgl_kernel``'s ``ops_subdir = "sm90"``) loads one of them."""
        for r in gpu:
            parts = r.path.split("/")
            for part in {*parts[1:-1], parts[-1].split(".", 1)[0]}:
                self.by_part.setdefault((parts[0], part), []).append(r.path)
        self.modules = {module_of(p): p for p in python}
        self.held = {m.split(".", 1)[0] for m in [*self.modules, *self.by_module]}
        """Top-level packages the input holds."""
        self._sources: dict[str, _Source | None] = {}
        self._direct_memo: dict[tuple[str, int, int], frozenset[Ref]] = {}
        self._callers_memo: dict[str, list[tuple[_Source, int, int]]] = {}
        self._importers: dict[str, set[str]] | None = None
        self._by_folder: Mapping[str, tuple[str, ...]] | None = None
        self._named_memo: dict[str, frozenset[str]] = {}
        self._targets_memo: dict[tuple[str, int, int], frozenset[str]] = {}
        self._built_memo: dict[tuple[str, int, int], frozenset[str]] = {}
        self._after_memo: dict[tuple[str, str, int, frozenset[str], str], tuple[frozenset[str], bool]] = {}

    def gate(self, gate: Gate) -> frozenset[Ref]:
        src = self.source(gate.file)
        if src is None:
            return frozenset()
        first, last = self._region(src, gate)
        if not first or first <= gate.line <= last:
            return frozenset()  # none, or the gate is an argument of what it "guards": that runs either way
        found = set(self._refs(src, first, last))
        package = gate.file.split("/", 1)[0]
        for _, text in _between(src.strings, first, last):
            found.update(("bin", p) for p in self.by_part.get((package, text), ()))
        for name in self._called(src, first, last):
            found.update(self._refs(src, *src.functions[name]))
        return frozenset(found)

    def builds(self, gate: Gate) -> frozenset[str]:
        """The arch- and family-specific build targets (``sm_120a``) of the code behind the gate,
        where the package pins them: what its guarded code names or reaches through the functions
        it calls (a loader whose JIT spec passes ``sm120a_nvcc_flags``); for a check in a helper
        with nothing after it, or a predicate's answer (``return False``, ``return other()``),
        what its callers run after calling it or when it passes (every caller, a few levels up);
        else what the gate's file names in its strings (``SM120_CODE_TARGET = "sm_120a"``), or
        the files of the predicates its condition reads (``return sm120a_available(dev)``, defined
        beside the kernel's ``SM120_CODE_TARGET``), or the modules of its backend's folder: a test
        lives with the build it guards.

        A caller whose call sits in a branch that none of the capabilities the gate turns away
        takes (``if cap == (12, 0): reason = check(...)``, by :attr:`bodies`) is no path to the
        check for them."""
        src = self.source(gate.file)
        if src is None:
            return frozenset()
        found: frozenset[str] = frozenset()
        first, last = self._region(src, gate)
        answers = gate.guards == Guards.REJECT and _ANSWER.match(
            src.lines[gate.end_line] if gate.end_line < len(src.lines) else ""
        )
        if first and not first <= gate.line <= last and not answers:
            found = self._built_in(src, first, last)
        if not found and (gate.guards == Guards.REJECT or _RETURNED.match(src.lines[gate.line - 1])):
            away = (
                frozenset(gate.admits)
                if gate.guards == Guards.REJECT
                else frozenset(arch.capabilities()) - set(gate.admits)
            )
            found = self._built_after_calls(src, gate.line, CALL_DEPTH, away)
        return frozenset(
            found
            or self._named(src)
            or {t for r in gate.resolutions for t in self._named_in(r.file)}
            or self._named_nearby(gate.file)
        )

    def _named(self, src: _Source) -> set[str]:
        """The build targets a file names in its short strings."""
        return {t for _, text in src.strings for t in build_targets(text)}

    def _named_in(self, path: str) -> frozenset[str]:
        """The build targets a Python file of the input names; none for another file. Asked
        for the files of a folder by each gate below it: found once per file."""
        found = self._named_memo.get(path)
        if found is None:
            src = self.source(path)
            found = frozenset(self._named(src)) if src is not None else frozenset()
            self._named_memo[path] = found
        return found

    def _named_nearby(self, path: str) -> set[str]:
        """What the modules of the nearest folder above the file that name any build target name,
        below the top-level package: a backend package whose every compile pins ``sm_120a``
        (``experimental/gdn_sm120_cute/consumer.py``) speaks for the checks of its other modules."""
        folder = posixpath.dirname(path)
        while folder.count("/") >= 1:
            found = {t for p in self._folders().get(folder, ()) for t in self._named_in(p)}
            if found:
                return found
            folder = posixpath.dirname(folder)
        return set()

    def _folders(self) -> Mapping[str, tuple[str, ...]]:
        """The input's Python files by folder."""
        if self._by_folder is None:
            by_folder: dict[str, list[str]] = {}
            for p in self.python:
                by_folder.setdefault(posixpath.dirname(p), []).append(p)
            self._by_folder = {k: tuple(sorted(v)) for k, v in by_folder.items()}
        return self._by_folder

    def _built_in(self, src: _Source, first: int, last: int) -> frozenset[str]:
        """The build targets lines ``first..last`` of a file name, and the functions they call
        (of the file, or of a Python module of the input) name; conditions are skipped. Found
        once per span: a caller's code is asked for by each check it calls."""
        key = (src.module, first, last)
        if key not in self._built_memo:
            self._built_memo[key] = frozenset(self._built_in_span(src, first, last))
        return self._built_memo[key]

    def _built_in_span(self, src: _Source, first: int, last: int) -> set[str]:
        skip = self.tests.get(self.modules.get(src.module, ""), {})
        lines = [n for n in range(first, last + 1) if n not in skip]
        found = build_targets(_code(src.lines[n - 1] for n in lines))
        called = {name for n in lines for _, name in _between(src.calls, n, n)}
        called |= {deeper for name in list(called) for deeper in self._called(src, *src.functions[name])}
        uses = [u for n in lines if not _IMPORT.match(src.lines[n - 1]) for u in _between(src.uses, n, n)]
        for name in called:
            a, b = src.functions[name]
            found |= self._targets(src, a, b)
            uses += _between(src.uses, a, b)
        for _, target in uses:
            found |= self._built_by(target)
        return found

    def _built_after_calls(self, src: _Source, line: int, depth: int, away: frozenset[str]) -> frozenset[str]:
        """What the callers of the function holding ``line`` build after calling it: a check
        helper (``require_sm120(device)``) guards what its callers then run. Every caller that
        the turned-away capabilities (``away``) can reach must reach a build, else nothing is
        known. A caller in the check's own module (``home``) that runs no build at all (torch
        operations and its file's helpers) is one step of the API the check serves, beside the
        steps that run its kernels, and says nothing either way; one in another module is a
        path of its own (a reference implementation), and its trap stands. A caller the
        turned-away parts cannot reach (its call sits in a branch only admitted parts take, or
        every caller of its own does) vetoes nothing, and speaks only when no other caller
        does (a check every caller makes behind a branch for the admitted parts alone)."""
        return self._after_calls(src, line, depth, away, src.module)[0]

    def _after_calls(
        self, src: _Source, line: int, depth: int, away: frozenset[str], home: str
    ) -> tuple[frozenset[str], bool]:
        """:meth:`_built_after_calls`, and whether the turned-away parts reach the function at
        all: not when it has callers and every one of them sits where only admitted parts go.
        Found once per function: every check in it, and every path up to it, asks the same."""
        held = _enclosing(src, line)
        if held is None or depth == 0:
            return frozenset(), True
        key = (src.module, held[0], depth, away, home)
        if key not in self._after_memo:
            self._after_memo[key] = self._after_calls_of(src, held[0], depth, away, home)
        return self._after_memo[key]

    def _after_calls_of(
        self, src: _Source, function: str, depth: int, away: frozenset[str], home: str
    ) -> tuple[frozenset[str], bool]:
        found: set[str] = set()
        aside: set[str] = set()  # what the callers the turned-away parts cannot reach build
        reached = False
        callers = self._callers(src, function)
        for caller, at, end in callers:
            path = self.modules[caller.module]
            admitted_only = any(a <= at <= b and not taken & away for a, b, taken in self.bodies.get(path, ()))
            first, last = self.tests.get(path, {}).get(at, (0, 0))
            if not first:  # not the test of an if: what runs after the call
                first, last = at + 1, end
            got = self._built_in(caller, first, last) if first <= last else frozenset()
            if not got:
                got, open_ = self._after_calls(caller, at, depth - 1, away, home)
                admitted_only = admitted_only or not open_
            if not got and caller.module == home and first <= last and self._runs_nothing(caller, first, last):
                reached = True
                continue  # a torch-only step of the check's own module
            if admitted_only:
                aside |= got
                continue
            if not got:
                return frozenset(), True
            found |= got
            reached = True
        return (frozenset(found), True) if reached else (frozenset(aside), not callers)

    def _runs_nothing(self, src: _Source, first: int, last: int) -> bool:
        """Whether lines ``first..last`` of a file, with the file's functions they call, run no
        build: no opaque call (:attr:`_Source.opaque`), no ``torch.ops`` and no extension. A
        portable kernel (a launch, a JIT module without pins) is not nothing."""
        spans = [(first, last), *(src.functions[n] for n in self._called(src, first, last))]
        if any(bisect.bisect_left(src.opaque, a) < bisect.bisect_right(src.opaque, b) for a, b in spans):
            return False
        return not any(next(self._refs(src, a, b), None) for a, b in spans)

    def _callers(self, src: _Source, name: str) -> list[tuple[_Source, int, int]]:
        """(file, line, last line of the calling function) of each call of a function in the
        input, inside a function (an import is no call): by the name bound to it in another
        module, or by its bare name in its own file; none past :data:`MAX_CALLERS` modules."""
        dotted = f"{src.module}.{name}"
        if dotted not in self._callers_memo:
            if self._importers is None:
                self._importers = _importers(self.python)
            named = self._importers.get(name, set()) | self._importers.get(src.module.rpartition(".")[2], set())
            others = (
                self.source(p)
                for p in sorted(named - {self.modules.get(src.module, "")})
                if not name.isascii() or name.encode() in self.python[p].data  # a use spells the name out
            )
            sites = chain(
                ((src, at) for at, called in src.calls if called == name and not _inside(src, name, at)),
                ((o, at) for o in others if o is not None for at, target in o.uses if target == dotted),
            )
            found: list[tuple[_Source, int, int]] = []
            modules: set[str] = set()
            for o, at in sites:
                held = _enclosing(o, at)
                if held is None:
                    continue
                modules.add(o.module)
                if len(modules) > MAX_CALLERS:  # stop reading files once past the cap
                    found = []
                    break
                found.append((o, at, held[1][1]))
            self._callers_memo[dotted] = found
        return self._callers_memo[dotted]

    def _built_by(self, dotted: str, depth: int = CALL_DEPTH) -> set[str]:
        """The build targets a function of a Python module of the input names, itself or in the
        functions of its file it calls (``load_x()`` -> ``gen_x_module()`` -> flags); a function
        a package re-exports (``pkg.run`` where ``pkg/__init__.py`` has ``from .impl import
        run``) is the one it imports."""
        parts = dotted.split(".")
        for n in range(len(parts) - 1, 0, -1):
            name = ".".join(parts[:n])
            if name in self.modules:
                src = self.source(self.modules[name])
                if src is not None and parts[n] in src.imported and depth:
                    return self._built_by(".".join([src.imported[parts[n]], *parts[n + 1 :]]), depth - 1)
                if src is not None and parts[n] in src.constants:
                    a, b, made = src.constants[parts[n]]
                    found = set(self._targets(src, a, b)) if made else set()
                    for _, target in _between(src.uses, a, b) if depth else ():
                        found |= self._built_by(target, depth - 1)  # a table of programs named elsewhere
                    return found
                if src is None or parts[n] not in src.functions:
                    return set()
                span = src.functions[parts[n]]
                spans = [span, *(src.functions[c] for c in self._called(src, *span))]
                return {t for a, b in spans for t in self._targets(src, a, b)}
        return set()

    def _targets(self, src: _Source, first: int, last: int) -> frozenset[str]:
        """The build targets lines ``first..last`` of a file name: a function's, asked for by
        every gate whose code calls it."""
        key = (src.module, first, last)
        found = self._targets_memo.get(key)
        if found is None:
            found = self._targets_memo[key] = frozenset(build_targets(_code(src.lines[first - 1 : last])))
        return found

    def elsewhere(self, package: str) -> bool:
        """Whether a top-level module is a package with prebuilt kernels that the input lacks."""
        return package in prebuilt_packages() and package not in self.held

    @staticmethod
    def _called(src: _Source, first: int, last: int) -> list[str]:
        """The file's functions that lines ``first..last`` call, and those these call in turn,
        up to :data:`CALL_DEPTH` levels; never the function the lines are in (that runs either way)."""
        seen: list[str] = []
        spans = [(first, last)]
        for _ in range(CALL_DEPTH):
            step = []
            for a, b in spans:
                for _, name in _between(src.calls, a, b):
                    span = src.functions[name]
                    if name not in seen and not span[0] <= first <= last <= span[1]:
                        seen.append(name)
                        step.append(span)
            spans = step
        return seen

    def source(self, path: str) -> _Source | None:
        if path not in self._sources:
            self._sources[path] = self._summarised(path) if path in self.python else None
        return self._sources[path]

    def _summarised(self, path: str) -> _Source | None:
        """A file as the evidence reads it: from its summary when one is kept, else read (and kept)."""
        data = self.python[path].data
        kept = self.summaries.get(path) if self.summaries is not None else None
        if kept is not None:
            try:
                return from_summary(module_of(path), data, kept)
            except (KeyError, IndexError, TypeError, ValueError):
                pass  # not what source_summary wrote: read the file
        src = _read(module_of(path), data, path.endswith("/__init__.py"))
        if self.summaries is not None:
            self.summaries[path] = source_summary(src)
        return src

    @staticmethod
    def _region(src: _Source, gate: Gate) -> tuple[int, int]:
        """The guarded lines; for a rejection guard, the statements after it in its block."""
        first, last = gate.body_lines
        if gate.guards != Guards.REJECT:
            return (first, last) if last >= first > 0 else (0, 0)
        return next(((a, b) for at, a, b in src.after if at <= gate.line < a), (0, 0))

    def _refs(self, src: _Source, first: int, last: int) -> Iterator[Ref]:
        """What the lines ``first..last`` of a file reach."""
        for op in _ops("\n".join(src.lines[first - 1 : last])):
            yield ("ns", op)
        for _, target in _between(src.uses, first, last):
            yield from self.target(target)

    def target(self, dotted: str) -> Iterator[Ref]:
        """What an imported module or object reaches: the extension itself; else, in the Python
        module that defines it, the function it names (``ops.cutlass_scaled_mm``) or the module's
        whole text, each read for direct references only."""
        parts = dotted.split(".")
        for n in range(len(parts), 0, -1):
            name = ".".join(parts[:n])
            if name in self.by_module:
                yield ("bin", self.by_module[name])
                return
            if name in self.modules:
                src = self.source(self.modules[name])
                if src is None:
                    return
                if n == len(parts):
                    yield from self._direct(src, 1, len(src.lines))
                elif parts[n] in src.functions:
                    yield from self._direct(src, *src.functions[parts[n]])
                return  # a class or a constant of the module: no specific call
        if self.elsewhere(parts[0]):
            yield ("far", parts[0])

    def _direct(self, src: _Source, first: int, last: int) -> frozenset[Ref]:
        """``torch.ops`` namespaces and extension modules that lines of a file name themselves."""
        key = (src.module, first, last)
        hit = self._direct_memo.get(key)
        if hit is None:
            found: set[Ref] = {("ns", op) for op in _ops("\n".join(src.lines[first - 1 : last]))}
            for _, target in _between(src.uses, first, last):
                parts = target.split(".")
                found.update(
                    ("bin", self.by_module[m])
                    for m in (".".join(parts[:n]) for n in range(len(parts), 0, -1))
                    if m in self.by_module
                )
            hit = self._direct_memo[key] = frozenset(found)
        return hit


_COMMENT = re.compile(r"""^((?:[^#'"\n]|'[^'\n]*'|"[^"\n]*")*)#.*$""", re.M)
"""A line's ``#`` comment, outside the quotes of that line."""


def _code(lines: Iterable[str]) -> str:
    """Python lines without their comments: a comment that says what a default context would
    choose (``normalizes SM 12.0 to compute_120f``) builds nothing."""
    return _COMMENT.sub(r"\1", "\n".join(lines))


def _between(rows: tuple[tuple[int, str], ...], first: int, last: int) -> tuple[tuple[int, str], ...]:
    lo = bisect.bisect_left(rows, (first, ""))
    hi = bisect.bisect_right(rows, (last, "\uffff"))
    return rows[lo:hi]


_IMPORTS = re.compile(rb"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+)?import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
"""An import statement, as bytes: read without parsing, so that finding a function's callers
parses only the files that import its name or its module."""


def _importers(python: Mapping[str, Any]) -> dict[str, set[str]]:
    """Name -> the Python files whose import statements name it (an imported function, or the
    last part of a module imported or imported from): where a call of a function can be."""
    found: dict[str, set[str]] = {}
    for path, file in python.items():
        for m in line_matches(_IMPORTS, file.data, b"import"):
            names = re.findall(rb"\w+", m.group(2)) + ([m.group(1).rpartition(b".")[2]] if m.group(1) else [])
            for n in names:
                found.setdefault(n.decode("ascii", "replace"), set()).add(path)
    return found


def _splits_a_major(gate: Gate) -> bool:
    """Whether the gate lets some parts of a major through and not others (``!= (12, 0)``): the
    only tests a part-specific build can agree with, so the only ones whose build is sought. A
    rejection lets through all but where it is certain (``arch is None or arch not in
    catalogued``, where ``arch`` is looked up for 12.0 alone, surely rejects 12.1 only)."""
    admitted = set(verdicts.allowed(gate))
    return any(0 < len(admitted & parts) < len(parts) for parts in _majors())


@lru_cache(maxsize=1)
def _majors() -> tuple[frozenset[str], ...]:
    """The capabilities of the device domain, grouped by major."""
    by_major: dict[str, set[str]] = {}
    for c in arch.capabilities():
        by_major.setdefault(c.partition(".")[0], set()).add(c)
    return tuple(frozenset(parts) for parts in by_major.values())


def _enclosing(src: _Source, line: int) -> tuple[str, tuple[int, int]] | None:
    """The innermost function of the file that holds ``line`` (the latest to start), and its span."""
    holding = [(name, span) for name, span in src.functions.items() if span[0] <= line <= span[1]]
    return max(holding, key=lambda item: item[1][0], default=None)


def _inside(src: _Source, name: str, line: int) -> bool:
    first, last = src.functions[name]
    return first <= line <= last


def _read(module: str, data: bytes, package: bool = False) -> _Source | None:
    """A Python file's imports, uses of imported names, functions and calls of them. A
    ``package``'s ``__init__`` imports ``from .impl`` out of itself, not out of its parent."""
    inside = f"{module}.__init__" if package else module
    text = data.decode("utf-8", "replace")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    bound: dict[str, str] = {}
    functions: dict[str, tuple[int, int]] = {}
    statements: list[tuple[int, str]] = []
    names: list[ast.Name] = []
    attributes: list[ast.Attribute] = []
    calls: list[tuple[int, str]] = []
    strings: list[tuple[int, str]] = []
    imported: dict[str, str] = {}
    invoked: list[ast.Call] = []
    holders: list[ast.AST] = []  # what holds statements: read once more for what follows each if
    constants = {
        t.id: (node.lineno, node.end_lineno or node.lineno, isinstance(node.value, ast.Call))
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        and isinstance(node.value, (ast.Call, ast.Dict, ast.List, ast.Tuple, ast.Set))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    }
    node: Any  # narrowed by its type, not by isinstance
    for node in _walk(tree):
        t = type(node)
        if _holds_statements(t):
            holders.append(node)
        if t is ast.Name:
            names.append(node)
        elif t is ast.Attribute:
            if type(node.value) is ast.Name:
                attributes.append(node)
        elif t is ast.Call:
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            calls.append((node.lineno, name))
            invoked.append(node)
        elif t is ast.Constant:
            if isinstance(node.value, str) and _NAME_LIKE.fullmatch(node.value):
                strings.append((node.lineno, node.value))
        elif t is ast.Import or t is ast.ImportFrom:
            binds = _imported(inside, node)
            bound.update(binds)
            if t is ast.ImportFrom:
                imported.update(binds)
            statements += [(node.lineno, m) for m in _modules(inside, node)]
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            functions.setdefault(node.name, (node.lineno, node.end_lineno or node.lineno))
    qualified = {id(a.value) for a in attributes if a.value.id in bound}  # type: ignore[attr-defined]
    after: list[tuple[int, int, int]] = []
    for node in holders:
        for block in (getattr(node, f, None) for f in ("body", "orelse", "finalbody")):
            if not isinstance(block, list):
                continue
            for i, stmt in enumerate(block[:-1]):
                if isinstance(stmt, ast.If):
                    after.append((stmt.lineno, block[i + 1].lineno, block[-1].end_lineno or block[-1].lineno))
    after.sort(key=lambda x: -x[0])  # innermost (latest) first
    uses = statements + [(n.lineno, bound[n.id]) for n in names if n.id in bound and id(n) not in qualified]
    uses += [  # a module constant read (``_FP8_GEMM[...]``): what it holds may be a program
        (n.lineno, f"{module}.{n.id}")
        for n in names
        if n.id in constants and n.id not in bound and n.id.upper() == n.id and isinstance(n.ctx, ast.Load)
    ]
    uses += [(a.lineno, f"{bound[a.value.id]}.{a.attr}") for a in attributes if a.value.id in bound]  # type: ignore[attr-defined]
    return _Source(
        module,
        Lines(text),
        tuple(sorted(uses)),
        tuple(sorted(c for c in calls if c[1] in functions)),
        functions,
        tuple(sorted(strings)),
        tuple(after),
        imported,
        constants,
        tuple(sorted({c.lineno for c in invoked if _opaque(c.func, bound, functions)})),
    )


def _walk(tree: ast.AST) -> list[ast.AST]:
    """Every node in :func:`ast.walk`'s order (breadth first, fields in order), gathered in one
    list without ``ast.walk``'s generators (with the type tests below, :func:`_read` of
    sglang 0.5.23's 4,719 files: 52 → 39 s, of which 15 s are the parse)."""
    out = [tree]
    for node in out:  # grows while read: each node's children go to the end
        for field in node._fields:
            v = getattr(node, field, None)
            if isinstance(v, ast.AST):
                out.append(v)
            elif isinstance(v, list):
                out.extend([x for x in v if isinstance(x, ast.AST)])
    return out


_HOLDERS: dict[type, bool] = {}


def _holds_statements(t: type) -> bool:
    """Whether nodes of type ``t`` may hold statements (what follows an ``if`` is read in them)."""
    holds = _HOLDERS.get(t)
    if holds is None:
        holds = _HOLDERS[t] = issubclass(t, (ast.stmt, ast.mod, ast.excepthandler, ast.match_case))
    return holds


def _opaque(f: ast.expr, bound: Mapping[str, str], functions: Mapping[str, Any]) -> bool:
    """Whether a call of ``f`` may run a build the file does not show (:attr:`_Source.opaque`)."""
    if isinstance(f, ast.Subscript):
        return True  # a launch: kernel[grid](...)
    root: ast.expr = f
    while isinstance(root, ast.Attribute):
        root = root.value
    if not isinstance(root, ast.Name):
        return False  # a method of a value some other call made
    if root.id in bound:
        dotted = ".".join([bound[root.id], *reversed(_attributes(f))])
        return not _buildless(dotted)
    if isinstance(f, ast.Attribute):
        return root.id in ("self", "cls")
    return f.id not in functions and f.id not in _BUILTINS  # type: ignore[attr-defined]


def _attributes(f: ast.expr) -> list[str]:
    """The attribute names of ``a.b.c``, innermost last: ``["c", "b"]``."""
    out = []
    while isinstance(f, ast.Attribute):
        out.append(f.attr)
        f = f.value
    return out


_BUILTINS = frozenset(dir(builtins))


@lru_cache(maxsize=4096)
def _buildless(dotted: str) -> bool:
    """Whether a dotted name lies in a module whose calls run no build (``data/kernel-packages.json``).
    Asked for every imported call of every file read, mostly the same few (``torch.empty``)."""
    data = _kernel_packages()
    return _under(dotted, data["buildless"]) and not _under(dotted, data["building"])


def _under(dotted: str, modules: Iterable[str]) -> bool:
    return any(dotted == m or dotted.startswith(m + ".") for m in modules)


def source_summary(src: _Source | None) -> Any:
    """What a Python file holds for the evidence, as JSON (its lines aside: they are its bytes),
    so that a file whose content is unchanged is not parsed again; 0 for a file ``ast`` rejects."""
    if src is None:
        return 0
    return [
        [list(u) for u in src.uses],
        [list(c) for c in src.calls],
        [[name, a, b] for name, (a, b) in src.functions.items()],
        [list(x) for x in src.strings],
        [list(x) for x in src.after],
        [[name, dotted] for name, dotted in sorted(src.imported.items())],
        [[name, a, b, made] for name, (a, b, made) in src.constants.items()],
        list(src.opaque),
    ]


def from_summary(module: str, data: bytes, summary: Any) -> _Source | None:
    """Inverse of :func:`source_summary` for a file of these bytes; raises ValueError (or
    TypeError, KeyError, IndexError) on anything it did not write."""
    if summary == 0 and type(summary) is int:
        return None
    uses, calls, functions, strings, after, imported, constants, opaque = summary

    def pair(row: Any) -> tuple[int, str]:
        line, text = row
        if type(line) is not int or type(text) is not str:
            raise ValueError("malformed summary")
        return line, text

    def ints(row: Any) -> tuple[int, ...]:
        if any(type(x) is not int for x in row):
            raise ValueError("malformed summary")
        return tuple(row)

    spans: dict[str, tuple[int, int]] = {}
    for name, a, b in functions:
        if type(name) is not str:
            raise ValueError("malformed summary")
        spans[name] = (a, b) if ints((a, b)) else (0, 0)
    found = [ints(x) for x in after]
    if any(len(x) != 3 for x in found):
        raise ValueError("malformed summary")
    return _Source(
        module,
        Lines(data.decode("utf-8", "replace")),
        tuple(map(pair, uses)),
        tuple(map(pair, calls)),
        spans,
        tuple(map(pair, strings)),
        tuple((x[0], x[1], x[2]) for x in found),
        {name: dotted for name, dotted in imported if type(name) is str and type(dotted) is str},
        {name: (a, b, made) for name, a, b, made in constants if ints((a, b)) and type(made) is bool},
        ints(opaque),
    )


def _base(module: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from … import`` names."""
    if not node.level:
        return node.module or ""
    package = module.split(".")[: -node.level]
    return ".".join([*package, *([node.module] if node.module else [])])


def _modules(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules (or objects) an import statement loads, dotted."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = _base(module, node)
    return [f"{base}.{a.name}" if base else a.name for a in node.names]


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> dict[str, str]:
    """Local name -> dotted path of what an import statement binds (``import a.b`` binds ``a``)."""
    if isinstance(node, ast.Import):
        return {a.asname or a.name.split(".")[0]: a.name if a.asname else a.name.split(".")[0] for a in node.names}
    return dict(zip((a.asname or a.name for a in node.names), _modules(module, node)))

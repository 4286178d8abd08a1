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

import importlib
import io
import json
import re
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType

from elftools.elf.elffile import ELFFile

from auditor import arch
from auditor.model import Binary, EmbeddedCode, FileError, Loadability, SourceFile, Target


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


def read_embedded(data: bytes, path: str) -> BinaryListing:
    """List the SASS and PTX in an ELF file's fatbinaries, each distinct entry once, sorted."""
    if not data.startswith(b"\x7fELF"):
        raise BinaryError("not an ELF file")
    try:
        entries = _classified(_raw_entries(data))
    except BinaryError:
        raise
    except Exception as exc:  # pyelftools raises many kinds on damaged input
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BinaryError(f"malformed ELF: {reason}") from None
    return BinaryListing(path=path, entries=tuple(sorted(entries, key=_sort_key)))


def loadability(entries: Iterable[EmbeddedCode], capability: str) -> Loadability:
    """``native`` if some SASS runs on ``capability`` (``12.0``), else ``jit`` if some PTX can be
    compiled for it, else ``none``."""
    device = arch.Capability.parse(capability)
    fitting = {e.kind for e in entries if arch.runs_on(e.kind, e.target, device)}
    return next((verdict for kind, verdict in _VERDICTS if kind in fitting), Loadability.NONE)


def read_binaries(files: Sequence[SourceFile], input_name: str) -> tuple[list[BinaryListing], list[FileError]]:
    """The GPU code embedded in an input's shared objects, by path; unreadable ones as errors.

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
            listings.append(read_embedded(f.data, f.path))
        except BinaryError as exc:
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
    payload: memoryview
    note: str


def _classified(raws: Iterable[_Raw]) -> set[EmbeddedCode]:
    """Name each distinct header once: a binary repeats the same header in one container per
    translation unit, so the first payload of each stands for the rest."""
    named: dict[tuple, EmbeddedCode] = {}
    for raw in raws:
        key = (raw.kind, raw.number, raw.flags, raw.note)
        if key not in named:
            named[key] = _classify(raw)
    return set(named.values())


def _raw_entries(data: bytes) -> Iterator[_Raw]:
    """Every listed entry of every container, from the fatbin sections or, failing those, a scan."""
    elf = ELFFile(io.BytesIO(data))
    sections = list(elf.iter_sections())
    view = memoryview(data)
    fatbins = [s for s in sections if s.name in _SECTIONS]
    for section in fatbins:
        start, size = section["sh_offset"], section["sh_size"]
        if section["sh_type"] == "SHT_NOBITS" or start + size > len(data):
            raise BinaryError(f"section {section.name} runs past the end of the file (truncated?)")
        note = _RELOCATABLE_NOTE if section.name == "__nv_relfatbin" else ""
        yield from _walk_section(view[start : start + size], section.name, note)
    if not fatbins and (not sections or any(s.name == ".nvFatBinSegment" for s in sections)):
        yield from _scan(data)


def _walk_section(blob: memoryview, where: str, note: str) -> Iterator[_Raw]:
    """Containers back to back; trailing zero padding is allowed, anything else is an error."""
    offset = 0
    while offset < len(blob):
        end = _container_end(blob, offset)
        if end is None:
            if not bytes(blob[offset:]).strip(b"\0"):
                return
            raise BinaryError(f"{where}: no valid fatbinary container at offset {offset}")
        yield from _container(blob, offset, end, where, note)
        offset = end


def _scan(data: bytes) -> Iterator[_Raw]:
    """Containers anywhere in the file, for binaries whose fatbin is not in its own section."""
    magic, view = struct.pack("<I", FATBIN_MAGIC), memoryview(data)
    offset = data.find(magic)
    while offset >= 0:
        end = _container_end(view, offset)
        if end is not None:
            try:
                yield from list(_container(view, offset, end, "scan", _SCANNED_NOTE))
            except BinaryError:
                pass  # the magic by chance, not a container
        offset = data.find(magic, offset + 1)


def _container_end(blob: memoryview, offset: int) -> int | None:
    """Where the container at ``offset`` ends, or None if no valid header is there."""
    if offset + _CONTAINER.size > len(blob):
        return None
    magic, version, header, size = _CONTAINER.unpack_from(blob, offset)
    end = offset + header + size
    if magic != FATBIN_MAGIC or version != 1 or header < _CONTAINER.size or end > len(blob):
        return None
    return end


def _container(blob: memoryview, offset: int, end: int, where: str, note: str) -> Iterator[_Raw]:
    """The listed entries of one container."""
    pos = offset + _CONTAINER.unpack_from(blob, offset)[2]
    while pos < end:
        if pos + _ENTRY.size > end:
            raise BinaryError(f"{where}: entry header at offset {pos} is cut short")
        kind, _, head, padded, packed, *_, number, _, _, flags, _, unpacked = _ENTRY.unpack_from(blob, pos)
        next_pos = pos + head + padded
        if head < _ENTRY.size or next_pos > end or packed > padded:
            raise BinaryError(f"{where}: entry at offset {pos} overruns its container")
        if kind in _KINDS:
            payload = blob[pos + head : pos + head + (packed or padded)]
            yield _Raw(kind, number, flags, unpacked, payload, note)
        pos = next_pos


def _classify(raw: _Raw) -> EmbeddedCode:
    """Name an entry from its header flags, cross-checked with its payload where readable."""
    name, prefix = _KINDS[raw.kind]
    number = raw.number
    suffix = next((s for bit, s in _SUFFIX_FLAGS if raw.flags & bit), "")
    compression = next((c for bit, c in _COMPRESSION_FLAGS if raw.flags & bit), "")
    notes = [raw.note] if raw.note else []
    code, problem = _readable(bytes(raw.payload), compression, raw.unpacked)
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

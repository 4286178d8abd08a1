"""Shared objects are read by section: the ELF headers, the fatbin containers' headers and
one payload per distinct entry, never the whole file (issue #20: a 536 MB wheel of kernels
took 2.1 GB). The ELF files here are built by hand, with a large section of filler code the
reader must not touch; the nvcc-built ones are in test_binaries.py.
"""

from __future__ import annotations

import io
import struct
import zipfile

import pytest

from auditor.facts import binaries
from auditor.facts.binaries import read_embedded, with_extensions
from auditor.sources import ZipProvider, open_file, read_all

FILLER = 4 * 2**20
"""Bytes of host code in the test ELF: what a streamed read must leave unread."""


def cubin(arch: int) -> bytes:
    """The first bytes of a cubin as the reader checks them: ELF magic, ABI < 8, arch in e_flags."""
    head = bytearray(64)
    head[:4] = b"\x7fELF"
    struct.pack_into("<I", head, 48, arch)
    return bytes(head)


def entry(kind: int, arch: int, payload: bytes) -> bytes:
    padded = payload + b"\0" * (-len(payload) % 8)
    header = struct.pack("<HHIQIIHHIIIQQQ", kind, 1, 64, len(padded), 0, 0, 0, 0, arch, 0, 0, 0, 0, len(payload))
    return header + padded


def container(*entries: bytes) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", binaries.FATBIN_MAGIC, 1, 16, len(body)) + body


PTX = b".version 8.0\n.target sm_90\n.address_size 64\n"
FATBIN = container(entry(2, 90, cubin(90)), entry(1, 90, PTX)) + container(entry(2, 90, cubin(90)))
EXPECTED = {("sass", "sm_90"), ("ptx", "compute_90")}


def elf(fatbin: bytes = FATBIN, section: bytes = b".nv_fatbin", filler: int = FILLER) -> bytes:
    """A 64-bit little-endian shared object: [null, .text (filler), <section> (fatbin), .shstrtab]."""
    names = b"\0.text\0" + section + b"\0.shstrtab\0"
    text_at = 64
    fat_at = text_at + filler
    names_at = fat_at + len(fatbin)
    sh_at = names_at + len(names) + (-(names_at + len(names)) % 8)
    shdr = struct.Struct("<IIQQQQIIQQ")
    headers = [
        shdr.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        shdr.pack(1, 1, 6, 0, text_at, filler, 0, 0, 16, 0),
        shdr.pack(7, 1, 2, 0, fat_at, len(fatbin), 0, 0, 8, 0),
        shdr.pack(8 + len(section), 3, 0, 0, names_at, len(names), 0, 0, 1, 0),
    ]
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = struct.pack("<16sHHIQQQIHHHHHH", ident, 3, 62, 1, 0, 0, sh_at, 0, 64, 56, 0, 64, len(headers), 3)
    body = header + b"\x90" * filler + fatbin + names
    return body + b"\0" * (sh_at - len(body)) + b"".join(headers)


class Counting(io.BytesIO):
    """A stream that counts the bytes read from it."""

    def __init__(self, data: bytes):
        super().__init__(data)
        self.bytes_read = 0

    def read(self, n: int | None = -1) -> bytes:
        data = super().read(n)
        self.bytes_read += len(data)
        return data


def pairs(listing) -> set[tuple[str, str]]:
    return {(e.kind, e.target) for e in listing.entries}


def test_a_stream_is_read_by_section_not_whole():
    data = elf()
    stream = Counting(data)
    listing = read_embedded(stream, "k.so")
    assert pairs(listing) == EXPECTED
    assert listing == read_embedded(data, "k.so")
    assert stream.bytes_read < 4096 < len(data) // 1000, "the filler section was read"


def test_a_zip_member_gives_the_listing_of_its_bytes(tmp_path):
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pkg/_C.abi3.so", elf())
    (member,), _ = read_all(ZipProvider(str(whl)))
    with open_file(member) as stream:
        assert read_embedded(stream, member.path) == read_embedded(elf(), member.path)


@pytest.mark.parametrize("chunk", [5, 7, 64, 4096, 1 << 20])
def test_containers_outside_a_section_are_found_whatever_the_chunk_size(monkeypatch, chunk):
    """``.nvFatBinSegment`` and no ``.nv_fatbin``: containers are found by scanning the file for
    their magic a chunk at a time; one cut across a chunk boundary is still found."""
    monkeypatch.setattr(binaries, "CHUNK", chunk)
    listing = read_embedded(elf(section=b".nvFatBinSegment", filler=4099), "scan.so")
    assert pairs(listing) == EXPECTED
    assert all("scanning" in e.note for e in listing.entries)


def test_padding_after_the_containers_is_allowed_and_junk_is_not(monkeypatch):
    monkeypatch.setattr(binaries, "CHUNK", 3)
    assert pairs(read_embedded(elf(FATBIN + bytes(40)), "pad.so")) == EXPECTED
    with pytest.raises(binaries.BinaryError, match="no valid fatbinary container"):
        read_embedded(elf(FATBIN + bytes(20) + b"junk" + bytes(16)), "junk.so")


@pytest.mark.parametrize("chunk", [4, 9, 1 << 20])
def test_a_registered_namespace_is_found_across_chunks(monkeypatch, chunk):
    monkeypatch.setattr(binaries, "CHUNK", chunk)
    data = b"x" * 10 + b"\0my_ops\0" + b"y" * 10
    assert binaries._holds(io.BytesIO(data), {"my_ops": b"\0my_ops\0", "other": b"\0other\0"}) == {"my_ops"}


GUARDED = (
    b"import torch\n\n\ndef f():\n    if torch.cuda.get_device_capability()[0] >= 9:\n        torch.ops.my_ops.k()\n"
)


def test_evidence_reads_binaries_through_the_opener():
    """The gate's guarded code calls ``torch.ops.my_ops``; the binary that registers that name
    is found through the stream the opener gives (the file's own bytes are empty here)."""
    from auditor.model import Binary, EmbeddedCode, Loadability, SourceFile
    from auditor.python import extract

    py = SourceFile("pkg/a.py", GUARDED, "python", "in")
    so = SourceFile("pkg/_C.abi3.so", b"", "binary", "in")
    record = Binary(so.path, "pkg", "in", (EmbeddedCode("sass", "sm_90", False, ""),), (("12.0", Loadability.NONE),))
    gates, _ = extract.extract([py], 1)
    (gate,) = [g for g in gates if g.line == 5]
    opened = []

    def opener(f):
        opened.append(f.path)
        return io.BytesIO(elf(filler=64) + b"\0my_ops\0")

    (out,) = with_extensions([gate], [py, so], [record], opener)
    assert opened == [so.path]
    assert out.extensions == (so.path,)
    (unread,) = with_extensions([gate], [py, so], [record])  # the bytes alone hold no name
    assert unread.extensions == ()


@pytest.mark.slow
def test_real_wheel_streamed_listings_equal_the_in_memory_ones():
    """Every shared object of sgl-kernel 0.1.0 (102 MB, CUDA 12): the listing from the member's
    stream is the one from its bytes."""
    from tests.conftest import wheel

    whl = wheel("sgl-kernel==0.1.0")
    files, _ = read_all(ZipProvider(str(whl)))
    shared = [f for f in files if f.language == "binary"]
    assert shared
    with zipfile.ZipFile(whl) as zf:
        for f in shared:
            with open_file(f) as stream:
                assert read_embedded(stream, f.path) == read_embedded(zf.read(f.origin.name), f.path), f.path

"""Reading embedded GPU code: shared objects built here with the real nvcc, and a real wheel.

Why real builds: the fatbinary layout is undocumented, so the only test that means anything
is one against what nvcc writes today (stored, LZ4 and zstd payloads, ``a`` and ``f``
variants). The builds run once per session; without nvcc those tests skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from auditor.facts import binaries
from auditor.facts.binaries import BinaryError, EmbeddedCode, loadability, read_embedded

NVCC = shutil.which("nvcc") or ("/usr/local/bin/nvcc" if os.access("/usr/local/bin/nvcc", os.X_OK) else None)
KERNEL = "__global__ void k(float *x) { x[threadIdx.x] *= 2.0f; }\n"
COMPRESS_ALL = ("-Xfatbin=-compress-all",)

# name -> (nvcc code options, the (kind, target) set expected, loadability on 12.0 and 12.1)
BUILDS = {
    "hopper": (
        ("-gencode", "arch=compute_90a,code=sm_90a", "-gencode", "arch=compute_90,code=compute_90"),
        {("sass", "sm_90a"), ("ptx", "compute_90")},
        ("jit", "jit"),
    ),
    "sm120a": (("-gencode", "arch=compute_120a,code=sm_120a"), {("sass", "sm_120a")}, ("native", "none")),
    "sm120f": (("-gencode", "arch=compute_120f,code=sm_120f"), {("sass", "sm_120f")}, ("native", "native")),
    "compressed": (
        ("-gencode", "arch=compute_90a,code=sm_90a", "-gencode", "arch=compute_120f,code=compute_120f", *COMPRESS_ALL),
        {("sass", "sm_90a"), ("ptx", "compute_120f")},
        ("jit", "jit"),
    ),
    "lz4": (
        ("-gencode", "arch=compute_120a,code=[sm_120a,compute_120a]", *COMPRESS_ALL, "-compress-mode=speed"),
        {("sass", "sm_120a"), ("ptx", "compute_120a")},
        ("native", "none"),
    ),
}
COMPRESSED = {"compressed", "lz4"}

WHEEL_CACHE = Path.home() / ".cache" / "archaudit-wheels"
WHEEL = "sgl-kernel==0.1.0"
"""102 MB, built with CUDA 12: SASS for sm_75…sm_90a and no PTX."""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, bytes]:
    """Each BUILDS entry compiled to a shared object, in parallel; name -> file bytes."""
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    root = tmp_path_factory.mktemp("nvcc")
    (root / "k.cu").write_text(KERNEL)
    jobs = {
        name: subprocess.Popen(
            [NVCC, "-shared", "-Xcompiler", "-fPIC", *options, "k.cu", "-o", f"{name}.so"],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, (options, _, _) in BUILDS.items()
    }
    for name, job in jobs.items():
        out, _ = job.communicate()
        assert job.returncode == 0, f"nvcc failed for {name}:\n{out}"
    return {name: (root / f"{name}.so").read_bytes() for name in BUILDS}


def pairs(listing) -> set[tuple[str, str]]:
    return {(e.kind, e.target) for e in listing.entries}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUILDS))
def test_listing_is_exactly_what_nvcc_was_asked_for(built, name):
    listing = read_embedded(built[name], f"{name}.so")
    _, expected, _ = BUILDS[name]
    assert listing.path == f"{name}.so"
    assert pairs(listing) == expected
    assert all(e.compressed for e in listing.entries) == (name in COMPRESSED)
    assert [e.note for e in listing.entries] == [""] * len(listing.entries), "payload cross-check disagreed"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUILDS))
def test_loadability_on_blackwell_consumer_parts(built, name):
    entries = read_embedded(built[name], name).entries
    _, _, (on_120, on_121) = BUILDS[name]
    assert (loadability(entries, "12.0"), loadability(entries, "12.1")) == (on_120, on_121)


@pytest.mark.slow
def test_without_a_decompressor_the_entry_is_listed_with_a_note(built, monkeypatch):
    monkeypatch.setitem(binaries._DECOMPRESS, "zstd", (None, "zstandard is not installed"))
    listing = read_embedded(built["compressed"], "compressed.so")
    assert pairs(listing) == BUILDS["compressed"][1]
    for entry in listing.entries:
        assert entry.compressed
        assert "zstandard is not installed" in entry.note and "header flags only" in entry.note


@pytest.mark.slow
def test_fatbin_outside_its_section_is_found_by_scanning(built):
    data = built["hopper"].replace(b"\0.nv_fatbin\0", b"\0.nv_fatbiX\0", 1)
    assert data != built["hopper"]
    listing = read_embedded(data, "renamed.so")
    assert pairs(listing) == BUILDS["hopper"][1]
    assert all("scanning" in e.note for e in listing.entries)


@pytest.mark.slow
def test_truncated_shared_object_is_a_binary_error(built):
    data = built["hopper"]
    for cut in (4, 64, len(data) // 3, len(data) - 100):
        with pytest.raises(BinaryError) as err:
            read_embedded(data[:cut], "cut.so")
        assert "\n" not in str(err.value)


@pytest.mark.slow
def test_damaged_fatbin_is_a_binary_error_or_a_listing_never_a_crash(built):
    data = built["sm120a"]
    start = data.index(binaries.FATBIN_MAGIC.to_bytes(4, "little"))
    with pytest.raises(BinaryError, match="container"):
        read_embedded(data[: start + 8] + b"\xff" * 8 + data[start + 16 :], "huge.so")
    for at in range(start, start + 600, 3):
        damaged = data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]
        try:
            read_embedded(damaged, "flipped.so")
        except BinaryError as exc:
            assert str(exc) and "\n" not in str(exc)


@pytest.mark.parametrize("data", [b"", b"not an elf at all", b"MZ\x90\x00" + bytes(200)])
def test_non_elf_is_a_binary_error(data):
    with pytest.raises(BinaryError, match="not an ELF"):
        read_embedded(data, "x.so")


def test_truncated_host_elf_is_a_binary_error():
    data = Path(os.path.realpath(sys.executable)).read_bytes()
    if not data.startswith(b"\x7fELF"):
        pytest.skip("the interpreter is not an ELF file here")
    with pytest.raises(BinaryError):
        read_embedded(data[:4096], "python-cut")


def test_host_only_elf_lists_nothing():
    import _struct

    path = Path(_struct.__file__) if getattr(_struct, "__file__", None) else Path(os.path.realpath(sys.executable))
    assert read_embedded(path.read_bytes(), str(path)).entries == ()


def code(kind: str, target: str) -> EmbeddedCode:
    return EmbeddedCode(kind=kind, target=target, compressed=False)


@pytest.mark.parametrize(
    "kind, target, capability, expected",
    [
        ("sass", "sm_120", "12.0", "native"),
        ("sass", "sm_120", "12.1", "native"),
        ("sass", "sm_121", "12.0", "none"),
        ("sass", "sm_90", "10.0", "none"),
        ("sass", "sm_120a", "12.0", "native"),
        ("sass", "sm_120a", "12.1", "none"),
        ("sass", "sm_100f", "10.3", "native"),
        ("sass", "sm_100f", "12.0", "none"),
        ("ptx", "compute_90", "12.1", "jit"),
        ("ptx", "compute_120", "9.0", "none"),
        ("ptx", "compute_120a", "12.0", "jit"),
        ("ptx", "compute_120a", "12.1", "none"),
        ("ptx", "compute_120f", "12.1", "jit"),
        ("ptx", "compute_100f", "12.0", "none"),
    ],
)
def test_loadability_rules(kind, target, capability, expected):
    assert loadability([code(kind, target)], capability) == expected


def test_native_wins_over_jit_and_nothing_is_none():
    both = [code("ptx", "compute_80"), code("sass", "sm_120a")]
    assert loadability(both, "12.0") == "native"
    assert loadability(both, "12.1") == "jit"
    assert loadability([], "12.0") == "none"


@pytest.mark.slow
def test_real_wheel_from_pypi(capsys):
    """sgl-kernel 0.1.0 ships SASS only, up to sm_90a: nothing in it runs on 12.x."""
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    name = WHEEL.split("==")[0].replace("-", "_") + "-" + WHEEL.split("==")[1] + "-"
    found = sorted(WHEEL_CACHE.glob(f"{name}*.whl"))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                "manylinux2014_x86_64",
                WHEEL,
                "-d",
                str(WHEEL_CACHE),
            ],
            check=True,
            capture_output=True,
        )
        found = sorted(WHEEL_CACHE.glob(f"{name}*.whl"))
    assert found, f"pip did not fetch {WHEEL}"
    listings = []
    with zipfile.ZipFile(found[0]) as wheel:
        for member in wheel.namelist():
            if member.endswith(".so"):
                listings.append(read_embedded(wheel.read(member), member))
    assert listings
    every = set().union(*(pairs(lst) for lst in listings))
    assert {("sass", "sm_80"), ("sass", "sm_90"), ("sass", "sm_90a")} <= every
    with capsys.disabled():
        for lst in listings:
            verdicts = {cap: loadability(lst.entries, cap) for cap in ("12.0", "12.1")}
            print(f"\n{WHEEL} {lst.path}: {sorted(e.target for e in lst.entries)} -> {verdicts}")
    assert all(loadability(lst.entries, "12.0") == "none" for lst in listings)

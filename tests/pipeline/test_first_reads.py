"""A re-scan of an unchanged tree or wheel reads no file: each file's first read (digest and
suppression marker) is recalled by the file's path and metadata (device, inode, size, mtime,
ctime; for a member, the archive's and its place in it). A file whose metadata changed, or
that changed too recently to be sure, is read again, and the result is the cold scan's.
"""

from __future__ import annotations

import json
import os
import zipfile

import pytest

from auditor import cli
from auditor.pipeline import kept, workers
from tests.conftest import GATED_PY, gated_tree


@pytest.fixture
def reads(monkeypatch):
    """The files the workers read, by path; files count as settled at once."""
    seen: list[str] = []
    real = workers._work

    def counting(tasks):
        seen.extend(t[1] for t in tasks)
        return real(tasks)

    monkeypatch.setattr(workers, "_work", counting)
    monkeypatch.setattr(kept, "SETTLED_NS", 0)
    return seen


def scan(capsys, *args: str) -> dict:
    assert cli.main(["scan", *args, "--format", "json", "--jobs", "1", "-q"]) in (0, 1)
    return json.loads(capsys.readouterr().out)


def test_an_unchanged_tree_is_not_read_again(tmp_path, capsys, reads):
    root = gated_tree(tmp_path / "t", 4)
    cache = str(tmp_path / "cache")
    first = scan(capsys, str(root), "--cache-dir", cache)
    assert len(reads) >= 8
    reads.clear()
    assert scan(capsys, str(root), "--cache-dir", cache) == first
    assert reads == []


def test_a_file_changed_in_place_is_read_again_even_with_its_mtime_put_back(tmp_path, capsys, reads):
    root = gated_tree(tmp_path / "t", 4)
    cache = str(tmp_path / "cache")
    scan(capsys, str(root), "--cache-dir", cache)
    target = root / "pkg" / "m2.py"
    st = target.stat()
    target.write_text(GATED_PY.format(i=2).replace(">= 9", ">= 8"))  # same size
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # ctime still moves
    reads.clear()
    warm = scan(capsys, str(root), "--cache-dir", cache)
    assert "pkg/m2.py" in reads
    assert warm == scan(capsys, str(root), "--no-cache")
    assert any(g["file"] == "pkg/m2.py" and ">= 8" in g["expression"] for g in warm["gates"])


def test_a_file_changed_just_now_is_read_not_recalled(tmp_path, capsys, reads, monkeypatch):
    monkeypatch.setattr(kept, "SETTLED_NS", 3600 * 10**9)  # everything here is "just now"
    root = gated_tree(tmp_path / "t", 4)
    cache = str(tmp_path / "cache")
    first = scan(capsys, str(root), "--cache-dir", cache)
    reads.clear()
    assert scan(capsys, str(root), "--cache-dir", cache) == first
    assert len(reads) >= 8, "files too recent to trust their metadata were recalled"


def test_an_unchanged_wheel_is_not_read_again_and_a_rewritten_one_is(tmp_path, capsys, reads):
    root = gated_tree(tmp_path / "t", 4)
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"

    def pack(replace: str = "") -> None:
        with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as zf:
            for p in sorted(root.rglob("*")):
                if p.is_file():
                    text = p.read_text()
                    zf.writestr(p.relative_to(root).as_posix(), text.replace(">= 9", replace) if replace else text)

    pack()
    cache = str(tmp_path / "cache")
    first = scan(capsys, str(whl), "--cache-dir", cache)
    reads.clear()
    assert scan(capsys, str(whl), "--cache-dir", cache) == first
    assert reads == []
    pack(">= 10")
    again = scan(capsys, str(whl), "--cache-dir", cache)
    assert len(reads) >= 8
    assert again == scan(capsys, str(whl), "--no-cache") != first


def test_a_corrupt_shared_object_member_is_the_same_error_with_and_without_a_cache(tmp_path, capsys):
    """Shared objects are streamed in the first read; a member whose bytes fail their CRC is
    reported as every other corrupt member is, cache or not."""
    from tests.facts.test_binaries_streamed import elf

    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    data = elf(filler=4096)
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("pkg/_C.abi3.so", data)
        zf.writestr("pkg/m.py", GATED_PY.format(i=0))
    raw = whl.read_bytes()
    at = raw.index(data) + 100
    whl.write_bytes(raw[:at] + bytes([raw[at] ^ 0xFF]) + raw[at + 1 :])
    cold = scan(capsys, str(whl), "--no-cache")
    warm = scan(capsys, str(whl), "--cache-dir", str(tmp_path / "cache"))
    (error,) = cold["errors"]
    assert error["file"] == "pkg/_C.abi3.so" and error["reason"].startswith("corrupt archive member (Bad CRC-32")
    assert warm == cold

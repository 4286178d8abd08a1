"""Hostile inputs: archaudit reads code from strangers.

Every case builds its input in ``tmp_path`` and scans it next to a known-good file through
``auditor.cli.main`` (and once through ``python -m auditor``), then checks the promise:
no traceback, a one-line error or a correct result, the good file still scanned, the exit
code of the contract (0 normally, 2 only when an input cannot be read at all), nothing
written outside the output, and bounded time and memory (measured here, generous bounds).

``ARCHAUDIT_HOSTILE_TABLE=FILE`` appends one JSON line per case with its time and peak
traced memory (how docs/testing.md's table is made).
"""

from __future__ import annotations

import gc
import io
import json
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import tarfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from auditor import arch, cli
from auditor.cuda.structure import MAX_CHAIN
from auditor.render.formats import Format
from auditor.sources import archives
from auditor.sources import files as source_files

GOOD = "#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\nint sm90_to_110;\n#endif\n"
GOOD_ADMITS = [t for t in arch.device_targets() if 900 <= arch.target_macros()[t]["__CUDA_ARCH__"] < 1200]
GOOD_PY = "import torch\nmajor, minor = torch.cuda.get_device_capability()\nif major >= 9 and major < 12:\n    x = 1\n"
GOOD_PY_ADMITS = [c for c in arch.capabilities() if 9 <= int(c.split(".")[0]) < 12]
ERROR_LINE = re.compile(r"^archaudit: \S")


@dataclass
class Run:
    """One scan: exit code, JSON document (None on exit 2), stderr lines, seconds, peak bytes."""

    rc: int
    doc: dict | None
    err: list[str]
    seconds: float
    peak: int

    def errors(self) -> dict[str, str]:
        """file -> reason, for the per-file errors of the report."""
        return {e["file"]: e["reason"] for e in (self.doc or {}).get("errors", [])}

    def gates(self, file: str) -> list[dict]:
        return [g for g in (self.doc or {}).get("gates", []) if g["file"] == file]


def _status(field: str) -> int:
    """A ``/proc/self/status`` field in bytes (0 where there is no /proc)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _reset_peak() -> bool:
    """Reset the process's peak resident size (Linux: ``echo 5 > /proc/self/clear_refs``)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def scan(capsys, case: str, *inputs, args=(), seconds: float = 60, peak_mb: float = 512) -> Run:
    """``archaudit scan INPUTS --format json`` in this process, timed, with its peak memory.

    Memory is the growth of the peak resident size over the resident size before the scan
    (tracemalloc would be exact for Python objects but slows these cases down 5-10x).
    """
    argv = ["scan", *map(str, inputs), "--no-cache", "--format", "json", "--jobs", "1", *args]
    gc.collect()
    measured = _reset_peak()
    before = _status("VmRSS")
    t0 = time.perf_counter()
    rc = cli.main(argv)
    elapsed = time.perf_counter() - t0
    peak = max(0, _status("VmHWM") - before) if measured else 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert "Traceback" not in err, err[-3000:]
    for line in lines:  # one line per problem, each an archaudit message
        assert ERROR_LINE.match(line), line
    doc = json.loads(out) if rc != cli.EXIT_ERROR else None
    run = Run(rc, doc, lines, elapsed, peak)
    _record(case, run)
    assert elapsed < seconds, f"{case}: {elapsed:.1f}s"
    assert peak < peak_mb * 2**20, f"{case}: {peak / 2**20:.0f} MB"
    return run


def _record(case: str, run: Run) -> None:
    table = os.environ.get("ARCHAUDIT_HOSTILE_TABLE")
    if table:
        with open(table, "a", encoding="utf-8") as fh:
            fh.write(
                json.dumps(
                    {
                        "case": case,
                        "rc": run.rc,
                        "seconds": round(run.seconds, 2),
                        "peak_mb": round(run.peak / 2**20, 1),
                        "errors": sorted(run.errors().values()) or run.err,
                    }
                )
                + "\n"
            )


def good_tree(root: Path) -> Path:
    """A directory holding the known-good CUDA and Python files."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "good.cu").write_text(GOOD)
    (root / "good.py").write_text(GOOD_PY)
    return root


def assert_good(run: Run, prefix: str = "") -> None:
    """The good files were scanned and answered right."""
    cu = run.gates(prefix + "good.cu")
    assert [g["admits"] for g in cu] == [GOOD_ADMITS], run.doc
    py = run.gates(prefix + "good.py")
    assert [g["admits"] for g in py] == [GOOD_PY_ADMITS], run.doc


def make_zip(path: Path, members: dict[str, bytes], compression=zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0)), data, compress_type=compression)
    return path


def make_tar(path: Path, members: list[tarfile.TarInfo | tuple[str, bytes]]) -> Path:
    with tarfile.open(path, "w:gz", compresslevel=1) as tf:
        for m in members:
            if isinstance(m, tarfile.TarInfo):
                tf.addfile(m)
            else:
                info = tarfile.TarInfo(m[0])
                info.size = len(m[1])
                tf.addfile(info, io.BytesIO(m[1]))
    return path


def nothing_written(root: Path, names: tuple[str, ...]) -> None:
    """None of ``names`` appeared anywhere under ``root`` or the working directory."""
    for base in (root, Path.cwd()):
        for name in names:
            assert not list(base.rglob(name)), f"{name} written under {base}"


# --- archives: paths, links, bombs, corruption ----------------------------------------------


def test_zip_slip_and_absolute_paths_in_a_wheel(tmp_path, capsys):
    whl = make_zip(
        tmp_path / "evil-1.0-py3-none-any.whl",
        {
            "../../slipped_zip.cu": GOOD.encode(),
            "/abs_zip.cu": GOOD.encode(),
            "C:/drive_zip.cu": GOOD.encode(),
            "pkg/../../../up_zip.cu": GOOD.encode(),
            "pkg\\..\\..\\back_zip.cu": GOOD.encode(),
            "pkg/good.cu": GOOD.encode(),
            "pkg/good.py": GOOD_PY.encode(),
        },
    )
    run = scan(capsys, "zip-slip wheel", whl)
    assert run.rc == 0
    assert_good(run, "pkg/")
    errors = run.errors()
    for name in (
        "../../slipped_zip.cu",
        "/abs_zip.cu",
        "C:/drive_zip.cu",
        "pkg/../../../up_zip.cu",
        "pkg\\..\\..\\back_zip.cu",
    ):
        assert "unsafe archive path" in errors[name]
    assert len(run.doc["gates"]) == 2  # nothing read from the unsafe members
    nothing_written(tmp_path.parent, ("slipped_zip.cu", "abs_zip.cu", "up_zip.cu", "back_zip.cu"))
    assert not Path("/abs_zip.cu").exists()


def test_zip_slip_links_and_devices_in_an_sdist(tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.cuh").write_text("#if __CUDA_ARCH__ == 750\nint leaked;\n#endif\n")
    members: list = [
        ("evil-1.0/good.cu", GOOD.encode()),
        ("evil-1.0/good.py", GOOD_PY.encode()),
        ("evil-1.0/../../slipped_tar.cu", GOOD.encode()),
        ("/abs_tar.cu", GOOD.encode()),
    ]
    for name, target, kind in (
        ("evil-1.0/link_abs.cuh", str(outside / "secret.cuh"), tarfile.SYMTYPE),
        ("evil-1.0/link_up.cuh", "../outside/secret.cuh", tarfile.SYMTYPE),
        ("evil-1.0/hard.cuh", "../outside/secret.cuh", tarfile.LNKTYPE),
        ("evil-1.0/fifo.cu", "", tarfile.FIFOTYPE),
        ("evil-1.0/dev.cu", "", tarfile.CHRTYPE),
    ):
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, target
        members.append(info)
    sdist = make_tar(tmp_path / "evil-1.0.tar.gz", members)
    run = scan(capsys, "zip-slip and links in sdist", sdist)
    assert run.rc == 0
    assert_good(run)
    errors = run.errors()
    assert "unsafe archive path" in errors["evil-1.0/../../slipped_tar.cu"]
    assert "unsafe archive path" in errors["/abs_tar.cu"]
    for name in ("link_abs.cuh", "link_up.cuh", "hard.cuh"):
        assert "not followed" in errors[name]
    assert not any("leaked" in json.dumps(g) or g["file"].endswith("secret.cuh") for g in run.doc["gates"])
    assert len(run.doc["gates"]) == 2
    nothing_written(tmp_path.parent, ("slipped_tar.cu", "abs_tar.cu", "fifo.cu", "dev.cu"))


def test_zip_bomb_declared_size_is_refused_without_inflating(tmp_path, capsys):
    """A 100 MB member (real caps): refused from its header, the rest scanned."""
    whl = make_zip(
        tmp_path / "bomb-1.0-py3-none-any.whl",
        {"pkg/bomb.cu": bytes(100 * 2**20), "pkg/good.cu": GOOD.encode(), "pkg/good.py": GOOD_PY.encode()},
    )
    assert whl.stat().st_size < 2**20
    run = scan(capsys, "zip bomb (one 100 MB member)", whl, seconds=20, peak_mb=64)
    assert run.rc == 0
    assert_good(run, "pkg/")
    assert "member too large" in run.errors()["pkg/bomb.cu"]


def _lie_about_size(path: Path, member: str, size: int) -> None:
    """Rewrite a member's uncompressed size in its local header and its central directory entry."""
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    struct.pack_into("<I", raw, info.header_offset + 22, size)
    central = raw.find(b"PK\x01\x02")
    while central != -1:
        name_len = struct.unpack_from("<H", raw, central + 28)[0]
        if raw[central + 46 : central + 46 + name_len] == member.encode():
            struct.pack_into("<I", raw, central + 24, size)
            break
        central = raw.find(b"PK\x01\x02", central + 46)
    else:
        raise AssertionError(f"{member} not in the central directory")
    path.write_bytes(bytes(raw))
    with zipfile.ZipFile(path) as zf:
        assert zf.getinfo(member).file_size == size


def test_zip_bomb_that_lies_about_its_size(tmp_path, capsys):
    """Declares 4 KB, inflates to 60 MB: reading stops at the declared size (bad CRC)."""
    whl = make_zip(
        tmp_path / "liar-1.0-py3-none-any.whl",
        {"pkg/liar.cu": bytes(60 * 2**20), "pkg/good.cu": GOOD.encode(), "pkg/good.py": GOOD_PY.encode()},
    )
    _lie_about_size(whl, "pkg/liar.cu", 4096)
    run = scan(capsys, "zip bomb (size lie: 4 KB declared, 60 MB inside)", whl, seconds=20, peak_mb=64)
    assert run.rc == 0
    assert_good(run, "pkg/")
    assert "corrupt archive member" in run.errors()["pkg/liar.cu"]


def test_zip_bomb_total_cap(tmp_path, capsys, monkeypatch):
    """Many highly compressible members: reading stops at the archive cap, with a message."""
    monkeypatch.setattr(source_files, "MAX_FILE_BYTES", 2**20)
    monkeypatch.setattr(archives, "MAX_ARCHIVE_BYTES", 4 * 2**20)
    members = {"pkg/good.cu": GOOD.encode(), "pkg/good.py": GOOD_PY.encode()}
    members.update({f"pkg/z{i:03d}.cu": GOOD.encode() + b" " * (2**20 - 100) for i in range(40)})
    whl = make_zip(tmp_path / "many-1.0-py3-none-any.whl", members)
    run = scan(capsys, "zip bomb (40 x 1 MB, cap 4 MB)", whl, peak_mb=128)
    assert run.rc == 0
    assert_good(run, "pkg/")
    assert any("archive expands past" in r for r in run.errors().values())
    assert 2 <= len(run.doc["gates"]) <= 6  # what was read before the cap is reported


def test_tar_bomb_member_and_total(tmp_path, capsys, monkeypatch):
    big = make_tar(
        tmp_path / "big-1.0.tar.gz",
        [
            ("big-1.0/good.cu", GOOD.encode()),
            ("big-1.0/good.py", GOOD_PY.encode()),
            ("big-1.0/bomb.cu", bytes(100 * 2**20)),
        ],
    )
    assert big.stat().st_size < 2**20
    run = scan(capsys, "tar bomb (one 100 MB member)", big, seconds=20, peak_mb=64)
    assert run.rc == 0
    assert_good(run)
    assert "member too large" in run.errors()["bomb.cu"]

    monkeypatch.setattr(source_files, "MAX_FILE_BYTES", 2**20)
    monkeypatch.setattr(archives, "MAX_ARCHIVE_BYTES", 4 * 2**20)
    many = make_tar(
        tmp_path / "many-1.0.tar.gz",
        [("many-1.0/good.cu", GOOD.encode()), ("many-1.0/good.py", GOOD_PY.encode())]
        + [(f"many-1.0/z{i:03d}.cu", GOOD.encode() + b" " * (2**20 - 100)) for i in range(40)],
    )
    run = scan(capsys, "tar bomb (40 x 1 MB, cap 4 MB)", many, peak_mb=128)
    assert run.rc == 0
    assert_good(run)
    assert any("archive expands past" in r for r in run.errors().values())


def test_tar_header_bomb(tmp_path, capsys, monkeypatch):
    """Thousands of empty members (each header costs tarfile ~0.1 ms): capped, with a message."""
    monkeypatch.setattr(archives, "MAX_ARCHIVE_MEMBERS", 2000)
    sdist = make_tar(
        tmp_path / "headers-1.0.tar.gz",
        [("headers-1.0/good.cu", GOOD.encode()), ("headers-1.0/good.py", GOOD_PY.encode())]
        + [(f"headers-1.0/e{i:05d}.txt", b"") for i in range(5000)],
    )
    run = scan(capsys, "tar header bomb (5,000 members, cap 2,000)", sdist, peak_mb=64)
    assert run.rc == 0
    assert_good(run)
    assert any("more than 2000 members" in r for r in run.errors().values())


def test_sdist_read_in_one_pass_whatever_the_member_order(tmp_path, capsys):
    """Members stored in reverse name order: reading in name order re-inflated the stream per member."""
    body = (GOOD + "// padding\n" * 300).encode()
    sdist = make_tar(tmp_path / "rev-1.0.tar.gz", [(f"rev-1.0/f{i:05d}.cu", body) for i in reversed(range(3000))])
    run = scan(capsys, "sdist with 3,000 members in reverse order", sdist, seconds=30)
    assert run.rc == 0 and len(run.doc["gates"]) == 3000
    assert [g["file"] for g in run.doc["gates"]] == sorted(g["file"] for g in run.doc["gates"])


def test_truncated_wheel_is_an_input_error(tmp_path, capsys):
    whl = make_zip(tmp_path / "cut-1.0-py3-none-any.whl", {"pkg/good.cu": GOOD.encode() * 50})
    whl.write_bytes(whl.read_bytes()[: whl.stat().st_size // 2])
    run = scan(capsys, "truncated wheel", whl)
    assert run.rc == cli.EXIT_ERROR
    assert len(run.err) == 1 and "not a readable zip archive" in run.err[0]


def test_wheel_with_a_corrupt_member(tmp_path, capsys):
    whl = make_zip(
        tmp_path / "rot-1.0-py3-none-any.whl",
        {"pkg/good.cu": GOOD.encode(), "pkg/good.py": GOOD_PY.encode(), "pkg/rot.cu": GOOD.encode() * 200},
    )
    raw = bytearray(whl.read_bytes())
    with zipfile.ZipFile(whl) as zf:
        info = zf.getinfo("pkg/rot.cu")
    start = info.header_offset + 30 + len(info.filename)
    raw[start : start + 16] = b"\xff" * 16  # the deflate stream, not the headers
    whl.write_bytes(bytes(raw))
    run = scan(capsys, "wheel with a corrupt member", whl)
    assert run.rc == 0
    assert_good(run, "pkg/")
    assert "corrupt archive member" in run.errors()["pkg/rot.cu"]


def test_truncated_sdist_scans_what_it_can(tmp_path, capsys):
    sdist = make_tar(
        tmp_path / "cut-1.0.tar.gz",
        [("cut-1.0/good.cu", GOOD.encode()), ("cut-1.0/good.py", GOOD_PY.encode())]
        + [(f"cut-1.0/z{i:03d}.cu", os.urandom(20000)) for i in range(20)],
    )
    sdist.write_bytes(sdist.read_bytes()[: sdist.stat().st_size // 2])
    run = scan(capsys, "truncated sdist", sdist)
    assert run.rc == 0
    assert_good(run)
    assert any("truncated or corrupt" in r for r in run.errors().values())


def test_corrupt_wheel_beside_a_good_input(tmp_path, capsys):
    """Exit 2 (one input cannot be read at all), with one clear line naming it."""
    whl = tmp_path / "junk-1.0-py3-none-any.whl"
    whl.write_bytes(b"PK\x03\x04 this is not a zip")
    run = scan(capsys, "corrupt wheel beside a good dir", good_tree(tmp_path / "tree"), whl)
    assert run.rc == cli.EXIT_ERROR
    assert any("junk-1.0-py3-none-any.whl" in line and "not a readable zip archive" in line for line in run.err)


def test_corrupt_wheel_does_not_hide_the_other_inputs(tmp_path, capsys):
    whl = tmp_path / "junk-1.0-py3-none-any.whl"
    whl.write_bytes(b"PK\x03\x04 this is not a zip")
    out = tmp_path / "r.json"
    rc = cli.main(["scan", str(whl), str(good_tree(tmp_path / "tree")), "--no-cache", "-o", str(out)])
    capsys.readouterr()
    assert rc == cli.EXIT_ERROR
    assert_good(Run(rc, json.loads(out.read_text()), [], 0, 0))


# --- directories: links, special files, sizes, encodings -------------------------------------


def test_symlink_loops_in_a_directory(tmp_path, capsys):
    root = good_tree(tmp_path / "tree")
    (root / "a.cu").symlink_to("b.cu")
    (root / "b.cu").symlink_to("a.cu")
    sub = root / "sub"
    sub.mkdir()
    (sub / "up").symlink_to("..", target_is_directory=True)
    (sub / "self").symlink_to(".", target_is_directory=True)
    (sub / "dangling.cuh").symlink_to("nowhere.cuh")
    run = scan(capsys, "symlink loops (a->b->a, dir -> ancestor)", root, seconds=20)
    assert run.rc == 0
    assert_good(run)
    errors = run.errors()
    assert "symlink loop" in errors["a.cu"] and "symlink loop" in errors["b.cu"]
    assert "ancestor" in errors["sub/up"] and "ancestor" in errors["sub/self"]
    assert "no such file" in errors["sub/dangling.cuh"]


def test_fifo_and_a_directory_named_like_a_source(tmp_path, capsys):
    """A FIFO named x.cu would block a naive open(); a directory named y.cu is a directory."""
    root = good_tree(tmp_path / "tree")
    os.mkfifo(root / "x.cu")
    (root / "y.cu").mkdir()
    (root / "y.cu" / "inner.cuh").write_text(GOOD)
    run = scan(capsys, "FIFO named x.cu, directory named y.cu", root, seconds=20)
    assert run.rc == 0
    assert_good(run)
    assert "not a regular file" in run.errors()["x.cu"]
    assert [g["admits"] for g in run.gates("y.cu/inner.cuh")] == [GOOD_ADMITS]


def test_unreadable_file(tmp_path):
    """chmod 000. Tests run as root, who reads anything: the scan then runs without the
    capabilities that bypass file permissions (``setpriv``), so the file is really unreadable."""
    root = good_tree(tmp_path / "tree")
    secret = root / "secret.cu"
    secret.write_text(GOOD)
    secret.chmod(0)
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: no way to make a file unreadable")
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search"]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [*prefix, sys.executable, "-m", "auditor", "scan", str(root), "--no-cache", "--format", "json"],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        timeout=120,
    )
    _record("unreadable file (chmod 000)", Run(proc.returncode, None, [], time.perf_counter() - t0, 0))
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert_good(Run(0, doc, [], 0, 0))
    assert {e["file"]: e["reason"] for e in doc["errors"]} == {"secret.cu": "permission denied"}
    assert proc.stderr.splitlines() == [f"archaudit: {root}: secret.cu: permission denied"]


def test_huge_source_file_is_skipped_by_the_cap(tmp_path, capsys):
    root = good_tree(tmp_path / "tree")
    with open(root / "huge.cu", "wb") as fh:  # sparse: 100 MB on paper, nothing on disk
        fh.truncate(100 * 2**20)
    run = scan(capsys, "100 MB source file (sparse)", root, seconds=20, peak_mb=32)
    assert run.rc == 0
    assert_good(run)
    assert run.errors()["huge.cu"] == f"file too large ({100 * 2**20} bytes > {source_files.MAX_FILE_BYTES})"


def test_large_source_file_under_the_cap(tmp_path, capsys):
    """60 MB of real text (under the 64 MB cap) with a gate at its end: read and answered."""
    root = good_tree(tmp_path / "tree")
    with open(root / "large.cu", "w") as fh:
        line = "__device__ float f(float x) { return x * 2.0f + 1.0f; } // filler\n"
        fh.write(line * (60 * 2**20 // len(line)))
        fh.write(GOOD)
    run = scan(capsys, "60 MB source file", root, seconds=60, peak_mb=600)
    assert run.rc == 0
    assert_good(run)
    assert [g["admits"] for g in run.gates("large.cu")] == [GOOD_ADMITS]


LONG_LINES = {
    "plain code": "int x = " + "1 + " * 250_000 + "1;",
    "comment openers in strings": '"/*" ' * 200_000,
    "directive-looking tokens": "x #if " * 170_000,
    "raw-string openers": 'R"x(' * 250_000,
    "closed raw strings": 'R"()" ' * 170_000,
    "unclosed NV_IF_TARGET calls": "NV_IF_TARGET(" * 80_000,
    "quotes": '"' * 2**20,
    "block comments": "/* */" * 200_000,
}


@pytest.mark.parametrize("kind", LONG_LINES)
def test_one_megabyte_line(tmp_path, capsys, kind):
    """A 1 MB line after a gate (each shape once made some stage quadratic)."""
    root = good_tree(tmp_path / "tree")
    (root / "long.cu").write_text(GOOD + LONG_LINES[kind] + "\n")
    (root / "long.py").write_text(GOOD_PY + "s = '" + "x" * 2**20 + "'\n")
    run = scan(capsys, f"1 MB single line: {kind}", root, seconds=30)
    assert run.rc == 0
    assert_good(run)
    assert [g["admits"] for g in run.gates("long.cu")] == [GOOD_ADMITS]
    assert [g["admits"] for g in run.gates("long.py")] == [GOOD_PY_ADMITS]


def test_many_cccl_calls_beside_many_branches(tmp_path, capsys):
    """20,000 NV_IF_TARGET on one 1 MB line beside 20,000 #if, then 5,000 arch arms on their own
    lines: finding each call's arguments and enclosing branch was a search per call."""
    root = good_tree(tmp_path / "tree")
    branches = "".join(f"#if FLAG_{i}\nint v{i};\n#endif\n" for i in range(20_000))
    one_line = "NV_IF_TARGET(NV_IS_HOST, (a();), (b();)); " * 20_000  # a host/device split: no gates
    own_lines = "NV_IF_TARGET(NV_PROVIDES_SM_90, (a();), (b();));\n" * 5_000
    (root / "cccl.cu").write_text(branches + one_line + "\n" + own_lines)
    run = scan(
        capsys, "20,000 NV_IF_TARGET on one line, 5,000 on their own, 20,000 #if", root, seconds=90, peak_mb=1024
    )
    assert run.rc == 0 and run.errors() == {}
    assert_good(run)
    gates = run.gates("cccl.cu")
    assert len(gates) == 10_000 and {g["line"] for g in gates} == set(range(60_002, 65_002))


def test_feature_tokens_on_a_megabyte_line_inside_a_gate(tmp_path):
    """60,000 PTX instructions in one asm string on one line of a gate's body, in a process given 15 s."""
    root = good_tree(tmp_path / "tree")
    # a gate that turns 12.x away: its body is searched for feature tokens
    (root / "body.cu").write_text(
        "#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n"
        + 'asm volatile("'
        + "wgmma.fence.sync.aligned; " * 60_000
        + '");\n#endif\n'
    )
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "auditor", "scan", str(root), "--no-cache", "--format", "json"],
            capture_output=True,
            text=True,
            timeout=15,
            cwd=str(tmp_path),
        )
    except subprocess.TimeoutExpired:
        _record("1 MB line of 60,000 feature tokens inside a gate", Run(-1, None, ["no answer in 15 s"], 15, 0))
        raise
    _record(
        "1 MB line of 60,000 feature tokens inside a gate", Run(proc.returncode, None, [], time.perf_counter() - t0, 0)
    )
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    gates = [g for g in json.loads(proc.stdout)["gates"] if g["file"] == "body.cu"]
    assert [f["token"] for g in gates for f in g["features"]] == ["wgmma.fence.sync.aligned"]


def test_binary_file_named_like_a_header(tmp_path, capsys):
    root = good_tree(tmp_path / "tree")
    (root / "blob.cuh").write_bytes(bytes(range(256)) * 64 + b"#if __CUDA_ARCH__ >= 900\n#endif\n")
    run = scan(capsys, "binary file named .cuh", root)
    assert run.rc == 0
    assert_good(run)
    assert "binary file" in run.errors()["blob.cuh"]


def test_utf16_and_latin1_cuda_sources_are_read(tmp_path, capsys):
    root = good_tree(tmp_path / "tree")
    text = "// caf\u00e9 \u00a9 Ma\u00f1ana\n" + GOOD
    (root / "utf16.cu").write_bytes(text.encode("utf-16"))
    (root / "utf16be.cu").write_bytes(b"\xfe\xff" + text.encode("utf-16-be"))
    (root / "latin1.cu").write_bytes(text.encode("latin-1"))
    run = scan(capsys, "UTF-16 and Latin-1 CUDA sources", root)
    assert run.rc == 0
    assert_good(run)
    for name in ("utf16.cu", "utf16be.cu", "latin1.cu"):
        assert [(g["line"], g["admits"]) for g in run.gates(name)] == [(2, GOOD_ADMITS)], name
    assert run.errors() == {}


def test_latin1_python_source_gives_an_error_or_an_answer(tmp_path, capsys):
    root = good_tree(tmp_path / "tree")
    (root / "latin1.py").write_bytes(("# caf\u00e9\n" + GOOD_PY).encode("latin-1"))
    run = scan(capsys, "Latin-1 Python source", root)
    assert run.rc == 0
    assert_good(run)
    answered = [g["admits"] for g in run.gates("latin1.py")] == [GOOD_PY_ADMITS]
    assert answered or "latin1.py" in run.errors()


def test_utf16_python_source_gives_an_error_or_an_answer(tmp_path, capsys):
    root = good_tree(tmp_path / "tree")
    (root / "utf16.py").write_bytes(GOOD_PY.encode("utf-16"))
    run = scan(capsys, "UTF-16 Python source", root)
    assert [g["admits"] for g in run.gates("utf16.py")] == [GOOD_PY_ADMITS] or "utf16.py" in run.errors()


# --- preprocessor structure and conditions -----------------------------------------------------


DEEP = {
    "10,000 nested #if": "#if __CUDA_ARCH__ >= 900\n" * 10_000 + "int x;\n" + "#endif\n" * 10_000,
    "#if chain with 100,000 branches": "#if __CUDA_ARCH__ == 1\n"
    + "".join(f"#elif __CUDA_ARCH__ == {i}\n" for i in range(2, 100_001))
    + "int x;\n#endif\n",
}


@pytest.mark.parametrize("case", DEEP)
def test_deep_nesting_and_long_chains(tmp_path, capsys, case):
    root = good_tree(tmp_path / "tree")
    (root / "deep.cu").write_text(DEEP[case])
    run = scan(capsys, case, root, seconds=30)
    assert run.rc == 0
    assert_good(run)
    assert f"under more than {MAX_CHAIN} conditions" in run.errors()["deep.cu"]


def test_nesting_up_to_the_cap_is_answered(tmp_path, capsys):
    root = good_tree(tmp_path / "tree")
    n = MAX_CHAIN
    (root / "deep.cu").write_text("#if __CUDA_ARCH__ >= 900\n" * (n - 1) + GOOD + "#endif\n" * (n - 1))
    run = scan(capsys, f"{n} nested #if (the cap)", root, seconds=60)
    assert run.rc == 0 and "deep.cu" not in run.errors()
    innermost = max(run.gates("deep.cu"), key=lambda g: g["line"])
    assert innermost["admits"] == GOOD_ADMITS and len(innermost["chain"]) == n


def test_long_flat_conditions_are_answered(tmp_path, capsys):
    """50,000-term ||, 9,999 '!', 4,000 nested parentheses: exact answers, no recursion limit."""
    root = good_tree(tmp_path / "tree")
    terms = " || ".join(f"__CUDA_ARCH__ == {n}" for n in range(1000, 51_000))
    (root / "flat.cu").write_text(
        f"#if {terms}\nint a;\n#endif\n"
        f"#if {'!' * 9_999}__CUDA_ARCH__\nint b;\n#endif\n"
        f"#if {'(' * 4000}__CUDA_ARCH__ >= 900{')' * 4000}\nint c;\n#endif\n"
    )
    run = scan(capsys, "50,000-term ||, 10,000 !, 4,000 parentheses", root, seconds=60)
    assert run.rc == 0 and run.errors() == {}
    macros = arch.target_macros()
    got = {g["line"]: g["admits"] for g in run.gates("flat.cu")}
    assert got[1] == [t for t in arch.device_targets() if macros[t]["__CUDA_ARCH__"] >= 1000]
    assert got[4] == ["host"]  # an odd number of '!': true where __CUDA_ARCH__ is 0
    assert got[7] == [t for t in arch.device_targets() if macros[t]["__CUDA_ARCH__"] >= 900]


def test_unbalanced_conditionals(tmp_path, capsys):
    root = good_tree(tmp_path / "tree")
    bad = {
        "endif.cu": "#endif\n",
        "else.cu": "int a;\n#else\n#endif\n",
        "elif_after_else.cu": "#if __CUDA_ARCH__ > 900\n#else\n#elif __CUDA_ARCH__ > 800\n#endif\n",
        "two_else.cu": "#if __CUDA_ARCH__ > 900\n#else\n#else\n#endif\n",
        "open.cu": "#if __CUDA_ARCH__ > 900\n#if 1\n#endif\n",
    }
    for name, text in bad.items():
        (root / name).write_text(text)
    run = scan(capsys, "unbalanced #endif/#else/#elif", root)
    assert run.rc == 0
    assert_good(run)
    errors = run.errors()
    assert all("unbalanced conditionals" in errors[name] for name in bad), errors


def test_derived_macro_chains_and_cycles(tmp_path, capsys):
    """3,000 macros each defined under the previous, in reverse order, and a cycle: no recursion limit."""
    root = good_tree(tmp_path / "tree")
    n = 3000
    chain = "".join(f"#if defined(M{i})\n#define M{i + 1} 1\n#endif\n" for i in reversed(range(n)))
    (root / "chain.h").write_text(
        chain + "#if __CUDA_ARCH__ >= 900\n#define M0 1\n#endif\n"
        f"#if defined(M{n})\nint deep;\n#endif\n"
        "#if defined(CYC_B) || __CUDA_ARCH__ >= 1000\n#define CYC_A 1\n#endif\n"
        "#if defined(CYC_A) && __CUDA_ARCH__ >= 900\n#define CYC_B 1\n#endif\n"
        "#ifdef CYC_A\nint cyc;\n#endif\n"
    )
    run = scan(capsys, "3,000-deep derived macro chain + a cycle", root, seconds=60, peak_mb=1024)
    assert run.rc == 0 and run.errors() == {}
    lines = {g["line"]: g for g in run.gates("chain.h")}
    deep = lines[3 * n + 4]
    assert deep["admits"] == [t for t in arch.device_targets() if arch.target_macros()[t]["__CUDA_ARCH__"] >= 900]
    assert len(deep["resolutions"]) <= 100 and deep["resolutions"][0]["name"] == f"M{n}"


# --- Python extractor ---------------------------------------------------------------------------

PY_HEADER = "import torch\nmajor, minor = torch.cuda.get_device_capability()\n"


@pytest.mark.parametrize("shape", ["5,000 nested parentheses", "50,000-term boolean", "a predicate 5,000 deep"])
def test_python_deep_expressions(tmp_path, capsys, shape):
    root = good_tree(tmp_path / "tree")
    if shape.startswith("5,000"):
        cond = "(" * 5000 + "major >= 9" + ")" * 5000
    elif shape.startswith("50,000"):
        cond = " or ".join(f"major == {i % 13}" for i in range(50_000))
    else:  # evaluated while predicates are found, before any gate is read
        deep = "(" * 5000 + "torch.cuda.get_device_capability()[0] >= 9" + ")" * 5000
        (root / "flags.py").write_text(f"import torch\nflag = {deep}\ndef is_deep():\n    return {deep}\n")
        cond = "major >= 9"
    (root / "deep.py").write_text(PY_HEADER + f"if {cond}:\n    x = 1\n")
    run = scan(capsys, f"Python: {shape}", root, seconds=60)
    assert run.rc == 0
    assert_good(run)
    assert run.gates("deep.py") or "deep.py" in run.errors()
    if shape.startswith("a predicate"):
        assert "too deeply" in run.errors()["flags.py"] and run.gates("deep.py")


def test_python_predicate_that_refers_to_itself(tmp_path, capsys):
    root = good_tree(tmp_path / "tree")
    (root / "selfref.py").write_text("""import functools
import torch

def _check(device_capability_majors=(), **kw):
    major, minor = torch.cuda.get_device_capability()
    return major in device_capability_majors and is_sm90_supported()

is_sm90_supported = functools.partial(_check, device_capability_majors=[9])
is_sm100_supported = is_sm90_supported
is_sm90_supported = is_sm100_supported
alias = functools.partial(functools.partial(is_sm100_supported))

def is_sm120_supported():
    return is_sm120_supported() or alias()

loop = lambda: loop()
again = functools.partial(again)

if is_sm90_supported() or is_sm120_supported() or loop() or again():
    x = 1
""")
    run = scan(capsys, "Python predicate recursive through partials and aliases", root, seconds=30)
    assert run.rc == 0
    assert_good(run)


# --- output: control characters and markup from the scanned code -------------------------------

EVIL_NAME = "evil\x1b[31m<script>\u202e.cu"


def _evil_tree(root: Path) -> Path:
    good_tree(root)
    (root / EVIL_NAME).write_text("#if __CUDA_ARCH__ >= 900 && '\x1b' == 27\nint x;\n#endif\n")
    (root / "bad\x1b]0;title\x07.cu").write_text("#else\n#endif\n")  # an error line names it on stderr
    (root / "evil.py").write_text(
        PY_HEADER + 'if major >= 9 and "\x1b]0;pwned\x07</script><script>alert(1)</script>" != minor:\n    x = 1\n'
    )
    return root


def test_text_output_escapes_control_characters(tmp_path, capsys):
    root = _evil_tree(tmp_path / "tree")
    rc = cli.main(["scan", str(root), "--no-cache", "--format", "text", "--jobs", "1"])
    out, err = capsys.readouterr()
    assert rc == 0 and "Traceback" not in err
    for stream in (out, err):
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202e]", stream), repr(stream)
    assert "evil\\x1b[31m<script>\\u202e.cu" in out
    assert "bad\\x1b]0;title\\x07.cu: unbalanced conditionals" in err
    assert "\\x1b]0;pwned\\x07" in out


def test_terminal_output_escapes_control_characters(tmp_path):
    from auditor.pipeline import Options, audit
    from auditor.render import terminal

    result = audit([str(_evil_tree(tmp_path / "tree"))], Options(jobs=1))
    out = terminal.render(result)
    # rich adds its own SGR colour codes (ESC [ ... m); no other escape may get through
    assert not re.search(r"\x1b(?!\[[0-9;]*m)", out), repr(out)
    assert "\x07" not in out and "\u202e" not in out


def _evil_result(tmp_path):
    from auditor.pipeline import Options, audit

    result = audit([str(_evil_tree(tmp_path / "tree"))], Options(jobs=1))
    assert any(g.file == EVIL_NAME for g in result.gates)
    assert any("</script>" in g.expression for g in result.gates)
    return result, {f: f.renderer() for f in Format}


def test_json_and_sarif_carry_hostile_text_exactly_and_escaped(tmp_path):
    result, table = _evil_result(tmp_path)
    text = table["json"](result)
    assert "\x1b" not in text  # JSON escapes C0 controls: \u001b
    assert any(g["file"] == EVIL_NAME for g in json.loads(text)["gates"])  # the exact name survives
    sarif = table["sarif"](result)
    assert "\x1b" not in sarif
    uris = [
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for run in json.loads(sarif)["runs"]
        for r in run["results"]
        for loc in r.get("locations", [])
    ]
    assert all("\x1b" not in u and "<" not in u for u in uris)


def test_html_and_markdown_escape_markup_from_the_scanned_code(tmp_path):
    result, table = _evil_result(tmp_path)
    html = table["html"](result)
    assert "</script><script>alert(1)" not in html and "<script>\u202e" not in html
    # Markdown goes to GitHub, which renders raw HTML: render it as CommonMark does and look
    # for tags that came from the scanned code (code spans must hold them as text).
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(table["markdown"](result))
    assert "<script" not in rendered and "&lt;script&gt;" in rendered


def test_html_and_markdown_escape_control_characters(tmp_path):
    result, table = _evil_result(tmp_path)
    for fmt in ("html", "markdown"):
        out = table[fmt](result)
        assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", out), fmt


# --- one real process ---------------------------------------------------------------------------


def test_python_m_auditor_on_many_hostile_inputs(tmp_path):
    """Several hostile inputs in one ``python -m auditor scan``, under a 4 GB address-space limit."""
    root = _evil_tree(tmp_path / "tree")
    (root / "a.cu").symlink_to("b.cu")
    (root / "b.cu").symlink_to("a.cu")
    (root / "up").symlink_to("..", target_is_directory=True)
    (root / "deep.cu").write_text("#if __CUDA_ARCH__ >= 900\n" * 10_000 + "#endif\n" * 10_000)
    (root / "blob.cuh").write_bytes(bytes(range(256)) * 16)
    (root / "bad.cu").write_text("#else\n#endif\n")
    os.mkfifo(root / "fifo.cu")
    with open(root / "huge.cu", "wb") as fh:
        fh.truncate(100 * 2**20)
    whl = make_zip(
        tmp_path / "evil-1.0-py3-none-any.whl",
        {"../../slipped.cu": GOOD.encode(), "pkg/bomb.cu": bytes(100 * 2**20), "pkg/good.cu": GOOD.encode()},
    )

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (4 * 2**30, 4 * 2**30))

    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "auditor", "scan", str(root), str(whl), "--no-cache", "--format", "json", "--jobs", "2"],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=300,
        cwd=str(tmp_path),
    )
    elapsed = time.perf_counter() - t0
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 120
    doc = json.loads(proc.stdout)
    by_input = {}
    for e in doc["errors"]:
        by_input.setdefault(Path(e["input"]).name, {})[e["file"]] = e["reason"]
    assert {"a.cu", "b.cu", "up", "deep.cu", "blob.cuh", "bad.cu", "fifo.cu", "huge.cu"} <= set(by_input["tree"])
    assert {"../../slipped.cu", "pkg/bomb.cu"} <= set(by_input[whl.name])
    files = {(Path(g["input"]).name, g["file"]) for g in doc["gates"]}
    assert {("tree", "good.cu"), ("tree", "good.py"), ("tree", EVIL_NAME), (whl.name, "pkg/good.cu")} <= files
    for line in proc.stderr.splitlines():
        assert ERROR_LINE.match(line) and not re.search(r"[\x00-\x1f\x7f-\x9f]", line), repr(line)
    nothing_written(tmp_path.parent, ("slipped.cu",))

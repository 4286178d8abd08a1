"""Streaming scans and the result cache: files are listed, not held; workers read them; a
re-scan of an unchanged input reads and hashes and does nothing else; the cache is never trusted.
"""

from __future__ import annotations

import json
import sqlite3
import zipfile
from pathlib import Path

import pytest

from auditor import cli, pipeline
from auditor.cuda import gates as cuda_gates
from auditor.model import Binary, EmbeddedCode, GateKind, Language, Loadability, Severity
from auditor.pipeline import cache as pipeline_cache
from auditor.pipeline import workers
from auditor.pipeline.cache import Cache, InputResult
from auditor.python import extract as python_gates
from auditor.render.formats import Format
from auditor.sources import DirectoryProvider, LazyFile, ZipProvider, read_all, read_file

GUARD = "#if __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1200\n"
CU = GUARD + "__device__ void k{i}() {{ cudaGridDependencySynchronize(); }}\n#endif\n"
PY = "import torch\n\n\ndef f{i}():\n    if torch.cuda.get_device_capability()[0] >= 9:\n        return 1\n    return 0\n"


def tree(root: Path, n: int = 6) -> Path:
    for i in range(n):
        (root / "pkg").mkdir(parents=True, exist_ok=True)
        (root / "pkg" / f"k{i}.cu").write_text(CU.format(i=i))
        (root / "pkg" / f"m{i}.py").write_text(PY.format(i=i))
    (root / "pkg" / "plain.h").write_text("int no_directives_here;\n")
    return root


def run(capsys, *args: str) -> tuple[int, dict]:
    rc = cli.main(["scan", *args, "--format", "json"])
    out, _ = capsys.readouterr()
    return rc, json.loads(out)


def test_directory_files_are_listed_not_read(tmp_path):
    root = tree(tmp_path / "t", 2)
    files, errors = read_all(DirectoryProvider(str(root)))
    assert errors == [] and files and all(isinstance(f, LazyFile) for f in files)
    k0 = next(f for f in files if f.path == "pkg/k0.cu")
    (root / "pkg" / "k0.cu").write_text("changed after listing\n")
    assert read_file(k0) == b"changed after listing\n"  # the bytes are read when asked for


def test_wheel_members_are_read_in_the_workers(tmp_path, capsys, monkeypatch):
    root = tree(tmp_path / "t", 8)
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(root.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(root).as_posix())
    files, _ = read_all(ZipProvider(str(whl)))
    assert all(isinstance(f, LazyFile) for f in files)
    _, one = run(capsys, str(whl), "--no-cache", "--jobs", "1")
    monkeypatch.setattr(workers, "PARALLEL_MIN_FILES", 1)
    _, pooled = run(capsys, str(whl), "--no-cache", "--jobs", "2")
    assert pooled == one
    assert len([g for g in one["gates"] if g["language"] == "cuda"]) == 8
    assert len([g for g in one["gates"] if g["language"] == "python"]) == 8


def test_symlink_to_a_file_outside_the_tree_is_not_read(tmp_path, capsys):
    outside = tmp_path / "secret.cu"
    outside.write_text(CU.format(i=99))
    root = tree(tmp_path / "t", 1)
    (root / "pkg" / "leak.cu").symlink_to(outside)
    (root / "pkg" / "inside.cu").symlink_to("k0.cu")  # a link that stays in the tree is read
    rc, doc = run(capsys, str(root), "--no-cache", "--jobs", "1")
    assert rc == 0
    errors = {e["file"]: e["reason"] for e in doc["errors"]}
    assert "outside the scanned tree" in errors["pkg/leak.cu"]
    files = {g["file"] for g in doc["gates"]}
    assert "pkg/leak.cu" not in files and {"pkg/inside.cu", "pkg/k0.cu"} <= files
    assert all("k99" not in g["expression"] for g in doc["gates"])


def test_result_cache_lives_at_the_cache_root(tmp_path, capsys):
    root = tree(tmp_path / "t", 1)
    cache = tmp_path / "cache"
    run(capsys, str(root), "--cache-dir", str(cache), "--jobs", "1")
    assert (cache / "results.sqlite3").is_file()
    assert [p.relative_to(cache).as_posix() for p in cache.rglob("*.sqlite3")] == ["results.sqlite3"]


def test_warm_scan_does_not_extract_again(tmp_path, capsys, monkeypatch):
    root = tree(tmp_path / "t")
    cache = str(tmp_path / "cache")
    _, cold = run(capsys, str(root), "--cache-dir", cache, "--jobs", "1")

    def fail(*a, **k):
        raise AssertionError("extraction ran on an unchanged input")

    monkeypatch.setattr(cuda_gates, "scan_bytes", fail)
    monkeypatch.setattr(python_gates, "extract", fail)
    _, warm = run(capsys, str(root), "--cache-dir", cache, "--jobs", "1")
    assert warm == cold


def test_one_changed_file_is_the_only_one_scanned_again(tmp_path, capsys, monkeypatch):
    root = tree(tmp_path / "t")
    cache = str(tmp_path / "cache")
    run(capsys, str(root), "--cache-dir", cache, "--jobs", "1")
    (root / "pkg" / "k3.cu").write_text(CU.format(i=3).replace("900", "800"))
    scanned: list[str] = []
    real = cuda_gates.scan_bytes
    monkeypatch.setattr(cuda_gates, "scan_bytes", lambda path, *a: scanned.append(path) or real(path, *a))
    _, warm = run(capsys, str(root), "--cache-dir", cache, "--jobs", "1")
    assert scanned == ["pkg/k3.cu"]
    _, uncached = run(capsys, str(root), "--no-cache", "--jobs", "1")
    assert warm == uncached


def scan_to(tmp_path: Path, root: Path, cache: Path, *extra: str) -> dict[str, str]:
    """One scan writing every file format; the texts by suffix."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    names = [out / f"r{s}" for s in (".json", ".sarif", ".md", ".html", ".txt")]
    rc = cli.main(
        [
            "scan",
            str(root),
            "--cache-dir",
            str(cache),
            "--jobs",
            "1",
            *extra,
            *[a for n in names for a in ("-o", str(n))],
        ]
    )
    assert rc in (0, 1)
    return {n.suffix: n.read_text(encoding="utf-8") for n in names}


def report_slots(cache: Path) -> list[str]:
    db = sqlite3.connect(cache / "results.sqlite3")
    try:
        return [k for (k,) in db.execute("SELECT key FROM entries WHERE key LIKE 'report:%'")]
    finally:
        db.close()


def test_warm_scan_does_not_evaluate_or_render_again(tmp_path, monkeypatch, capsys):
    root = tree(tmp_path / "t")
    (root / "pkg" / "broken.cu").write_bytes(b"#if __CUDA_ARCH__ >= 900\n")  # an error line on stderr
    cache = tmp_path / "cache"
    cold = scan_to(tmp_path, root, cache, "--fail-on", "high")
    cold_err = capsys.readouterr().err
    assert "broken.cu" in cold_err
    assert cold == scan_to(tmp_path, root, tmp_path / "other", "--no-cache", "--fail-on", "high")
    capsys.readouterr()

    def fail(*a, **k):
        raise AssertionError("a result was decoded or a report rendered again for an unchanged input")

    monkeypatch.setattr(Format, "renderer", fail)
    monkeypatch.setattr(pipeline_cache, "decode_gates", fail)
    out = tmp_path / "out"
    args = ["scan", str(root), "--cache-dir", str(cache), "--jobs", "1", "--fail-on", "high"]
    outputs = [a for s in (".json", ".sarif", ".md", ".html", ".txt") for a in ("-o", str(out / f"r{s}"))]
    assert cli.main(args + outputs) == 1  # ARCH001 is high: the exit code comes back with the reports
    assert capsys.readouterr().err == cold_err
    assert {p.suffix: p.read_text(encoding="utf-8") for p in out.iterdir()} == cold
    assert cli.main(args + ["--fail-on", "info"] + outputs) == 1
    capsys.readouterr()
    assert cli.main(args + ["--format", "json"]) == 1 and capsys.readouterr().out == cold[".json"]
    # Writing a baseline needs the findings themselves.
    with pytest.raises(AssertionError, match="decoded or a report rendered"):
        cli.main(args + ["--format", "json", "--write-baseline", str(tmp_path / "baseline.json")])


def test_a_changed_result_or_report_option_renders_again(tmp_path):
    root = tree(tmp_path / "t")
    cache = tmp_path / "cache"
    scan_to(tmp_path, root, cache)
    (root / "pkg" / "k2.cu").write_text(CU.format(i=2).replace("1200", "1000"))
    changed = scan_to(tmp_path, root, cache)
    assert changed == scan_to(tmp_path, root, cache, "--no-cache")
    assert '"12.0": "excludes"' in changed[".json"]
    linked = scan_to(tmp_path, root, cache, "--link-base", "https://example.org/src")
    assert linked[".md"] != changed[".md"] and "https://example.org/src" in linked[".md"]
    assert linked == scan_to(tmp_path, root, cache, "--no-cache", "--link-base", "https://example.org/src")
    assert scan_to(tmp_path, root, cache, "--ignore", "ARCH001") == scan_to(
        tmp_path, root, cache, "--no-cache", "--ignore", "ARCH001"
    )
    # One stored text per format and set of inputs, however many results it has seen.
    assert len(report_slots(cache)) == 5


WRONG_SHAPES = [
    ["scan", [[["if", 1, "x", 2, [], [], []]], [], []], []],
    ["scan", "x", "y"],
    ["error"],
    ["none", 1],
    {"gates": 1},
    {"gates": [{"line": "7"}], "errors": []},
    {"gates": [], "findings": [["R", 1]], "errors": [], "binaries": []},
    {"gates": [], "findings": [], "errors": [["a"]], "binaries": [{"path": 3}]},
    None,
    12,
    "text",
    [],
]


@pytest.mark.parametrize("damage", ["garbage", "moved between keys", "unsealed JSON", "wrong shapes", "not a database"])
def test_corrupt_or_foreign_cache_entries_are_ignored(tmp_path, capsys, damage):
    root = tree(tmp_path / "t")
    cache = tmp_path / "cache"
    _, uncached = run(capsys, str(root), "--no-cache", "--jobs", "1")
    run(capsys, str(root), "--cache-dir", str(cache), "--jobs", "1")
    db_path = cache / "results.sqlite3"
    if damage == "not a database":
        db_path.write_bytes(b"this is not an sqlite file" * 100)
    else:
        db = sqlite3.connect(db_path)
        rows = db.execute("SELECT key, value FROM entries ORDER BY key").fetchall()
        keys = [k for k, _ in rows]
        assert any(k.startswith("file:") for k in keys) and any(k.startswith("result:") for k in keys)
        if damage == "wrong shapes":  # written the way archaudit writes: only the shape checks stand
            db.close()
            store = Cache(cache)
            store.put_many(
                [(k, WRONG_SHAPES[i % len(WRONG_SHAPES)]) for i, k in enumerate(keys) if not k.startswith("input:")]
            )  # an empty input entry is a valid shape
            store.close()
            db = sqlite3.connect(db_path)
        for i, (k, v) in enumerate(rows):
            if damage == "garbage":
                db.execute("UPDATE entries SET value = ? WHERE key = ?", (b"{not json" if i % 2 else "{not json", k))
            elif damage == "moved between keys":  # each entry under its neighbour's key
                db.execute("UPDATE entries SET value = ? WHERE key = ?", (rows[(i + 1) % len(rows)][1], k))
            elif damage == "unsealed JSON":  # the JSON without its seal, or with its text altered
                if i % 2:
                    db.execute("UPDATE entries SET seal = ? WHERE key = ?", (b"", k))
                else:
                    db.execute("UPDATE entries SET value = ? WHERE key = ?", (v.replace(b"sm_90", b"sm_80"), k))
            elif damage == "wrong shapes" and k.startswith("input:"):
                db.execute("DELETE FROM entries WHERE key = ?", (k,))
        db.commit()
        db.close()
    rc, doc = run(capsys, str(root), "--cache-dir", str(cache), "--jobs", "1")
    assert rc == 0 and doc == uncached


def test_suppression_comments_in_streamed_files(tmp_path, capsys, monkeypatch):
    root = tree(tmp_path / "t", 1)
    (root / "pkg" / "quiet.cu").write_text("// archaudit: ignore\n" + CU.format(i=7))
    monkeypatch.setattr(workers, "PARALLEL_MIN_FILES", 1)
    for jobs in ("1", "2"):
        _, doc = run(capsys, str(root), "--no-cache", "--jobs", jobs)
        assert [f for f in doc["findings"] if f["file"] == "pkg/quiet.cu"] == []
        assert [f for f in doc["findings"] if f["file"] == "pkg/k0.cu"]


def test_cache_encoding_round_trips_every_field():
    from tests.conftest import FIXTURES

    result = pipeline.audit([str(FIXTURES)], pipeline.Options(jobs=1))
    gates, findings, errors = list(result.gates), list(result.findings), list(result.errors)
    assert any(g.features for g in gates) and any(g.resolutions for g in gates)
    assert {g.language for g in gates} == {"python", "cuda"}
    code = (EmbeddedCode("sass", "sm_90a", False), EmbeddedCode("ptx", "compute_90", True, "a note"))
    binaries = (Binary("p/k.so", "p", "x", code, (("12.0", Loadability.NONE), ("9.0", Loadability.NATIVE))),)
    final = InputResult(gates, findings, errors, binaries)
    assert pipeline_cache.FINAL.decode(json.loads(json.dumps(pipeline_cache.FINAL.encode(final)))) == final
    wire = json.loads(json.dumps(pipeline_cache.EXTRACTED.encode((gates, errors))))
    assert pipeline_cache.EXTRACTED.decode(wire) == (gates, errors)


def test_cache_entries_decode_into_the_vocabularies_or_not_at_all():
    """A word the model does not know (a kind, a severity, a loadability) makes the entry a miss."""
    from tests.conftest import FIXTURES

    result = pipeline.audit([str(FIXTURES)], pipeline.Options(jobs=1))
    final = InputResult(list(result.gates), list(result.findings), [], ())
    wire = json.loads(json.dumps(pipeline_cache.FINAL.encode(final)))
    decoded = pipeline_cache.FINAL.decode(wire)
    assert all(type(g.kind) is GateKind and type(g.language) is Language for g in decoded.gates)
    assert all(type(f.severity) is Severity for f in decoded.findings)
    kind = wire["gates"]["fields"].index("kind")
    wire["gates"]["rows"][0][kind] = "not-a-kind"
    with pytest.raises(ValueError):
        pipeline_cache.FINAL.decode(wire)
    store = Cache(None)
    assert store.recall("k", pipeline_cache.FINAL) is None


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_python_pass_reports_progress(tmp_path, monkeypatch, jobs):
    """In this process, or from its pool worker through a queue: files parsed, batches read."""
    root = tree(tmp_path / "t", 40)  # 40 modules: three batches of 16
    monkeypatch.setattr(workers, "PARALLEL_MIN_FILES", 1)
    seen: list[tuple[str, int, int]] = []
    options = pipeline.Options(jobs=jobs, progress=lambda *event: seen.append(event))
    result = pipeline.audit([str(root)], options)
    assert len([g for g in result.gates if g.language == "python"]) == 40
    parse = [e for e in seen if e[0] == "python (parse)"]
    evaluate = [e for e in seen if e[0] == "python (evaluate)"]
    assert parse and parse[-1][1] == parse[-1][2] == 40
    assert [done for _, done, _ in evaluate] == [1, 2, 3] and {total for _, _, total in evaluate} == {3}

"""The result cache is bounded: a size cap, least-recently-used eviction, ``archaudit cache
info|clean``, ``--cache-max`` and ``[tool.archaudit] cache-max`` (issue #20).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import orjson
import pytest

from auditor import cli, config
from auditor.model import SEVERITIES, Domain, Feature, Gate, GateKind, Language, held_once
from auditor.pipeline import kept
from auditor.pipeline.cache import Cache, decode_gates, encode_gates
from tests.conftest import gated_tree


def value(i: int) -> dict:
    return {"n": i, "pad": "x" * 200}


def stored(directory: Path) -> tuple[int, int]:
    """(entries, bytes of entries) as the database holds them."""
    with sqlite3.connect(directory / "results.sqlite3") as db:
        return db.execute("SELECT COUNT(*), COALESCE(SUM(length(key) + length(value)), 0) FROM entries").fetchone()


def test_entries_past_the_cap_evict_the_least_recently_used(tmp_path):
    store = Cache(tmp_path, max_bytes=1500)
    for i in range(4):
        store.put_many([(f"k{i}", value(i))])
    assert store.get("k0") == value(0)  # k0 is now the most recently used
    for i in range(4, 8):
        store.put_many([(f"k{i}", value(i))])
    kept = {k for k in (f"k{i}" for i in range(8)) if store.get(k) is not None}
    info = store.info()
    assert info is not None and info.entry_bytes <= 1500 and info.entries == len(kept)
    assert "k7" in kept and "k1" not in kept, "the oldest unread entry goes first"
    assert "k0" in kept, "reading an entry keeps it"
    store.close()


def test_reading_an_entry_marks_it_used_without_writing_it_again(tmp_path):
    """SQLite rewrites a whole row to change one column: a read of a kept report (tens of MB)
    must touch only its recency."""
    store = Cache(tmp_path)
    store.put_many([("report", {"text": "r" * 100_000}), ("other", value(1))])
    assert store.db is not None
    store.db.execute("CREATE TEMP TABLE written (key TEXT)")
    for event in ("INSERT", "UPDATE", "DELETE"):
        store.db.execute(
            f"CREATE TEMP TRIGGER entries_{event.lower()} AFTER {event} ON main.entries"
            f" BEGIN INSERT INTO written VALUES ({'old' if event == 'DELETE' else 'new'}.key); END"
        )
    (before,) = store.db.execute("SELECT used FROM uses WHERE key = 'report'").fetchone()
    assert store.get("report") == {"text": "r" * 100_000}
    (after,) = store.db.execute("SELECT used FROM uses WHERE key = 'report'").fetchone()
    assert after > before, "the read counts as a use (eviction goes by it)"
    assert store.db.execute("SELECT key FROM written").fetchall() == []
    store.close()


@pytest.mark.parametrize(
    "kept",
    [
        {"path": "pkg/caf\udce9.py", "n": 1},  # a file name that is not UTF-8, as os.fsdecode gives it
        {"mask": 2**70 + 1, "ok": [True, None]},  # not a float: 2**70 + 1 has none
        {"é": ["ü", "\u2028", ""]},
    ],
)
def test_an_entry_comes_back_as_it_was_kept_whoever_wrote_its_json(tmp_path, kept):
    """Entries are written by orjson, or by the standard library where orjson declines (a lone
    surrogate, an integer past 64 bits): either way they read back equal, of the same types."""
    store = Cache(tmp_path)
    store.put_many([("k", kept)])
    back = store.get("k")
    assert back == kept and [type(v) for v in back.values()] == [type(v) for v in kept.values()]
    store.close()


def test_an_entry_larger_than_the_cap_is_not_kept_and_evicts_nothing(tmp_path):
    store = Cache(tmp_path, max_bytes=1000)
    store.put_many([("small", value(1))])
    store.put_many([("huge", {"pad": "y" * 5000})])
    assert store.get("huge") is None
    assert store.get("small") == value(1)
    store.close()


def test_a_database_of_the_earlier_layout_is_emptied_not_read(tmp_path):
    with sqlite3.connect(tmp_path / "results.sqlite3") as db:
        db.execute("CREATE TABLE entries (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO entries VALUES ('old', 'whatever')")
    store = Cache(tmp_path)
    assert store.get("old") is None
    store.put_many([("new", value(2))])
    assert store.get("new") == value(2)
    assert store.info().entries == 1
    store.close()


def test_clean_empties_the_cache_and_gives_the_space_back(tmp_path):
    store = Cache(tmp_path)
    store.put_many([(f"k{i}", {"pad": "z" * 10_000}) for i in range(50)])
    before = store.info()
    assert store.clean() == 50
    after = store.info()
    assert after.entries == 0 and after.entry_bytes == 0
    assert after.disk_bytes < before.disk_bytes / 4
    store.close()


def scan(capsys, *args: str) -> tuple[int, str]:
    rc = cli.main(["scan", *args, "--format", "json", "--jobs", "1", "-q"])
    return rc, capsys.readouterr().out


def test_scans_under_a_tiny_cap_stay_under_it_and_give_the_same_result(tmp_path, capsys):
    root = gated_tree(tmp_path / "t", 5)
    cache = tmp_path / "cache"
    _, cold = scan(capsys, str(root), "--no-cache")
    for _ in range(2):
        rc, out = scan(capsys, str(root), "--cache-dir", str(cache), "--cache-max", "6K")
        assert rc == 0 and json.loads(out) == json.loads(cold)
        entries, size = stored(cache)
        assert 0 < size <= 6 * 1024
    _, roomy = scan(capsys, str(root), "--cache-dir", str(cache))
    assert stored(cache)[1] > 6 * 1024, "the default cap keeps what the tiny one evicted"
    assert json.loads(roomy) == json.loads(cold)


def test_cache_info_and_clean_on_the_command_line(tmp_path, capsys):
    root = gated_tree(tmp_path / "t", 5)
    cache = tmp_path / "cache"
    scan(capsys, str(root), "--cache-dir", str(cache))
    entries, size = stored(cache)
    assert cli.main(["cache", "info", "--cache-dir", str(cache), "--cache-max", "2G"]) == 0
    out = capsys.readouterr().out
    assert f"cache: {cache / 'results.sqlite3'}" in out
    assert f"in {entries} entries" in out and "cap: 2.0 GiB" in out
    assert cli.main(["cache", "clean", "--cache-dir", str(cache)]) == 0
    assert f"removed {entries} entries" in capsys.readouterr().out
    assert stored(cache) == (0, 0)


def test_cache_max_from_pyproject_and_flags_that_override_it(tmp_path, capsys, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.archaudit]\ncache-max = "1M"\n')
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "cache"
    assert cli.main(["cache", "info", "--cache-dir", str(cache)]) == 0
    assert "cap: 1.0 MiB" in capsys.readouterr().out
    assert cli.main(["cache", "info", "--cache-dir", str(cache), "--cache-max", "300M"]) == 0
    assert "cap: 300.0 MiB" in capsys.readouterr().out


@pytest.mark.parametrize("bad", ['"lots"', "true", '"-1G"', "[1]"])
def test_a_bad_cache_max_in_pyproject_is_an_error_naming_the_file(tmp_path, capsys, monkeypatch, bad):
    (tmp_path / "pyproject.toml").write_text(f"[tool.archaudit]\ncache-max = {bad}\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["cache", "info", "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "pyproject.toml" in err and "cache-max" in err


def test_a_bad_cache_max_flag_is_a_usage_error(tmp_path, capsys):
    assert cli.main(["cache", "info", "--cache-dir", str(tmp_path), "--cache-max", "huge"]) == 2
    assert "not a size" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1073741824", 2**30),
        ("512M", 512 * 2**20),
        ("1.5G", 3 * 2**29),
        ("2GiB", 2**31),
        ("800MB", 800 * 2**20),
        (0, 0),
    ],
)
def test_sizes(text, size):
    assert config.parse_size(text) == size


def test_a_kept_report_comes_back_as_it_was_written(tmp_path):
    """A report is kept as a line of JSON (its key, its outcome) and then its text as it is:
    a file name that is not UTF-8 and characters past Latin-1 come back unchanged."""
    store = Cache(tmp_path)
    text = '{"file": "pkg/caf\udce9.py", "admits": "\u2265 12.0"}\n{"second": "line"}\n'
    outcome = kept.Outcome(("archaudit: pkg/x.py: unreadable",), (SEVERITIES[0],), False)
    kept.keep(store, "result-key", ["input"], "", {"json": text}, outcome)
    assert kept.find(store, "result-key", ["input"], "", ["json"]) == ({"json": text}, outcome)
    assert kept.find(store, "another-key", ["input"], "", ["json"]) is None
    assert kept.find(store, "result-key", ["input"], "https://example.org", ["json"]) is None
    store.close()


def _judged(line: int) -> Gate:
    """A judged gate whose values are built afresh on every call, as each gate's are."""
    feature = Feature("ptx", 2, "cp.async.bulk", "9.0", (("12.0", "yes"),), "", "")
    toolkits = tuple([("12.0", tuple(["12.8", "13.0"]))])
    return Gate(
        f"g{line}", "/".join(["src", "k.cuh"]), line, line, Language.CUDA, GateKind.PREPROCESSOR,
        "__CUDA_ARCH__ >= 900", Domain.TARGET, ("sm_90",), features=(feature,), toolkits=toolkits, input="pkg",
    )  # fmt: skip


def test_gates_come_back_equal_with_their_repeated_values_held_once():
    """A whole environment's gates repeat a few features, toolkits and paths: decoded (as a warm
    scan reads them) or judged (as a judging process sends them back), each is one object."""
    gates = [_judged(1), _judged(2)]
    assert gates[0].features is not gates[1].features and gates[0].file is not gates[1].file
    for back in (decode_gates(orjson.loads(orjson.dumps(encode_gates(gates)))), held_once(gates)):
        assert back == gates
        assert back[0].features is back[1].features and back[0].toolkits is back[1].toolkits
        assert back[0].file is back[1].file and back[0].id != back[1].id


def test_an_entry_written_in_parts_reads_back_whole_and_sealed(tmp_path):
    """A kept report is written as its header and its text, in place, never joined; it reads
    back as one, its size counted whole, and a byte changed in the file is a miss."""
    store = Cache(tmp_path)
    parts = (b'{"key": "k"}\n', "text é ".encode() * 50_000)
    store.put_raw_many([("report", parts), ("small", (b"one",))])
    assert store.get_raw("report") == b"".join(parts) and store.get_raw("small") == b"one"
    assert store.db is not None
    (size,) = store.db.execute("SELECT size FROM uses WHERE key = 'report'").fetchone()
    assert size == len("report") + sum(map(len, parts))
    store.db.execute("UPDATE entries SET value = CAST(REPLACE(value, 'text', 'TEXT') AS BLOB) WHERE key = 'report'")
    assert store.get_raw("report") is None
    store.close()

"""``--cuda VERSION``: the toolkits evaluated decide the verdicts (the newest chosen one's), the
notes say what the others admit, an unknown release is a usage error, a cached result is
never reused for another selection, and diff reports grow a CUDA column only where it matters."""

from __future__ import annotations

import json

import pytest

from auditor import arch, cli
from auditor.cuda.macros import Axis, MacroTable
from auditor.pipeline import Options, audit
from tests.conftest import FIXTURES

CHOICE = str(FIXTURES / "toolkits" / "choice")
DIFF = FIXTURES / "toolkits" / "diff"


def scan_json(capsys, *args: str) -> dict:
    assert cli.main(["scan", CHOICE, "--format", "json", "--no-cache", "--jobs", "1", *args]) == 0
    return json.loads(capsys.readouterr().out)


def gates_by_place(doc: dict) -> dict:
    return {(g["file"], g["line"]): g for g in doc["gates"]}


def test_the_verdict_differs_between_cuda_12_8_and_13_0(capsys):
    old = gates_by_place(scan_json(capsys, "--cuda", "12.8"))
    new = gates_by_place(scan_json(capsys, "--cuda", "13.0"))
    cuda13 = ("kernel.cu", 2)  # __CUDACC_VER_MAJOR__ >= 13 && __CUDA_ARCH__ >= 1200
    # 12.8 builds 12.0 and takes the other path; it cannot build 12.1 at all, so the nearest
    # toolkit that can, 12.9, judges that one (the command line warns): no CUDA 13 there either
    assert old[cuda13]["verdicts"] == {"12.0": "excludes", "12.1": "excludes"}
    assert old[cuda13]["toolkit_verdicts"] == {"12.0": "CUDA ≥ 13.0", "12.1": "CUDA ≥ 13.0"}
    assert new[cuda13]["verdicts"] == {"12.0": "admits", "12.1": "admits"}
    assert not new[cuda13].get("toolkit_verdicts")  # one toolkit chosen, and it admits
    caller = ("pick.py", 13)  # if fast_path_supported(): 9.x below CUDA 13, 12.x from it
    assert old[caller]["verdicts"] == {"12.0": "excludes", "12.1": "excludes"}
    assert new[caller]["verdicts"] == {"12.0": "admits", "12.1": "admits"}


def test_the_newest_chosen_toolkit_decides_and_the_others_are_noted(capsys):
    doc = scan_json(capsys, "--cuda", "12.8", "--cuda", "13.0")
    assert doc["cuda"] == ["12.8", "13.0"]
    g = gates_by_place(doc)[("kernel.cu", 2)]
    assert g["verdicts"] == {"12.0": "admits", "12.1": "admits"}
    assert g["toolkit_verdicts"] == {"12.0": "CUDA ≥ 13.0"}  # 12.8 has no 12.1 target: nothing to compare
    # by default every known toolkit is evaluated: 13.5 decides, the note is the same
    default = scan_json(capsys)
    assert "cuda" not in default
    assert gates_by_place(default)[("kernel.cu", 2)]["toolkit_verdicts"] == {
        "12.0": "CUDA ≥ 13.0",
        "12.1": "CUDA ≥ 13.0",
    }


def test_an_architecture_no_chosen_toolkit_builds_is_judged_by_the_nearest_that_does_and_is_not_dead(capsys):
    assert (
        cli.main(
            ["scan", CHOICE, "--format", "json", "--no-cache", "--jobs", "1", "--cuda", "13.0", "--target", "10.7,12.0"]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert err == "archaudit: warning: CUDA 13.0 cannot build for 10.7; it is judged as CUDA 13.4 builds it\n"
    doc = json.loads(out)
    g = gates_by_place(doc)[("kernel.cu", 6)]  # __CUDA_ARCH__ == 1070: sm_107 is 13.4's
    assert g["verdicts"] == {"10.7": "admits", "12.0": "excludes"}
    assert dict(g["toolkits"]) == {"sm_107": ["13.4", "13.5"], "sm_107a": ["13.4", "13.5"], "sm_107f": ["13.4", "13.5"]}
    assert not [f for f in doc["findings"] if f["rule"] == "ARCH006"]
    # with the default targets, sm_107 is not requested: the branch is still not dead
    default = scan_json(capsys, "--cuda", "13.0")
    assert gates_by_place(default)[("kernel.cu", 6)]["admits"] == ["sm_107", "sm_107a", "sm_107f"]
    assert not [f for f in default["findings"] if f["rule"] == "ARCH006"]


def test_code_only_unchosen_toolkits_admit_needs_that_cuda_and_is_not_dead(capsys):
    doc = scan_json(capsys, "--cuda", "12.8", "--target", "9.0,12.0")
    gates = gates_by_place(doc)
    hopper = gates[("kernel.cu", 10)]  # __CUDACC_VER_MAJOR__ >= 13 && __CUDA_ARCH__ == 900
    assert hopper["admits"] == [] and hopper["toolkit_verdicts"] == {"9.0": "CUDA ≥ 13.0"}
    ready = gates[("pick.py", 20)]  # torch.version.cuda >= "12.9" and major == 12
    assert ready["admits"] == [] and ready["toolkit_verdicts"] == {"12.0": "CUDA ≥ 12.9"}
    assert not [f for f in doc["findings"] if f["rule"] == "ARCH006"]
    # the same gates under CUDA 13.0: admitted, nothing to note
    later = gates_by_place(scan_json(capsys, "--cuda", "13.0", "--target", "9.0,12.0"))
    assert later[("kernel.cu", 10)]["verdicts"]["9.0"] == "admits"
    assert later[("pick.py", 20)]["verdicts"]["12.0"] == "admits"


def test_axis_reads_only_the_chosen_toolkits():
    table = MacroTable()
    (sm_120,) = [i for i, t in enumerate(arch.target_order()) if t == "sm_120"]
    for releases, want in ((("12.8",), False), (("13.0",), True), (("12.8", "13.0"), True), ((), True)):
        values, _, _, _ = Axis(table, releases).effective([("__CUDACC_VER_MAJOR__ >= 13", True)])
        assert values[sm_120] is want, releases


def test_an_unknown_toolkit_is_a_one_line_usage_error(capsys):
    assert cli.main(["scan", CHOICE, "--cuda", "11.8", "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown CUDA toolkit '11.8'" in err and "12.8" in err
    with pytest.raises(ValueError):
        arch.chosen_toolkits(["13.9"])
    assert arch.releases_of(["13.0.88", "12.8"]) == ("12.8", "13.0")
    assert arch.nearest(["12.9", "13.0", "13.5"], ["12.8"]) == "12.9"
    assert arch.nearest(["12.8", "12.9"], ["13.0"]) == "12.9"


def test_another_selection_does_not_reuse_a_cached_result(tmp_path):
    def verdict(*releases: str) -> str:
        options = Options(jobs=1, cache_dir=tmp_path / "cache", toolkits=releases)
        (g,) = [g for g in audit([CHOICE], options).gates if g.file == "kernel.cu" and g.line == 2]
        return "admits" if arch.admits_target(g.domain, g.admits, options.targets[0]) else "excludes"

    assert verdict("13.0") == "admits"
    assert verdict("12.8") == "excludes"  # a hit on 13.0's entry would say admits
    assert verdict("13.0") == "admits"


def diff(capsys, fmt: str, *args: str) -> str:
    assert (
        cli.main(["diff", str(DIFF / "old"), str(DIFF / "new"), "--format", fmt, "--no-cache", "--jobs", "1", *args])
        == 0
    )
    return capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["text", "markdown", "html"])
def test_diff_reports_show_the_toolkit_column_where_it_changes_an_answer(capsys, fmt):
    out = diff(capsys, fmt)
    assert "12.0: any CUDA → CUDA ≥ 13.0" in out
    if fmt == "markdown":
        assert "| admits | CUDA | verdict |" in out
    # with CUDA 13.0 alone the toolkit changes no answer: no column, no note
    alone = diff(capsys, fmt, "--cuda", "13.0")
    assert "CUDA ≥" not in alone and "| CUDA |" not in alone and "<th>CUDA</th>" not in alone


def test_the_pr_comment_has_the_column_too(capsys):
    out = diff(capsys, "markdown")
    from auditor.render.diff import toolkit_cell  # the PR comment is this Markdown in pr mode

    assert toolkit_cell.__doc__ and "12.1: any CUDA → CUDA ≥ 13.0" in out


def test_a_flag_only_cuda_12_9_defines_across_12_9_and_13_0(capsys):
    """``MYLIB_SM101F_ENABLED`` (CUTLASS's ``CUTLASS_ARCH_MMA_SM101F_ENABLED`` shape): sm_101
    is 12.9's name for what 13.0 calls sm_110, so under 13.0 the branch needs CUDA 12.9."""

    def line_17(release: str) -> tuple[dict, list]:
        args = ["scan", str(FIXTURES / "cuda" / "derived"), "--format", "json", "--no-cache", "--jobs", "1"]
        assert cli.main([*args, "--cuda", release, "--target", "10.1"]) == 0
        doc = json.loads(capsys.readouterr().out)
        (g,) = [g for g in doc["gates"] if g["file"] == "kernel.cu" and g["line"] == 17]
        return g, [f for f in doc["findings"] if f["rule"] == "ARCH006" and f["gate"] == g["id"]]

    g, dead = line_17("12.9")
    assert g["verdicts"] == {"10.1": "admits"} and not g.get("toolkit_verdicts") and not dead
    # 13.0 cannot build 10.1 (it calls Thor sm_110): the nearest that can, 12.9, judges it
    g, dead = line_17("13.0")
    assert g["verdicts"] == {"10.1": "admits"} and g["toolkit_verdicts"] == {"10.1": "CUDA ≥ 12.9"} and not dead
    g, dead = line_17("12.8")
    assert g["verdicts"] == {"10.1": "excludes"} and g["toolkit_verdicts"] == {"10.1": "CUDA 12.9"} and not dead


def test_the_diff_document_names_the_chosen_toolkits(capsys):
    doc = json.loads(diff(capsys, "json", "--cuda", "13.0", "--cuda", "12.8"))
    assert doc["cuda"] == ["12.8", "13.0"]
    assert "cuda" not in json.loads(diff(capsys, "json"))


def test_a_flag_that_now_needs_cuda_13_changes_its_call_site(capsys):
    """The kernel's ``#if defined(FAST_PATH_ENABLED)`` is unchanged and the newest toolkit
    admits 12.x on both sides; only the CUDA that does changed. That is a change, traced to
    the flag's definition."""
    args = ["diff", str(FIXTURES / "toolkits" / "macro" / "old"), str(FIXTURES / "toolkits" / "macro" / "new")]
    assert cli.main([*args, "--format", "json", "--no-cache", "--jobs", "1"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (dfn,) = doc["definitions"]
    assert dfn["name"] == "FAST_PATH_ENABLED"
    (site,) = dfn["call_sites"]
    assert (site["file"], site["line"], site["delta"]) == ("kernel.cu", 3, [])
    assert doc["summary"]["unchanged"] == 0
    assert cli.main([*args, "--format", "markdown", "--no-cache", "--jobs", "1"]) == 0
    assert "12.1: any CUDA → CUDA ≥ 13.0" in capsys.readouterr().out

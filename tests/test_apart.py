"""Work run in a forked process that ends (:mod:`auditor.apart`)."""

from __future__ import annotations

import os

import pytest

from auditor.apart import apart, begun


def test_the_result_and_the_progress_come_back():
    held = list(range(1000))  # inherited, not pickled
    seen: list[tuple] = []

    def work(report):
        for i in range(3):
            report("step", i + 1, 3)
        return sum(held), os.getpid()

    total, pid = apart(work, lambda *args: seen.append(args))
    assert total == sum(held) and pid != os.getpid()
    assert seen == [("step", 1, 3), ("step", 2, 3), ("step", 3, 3)]


def test_what_the_child_changes_stays_in_the_child():
    state = {"n": 1}

    def work(report):
        state["n"] = 2
        return state["n"]

    assert apart(work) == 2 and state == {"n": 1}


def test_an_exception_is_raised_in_the_caller():
    def work(report):
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        apart(work)


def test_a_result_that_does_not_pickle_is_an_error():
    with pytest.raises(RuntimeError, match="pickle"):
        apart(lambda report: lambda: 1)
    with pytest.raises(RuntimeError, match="pickle"):  # part of it written into the pipe first
        apart(lambda report: [bytes(100_000), lambda: 1])


def test_a_child_that_dies_gives_none():
    def work(report):
        report("step", 1, 2)
        os._exit(3)

    assert apart(work) is None


def test_begun_work_runs_while_the_caller_goes_on(tmp_path):
    """Two children begun one after the other run at once: each waits for the other's mark."""
    import time

    def work(mine: str, theirs: str):
        def run(report):
            (tmp_path / mine).touch()
            deadline = time.monotonic() + 60
            while not (tmp_path / theirs).exists():
                if time.monotonic() > deadline:
                    return "alone"
                time.sleep(0.01)
            return "together"

        return run

    first = begun(work("a", "b"))
    second = begun(work("b", "a"))
    assert (second(), first()) == ("together", "together")


def test_a_result_larger_than_the_pipe_streams_through():
    """Progress before and after a result of many megabytes, read while the child writes."""
    seen: list[tuple] = []

    def work(report):
        report("start")
        return [bytes([i % 251]) * 1000 for i in range(20_000)]

    back = apart(work, lambda *args: seen.append(args))
    assert len(back) == 20_000 and back[7] == bytes([7]) * 1000 and seen == [("start",)]


def test_an_exception_that_does_not_pickle_comes_back_as_its_text():
    class Local(Exception):
        pass

    def work(report):
        raise Local("kept as text")

    with pytest.raises(RuntimeError, match="Local: kept as text"):
        apart(work)

"""Where the releases of a history are scanned: a local process pool, or a Ray cluster.

One task per release: the worker downloads the release (cached), scans it with the ordinary
pipeline (the result cache reused) and sends back only a compact result (:func:`compact`):
no wheel, no source, no shared-object listing. A release that fails is reported as failed
and the others go on; with Ray, a task whose worker died is retried by Ray itself.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from auditor import arch
from auditor.history.releases import Release
from auditor.model import AuditResult, Target
from auditor.pipeline import Options, audit
from auditor.sources import Filters

RAY_RETRIES = 2
"""Times Ray re-runs a release whose worker process or node died (not one that failed to scan)."""
LOCAL_RAY_CPUS = 2
"""CPUs of the Ray instance started when no ``--ray-address`` is given."""


class EngineError(ValueError):
    """An engine that cannot run at all (Ray missing, no cluster at the address): one line, exit 2."""


@dataclass(frozen=True)
class Settings:
    """What every release is scanned with: plain data, sent to each worker (rules are loaded
    there from their folders, as the scan command loads them)."""

    targets: tuple[Target, ...] = field(default_factory=lambda: arch.parse_targets(arch.DEFAULT_TARGETS))
    toolkits: tuple[str, ...] = ()
    filters: Filters = Filters()
    jobs: int = 1
    """Worker processes of each release's scan."""
    download_dir: Path | None = None
    cache_dir: Path | None = None
    """The result cache; None: none."""
    rule_dirs: tuple[Path, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()

    def options(self) -> Options:
        """The pipeline's options, built where the scan runs."""
        from auditor.rules import rulebook

        rules = rulebook.combine(rulebook.builtin(), *(rulebook.load_dir(d) for d in self.rule_dirs))
        return Options(
            targets=self.targets,
            toolkits=self.toolkits,
            filters=self.filters,
            jobs=self.jobs,
            download_dir=self.download_dir,
            cache_dir=self.cache_dir,
            rules=rules,
            select=self.select,
            ignore=self.ignore,
        )


@dataclass(frozen=True)
class Scanned:
    """What a worker sends back for one release."""

    release: Release
    result: AuditResult | None
    """The compact result (:func:`compact`); None when the release could not be scanned."""
    error: str = ""
    """Why it could not be scanned, on one line."""
    seconds: float = 0.0
    """Wall time of the task in the worker (download and scan); never in a report."""


def compact(result: AuditResult) -> AuditResult:
    """What the history needs of a scan: gates without their feature lists, findings and
    errors; no shared-object listing, no excerpts."""
    return replace(result, gates=tuple(replace(g, features=()) for g in result.gates), binaries=(), excerpts=())


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def scan_release(release: Release, settings: Settings) -> Scanned:
    """Worker side: download and scan one release; a failure is returned, never raised."""
    start = time.perf_counter()
    try:
        result = audit([release.spec], settings.options())
    except Exception as exc:  # one release's failure must not stop the others
        return Scanned(release, None, _one_line(exc), time.perf_counter() - start)
    return Scanned(release, compact(result), "", time.perf_counter() - start)


Done = Callable[[Scanned], None]
"""Called in the driver as each release finishes (progress lines)."""


def run_local(
    releases: Sequence[Release], settings: Settings, parallel: int, done: Done | None = None
) -> list[Scanned]:
    """Every release scanned in a pool of ``parallel`` processes (one: in this process)."""
    if parallel <= 1 or len(releases) == 1:
        out = []
        for r in releases:
            out.append(scan_release(r, settings))
            if done:
                done(out[-1])
        return out
    results: dict[int, Scanned] = {}
    with ProcessPoolExecutor(max_workers=min(parallel, len(releases))) as pool:
        futures: dict[Future, int] = {pool.submit(scan_release, r, settings): i for i, r in enumerate(releases)}
        for i, scanned in _as_done(futures, releases):
            results[i] = scanned
            if done:
                done(scanned)
    return [results[i] for i in range(len(releases))]


def _as_done(futures: dict[Future, int], releases: Sequence[Release]) -> Iterator[tuple[int, Scanned]]:
    pending = set(futures)
    while pending:
        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
        for f in finished:
            i = futures[f]
            try:
                yield i, f.result()
            except Exception as exc:  # the worker process died (killed, out of memory)
                yield i, Scanned(releases[i], None, f"worker failed: {_one_line(exc)}")


def run_ray(
    releases: Sequence[Release], settings: Settings, address: str | None = None, done: Done | None = None
) -> list[Scanned]:
    """Every release as a Ray task of ``settings.jobs`` CPUs, on the cluster at ``address``
    (``auto``: the one this machine belongs to) or, without one, on a Ray instance started
    here with :data:`LOCAL_RAY_CPUS` CPUs and stopped at the end."""
    try:
        import ray
    except ImportError:
        raise EngineError("--engine ray needs Ray: pip install 'archaudit[ray]'") from None
    started = not ray.is_initialized()
    if started:
        try:
            if address is None:
                ray.init(
                    num_cpus=LOCAL_RAY_CPUS, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR
                )
            else:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise EngineError(f"--ray-address {address}: no Ray cluster could be joined ({_one_line(exc)})") from None
    try:
        task = ray.remote(num_cpus=max(1, settings.jobs), max_retries=RAY_RETRIES)(scan_release)
        refs = {task.remote(r, settings): i for i, r in enumerate(releases)}
        results: dict[int, Scanned] = {}
        pending = list(refs)
        while pending:
            finished, pending = ray.wait(pending, num_returns=1)
            for ref in finished:
                i = refs[ref]
                try:
                    scanned = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the task's worker died past its retries
                    scanned = Scanned(releases[i], None, f"ray task failed: {_one_line(exc)}")
                results[i] = scanned
                if done:
                    done(scanned)
        return [results[i] for i in range(len(releases))]
    finally:
        if started:
            ray.shutdown()


def default_parallel(jobs: int) -> int:
    """Releases scanned at once by the local engine: one per ``jobs`` CPUs."""
    return max(1, (os.cpu_count() or 1) // max(1, jobs))

"""Command line: arguments, filtering, file writes and exit codes; the only terminal I/O."""

from __future__ import annotations

import argparse
import gc
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing, contextmanager
from dataclasses import replace
from pathlib import Path

from auditor import __version__, arch
from auditor.model import SEVERITIES, AuditResult, Severity
from auditor.render.formats import BY_SUFFIX, Format
from auditor.sources import Filters, InputError

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageError(Exception):
    """A bad command line: one line on stderr, exit 2."""


def default_cache_dir() -> Path:
    """Where downloads and per-file results are cached (``ARCHAUDIT_CACHE_DIR`` overrides)."""
    env = os.environ.get("ARCHAUDIT_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("archaudit"))


def _target_arguments(p: argparse.ArgumentParser) -> None:
    """What a gate is judged for: the targets and the CUDA toolkits."""
    p.add_argument(
        "--target", default=None, help=f"targets, e.g. 12.0,12.1 or sm_120a (default {arch.DEFAULT_TARGETS})"
    )
    p.add_argument(
        "--cuda",
        action="append",
        default=[],
        metavar="VERSION",
        help="evaluate under this CUDA toolkit, e.g. 12.8 (repeatable; default: every known one, "
        "the verdict being the newest chosen one's)",
    )


def _input_arguments(p: argparse.ArgumentParser) -> None:
    """Which files are read, how many workers read them, and the cache."""
    p.add_argument("--jobs", type=int, default=0, help="worker processes (default: CPU count)")
    p.add_argument(
        "--include", action="append", default=[], metavar="GLOB", help="only files matching (gitignore syntax)"
    )
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="skip files matching")
    p.add_argument("--cache-dir", type=Path, default=None, help="cache for downloads and results")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the result cache")
    _cache_max_argument(p)


def _cache_max_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cache-max",
        default=None,
        metavar="SIZE",
        help="cap on the result cache, e.g. 500M or 2G; least recently used entries go first (default 1G)",
    )


def _output_arguments(p: argparse.ArgumentParser) -> None:
    """Reports: the stdout format, files, links, and what decides the exit code."""
    p.add_argument(
        "--format",
        choices=[f.value for f in Format],
        default=None,
        help="report format on stdout (default text)",
    )
    p.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        metavar="FILE",
        help="write a report to FILE, format by extension (repeatable)",
    )
    p.add_argument(
        "--link-base",
        metavar="URL",
        default="",
        help="markdown: link file:line to URL/FILE#LLINE (e.g. https://github.com/o/r/blob/SHA)",
    )
    _exit_arguments(p)
    p.add_argument(
        "-q",
        "--quiet",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="no progress, warnings or 'wrote FILE' line on stderr (errors still)",
    )


def _exit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-on",
        choices=[s.value for s in SEVERITIES],
        default=None,
        help="exit 1 when a finding is at or above this",
    )
    p.add_argument(
        "--exit-zero",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="exit 0 even when findings reach --fail-on (2 for errors still)",
    )


def _baseline_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--baseline", type=Path, metavar="FILE", help="report only findings not listed in this baseline file"
    )
    p.add_argument(
        "--write-baseline",
        type=Path,
        metavar="FILE",
        help="write this run's findings to FILE as a baseline (--baseline is then not applied)",
    )


def _view_arguments(p: argparse.ArgumentParser) -> None:
    """What a scan's reports show (every format alike)."""
    p.add_argument("--only-excluding", action="store_true", help="only gates that exclude a target, and their findings")
    p.add_argument(
        "--vendored",
        action="append",
        default=[],
        metavar="GLOB",
        help="files matching are a vendored tree, listed after the package's own code (repeatable)",
    )
    p.add_argument(
        "--statistics", action="store_true", help="print the number of findings per rule instead of the report"
    )


def _common(p: argparse.ArgumentParser) -> None:
    """The options of the commands that scan and report: scan, diff and pr."""
    _target_arguments(p)
    _input_arguments(p)
    _output_arguments(p)
    _rule_arguments(p)
    p.add_argument(
        "--unreached",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also judge vendored code the package never includes, imports or calls (listed, not judged, by default)",
    )


def _rule_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rules", action="append", default=[], type=Path, metavar="DIR", help="add the rules in DIR (repeatable)"
    )
    p.add_argument(
        "--select", action="append", default=[], metavar="ID", help="only these rule ids (comma list, repeatable)"
    )
    p.add_argument(
        "--ignore", action="append", default=[], metavar="ID", help="skip these rule ids (comma list, repeatable)"
    )


def build_parser() -> argparse.ArgumentParser:
    """All subcommands."""
    parser = argparse.ArgumentParser(prog="archaudit", description="Find GPU architecture gates and what they admit.")
    parser.add_argument("--version", action="version", version=f"archaudit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    scan = sub.add_parser("scan", help="scan inputs (default: this interpreter's site-packages)")
    scan.add_argument("inputs", nargs="*", help="directories, wheels, sdists, files, installed names or name==version")
    _common(scan)
    _view_arguments(scan)
    _baseline_arguments(scan)
    from auditor import github

    diff = sub.add_parser("diff", help="gates added, removed and changed between two releases or trees")
    diff.add_argument("old", help="directory, wheel, sdist, name==version or git:[PATH:]REV")
    diff.add_argument("new", help="likewise, the newer side")
    _common(diff)
    pr = sub.add_parser("pr", help="gates a pull request adds or alters, as a PR comment body (markdown)")
    pr.add_argument("--base", required=True, help="base revision (commit, branch or tag)")
    pr.add_argument("--head", default="HEAD", help="head revision (default %(default)s)")
    pr.add_argument("--repo", default=".", help="the git repository (default: the current directory)")
    _common(pr)
    comment = sub.add_parser("comment", help="create or update the sticky archaudit comment on a pull request")
    github.add_arguments(comment)
    rules = sub.add_parser("rules", help="list the rules, show one, or test every rule's examples")
    rules.add_argument("action", nargs="?", choices=("list", "show", "test"), default="list")
    rules.add_argument("id", nargs="?", help="rule id, for show")
    _rule_arguments(rules)
    cache = sub.add_parser("cache", help="where the result cache is and how large, or empty it")
    cache.add_argument("action", choices=("info", "clean"), help="info: path, size, entries, cap; clean: empty it")
    cache.add_argument("--cache-dir", type=Path, default=None, help="the cache (default: the user cache dir)")
    _cache_max_argument(cache)
    explain = sub.add_parser("explain", help="one gate's evaluation, step by step")
    explain.add_argument(
        "location", help="FILE:LINE (scanned within its project) or INPUT::FILE:LINE (e.g. x.whl::pkg/a.cuh:417)"
    )
    explain.add_argument("--format", choices=("text", "json"), default=None, help="text (default) or json")
    _target_arguments(explain)
    _input_arguments(explain)
    _exit_arguments(explain)
    _rule_arguments(explain)
    _history_parser(sub)
    return parser


def _say(line: str) -> None:
    """One line on stderr, control characters escaped: paths and reasons come from the scanned code."""
    from auditor.render.text import printable

    print(printable(line), file=sys.stderr)


GC_THRESHOLDS = (100_000, 50, 100)
"""A scan builds millions of long-lived objects (trees, gates, report records) and few cycles;
at the default thresholds the collector re-walks them ~2,000 times, a third of a warm scan."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    gc.set_threshold(*GC_THRESHOLDS)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_ERROR if exc.code not in (0, None) else EXIT_CLEAN
    try:
        return COMMANDS[args.command](configure(args))
    except (UsageError, InputError, ValueError) as exc:
        _say(f"archaudit: error: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("archaudit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_CLEAN


def configure(args: argparse.Namespace) -> argparse.Namespace:
    """The command line with the nearest ``[tool.archaudit]`` table's settings filled in where
    no flag was given (flags win; a list given on the command line replaces the table's)."""
    from auditor import config

    if args.command == "comment":
        return args
    table = config.load(config.find())
    for key in (*config.LISTS, *config.SCALARS, *config.FLAGS, *config.SIZES):
        attr = key.replace("-", "_")
        if not hasattr(args, attr) or getattr(args, attr) not in (None, []):
            continue
        value = table.get(attr)
        if value is None:
            continue
        if key == "target":
            value = ",".join(value)
        elif key in ("baseline", "rules"):
            value = [Path(v) for v in value] if key == "rules" else Path(value)
        elif key in config.LISTS:
            value = list(value)
        setattr(args, attr, value)
    return args


def _options(args, excerpts: bool = False):
    """The pipeline's options; ``excerpts`` when an HTML report will show source lines."""
    from auditor.pipeline import Options

    targets = arch.parse_targets(args.target or arch.DEFAULT_TARGETS)
    toolkits = arch.releases_of(_ids(args.cuda))
    for label, release in arch.unbuilt(targets, toolkits).items():
        if getattr(args, "quiet", False):
            break
        _say(
            f"archaudit: warning: CUDA {', '.join(toolkits)} cannot build for {label}; it is judged as CUDA {release} builds it"
        )
    return Options(
        targets=targets,
        toolkits=toolkits,
        filters=Filters(tuple(args.include), tuple(args.exclude)),
        jobs=max(0, args.jobs),
        download_dir=(args.cache_dir or default_cache_dir()) / "downloads",
        cache_dir=_cache_dir(args),
        cache_max=_cache_max(args),
        excerpts=excerpts,
        **_rule_options(args),
    )


def _formats(args, default: Format = Format.TEXT) -> tuple[Format | None, dict[str, Format]]:
    """The stdout format (None: none, when only files are written) and each ``-o FILE``'s
    format, by its extension; an unknown one is a usage error, raised before anything is scanned."""
    outputs = {}
    for out in args.output:
        fmt = Format.of_path(out)
        if fmt is None:
            raise UsageError(f"-o {out}: unknown extension (use one of {', '.join(sorted(BY_SUFFIX))})")
        outputs[out] = fmt
    return (Format(args.format) if args.format else None if outputs else default), outputs


def _coloured(fmt: Format | None) -> bool:
    return fmt == Format.TEXT and sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _terminal(result: AuditResult) -> str:
    from auditor.render import terminal

    return terminal.render(result)


def emit(stdout: str | None, texts: dict[Format, str], outputs: dict[str, Format], quiet: bool = False) -> None:
    """Write the reports: ``stdout``, and each -o FILE in its format (:func:`_formats`), then
    one line on stderr naming the files written (not with ``--quiet``)."""
    if stdout:
        sys.stdout.write(stdout)
    for out, f in outputs.items():
        _write(out, texts[f])
    if outputs and not quiet:
        _say(wrote_line(outputs))


def wrote_line(outputs: dict[str, Format]) -> str:
    """``archaudit: wrote out.html (html), out.json (json)``."""
    return "archaudit: wrote " + ", ".join(f"{out} ({f})" for out, f in outputs.items())


def _write(out: str, text: str) -> None:
    """Write ``text`` a megabyte at a time: encoded whole, a large report would be held twice.
    Each piece is encoded here and written as bytes: a text-mode file encodes a report that is
    not all ASCII four times slower (0.67 against 0.15 s for BIG's 77 MB of JSON)."""
    try:
        with open(out, "wb") as fh:
            for i in range(0, len(text), 1 << 20):
                fh.write(text[i : i + (1 << 20)].encode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None


def _cache_dir(args) -> Path | None:
    """The result cache's directory; None with ``--no-cache``."""
    return None if getattr(args, "no_cache", False) else (getattr(args, "cache_dir", None) or default_cache_dir())


def _cache_max(args) -> int:
    """The result cache's cap in bytes: ``--cache-max``, else ``[tool.archaudit] cache-max``, else 1 GiB."""
    from auditor import config
    from auditor.pipeline.cache import DEFAULT_MAX_BYTES

    value = getattr(args, "cache_max", None)
    return DEFAULT_MAX_BYTES if value is None else config.parse_size(value)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def cmd_cache(args) -> int:
    """``archaudit cache info|clean``: the result cache's place, size, entries and cap, or emptied.
    Downloads (``name==version``) are kept beside it and left alone."""
    from auditor.pipeline.cache import Cache

    directory = _cache_dir(args)
    assert directory is not None
    with closing(Cache(directory, _cache_max(args))) as store:
        if args.action == "clean":
            before = store.info()
            count = store.clean()
            freed = _size(before.entry_bytes) if before else "0 bytes"
            print(f"archaudit: removed {count} entries ({freed}) from {store.path}")
            return EXIT_CLEAN
        info = store.info()
        if info is None:
            raise UsageError(f"no readable cache at {directory}")
        print(f"cache: {info.path}")
        print(f"size: {_size(info.disk_bytes)} on disk, {_size(info.entry_bytes)} in {info.entries} entries")
        print(f"cap: {_size(info.max_bytes)} (--cache-max; least recently used entries are evicted past it)")
    return EXIT_CLEAN


@contextmanager
def progress(options, quiet: bool = False):
    """The options, with a progress bar on stderr when stderr is a terminal (it shows once work
    outlasts a moment) and ``--quiet`` is not given."""
    from auditor.render import terminal

    console = None if quiet else terminal.stderr_console()
    if console is None:
        yield options
        return
    with terminal.progress_bar(console) as update:
        yield replace(options, progress=update)


def report_inputs(result: AuditResult, args) -> AuditResult:
    """The result with what the command line adds for the reports: the link base."""
    return replace(result, link_base=getattr(args, "link_base", "") or "")


def _ids(values: Sequence[str]) -> tuple[str, ...]:
    return tuple(i.strip() for v in values for i in v.split(",") if i.strip())


def _rules(args) -> tuple:
    """Built-in rules plus every ``--rules DIR``."""
    from auditor.rules import rulebook

    return rulebook.combine(rulebook.builtin(), *(rulebook.load_dir(d) for d in args.rules))


def _rule_options(args) -> dict:
    """Rules, selection and baseline for the pipeline; unknown ids are usage errors."""
    from auditor.rules import engine

    rules = _rules(args)
    select, ignore = _ids(args.select), _ids(args.ignore)
    unknown = sorted(set(select + ignore) - engine.known_ids(rules))
    if unknown:
        raise UsageError(f"unknown rule id {', '.join(unknown)} (see `archaudit rules list`)")
    baseline_file, writing = getattr(args, "baseline", None), getattr(args, "write_baseline", None)
    baseline = engine.load_baseline(baseline_file) if baseline_file and not writing else frozenset()
    unreached = bool(getattr(args, "unreached", False))
    return {"rules": rules, "select": select, "ignore": ignore, "baseline": baseline, "unreached": unreached}


def write_baseline(result: AuditResult, args) -> None:
    """``--write-baseline FILE``: this run's findings, matched later by rule and gate fingerprint."""
    if not getattr(args, "write_baseline", None):
        return
    from auditor.rules import engine

    try:
        args.write_baseline.write_text(engine.baseline_text(result.findings, result.gates), encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {args.write_baseline}: {exc.strerror or exc}") from None


def exit_code(severities: Iterable[str], fail_on: str | None, exit_zero: bool = False) -> int:
    """1 when a finding's severity reaches --fail-on (and not ``--exit-zero``), else 0."""
    if fail_on is None or exit_zero:
        return EXIT_CLEAN
    floor = Severity(fail_on).rank
    return EXIT_FINDINGS if any(Severity(s).rank >= floor for s in severities) else EXIT_CLEAN


def cmd_scan(args) -> int:
    """``archaudit scan``: a re-scan of unchanged inputs writes the reports of the last scan
    again (:mod:`auditor.kept`), with its error lines and exit code. Views of the result
    (``--only-excluding``, ``--vendored``, ``--statistics``) are applied before any renderer,
    so every format shows the same gates; those runs are not kept."""
    from auditor.pipeline import Scan, kept
    from auditor.pipeline.cache import Cache

    fmt, outputs = _formats(args)
    formats = set(outputs.values()) | ({fmt} if fmt and not _coloured(fmt) else set())
    link_base = getattr(args, "link_base", "") or ""
    viewed = args.only_excluding or args.vendored or args.statistics
    fresh = bool(args.write_baseline or _coloured(fmt) or viewed)
    with closing(Cache(_cache_dir(args), _cache_max(args))) as store:
        with (
            progress(_options(args, Format.HTML in formats), args.quiet) as options,
            Scan(args.inputs, options) as scan,
        ):
            names = scan.names
            found = None if fresh else kept.find(store, scan.key, names, link_base, formats)
            result = None if found else scan.result()
        if found:
            texts, outcome = found
            stdout = texts[fmt] if fmt else None
        else:
            assert result is not None
            full = view(report_inputs(result, args), args)
            texts, outcome = {f: f.renderer()(full) for f in formats}, kept.Outcome.of(result)
            if not viewed:
                kept.keep(store, result.key, names, link_base, texts, outcome)
            write_baseline(result, args)
            stdout = _terminal(full) if _coloured(fmt) else texts[fmt] if fmt else None
            if args.statistics:
                from auditor.render import views

                stdout = views.statistics(full)
    for line in outcome.errors:
        _say(line)
    emit(stdout, texts, outputs, args.quiet)
    if outcome.failed:
        return EXIT_ERROR  # the others were scanned and reported; this one could not be read at all
    return exit_code(
        outcome.severities if not viewed else [f.severity for f in full.findings], args.fail_on, args.exit_zero
    )


def view(result: AuditResult, args) -> AuditResult:
    """What the reports show of a result: ``--vendored`` trees marked, ``--only-excluding``."""
    from auditor.render import views

    shown = views.mark_vendored(result, getattr(args, "vendored", ()) or ())
    return views.only_excluding(shown) if getattr(args, "only_excluding", False) else shown


def cmd_rules(args) -> int:
    """``archaudit rules list|show ID|test``."""
    from auditor.rules import engine, rulebook

    rules = _rules(args)
    chosen = [r for r in rules if engine.active(r.id, _ids(args.select), _ids(args.ignore))]
    if args.action == "show":
        rule = next((r for r in rules if r.id == (args.id or "").upper()), None)
        if rule is None:
            raise UsageError(f"rules show: unknown rule id {args.id!r} (see `archaudit rules list`)")
        print(rulebook.describe(rule), end="")
        return EXIT_CLEAN
    if args.action == "list":
        rows = [
            (
                r.id,
                r.severity,
                r.name,
                (", ".join(r.languages + r.kinds) or "all gates") + (" (opt-in)" if r.opt_in else ""),
            )
            for r in chosen
        ]
        widths = [max((len(str(row[i])) for row in rows), default=0) for i in range(3)]
        for row in rows:
            print("  ".join(f"{c:<{w}}" for c, w in zip(row, widths)) + "  " + row[3])
        return EXIT_CLEAN
    from auditor import pipeline

    def scan(files, rule):
        options = pipeline.Options(rules=(rule,), select=(rule.id,), jobs=1)
        _, findings, errors = pipeline.audit_input(files, "example", options)
        return findings, errors

    failed = 0
    for r in chosen:
        results = rulebook.verify(r, scan)
        bad = [c for c in results if not c.passed]
        failed += len(bad)
        counts = ", ".join(f"{sum(c.outcome == o for c in results)} {o}" for o in rulebook.OUTCOMES)
        print(f"{r.id} {r.name}: {'ok' if not bad else 'FAILED'} ({counts})")
        for c in bad:
            print(
                f"  {c.outcome.upper()}: {c.case} example {c.example.filename} ({r.source}:{c.example.line}): {c.detail}"
            )
    print(f"{len(chosen)} rules, {failed} failing examples")
    return EXIT_FINDINGS if failed else EXIT_CLEAN


def cmd_explain(args) -> int:
    """``archaudit explain FILE:LINE``: one gate's evaluation, step by step."""
    from auditor.pipeline import audit
    from auditor.render import explain
    from auditor.render.json import gate_document

    where = explain.parse_location(args.location)
    options = _options(args)
    result = audit([where.input], options)
    chosen = explain.pick(result.gates, where.file, where.line)
    findings = {g.id: [f for f in result.findings if f.gate == g.id] for g in chosen}
    if args.format == "json":
        import json

        docs = [
            dict(
                gate_document(g, result.targets, result.toolkits),
                findings=[{"rule": f.rule, "severity": f.severity, "message": f.message} for f in findings[g.id]],
            )
            for g in chosen
        ]
        print(json.dumps(docs, indent=2, ensure_ascii=False))
    else:
        print("\n".join(explain.render(g, findings[g.id], result.targets, result.toolkits) for g in chosen), end="")
    return exit_code((f.severity for fs in findings.values() for f in fs), args.fail_on, args.exit_zero)


def cmd_diff(args) -> int:
    """``archaudit diff OLD NEW``."""
    return _diff(args, args.old, args.new, "diff")


def cmd_pr(args) -> int:
    """``archaudit pr --base REV --head REV``: both revisions read from git, no checkout."""
    from auditor.sources import git as gitrev

    return _diff(args, gitrev.spec(args.repo, args.base), gitrev.spec(args.repo, args.head), "pr")


def _diff(args, old_spec: str, new_spec: str, mode: str) -> int:
    """Scan both sides, compare, write the reports; ``--fail-on`` sees new findings on newly excluding gates."""
    from auditor import diff
    from auditor.pipeline import audit

    with progress(_options(args), args.quiet) as options:
        old, new = (audit([spec], options) for spec in (old_spec, new_spec))
    from auditor.pipeline.kept import Outcome

    for line in Outcome.of(old).errors + Outcome.of(new).errors:
        _say(line)
    result = diff.compare(old, new, options.targets, mode)
    fmt, outputs = _formats(args, Format.MARKDOWN if mode == "pr" else Format.TEXT)
    emit(
        fmt.diff_renderer()(result) if fmt else None,
        {f: f.diff_renderer()(result) for f in set(outputs.values())},
        outputs,
        args.quiet,
    )
    return exit_code((f.severity for f in result.findings), args.fail_on, args.exit_zero)


# -- history (issue 22) ---------------------------------------------------------------------

HISTORY_FORMATS = (Format.TEXT, Format.JSON, Format.MARKDOWN, Format.HTML)
"""What a history is written in (SARIF reports findings, not releases)."""


def _history_parser(sub) -> None:
    """``archaudit history SPEC [SPEC ...]``: its own options beside the scan's targets, rules and cache."""
    from auditor.history.releases import INDEX

    p = sub.add_parser(
        "history", help="each decision's verdicts across releases: when it started or stopped turning a target away"
    )
    p.add_argument(
        "specs",
        nargs="+",
        metavar="SPEC",
        help="name==version, a project name (with --versions), a wheel, an sdist or a directory; compared in this order",
    )
    p.add_argument(
        "--versions",
        metavar="SPEC",
        help="the releases of each project name: a PEP 440 specifier ('>=0.6,<0.8') or last:N",
    )
    p.add_argument("--index", default=INDEX, metavar="URL", help="the package index's JSON API (default %(default)s)")
    p.add_argument(
        "--engine", choices=("local", "ray"), default="local", help="where releases are scanned (default local)"
    )
    p.add_argument(
        "--ray-address", metavar="auto|ADDRESS", help="the Ray cluster to run on (default: a local Ray instance)"
    )
    p.add_argument(
        "--parallel",
        type=int,
        default=0,
        metavar="N",
        help="local engine: releases scanned at once (default CPUs / --jobs)",
    )
    _target_arguments(p)
    _input_arguments(p)
    p.set_defaults(jobs=1)
    p.add_argument(
        "--format",
        choices=[f.value for f in HISTORY_FORMATS],
        default=None,
        help="report format on stdout (default text)",
    )
    p.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        metavar="FILE",
        help="write a report to FILE, format by extension",
    )
    p.add_argument("-q", "--quiet", action=argparse.BooleanOptionalAction, default=None, help="no progress on stderr")
    _rule_arguments(p)


def cmd_history(args) -> int:
    """``archaudit history``: list the releases, scan each with the chosen engine (one task per
    release), join them and write the reports; exit 2 when a release could not be scanned."""
    import time

    from auditor.history import engines, releases, timeline
    from auditor.render.history import RENDERERS

    fmt, outputs = _formats(args)
    wrong = sorted({f.value for f in (fmt, *outputs.values()) if f is not None and f not in HISTORY_FORMATS})
    if wrong:
        raise UsageError(f"history reports are text, json, markdown or html, not {', '.join(wrong)}")
    if args.ray_address and args.engine != "ray":
        raise UsageError("--ray-address needs --engine ray")
    if args.parallel and args.engine != "local":
        raise UsageError("--parallel is the local engine's; Ray runs as many releases as the cluster has CPUs for")
    if args.jobs < 1 or args.parallel < 0:
        raise UsageError("--jobs must be at least 1 and --parallel not negative")
    chosen = releases.releases(args.specs, args.versions, args.index)
    options = _options(args)
    settings = engines.Settings(
        targets=options.targets,
        toolkits=options.toolkits,
        filters=options.filters,
        jobs=args.jobs,
        download_dir=options.download_dir,
        cache_dir=options.cache_dir,
        rule_dirs=tuple(args.rules),
        select=options.select,
        ignore=options.ignore,
    )
    finished: list[int] = []

    def done(s: engines.Scanned) -> None:
        finished.append(1)
        if args.quiet:
            return
        how = f"failed: {s.error}" if s.error else "scanned"
        _say(f"archaudit: {s.release.label} {how} ({s.seconds:.1f} s; {len(finished)}/{len(chosen)})")

    start = time.perf_counter()
    if args.engine == "ray":
        scans = engines.run_ray(chosen, settings, args.ray_address, done)
    else:
        scans = engines.run_local(chosen, settings, args.parallel or engines.default_parallel(args.jobs), done)
    history = timeline.build(scans, options.targets, options.toolkits)
    if not args.quiet:
        _say(
            f"archaudit: {len(chosen)} release(s) in {time.perf_counter() - start:.1f} s with the {args.engine} engine"
        )
    emit(
        RENDERERS[fmt](history) if fmt else None,
        {f: RENDERERS[f](history) for f in set(outputs.values())},
        outputs,
        args.quiet,
    )
    return EXIT_ERROR if any(s.result is None for s in scans) else EXIT_CLEAN


def cmd_comment(args) -> int:
    """``archaudit comment``: post a report body to a pull request."""
    from auditor import github

    return github.run(args)


COMMANDS: dict[str, Callable] = {
    "scan": cmd_scan,
    "diff": cmd_diff,
    "pr": cmd_pr,
    "comment": cmd_comment,
    "rules": cmd_rules,
    "explain": cmd_explain,
    "history": cmd_history,
    "cache": cmd_cache,
}

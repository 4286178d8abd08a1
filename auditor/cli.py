"""Command line: arguments, filtering, file writes and exit codes; the only terminal I/O."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

from auditor import __version__, arch
from auditor.model import AuditResult
from auditor.sources import Filters, InputError

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
SEVERITIES = ("info", "low", "medium", "high")
FORMAT_BY_SUFFIX = {".json": "json", ".txt": "text", ".sarif": "sarif", ".md": "markdown", ".html": "html", ".htm": "html"}


class UsageError(Exception):
    """A bad command line: one line on stderr, exit 2."""


def default_cache_dir() -> Path:
    """Where downloads and per-file results are cached (``ARCHAUDIT_CACHE_DIR`` overrides)."""
    env = os.environ.get("ARCHAUDIT_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("archaudit"))


def renderers() -> dict[str, Callable[[AuditResult], str]]:
    """Format name -> pure renderer (AuditResult -> str)."""
    from auditor.render import json as json_render
    from auditor.render import text

    table: dict[str, Callable[[AuditResult], str]] = {"text": text.render, "json": json_render.render}
    return table


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--target", default=arch.DEFAULT_TARGETS, help="targets, e.g. 12.0,12.1 or sm_120a (default %(default)s)")
    p.add_argument("--format", choices=("text", "json", "sarif", "markdown", "html"), default=None,
                   help="report format on stdout (default text)")
    p.add_argument("-o", "--output", action="append", default=[], metavar="FILE",
                   help="write a report to FILE, format by extension (repeatable)")
    p.add_argument("--fail-on", choices=SEVERITIES, default=None, help="exit 1 when a finding is at or above this")
    p.add_argument("--jobs", type=int, default=0, help="worker processes (default: CPU count)")
    p.add_argument("--include", action="append", default=[], metavar="GLOB", help="only files matching (gitignore syntax)")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="skip files matching")
    p.add_argument("--cache-dir", type=Path, default=None, help="cache for downloads and results")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the result cache")
    p.add_argument("--only-excluding", action="store_true", help="text output: only gates that exclude a target")


def build_parser() -> argparse.ArgumentParser:
    """All subcommands."""
    parser = argparse.ArgumentParser(prog="archaudit", description="Find GPU architecture gates and what they admit.")
    parser.add_argument("--version", action="version", version=f"archaudit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    scan = sub.add_parser("scan", help="scan inputs (default: this interpreter's site-packages)")
    scan.add_argument("inputs", nargs="*", help="directories, wheels, sdists, files, installed names or name==version")
    _common(scan)
    from auditor import github

    comment = sub.add_parser("comment", help="create or update the sticky archaudit comment on a pull request")
    github.add_arguments(comment)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_ERROR if exc.code not in (0, None) else EXIT_CLEAN
    try:
        return COMMANDS[args.command](args)
    except (UsageError, InputError, ValueError) as exc:
        print(f"archaudit: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("archaudit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_CLEAN


def _options(args):
    from auditor.pipeline import Options

    return Options(
        targets=arch.parse_targets(args.target),
        filters=Filters(tuple(args.include), tuple(args.exclude)),
        jobs=max(0, args.jobs),
        cache_dir=(args.cache_dir or default_cache_dir()) / "downloads",
    )


def emit(result: AuditResult, args, render_extra: Optional[dict] = None) -> None:
    """Write the requested reports: stdout in --format, and each -o FILE by its extension."""
    table = renderers()
    for out in args.output:
        fmt = FORMAT_BY_SUFFIX.get(Path(out).suffix.lower())
        if fmt is None:
            raise UsageError(f"-o {out}: unknown extension (use one of {', '.join(sorted(FORMAT_BY_SUFFIX))})")
        if fmt not in table:
            raise UsageError(f"format {fmt} is not available")
    fmt = args.format or ("text" if not args.output else None)
    if fmt:
        if fmt not in table:
            raise UsageError(f"format {fmt} is not available")
        sys.stdout.write(table[fmt](result))
    for out in args.output:
        text = table[FORMAT_BY_SUFFIX[Path(out).suffix.lower()]](result)
        try:
            Path(out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None


def exit_code(result: AuditResult, fail_on: Optional[str]) -> int:
    """1 when a finding reaches --fail-on, else 0."""
    if fail_on is None:
        return EXIT_CLEAN
    floor = SEVERITIES.index(fail_on)
    return EXIT_FINDINGS if any(SEVERITIES.index(f.severity) >= floor for f in result.findings) else EXIT_CLEAN


def cmd_scan(args) -> int:
    """``archaudit scan``."""
    from auditor.pipeline import audit

    options = _options(args)
    result = audit(args.inputs, options)
    for e in result.errors:
        print(f"archaudit: {e.input + ': ' if e.input else ''}{e.file}: {e.reason}", file=sys.stderr)
    emit(result, args)
    return exit_code(result, args.fail_on)


def cmd_comment(args) -> int:
    """``archaudit comment``: post a report body to a pull request."""
    from auditor import github

    return github.run(args)


COMMANDS: dict[str, Callable] = {"scan": cmd_scan, "comment": cmd_comment}

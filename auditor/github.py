"""Post archaudit's report as one sticky comment on a GitHub pull request.

Why a sticky comment: a pull request gets pushed to many times, and reviewers
want one comment that always shows the latest audit, not a new one per push.
The comment is found again by a hidden HTML marker in its body.

This is the only module that talks to the network. It follows GitHub's REST
guidance: retry 5xx with exponential backoff, and on a rate limit wait as long
as ``retry-after`` or ``x-ratelimit-reset`` says (at least a minute for a
secondary limit without either), with bounded attempts and bounded total sleep
so a CI job never hangs. The token goes only into the Authorization header of
requests to the API host; no message, exception or output ever contains it.
"""

from __future__ import annotations

import argparse
import email.utils
import math
import os
import sys
import time
from urllib.parse import urlsplit

import httpx

from auditor import __version__

DEFAULT_API_URL = "https://api.github.com"
DEFAULT_MARKER = "<!-- archaudit -->"
MAX_ATTEMPTS = 4
"""Tries per request, the first included."""
MAX_TOTAL_SLEEP = 180.0
"""Seconds one upsert may spend waiting on retries; past that it fails rather than stalls CI."""
MAX_PAGES = 50
"""Comment pages read at most (100 comments each)."""
MAX_BODY = 65536
"""GitHub's limit on a comment body, in characters."""
SECONDARY_LIMIT_WAIT = 60.0
"""GitHub: with no retry header on a secondary rate limit, wait at least a minute."""

_TRUNCATED = (
    "\n\n_…report truncated: a GitHub comment holds at most 65536 characters;"
    " the full report is in the job's output._\n"
)


class GitHubError(Exception):
    """A failure to show the user as one line; never carries the token."""


def prepare_body(body: str, marker: str = DEFAULT_MARKER) -> str:
    """The body as it will be posted: with the marker, and cut to fit GitHub's limit."""
    if marker not in body:
        body = f"{marker}\n{body}"
    if len(body) <= MAX_BODY:
        return body
    head = body[: MAX_BODY - len(_TRUNCATED) - len(marker) - 1]
    if marker not in head:
        head = f"{marker}\n{head}"
    return head + _TRUNCATED


def upsert_comment(
    *,
    api_url: str,
    repo: str,
    pr: int,
    body: str,
    token: str,
    marker: str = DEFAULT_MARKER,
    client: httpx.Client | None = None,
    sleep=time.sleep,
) -> tuple[str, int]:
    """Create or update the pull request's archaudit comment.

    Returns ``("created" | "updated" | "unchanged", comment_id)``; raises
    :class:`GitHubError` with a one-line message on any failure.
    """
    if not marker:
        raise ValueError("marker must not be empty: it would match every comment")
    owner, _, name = repo.partition("/")
    if not owner or not name or "/" in name:
        raise GitHubError(f"repository must be OWNER/NAME, not {repo!r}")
    parts = urlsplit(api_url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise GitHubError(f"the API URL must be http(s)://HOST[/PATH], not {api_url!r}")
    body = prepare_body(body, marker)
    base = api_url.rstrip("/")
    own_client = client is None
    http = httpx.Client(timeout=30.0) if client is None else client
    api = _Api(http, base, token, sleep, where=f"{repo}#{pr}")
    try:
        existing = api.find_comment(f"{base}/repos/{owner}/{name}/issues/{pr}/comments?per_page=100", marker)
        if existing is None:
            made = api.call("POST", f"{base}/repos/{owner}/{name}/issues/{pr}/comments", {"body": body})
            return "created", int(made.json()["id"])
        if existing["body"] == body:
            return "unchanged", int(existing["id"])
        api.call("PATCH", f"{base}/repos/{owner}/{name}/issues/comments/{existing['id']}", {"body": body})
        return "updated", int(existing["id"])
    except GitHubError as exc:
        raise GitHubError(_scrub(str(exc), token)) from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GitHubError(f"unexpected reply from the GitHub API ({type(exc).__name__})") from None
    finally:
        if own_client:
            http.close()


class _Api:
    """One upsert's requests: shared headers, retries and a shared sleep budget."""

    def __init__(self, client: httpx.Client, base: str, token: str, sleep, where: str):
        self._client = client
        self._origin = _origin(base)
        self._headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "User-Agent": f"archaudit/{__version__}",
        }
        self._sleep = sleep
        self._slept = 0.0
        self._where = where

    def find_comment(self, url: str, marker: str) -> dict | None:
        """The first comment whose body holds the marker, following ``Link: rel=next`` pages."""
        for _ in range(MAX_PAGES):
            response = self.call("GET", url)
            for comment in response.json():
                if marker in (comment.get("body") or ""):
                    return comment
            following = response.links.get("next", {}).get("url")
            if not following:
                return None
            url = following
            if _origin(url) != self._origin:
                # The token must only ever go to the API host we were given.
                raise GitHubError("GitHub's pagination link points to another host; refusing to follow it")
        raise GitHubError(f"more than {MAX_PAGES} pages of comments on {self._where}; giving up")

    def call(self, method: str, url: str, payload: dict | None = None) -> httpx.Response:
        """One API request, retried on 5xx, rate limits and network errors."""
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                response = self._client.request(method, url, headers=self._headers, json=payload, follow_redirects=True)
            except httpx.HTTPError as exc:
                failure = GitHubError(f"cannot reach the GitHub API at {self._origin} ({type(exc).__name__})")
                wait = 2.0 ** (attempt - 1)
            else:
                if response.status_code < 400:
                    return response
                failure = _error(response, method, self._where)
                retry = _retry_wait(response, attempt)
                if retry is None:
                    raise failure
                wait = retry
            if attempt == MAX_ATTEMPTS:
                raise GitHubError(f"{failure} (gave up after {MAX_ATTEMPTS} attempts)")
            if self._slept + wait > MAX_TOTAL_SLEEP:
                raise GitHubError(f"{failure} (not waiting {wait:.0f} s for a retry; try again later)")
            self._sleep(wait)
            self._slept += wait
        raise AssertionError("unreachable")


def _retry_wait(response: httpx.Response, attempt: int) -> float | None:
    """Seconds to wait before retrying, or None when retrying cannot help."""
    retry_after = _retry_after(response.headers.get("retry-after"))
    if response.status_code >= 500:
        return max(2.0 ** (attempt - 1), retry_after or 0.0)
    if not _rate_limited(response):
        return None
    if retry_after is not None:
        return max(retry_after, 1.0)
    if response.headers.get("x-ratelimit-remaining") == "0":
        reset = _number(response.headers.get("x-ratelimit-reset"))
        if reset is not None:
            return max(reset - time.time(), 0.0) + 1.0
    return SECONDARY_LIMIT_WAIT * 2 ** (attempt - 1)


def _rate_limited(response: httpx.Response) -> bool:
    """GitHub signals a rate limit by 429, or by 403 with a spent quota, a retry hint or that message."""
    if response.status_code == 429:
        return True
    if response.status_code != 403:
        return False
    headers = response.headers
    return (
        headers.get("x-ratelimit-remaining") == "0"
        or "retry-after" in headers
        or "rate limit" in _message(response).lower()
    )


def _error(response: httpx.Response, method: str, where: str) -> GitHubError:
    """A one-line error naming what went wrong and what to check."""
    status = response.status_code
    message = _message(response)
    said = f": {message}" if message else ""
    if status == 401:
        return GitHubError(f"GitHub rejected the token (401){said or ': Bad credentials'}; check GITHUB_TOKEN")
    if _rate_limited(response):
        reset = _number(response.headers.get("x-ratelimit-reset"))
        when = f"; it resets in {max(reset - time.time(), 0):.0f} s" if reset else ""
        return GitHubError(f"GitHub API rate limit exceeded ({status}){said}{when}")
    if status == 403:
        return GitHubError(
            f"GitHub refused to comment on {where} (403 Forbidden){said}; the token needs"
            " 'pull-requests: write' (pull requests from forks only get a read-only token)"
        )
    if status == 404:
        return GitHubError(f"{where} not found (404): no such repository or pull request, or the token cannot see it")
    if status == 422:
        return GitHubError(f"GitHub rejected the comment (422){said}")
    reason = response.reason_phrase or "error"
    return GitHubError(f"GitHub API {method} failed on {where} ({status} {reason}){said}")


def _message(response: httpx.Response) -> str:
    """GitHub's own words from an error reply, details included, on one line."""
    try:
        data = response.json()
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    parts = [str(data.get("message") or "")]
    for item in data.get("errors") or []:
        parts.append(str(item.get("message") or item.get("code") or "") if isinstance(item, dict) else str(item))
    return " ".join("; ".join(p.strip().rstrip(".") for p in parts if p.strip()).split())


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds; it may be a number or an HTTP date."""
    seconds = _number(value)
    if seconds is not None or not value:
        return seconds
    try:
        return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    except (TypeError, ValueError):
        return None


def _number(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else None
    except ValueError:
        return None
    return number if number is None or math.isfinite(number) else None


def _origin(url: str) -> str:
    """``scheme://host[:port]``: where a request goes, and so where the token goes."""
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def _scrub(text: str, token: str) -> str:
    """Belt and braces: no message leaves this module with the token in it."""
    return text.replace(token, "***") if token else text


# ---- the ``archaudit comment`` subcommand ----------------------------------


def _repo_arg(value: str) -> str:
    owner, _, name = value.partition("/")
    if not owner or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"expected OWNER/NAME, got {value!r}")
    return value


def _pr_arg(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise argparse.ArgumentTypeError(f"expected a pull request number, got {value!r}")
    return number


def _marker_arg(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("the marker must not be empty")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``archaudit comment``."""
    parser.add_argument("--repo", required=True, type=_repo_arg, metavar="OWNER/NAME", help="the repository")
    parser.add_argument("--pr", required=True, type=_pr_arg, metavar="N", help="the pull request number")
    parser.add_argument(
        "--body-file", required=True, metavar="FILE", help="markdown to post ('-' reads standard input)"
    )
    parser.add_argument(
        "--api-url", default=DEFAULT_API_URL, metavar="URL", help=f"GitHub API root (default {DEFAULT_API_URL})"
    )
    parser.add_argument(
        "--marker", default=DEFAULT_MARKER, type=_marker_arg, help="hidden marker that finds the comment again"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the body that would be posted and stop")


def run(args: argparse.Namespace) -> int:
    """``archaudit comment``: 0 on success, 2 on any failure, with one line on stderr."""
    try:
        if args.body_file == "-":
            body = sys.stdin.read()
        else:
            with open(args.body_file, encoding="utf-8") as handle:
                body = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        print(f"archaudit comment: cannot read {args.body_file}: {reason}", file=sys.stderr)
        return 2
    if args.dry_run:
        sys.stdout.write(prepare_body(body, args.marker).rstrip("\n") + "\n")
        return 0
    token = os.environ.get("GITHUB_TOKEN", "").strip()
    if not token:
        print("archaudit comment: GITHUB_TOKEN is not set (or use --dry-run)", file=sys.stderr)
        return 2
    try:
        action, comment_id = upsert_comment(
            api_url=args.api_url,
            repo=args.repo,
            pr=args.pr,
            body=body,
            token=token,
            marker=args.marker,
            sleep=time.sleep,
        )
    except GitHubError as exc:
        print(f"archaudit comment: {exc}", file=sys.stderr)
        return 2
    print(f"{action} comment {comment_id}")
    return 0

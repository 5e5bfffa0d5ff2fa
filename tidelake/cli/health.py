"""``tidelake broker status --url`` / ``tidelake pipeline health --url``: read a metrics listener's
``/health/ready`` (or ``/health/live``) and print one line; exit 0 when ok, 1 when not (or unreachable)."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import click

from tidelake.cli.errors import CliError

url_option = click.option("--url", required=True, metavar="http://HOST:PORT",
                          help="The metrics listener (broker: metrics.listen; pipeline: metrics.listen).")
live_option = click.option("--live", is_flag=True, help="Ask /health/live instead of /health/ready.")


def read_health(url: str, which: str, timeout: float) -> tuple[bool, str]:
    """(ok, "status: check: detail; ...") of ``url``/health/``which``; CliError when it cannot be read."""
    target = f"{url.rstrip('/')}/health/{which}"
    if not target.startswith(("http://", "https://")):
        raise CliError(f"--url must start with http:// or https://, got {url!r}")
    try:
        with urllib.request.urlopen(target, timeout=timeout) as r:
            body = r.read()
    except urllib.error.HTTPError as e:
        if e.code != 503:
            raise CliError(f"{target} answered HTTP {e.code}") from None
        body = e.read()
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise CliError(f"cannot reach {target}: {reason}") from None
    try:
        doc = json.loads(body)
        checks = doc["checks"]
        ok = doc["status"] in ("ready", "live")
        detail = "; ".join(f"{name}: {c['detail']}" for name, c in checks.items())
    except (ValueError, KeyError, TypeError):
        raise CliError(f"{target} did not answer a tidelake health document") from None
    return ok, f"{doc['status']}: {detail}" if detail else doc["status"]


def report_health(url: str, live: bool, timeout: float) -> None:
    ok, line = read_health(url, "live" if live else "ready", timeout)
    click.echo(line)
    if not ok:
        raise click.exceptions.Exit(1)

"""The web console as a Starlette application: server-rendered pages (Jinja2), charts as inline SVG, and a few
lines of JavaScript that re-fetch the live parts. Pages are plain functions run in Starlette's thread pool, so a
slow broker answer never blocks the event loop.

Read-only unless ``allow_actions``: then compacting a table and resetting a group's offsets are offered, each
behind a confirmation page whose form carries this process's random token (another site cannot post it).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import logging
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import parse_qs, urlencode

from markupsafe import Markup
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from tidelake.clock import parse_timestamp_ms
from tidelake.console.broker_view import SHARE_TYPE, BrokerUnavailable, BrokerView
from tidelake.console.history import History, rate
from tidelake.console.login import IDENTITY, BearerTokens, ConsoleLogin, require_role
from tidelake.console.oidc_login import BrowserLogin
from tidelake.console.oidc_settings import OidcSettings
from tidelake.console.message_browser import MessageBrowser
from tidelake.console.pipelines_view import PipelineCatalog
from tidelake.console.sampler import Sampler
from tidelake.console.schemas_view import RegistryUnavailable, SchemaCatalog
from tidelake.console.svg_chart import line_chart
from tidelake.console.tables_view import TableCatalog
from tidelake.console.users_file import UsersFile
from tidelake.table import TableError

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
CHART_WINDOW_S = 15 * 60   # charts show the last 15 minutes of samples
TOP_SERIES = 6             # a labelled metric family's chart: its largest series, one line each


@dataclass(frozen=True)
class ConsoleSettings:
    client_config: Mapping[str, Any]         # librdkafka settings: bootstrap, timeouts, security
    timeout: float = 10.0
    kafka_python_config: Mapping[str, Any] | None = None
    tables_dir: str | None = None
    pipelines_dir: str | None = None
    metrics_url: str | None = None
    allow_actions: bool = False
    sample_interval: float = 5.0
    cache_ttl: float = 2.0
    schema_registry_url: str | None = None
    schema_registry_user_info: str | None = None      # USER:PASSWORD for the registry's basic auth
    users_file: str | None = None                     # HTTP basic logins (users_file.py)
    oidc: OidcSettings | None = None                  # OIDC bearer tokens (login.py)

    @property
    def login_required(self) -> bool:
        return self.users_file is not None or self.oidc is not None


def _iso(ms: int | None) -> str:
    if ms is None or ms < 0:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def _bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _cell(value: Any) -> Any:
    """A value in a table cell: SQL's null for None (Python's name for it means nothing to a reader)."""
    return Markup('<span class="null">null</span>') if value is None else value


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.1f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def _int_arg(request: Request, name: str, default: int | None = None, minimum: int | None = None) -> int | None:
    raw = request.query_params.get(name, "").strip()
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"{name}: {raw!r} is not an integer") from None
    if minimum is not None and value < minimum:
        raise HTTPException(400, f"{name}: must be >= {minimum}, got {value}")
    return value


class Console:
    """The pieces the pages read from, built once per process."""

    def __init__(self, settings: ConsoleSettings):
        self.settings = settings
        self.token = secrets.token_urlsafe(24)
        # first: a users file that cannot be read, a JWKS that cannot be fetched stop the start (one line)
        self.users = UsersFile(settings.users_file) if settings.users_file else None
        self.bearer = BearerTokens(settings.oidc) if settings.oidc else None
        self.browser_login = BrowserLogin(settings.oidc.issuer, settings.oidc.client_id, settings.oidc.client_secret,
                                          self.bearer) if settings.oidc and settings.oidc.client_id else None
        self.view = BrokerView(settings.client_config, settings.timeout, settings.kafka_python_config,
                               ttl=settings.cache_ttl)
        self.browser = MessageBrowser(self.view, settings.client_config)
        self.history = History()
        self.sampler = Sampler(self.view, self.history, settings.sample_interval, settings.metrics_url)
        self.pipelines = PipelineCatalog(settings.pipelines_dir, self.view, settings.client_config, settings.timeout,
                                         ttl=settings.cache_ttl)
        self.tables = TableCatalog(settings.tables_dir, self.pipelines.sink_tables)
        self.schemas = SchemaCatalog(settings.schema_registry_url, settings.timeout,
                                     settings.schema_registry_user_info) if settings.schema_registry_url else None
        self.templates = Jinja2Templates(directory=str(HERE / "templates"))
        self.templates.env.filters.update(iso=_iso, bytes=_bytes, duration=_duration, cell=_cell)
        self.templates.env.globals.update(settings=settings, urlencode=urlencode)
        self.started = time.time()

    def close(self) -> None:
        self.sampler.stop()
        self.pipelines.close()
        self.browser.close()
        self.view.close()

    def render(self, request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
        context = {"console": self, "identity": request.scope.get(IDENTITY), **context}
        return self.templates.TemplateResponse(request, name, context, status_code=status_code)

    # ------------------------------------------------------------------ charts
    def _window(self, points):
        cutoff = time.time() - CHART_WINDOW_S
        return [p for p in points if p[0] >= cutoff]

    def throughput_chart(self, topics: list[str] | None = None):
        keys = [k for k in self.history.keys("topic_end") if topics is None or k[1] in topics]
        keys = [k for k in keys if not k[1].startswith("__")] if topics is None else keys
        return line_chart([(k[1], self._window(rate(self.history.points(k)))) for k in keys], unit="records/s")

    def group_lag_chart(self, group_id: str):
        series = [(f"{k[2]}", self._window(self.history.points(k))) for k in self.history.keys("group_topic_lag")
                  if k[1] == group_id]
        return line_chart(series or [("lag", self._window(self.history.points(("group_lag", group_id))))],
                          unit="records behind")

    def groups_lag_chart(self):
        return line_chart([(k[1], self._window(self.history.points(k))) for k in self.history.keys("group_lag")],
                          unit="records behind")

    def metric_chart(self, name: str):
        """A family without labels as one line; a labelled one as a line for each of its top series."""
        m = self.sampler.metrics.get(name)
        cumulative = m is not None and m.is_cumulative
        if m is not None and m.series:
            lines = [(labels, self._window(self.history.points(("metric_series", name, labels))))
                     for labels in m.top_series(TOP_SERIES)]
        else:
            lines = [(name, self._window(self.history.points(("metric", name))))]
        if cumulative:
            return line_chart([(f"{label} /s", rate(points)) for label, points in lines], unit="per second")
        return line_chart(lines)


# ---------------------------------------------------------------------------------------------------- pages
def _console(request: Request) -> Console:
    return request.app.state.console


def overview(request: Request) -> Response:
    c = _console(request)
    topics = c.view.topics()
    return c.render(request, "overview.html", cluster=c.view.cluster(), topics=topics, groups=c.view.groups(),
                    pipelines=c.pipelines.entries(), tables=c.tables.paths(), chart=c.throughput_chart())


def topics_page(request: Request) -> Response:
    c = _console(request)
    internal = request.query_params.get("internal") == "1"
    return c.render(request, "topics.html", topics=c.view.topics(internal=internal), internal=internal)


def topic_page(request: Request) -> Response:
    c = _console(request)
    name = request.path_params["name"]
    topic = _lookup(lambda: c.view.topic(name), f"topic {name}")
    return c.render(request, "topic.html", topic=topic, configs=c.view.configs(name),
                    chart=c.throughput_chart([name]))


def messages_page(request: Request) -> Response:
    c = _console(request)
    name = request.path_params["name"]
    topic = _lookup(lambda: c.view.topic(name), f"topic {name}")
    partition = _int_arg(request, "partition", 0, minimum=0)
    if partition >= len(topic.partitions):
        raise HTTPException(404, f"topic {name} has no partition {partition}")
    offset = _int_arg(request, "offset", None, minimum=0)
    limit = _int_arg(request, "limit", 20, minimum=1)
    ts_text = request.query_params.get("timestamp", "").strip()
    timestamp = None
    if ts_text:
        try:
            timestamp = parse_timestamp_ms(ts_text)
        except ValueError:
            raise HTTPException(400, f"timestamp: {ts_text!r} is neither epoch milliseconds nor ISO-8601") from None
    result = c.browser.browse(name, partition, offset=offset, timestamp_ms=timestamp, limit=limit)
    return c.render(request, "messages.html", topic=topic, result=result, partition=partition, offset=offset,
                    timestamp=ts_text, limit=limit)


def groups_page(request: Request) -> Response:
    c = _console(request)
    if request.query_params.get("fragment") == "chart":
        return HTMLResponse(c.groups_lag_chart())
    return c.render(request, "groups.html", groups=c.view.groups(), chart=c.groups_lag_chart())


def group_page(request: Request) -> Response:
    c = _console(request)
    group_id = request.path_params["group_id"]
    if not c.view.has_group(group_id):
        raise HTTPException(404, f"no group {group_id}")
    group = c.view.group(group_id)
    fragment = request.query_params.get("fragment")
    if fragment == "chart":
        return HTMLResponse(c.group_lag_chart(group_id))
    if fragment == "lag":
        return c.render(request, "_group_lag.html", group=group)
    if fragment == "members":  # refreshed as the state is: a page opened mid-rebalance shows the assignment after
        return c.render(request, "_group_members.html", group=group)
    return c.render(request, "group.html", group=group, chart=c.group_lag_chart(group_id))


def pipelines_page(request: Request) -> Response:
    c = _console(request)
    entries = c.pipelines.entries()
    graph, graph_error = c.pipelines.graph()
    return c.render(request, "pipelines.html", statuses=[c.pipelines.status(e.name) for e in entries],
                    graph=graph, graph_error=graph_error)


def pipeline_page(request: Request) -> Response:
    c = _console(request)
    name = request.path_params["name"]
    status = _lookup(lambda: c.pipelines.status(name), f"pipeline {name}")
    tables = {v: k for k, v in c.tables.paths().items()}
    cfg = status.entry.config
    return c.render(request, "pipeline.html", status=status,
                    table_name=tables.get(cfg.sink.table) if cfg is not None else None,
                    chart=c.throughput_chart([cfg.source.topic]) if cfg is not None else None)


def tables_page(request: Request) -> Response:
    c = _console(request)
    infos, errors = [], []
    for name in c.tables.paths():
        try:
            infos.append(c.tables.info(name, history_limit=1))
        except TableError as e:
            errors.append((name, str(e)))
    return c.render(request, "tables.html", infos=infos, errors=errors)


def table_page(request: Request) -> Response:
    c = _console(request)
    name = request.path_params["name"]
    info = _lookup(lambda: c.tables.info(name), f"table {name}")
    version = _int_arg(request, "version", None, minimum=0)
    ts_text = request.query_params.get("timestamp", "").strip()
    start = _int_arg(request, "start", None, minimum=-1)
    end = _int_arg(request, "end", None, minimum=0)
    context: dict[str, Any] = {"info": info, "version": version, "timestamp": ts_text, "start": start, "end": end,
                               "message": request.query_params.get("message")}
    try:
        timestamp = parse_timestamp_ms(ts_text) if ts_text else None
        context["preview"] = c.tables.preview(name, version=version, timestamp_ms=timestamp)
        if start is not None:
            context["changes"] = c.tables.changes(name, start, end if end is not None else info.version)
    except ValueError as e:
        context["error"] = f"timestamp: {e}"
    except TableError as e:
        context["error"] = str(e)
    return c.render(request, "table.html", **context)


def subjects_page(request: Request) -> Response:
    c = _console(request)
    subjects = c.schemas.subjects() if c.schemas is not None else []
    return c.render(request, "subjects.html", catalog=c.schemas, subjects=subjects)


def subject_page(request: Request) -> Response:
    c = _console(request)
    name = request.path_params["subject"]
    if c.schemas is None:
        raise HTTPException(404, "no schema registry: start the console with --schema-registry-url URL")
    version = _int_arg(request, "version", None, minimum=1)
    detail = _lookup(lambda: c.schemas.subject(name, version), f"subject {name}" +
                     (f" version {version}" if version is not None else ""))
    return c.render(request, "subject.html", detail=detail)


def metrics_page(request: Request) -> Response:
    c = _console(request)
    name = request.query_params.get("metric")
    if request.query_params.get("fragment") == "chart":
        return HTMLResponse(c.metric_chart(name) if name else c.throughput_chart())
    latest = c.sampler.latest_metrics()
    return c.render(request, "metrics.html", chart=c.throughput_chart(), top_series=TOP_SERIES,
                    metrics=[latest[n] for n in sorted(latest)],
                    sampler=c.sampler)


def topic_chart(request: Request) -> Response:
    c = _console(request)
    topic = request.query_params.get("topic")
    return HTMLResponse(c.throughput_chart([topic] if topic else None))


# ---------------------------------------------------------------------------------------------------- actions
def _check_actions(request: Request, c: Console) -> None:
    if not c.settings.allow_actions:
        raise HTTPException(403, "actions are off: start the console with --allow-actions to offer them")
    require_role(request)


async def _confirmed_form(request: Request, c: Console) -> Mapping[str, str]:
    _check_actions(request, c)
    # an urlencoded form, parsed here (Starlette's request.form() needs python-multipart for any form)
    form = {k: v[-1] for k, v in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
    if not secrets.compare_digest(str(form.get("token", "")), c.token):
        raise HTTPException(403, "this form was not made by this console (stale or forged token): reload the page")
    if form.get("confirm") != "yes":
        raise HTTPException(400, "not confirmed")
    return form


def compact_confirm(request: Request) -> Response:
    c = _console(request)
    _check_actions(request, c)
    name = request.query_params.get("table", "")
    info = _lookup(lambda: c.tables.info(name, history_limit=1), f"table {name}")
    return c.render(request, "confirm.html", title=f"Compact table {name}?", action="/actions/compact",
                    fields={"table": name},
                    what=f"Merges each bucket's base and delta files of {info.path} into new base files "
                         f"and commits a new version (now {info.version}). Readers are not disturbed.")


async def compact_run(request: Request) -> Response:
    c = _console(request)
    form = await _confirmed_form(request, c)
    name = form.get("table", "")
    from starlette.concurrency import run_in_threadpool
    version = await run_in_threadpool(lambda: _lookup(lambda: c.tables.compact(name), f"table {name}"))
    message = "compact: nothing to do" if version is None else f"compact: committed version {version}"
    return RedirectResponse(f"/tables/{name}?{urlencode({'message': message})}", status_code=303)


def _refuse_share_group(c: Console, group: str) -> None:
    """A share group has start offsets, not committed ones: OffsetCommit would not move them."""
    if c.view.group_types().get(group) == SHARE_TYPE:
        raise HTTPException(400, f"{group} is a share group: reset its start offsets with "
                                 f"`tidelake share-groups reset-offsets`")


def reset_confirm(request: Request) -> Response:
    c = _console(request)
    _check_actions(request, c)
    group, topic = request.query_params.get("group", ""), request.query_params.get("topic", "")
    to = request.query_params.get("to", "earliest")
    if to not in ("earliest", "latest"):
        raise HTTPException(400, "to: earliest or latest")
    _refuse_share_group(c, group)
    g = _lookup(lambda: c.view.group(group) if c.view.has_group(group) else None, f"consumer group {group}")
    return c.render(request, "confirm.html", title=f"Reset {group}'s offsets of {topic} to {to}?",
                    action="/actions/reset-offsets", fields={"group": group, "topic": topic, "to": to},
                    what=f"Commits the {to} offset of every partition of {topic} for group {group} "
                         f"(state {g.state}; the broker refuses while the group has members).")


async def reset_run(request: Request) -> Response:
    c = _console(request)
    form = await _confirmed_form(request, c)
    group, topic, to = form.get("group", ""), form.get("topic", ""), form.get("to", "")
    if to not in ("earliest", "latest"):
        raise HTTPException(400, "to: earliest or latest")
    from starlette.concurrency import run_in_threadpool
    await run_in_threadpool(lambda: _refuse_share_group(c, group))
    await run_in_threadpool(lambda: _lookup(lambda: c.view.reset_group_offsets(group, topic, to), f"topic {topic}"))
    return RedirectResponse(f"/groups/{group}", status_code=303)


def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


# ---------------------------------------------------------------------------------------------------- errors
def _lookup(get, what: str):
    try:
        value = get()
    except KeyError:
        raise HTTPException(404, f"no {what}") from None
    if value is None:
        raise HTTPException(404, f"no {what}")
    return value


async def _http_error(request: Request, exc: HTTPException) -> Response:
    return _console(request).render(request, "error.html", status_code=exc.status_code, message=exc.detail,
                                    status=exc.status_code)


async def _broker_error(request: Request, exc: BrokerUnavailable) -> Response:
    return _console(request).render(request, "error.html", status_code=503, message=str(exc), status=503)


async def _registry_error(request: Request, exc: RegistryUnavailable) -> Response:
    return _console(request).render(request, "error.html", status_code=503, message=str(exc), status=503)


async def _table_error(request: Request, exc: TableError) -> Response:
    return _console(request).render(request, "error.html", status_code=400, message=str(exc), status=400)


class OneLineErrors:
    """An unexpected failure of a page: the error page for the browser and one log line naming the page and the
    error (the trace only at DEBUG level, i.e. with ``tidelake --debug``), never a traceback on stderr."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def send_tracking(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_tracking)
        except Exception as e:
            log.error("%s %s: %s: %s", scope.get("method"), scope.get("path"), type(e).__name__, e,
                      exc_info=log.isEnabledFor(logging.DEBUG))
            if not started:
                request = Request(scope, receive)
                await _console(request).render(request, "error.html", status_code=500, status=500,
                                               message=f"{type(e).__name__}: {e}")(scope, receive, send)


def create_app(settings: ConsoleSettings, console: Console | None = None) -> Starlette:
    console = console or Console(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        console.sampler.start()
        try:
            yield
        finally:
            console.close()

    routes = [
        Route("/", overview), Route("/topics", topics_page), Route("/topics/{name}", topic_page),
        Route("/topics/{name}/messages", messages_page), Route("/groups", groups_page),
        Route("/groups/{group_id}", group_page), Route("/pipelines", pipelines_page),
        Route("/pipelines/{name}", pipeline_page), Route("/tables", tables_page),
        Route("/tables/{name:path}", table_page), Route("/metrics", metrics_page),
        Route("/schemas", subjects_page), Route("/schemas/{subject:path}", subject_page),
        Route("/charts/throughput", topic_chart),
        Route("/actions/compact", compact_confirm, methods=["GET"]),
        Route("/actions/compact", compact_run, methods=["POST"]),
        Route("/actions/reset-offsets", reset_confirm, methods=["GET"]),
        Route("/actions/reset-offsets", reset_run, methods=["POST"]),
        Route("/healthz", healthz),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [Middleware(OneLineErrors)]
    if console.users is not None or console.bearer is not None:
        middleware.append(Middleware(ConsoleLogin, users=console.users, bearer=console.bearer,
                                     browser=console.browser_login))
    app = Starlette(routes=routes, lifespan=lifespan, middleware=middleware,
                    exception_handlers={HTTPException: _http_error, BrokerUnavailable: _broker_error,
                                        TableError: _table_error, RegistryUnavailable: _registry_error})
    app.state.console = console
    return app

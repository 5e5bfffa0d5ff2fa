"""The metrics listener: ``/metrics`` (Prometheus text format, from this process's own
``CollectorRegistry``), ``/health/live`` and ``/health/ready`` (JSON; 200 when ok, 503 when not).

A threaded WSGI server (the one prometheus_client's own ``start_http_server`` uses) on a daemon thread,
so a slow scrape never stalls the process's event loop; ``stop()`` closes the socket."""
from __future__ import annotations

import json
import logging
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from tidelake.observability.health import Health

__all__ = ["MetricsServer", "parse_listen"]

log = logging.getLogger("tidelake.observability")


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args) -> None:  # scrapes every few seconds would flood stderr
        pass


def parse_listen(text: str, where: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0 picks a free one) -> (host, port); ValueError naming
    ``where`` otherwise."""
    host, sep, port = str(text).strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{where}: expected HOST:PORT, got {text!r}")
    return host, int(port)


class MetricsServer:
    def __init__(self, host: str, port: int, registry: CollectorRegistry, health: Health | None = None):
        self.registry = registry
        self.health = health or Health()
        metrics_app = make_wsgi_app(registry)

        def app(environ, start_response):
            path = environ.get("PATH_INFO", "/")
            if path in ("/health/live", "/health/ready"):
                ok, checks = self.health.live() if path.endswith("live") else self.health.ready()
                word = ("live" if ok else "not live") if path.endswith("live") else ("ready" if ok else "not ready")
                body = json.dumps({"status": word, "checks": checks}).encode()
                start_response("200 OK" if ok else "503 Service Unavailable",
                               [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
                return [body]
            if path == "/metrics":
                try:
                    return metrics_app(environ, start_response)
                except Exception as e:  # one line in the log and in the answer, no traceback
                    log.warning("metrics scrape failed: %r", e)
                    body = f"metrics scrape failed: {e!r}\n".encode()
                    start_response("500 Internal Server Error",
                                   [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
                    return [body]
            body = b"not found: try /metrics, /health/live or /health/ready\n"
            start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
            return [body]

        self._httpd = make_server(host, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
        self.host = host
        self.port = self._httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> "MetricsServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=f"tidelake-metrics-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(10)
            self._thread = None
        self._httpd.server_close()

"""``/metrics`` (Prometheus text, this registry's own ``CollectorRegistry``) and ``/health/live``,
``/health/ready`` (JSON, 200 or 503, as the broker's metrics listener answers them), on the REST listener.

Ready: the ``_schemas`` topic was read to its end at start and a primary is known (this process or another).
"""
from __future__ import annotations

import json

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tidelake.observability.health import Health
from tidelake.schema_registry.forwarding import PrimaryRole
from tidelake.schema_registry.kafka_store import KafkaStore
from tidelake.schema_registry.registry import SchemaRegistry


class RegistryCollector:
    def __init__(self, registry: SchemaRegistry, store: KafkaStore, role: PrimaryRole):
        self._registry, self._store, self._role = registry, store, role

    def collect(self):
        with self._registry.lock:
            subjects = len(self._registry.state.subjects())
            schemas = len(self._registry.state.ids())
            max_id = self._registry.state.max_id
        counters = self._registry.counters
        stats = self._store.stats()
        yield GaugeMetricFamily("tidelake_schema_registry_subjects", "Subjects with a live version", value=subjects)
        yield GaugeMetricFamily("tidelake_schema_registry_schemas", "Distinct schema ids in use", value=schemas)
        yield GaugeMetricFamily("tidelake_schema_registry_max_schema_id", "The highest schema id given", value=max_id)
        yield GaugeMetricFamily("tidelake_schema_registry_primary", "1 when this process is the primary",
                                value=1 if self._role.is_primary() else 0)
        yield GaugeMetricFamily("tidelake_schema_registry_store_position", "Next _schemas offset to apply",
                                value=stats.end_offset)
        yield CounterMetricFamily("tidelake_schema_registry_store_records_applied_total",
                                  "_schemas records applied", value=stats.records_applied)
        yield CounterMetricFamily("tidelake_schema_registry_register_requests_total",
                                  "Register requests answered by this primary", value=counters.register_requests)
        yield CounterMetricFamily("tidelake_schema_registry_incompatible_total",
                                  "Registrations refused as incompatible", value=counters.incompatible)
        registered = CounterMetricFamily("tidelake_schema_registry_registered_total",
                                         "New versions registered, by schema type", labels=["type"])
        for schema_type, n in sorted(counters.by_type.items()):
            registered.add_metric([schema_type], n)
        yield registered
        yield CounterMetricFamily("tidelake_schema_registry_deleted_versions_total", "Versions deleted",
                                  value=counters.deleted_versions)


class RegistryObserver:
    def __init__(self, registry: SchemaRegistry, store: KafkaStore, role: PrimaryRole):
        self.metrics = CollectorRegistry(auto_describe=True)
        self.metrics.register(RegistryCollector(registry, store, role))
        self.health = Health()
        self.health.add_live("http", lambda: (True, "serving"))
        self.health.add_ready("store", lambda: (True, f"_schemas read to offset {store.stats().end_offset}"))
        self.health.add_ready("primary", lambda: _primary_check(role))

    def routes(self) -> list[Route]:
        async def metrics(request: Request) -> Response:
            body = await run_in_threadpool(generate_latest, self.metrics)
            return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")

        async def live(request: Request) -> Response:
            return _health_answer(*self.health.live(), "live")

        async def ready(request: Request) -> Response:
            ok, checks = await run_in_threadpool(self.health.ready)
            return _health_answer(ok, checks, "ready")

        return [Route("/metrics", metrics), Route("/health/live", live), Route("/health/ready", ready)]


def _primary_check(role: PrimaryRole) -> tuple[bool, str]:
    if role.is_primary():
        return True, "this process is the primary"
    url = role.primary_url()
    return (url is not None), (f"primary at {url}" if url else "no primary elected")


def _health_answer(ok: bool, checks: dict, word: str) -> Response:
    status = word if ok else f"not {word}"
    return Response(json.dumps({"status": status, "checks": checks}), status_code=200 if ok else 503,
                    media_type="application/json")

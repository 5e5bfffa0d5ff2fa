"""Several registries against one cluster: one primary elected through the group protocol, the others forward
writes; the primary going away elects another; a deposed primary cannot write (its producer is fenced)."""
from __future__ import annotations

import contextlib
import time

import pytest

from schema_registry_fixtures import registry_process, start_registry
from schema_registry_rest import Rest, record
from tidelake.schema_registry.kafka_store import NotWriter
from tidelake.schema_registry.records import StoreKey, StoreRecord


def wait_for(condition, timeout_s: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout_s}s")
        time.sleep(0.1)


def test_one_primary_and_forwarded_writes(registry_broker):
    with contextlib.ExitStack() as stack:
        registries = [stack.enter_context(start_registry(registry_broker.bootstrap_servers)) for _ in range(3)]
        wait_for(lambda: sum(r.election.is_primary() for r in registries) == 1, what="one primary")
        primary = next(r for r in registries if r.election.is_primary())
        followers = [r for r in registries if r is not primary]
        assert all(f.election.primary_url() == primary.url for f in followers)
        # writes through every process land once, with distinct ids, and every process reads them
        ids = [Rest(r.url).register(f"elected-{i}", record(f"E{i}", ("a", "int"))).body["id"]
               for i, r in enumerate(registries)]
        assert len(set(ids)) == 3
        assert Rest(followers[0].url).put("/config/elected-0", {"compatibility": "NONE"}).status == 200
        for r in registries:
            wait_for(lambda r=r: r.state.subjects() == ["elected-0", "elected-1", "elected-2"], what="replicated")
            assert Rest(r.url).get("/config/elected-0").body == {"compatibilityLevel": "NONE"}
        assert Rest(followers[1].url).get("/health/ready").status == 200


def test_a_new_primary_when_the_primary_stops_and_the_old_one_is_fenced(registry_broker):
    first = start_registry(registry_broker.bootstrap_servers)
    a = first.__enter__()
    try:
        with start_registry(registry_broker.bootstrap_servers) as b:
            wait_for(lambda: a.election.is_primary(), what="the first registry primary")
            first_id = Rest(b.url).register("failover-1", record("F1", ("a", "int"))).body["id"]
            store_of_a = a.store
            first.__exit__(None, None, None)           # leaves the group: b is elected at once
            a = None
            wait_for(lambda: b.election.is_primary(), what="the second registry primary")
            second_id = Rest(b.url).register("failover-2", record("F2", ("a", "int"))).body["id"]
            assert second_id == first_id + 1
            with pytest.raises(NotWriter):
                store_of_a.write([StoreRecord(StoreKey("NOOP"))])
    finally:
        if a is not None:
            first.__exit__(None, None, None)


def test_a_stale_primary_is_fenced_by_the_next(registry_broker):
    """Two processes that both believe they are primary (a paused one coming back): the second becoming writer
    fences the first, whose next write fails instead of handing out an id twice."""
    with start_registry(registry_broker.bootstrap_servers, {"tidelake.election": "none"}) as a:
        Rest(a.url).register("fenced-1", record("X1", ("a", "int")))
        with start_registry(registry_broker.bootstrap_servers, {"tidelake.election": "none"}) as b:
            answer = Rest(a.url).register("fenced-2", record("X2", ("a", "int")))
            assert answer.status == 500 and answer.body["error_code"] == 50004, answer
            assert Rest(b.url).register("fenced-2", record("X2", ("a", "int"))).body["id"] == 2
            assert not a.election.is_primary()


def test_registry_processes_elect_one_primary(registry_broker):
    with registry_process(registry_broker.bootstrap_servers) as (url_a, _), \
            registry_process(registry_broker.bootstrap_servers) as (url_b, _):
        ids = [Rest(url).register(f"proc-{i}", record(f"P{i}", ("a", "int"))).body["id"]
               for i, url in enumerate([url_a, url_b, url_a, url_b])]
        assert sorted(ids) == [1, 2, 3, 4]
        primaries = [Rest(u).get("/metrics").body for u in (url_a, url_b)]
        assert sum("tidelake_schema_registry_primary 1.0" in text for text in primaries) == 1


def test_an_ineligible_registry_only_forwards(registry_broker):
    with start_registry(registry_broker.bootstrap_servers) as primary, \
            start_registry(registry_broker.bootstrap_servers, {"leader.eligibility": "false"}) as follower:
        assert not follower.election.is_primary() and follower.election.primary_url() == primary.url
        assert Rest(follower.url).register("ineligible", record("I", ("a", "int"))).status == 200

"""The console's Schemas pages (``--schema-registry-url``) in chromium: subjects with their latest version and
compatibility, a subject's versions and schemas; an unknown subject is a 404 page."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from console_fixtures import ConsoleProcess
from schema_registry_fixtures import BROKER_CONFIG, registry_broker  # noqa: F401  (fixture)
from schema_registry_rest import Rest, record
from tidelake.broker import EmbeddedBroker

PROTO = 'syntax = "proto3";\npackage shop;\nmessage Order {\n  int32 id = 1;\n}\n'


@pytest.fixture(scope="module")
def registry_console(tmp_path_factory):
    config = {**BROKER_CONFIG, "schema.registry.listen": "http://127.0.0.1:0"}
    with EmbeddedBroker(tmp_path_factory.mktemp("schemas-console"), config=config) as broker:
        api = Rest(broker.schema_registry_url)
        api.register("users-value", record("User", ("name", "string")))
        api.register("users-value", record("User", ("name", "string"), ("age", "int", 0)))
        api.put("/config/users-value", {"compatibility": "FULL"})
        api.register("google/orders.proto", PROTO, "PROTOBUF")
        console = ConsoleProcess(["-b", broker.bootstrap_servers, "--schema-registry-url",
                                  broker.schema_registry_url, "--sample-interval", "0.5"])
        try:
            yield console
        finally:
            stderr = console.stop()
            assert "Traceback" not in stderr, stderr


def test_subjects_and_versions(registry_console, page):
    page.goto(f"{registry_console.url}/schemas")
    users = page.locator("#subjects tr[data-subject='users-value'] td")
    expect(users.nth(1)).to_have_text("2")
    expect(users.nth(4)).to_have_text("AVRO")
    expect(users.nth(5)).to_have_text("FULL")
    expect(page.locator("#subjects tr[data-subject='google/orders.proto'] td").nth(5)).to_have_text(
        "BACKWARD (global)")

    page.locator("#subjects a", has_text="users-value").click()
    expect(page.locator("h1")).to_have_text("Subject users-value")
    expect(page.locator("#versions tr")).to_have_count(3)
    expect(page.locator("#schema")).to_contain_text('"age"')
    page.locator("#versions a", has_text="1").first.click()
    expect(page.locator("#schema")).not_to_contain_text('"age"')

    page.goto(f"{registry_console.url}/schemas/google/orders.proto")
    expect(page.locator("#schema")).to_contain_text("message Order")
    expect(page.locator("#versions tr[data-version='1'] td").nth(2)).to_have_text("PROTOBUF")


def test_unknown_subject_is_404(registry_console, page):
    answer = page.goto(f"{registry_console.url}/schemas/no-such-subject")
    assert answer.status == 404
    answer = page.goto(f"{registry_console.url}/schemas/users-value?version=9")
    assert answer.status == 404


def test_an_unreachable_registry_is_a_503_with_its_reason(registry_broker, page):
    from conftest import free_port
    console = ConsoleProcess(["-b", registry_broker.bootstrap_servers, "--schema-registry-url",
                              f"http://127.0.0.1:{free_port()}", "--timeout", "2"])
    try:
        answer = page.goto(f"{console.url}/schemas")
        assert answer.status == 503
        expect(page.locator("main")).to_contain_text("schema registry http://127.0.0.1:")
    finally:
        assert "Traceback" not in console.stop()

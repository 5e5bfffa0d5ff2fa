"""Every endpoint of Confluent's REST API by plain HTTP: answers and error bodies (status, error_code)."""
from __future__ import annotations

import json
import re

import pytest

from schema_registry_rest import Rest, record

V1 = record("User", ("name", "string"))
V2 = record("User", ("name", "string"), ("age", "int", 0))


@pytest.fixture
def api(shared_registry) -> Rest:
    return Rest(shared_registry.url)


@pytest.fixture
def subject(request) -> str:
    return f"{request.node.name.replace('[', '-').replace(']', '')}-value"


@pytest.fixture
def v1(request) -> dict:
    """V1 in a namespace of the test's own: the registry is shared, and equal schemas share an id."""
    return record("User", ("name", "string"), namespace=re.sub(r"\W", "_", request.node.name))


@pytest.fixture
def v2(v1) -> dict:
    return {**v1, "fields": v1["fields"] + [{"name": "age", "type": "int", "default": 0}]}


def assert_error(answer, status: int, code: int) -> None:
    assert answer.status == status, answer
    assert answer.body["error_code"] == code, answer
    assert isinstance(answer.body["message"], str) and answer.body["message"]


def test_register_is_idempotent_and_ids_are_shared_across_subjects(api, subject, v1, v2):
    first = api.register(subject, v1)
    assert first.status == 200 and first.content_type.startswith("application/vnd.schemaregistry.v1+json")
    again = api.register(subject, json.dumps(v1, indent=4))     # the same schema, written differently
    assert again.body == first.body
    other = api.register(subject + "-other", v1)
    assert other.body["id"] == first.body["id"]
    assert api.get(f"/subjects/{subject}/versions").body == [1]
    second = api.register(subject, v2)
    assert second.body["id"] > first.body["id"]
    assert api.get(f"/subjects/{subject}/versions").body == [1, 2]


def test_schemas_by_id(api, subject, v1):
    sid = api.register(subject, v1).body["id"]
    got = api.get(f"/schemas/ids/{sid}")
    assert got.status == 200 and json.loads(got.body["schema"]) == json.loads(json.dumps(v1)) | {
        "fields": json.loads(got.body["schema"])["fields"]}
    assert "schemaType" not in got.body                       # AVRO is left out, as Confluent does
    assert json.loads(api.get(f"/schemas/ids/{sid}/schema").body)["name"] == "User"
    assert api.get(f"/schemas/ids/{sid}/subjects").body == [subject]
    assert api.get(f"/schemas/ids/{sid}/versions").body == [{"subject": subject, "version": 1}]
    assert api.get(f"/schemas/ids/{sid}", subject=subject).status == 200
    assert_error(api.get(f"/schemas/ids/{sid}", subject="no-such-subject"), 404, 40403)
    assert_error(api.get("/schemas/ids/987654"), 404, 40403)
    assert_error(api.get("/schemas/ids/987654/subjects"), 404, 40403)
    assert_error(api.get("/schemas/ids/987654/versions"), 404, 40403)


def test_subjects_and_versions(api, subject, v1, v2):
    sid = api.register(subject, v1).body["id"]
    api.register(subject, v2)
    assert subject in api.get("/subjects").body
    assert api.get("/subjects", subjectPrefix=subject).body == [subject]
    v1 = api.get(f"/subjects/{subject}/versions/1").body
    assert v1["subject"] == subject and v1["version"] == 1 and v1["id"] == sid
    assert api.get(f"/subjects/{subject}/versions/latest").body["version"] == 2
    assert api.get(f"/subjects/{subject}/versions/-1").body["version"] == 2
    assert json.loads(api.get(f"/subjects/{subject}/versions/2/schema").body)["fields"][1]["name"] == "age"
    assert_error(api.get("/subjects/no-such-subject/versions"), 404, 40401)
    assert_error(api.get("/subjects/no-such-subject/versions/1"), 404, 40401)
    assert_error(api.get(f"/subjects/{subject}/versions/7"), 404, 40402)
    assert_error(api.get(f"/subjects/{subject}/versions/0"), 422, 42202)
    assert_error(api.get(f"/subjects/{subject}/versions/abc"), 422, 42202)


def test_lookup(api, subject, v1, v2):
    sid = api.register(subject, v1).body["id"]
    found = api.post(f"/subjects/{subject}", {"schema": json.dumps(v1)})
    assert found.status == 200 and found.body["id"] == sid and found.body["version"] == 1
    assert found.body["subject"] == subject
    assert_error(api.post(f"/subjects/{subject}", {"schema": json.dumps(v2)}), 404, 40403)
    assert_error(api.post("/subjects/no-such-subject", {"schema": json.dumps(v1)}), 404, 40401)
    api.delete(f"/subjects/{subject}")
    assert_error(api.post(f"/subjects/{subject}", {"schema": json.dumps(v1)}), 404, 40401)    # soft-deleted
    assert api.post(f"/subjects/{subject}", {"schema": json.dumps(v1)}, deleted=True).body["id"] == sid


def test_list_schemas(api, subject, v1, v2):
    api.register(subject, v1)
    api.register(subject, v2)
    every = api.get("/schemas", subjectPrefix=subject).body
    assert [(s["subject"], s["version"]) for s in every] == [(subject, 1), (subject, 2)]
    latest = api.get("/schemas", subjectPrefix=subject, latestOnly=True).body
    assert [s["version"] for s in latest] == [2]


def test_schema_types(api):
    assert api.get("/schemas/types").body == ["AVRO", "JSON", "PROTOBUF"]


def test_invalid_requests(api, subject):
    assert_error(api.register(subject, '{"type": "record", "name": "X"}'), 422, 42201)    # no fields
    assert_error(api.register(subject, "not json"), 422, 42201)
    assert_error(api.register(subject, {"type": "object"}, schema_type="XML"), 422, 42201)
    assert_error(api.post(f"/subjects/{subject}/versions", {"schemaa": "x"}), 422, 422)
    assert_error(api.call("POST", f"/subjects/{subject}/versions", raw=b"{not json"), 400, 400)
    assert_error(api.get("/no/such/endpoint"), 404, 404)
    assert_error(api.call("PATCH", "/subjects"), 405, 405)


# -- compatibility ---------------------------------------------------------------------------------------------
def test_global_and_subject_config(api, subject):
    assert api.get("/config").body == {"compatibilityLevel": "BACKWARD"}
    assert_error(api.get(f"/config/{subject}"), 404, 40408)
    assert api.get(f"/config/{subject}", defaultToGlobal=True).body == {"compatibilityLevel": "BACKWARD"}
    assert api.put(f"/config/{subject}", {"compatibility": "full"}).body == {"compatibility": "FULL"}
    assert api.get(f"/config/{subject}").body == {"compatibilityLevel": "FULL"}
    assert_error(api.put(f"/config/{subject}", {"compatibility": "SIDEWAYS"}), 422, 42203)
    assert api.delete(f"/config/{subject}").body == {"compatibilityLevel": "FULL"}
    assert_error(api.get(f"/config/{subject}"), 404, 40408)
    assert_error(api.delete(f"/config/{subject}"), 404, 40401)


ADD_REQUIRED = record("User", ("name", "string"), ("email", "string"))      # no default: old data lacks it
DROP_FIELD = record("User", ("other", "string", ""))                         # 'name' dropped


@pytest.mark.parametrize("level,new,ok", [
    ("BACKWARD", V2, True), ("BACKWARD", ADD_REQUIRED, False), ("BACKWARD", DROP_FIELD, True),
    ("FORWARD", ADD_REQUIRED, True), ("FORWARD", DROP_FIELD, False),
    ("FULL", V2, True), ("FULL", ADD_REQUIRED, False), ("FULL", DROP_FIELD, False),
    ("NONE", record("User", ("name", "int")), True),
])
def test_levels_against_the_latest(api, subject, level, new, ok):
    api.put(f"/config/{subject}", {"compatibility": level})
    api.register(subject, V1)
    check = api.post(f"/compatibility/subjects/{subject}/versions/latest", {"schema": json.dumps(new)}, verbose=True)
    assert check.status == 200 and check.body["is_compatible"] is ok, check
    assert (check.body["messages"] == []) is ok
    answer = api.register(subject, new)
    if ok:
        assert answer.status == 200
    else:
        assert_error(answer, 409, 409)
        assert api.get(f"/subjects/{subject}/versions").body == [1]


@pytest.mark.parametrize("level", ["BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE"])
def test_transitive_levels_check_every_version(api, subject, level):
    # v1 -> v2 -> v3 each compatible with the one before, v3 not with v1: only the transitive level refuses
    v1 = record("R", ("a", "string"))
    if level.startswith("BACKWARD"):     # v3 reads v1's 'a' (a string) as an int
        v2 = record("R", ("x", "string", ""))
        v3 = record("R", ("x", "string", ""), ("a", "int", 0))
    else:                                # v1 cannot read v3, which lacks the 'a' v1 needs
        v2 = record("R", ("a", "string", ""), ("b", "int", 0))
        v3 = record("R", ("b", "int", 0), ("c", "string", ""))
    api.put(f"/config/{subject}", {"compatibility": "NONE"})
    api.register(subject, v1)
    api.register(subject, v2)
    plain = level.replace("_TRANSITIVE", "")
    api.put(f"/config/{subject}", {"compatibility": plain})
    assert api.post(f"/compatibility/subjects/{subject}/versions", {"schema": json.dumps(v3)}).body == {
        "is_compatible": True}
    api.put(f"/config/{subject}", {"compatibility": level})
    check = api.post(f"/compatibility/subjects/{subject}/versions", {"schema": json.dumps(v3)}, verbose=True)
    assert check.body["is_compatible"] is False and check.body["messages"]
    assert_error(api.register(subject, v3), 409, 409)


def test_compatibility_errors(api, subject, v1):
    body = {"schema": json.dumps(v1)}
    assert api.post("/compatibility/subjects/no-such-subject/versions", body).body == {"is_compatible": True}
    assert_error(api.post("/compatibility/subjects/no-such-subject/versions/1", body), 404, 40401)
    api.register(subject, v1)
    assert_error(api.post(f"/compatibility/subjects/{subject}/versions/9", body), 404, 40402)
    assert_error(api.post(f"/compatibility/subjects/{subject}/versions/x", body), 422, 42202)
    assert_error(api.post(f"/compatibility/subjects/{subject}/versions/1", {"schema": "{"}), 422, 42201)


# -- deletes ---------------------------------------------------------------------------------------------------
def test_soft_and_hard_delete_of_a_version(api, subject, v1, v2):
    api.put(f"/config/{subject}", {"compatibility": "NONE"})
    api.register(subject, v1)
    sid2 = api.register(subject, v2).body["id"]
    assert_error(api.delete(f"/subjects/{subject}/versions/2", permanent=True), 404, 40407)
    assert api.delete(f"/subjects/{subject}/versions/2").body == 2
    assert api.get(f"/subjects/{subject}/versions").body == [1]
    assert api.get(f"/subjects/{subject}/versions", deleted=True).body == [1, 2]
    assert_error(api.get(f"/subjects/{subject}/versions/2"), 404, 40402)
    assert api.get(f"/subjects/{subject}/versions/2", deleted=True).body["id"] == sid2
    assert_error(api.post(f"/subjects/{subject}", {"schema": json.dumps(v2)}), 404, 40403)
    assert api.post(f"/subjects/{subject}", {"schema": json.dumps(v2)}, deleted=True).body["version"] == 2
    assert api.get(f"/schemas/ids/{sid2}").status == 200          # a soft-deleted schema is still readable by id
    assert_error(api.delete(f"/subjects/{subject}/versions/2"), 404, 40402)
    assert api.delete(f"/subjects/{subject}/versions/2", permanent=True).body == 2
    assert api.get(f"/subjects/{subject}/versions", deleted=True).body == [1]
    assert_error(api.get(f"/schemas/ids/{sid2}"), 404, 40403)
    # registering it again: the hard-deleted version number is free again (as in Confluent), the id is not
    again = api.register(subject, v2)
    assert again.status == 200 and api.get(f"/subjects/{subject}/versions").body == [1, 2]
    assert again.body["id"] > sid2                                   # ids never repeat


def test_soft_and_hard_delete_of_a_subject(api, subject, v1):
    api.register(subject, v1)
    api.put(f"/config/{subject}", {"compatibility": "FULL"})
    assert_error(api.delete(f"/subjects/{subject}", permanent=True), 404, 40405)
    assert api.delete(f"/subjects/{subject}").body == [1]
    assert subject not in api.get("/subjects").body
    assert subject in api.get("/subjects", deleted=True).body
    assert_error(api.get(f"/subjects/{subject}/versions"), 404, 40401)
    assert_error(api.delete(f"/subjects/{subject}"), 404, 40404)
    assert_error(api.get(f"/config/{subject}"), 404, 40408)        # its settings went with it
    assert api.delete(f"/subjects/{subject}", permanent=True).body == [1]
    assert subject not in api.get("/subjects", deleted=True).body
    assert_error(api.delete(f"/subjects/{subject}"), 404, 40401)
    assert api.register(subject, v1).status == 200


# -- modes -----------------------------------------------------------------------------------------------------
def test_modes(api, subject, v1, v2):
    assert api.get("/mode").body == {"mode": "READWRITE"}
    assert_error(api.get(f"/mode/{subject}"), 404, 40409)
    assert api.get(f"/mode/{subject}", defaultToGlobal=True).body == {"mode": "READWRITE"}
    api.register(subject, v1)
    assert api.put(f"/mode/{subject}", {"mode": "READONLY"}).body == {"mode": "READONLY"}
    assert_error(api.register(subject, v2), 422, 42205)
    assert_error(api.delete(f"/subjects/{subject}"), 422, 42205)
    assert api.get(f"/subjects/{subject}/versions").body == [1]     # reads go on
    assert_error(api.put(f"/mode/{subject}", {"mode": "SOMETIMES"}), 422, 42204)
    assert_error(api.put(f"/mode/{subject}", {"mode": "IMPORT"}), 422, 42205)   # it has versions
    assert api.delete(f"/mode/{subject}").body == {"mode": "READONLY"}
    assert api.register(subject, v2).status == 200


def test_import_mode_keeps_the_given_ids(api, subject, v1, v2):
    imported = subject + "-imported"
    assert api.put(f"/mode/{imported}", {"mode": "IMPORT"}).body == {"mode": "IMPORT"}
    answer = api.post(f"/subjects/{imported}/versions", {"schema": json.dumps(v1), "id": 50000, "version": 7})
    assert answer.body == {"id": 50000}
    assert api.get(f"/subjects/{imported}/versions").body == [7]
    assert api.get("/schemas/ids/50000/versions").body == [{"subject": imported, "version": 7}]
    clash = api.post(f"/subjects/{imported}/versions", {"schema": json.dumps(v2), "id": 50000, "version": 8})
    assert_error(clash, 422, 42207)
    api.delete(f"/mode/{imported}")
    assert_error(api.post(f"/subjects/{subject}/versions", {"schema": json.dumps(v2), "id": 50001}), 422, 42205)
    assert api.register(subject, v2).body["id"] > 50000              # new ids go on above imported ones


# -- references ------------------------------------------------------------------------------------------------
def test_avro_references(api, subject):
    address = record("Address", ("street", "string"), namespace="com.example")
    api.register(subject + "-address", address)
    user = record("User", ("name", "string"), ("address", "com.example.Address"))
    refs = [{"name": "com.example.Address", "subject": subject + "-address", "version": 1}]
    assert_error(api.register(subject, user), 422, 42201)            # the named type is unknown without it
    sid = api.register(subject, user, references=refs).body["id"]
    got = api.get(f"/schemas/ids/{sid}").body
    assert got["references"] == refs
    assert api.get(f"/subjects/{subject}-address/versions/1/referencedby").body == [sid]
    assert_error(api.delete(f"/subjects/{subject}-address"), 422, 42206)
    assert_error(api.delete(f"/subjects/{subject}-address/versions/1"), 422, 42206)
    missing = [{"name": "com.example.Address", "subject": "no-such-subject", "version": 1}]
    assert_error(api.register(subject + "-2", user, references=missing), 422, 42201)
    assert api.post(f"/subjects/{subject}", {"schema": json.dumps(user), "references": refs}).body["id"] == sid


def test_global_mode_and_config_changes(api, subject, v1, v2):
    """Last in the module: it changes the global settings (and puts them back)."""
    api.register(subject, v1)
    assert_error(api.put("/mode", {"mode": "IMPORT"}), 422, 42205)          # subjects exist
    assert api.put("/mode", {"mode": "IMPORT"}, force=True).body == {"mode": "IMPORT"}
    assert api.get(f"/mode/{subject}", defaultToGlobal=True).body == {"mode": "IMPORT"}
    assert api.put("/mode", {"mode": "READONLY"}).body == {"mode": "READONLY"}
    assert_error(api.register(subject, v2), 422, 42205)
    assert api.put("/mode", {"mode": "READWRITE"}).body == {"mode": "READWRITE"}
    assert api.put("/config", {"compatibility": "NONE"}).body == {"compatibility": "NONE"}
    assert api.get(f"/config/{subject}", defaultToGlobal=True).body == {"compatibilityLevel": "NONE"}
    assert api.delete("/config").body == {"compatibilityLevel": "NONE"}
    assert api.get("/config").body == {"compatibilityLevel": "BACKWARD"}     # back to schema.compatibility.level
    assert_error(api.put("/config", {"compatibility": 7}), 422, 42203)
    assert_error(api.put("/config", ["BACKWARD"]), 422, 422)

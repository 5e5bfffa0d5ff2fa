"""JSON Schema and Protobuf through the REST API: validity, identity, compatibility, references."""
from __future__ import annotations


import pytest

from schema_registry_rest import Rest


@pytest.fixture
def api(shared_registry) -> Rest:
    return Rest(shared_registry.url)


def obj(props: dict, required=(), closed=False) -> dict:
    out = {"type": "object", "properties": props, "required": list(required)}
    if closed:
        out["additionalProperties"] = False
    return out


def test_json_schema_validity_and_identity(api):
    assert api.register("js-valid", {"type": "object", "properties": {"a": {"type": "string"}}}, "JSON").status == 200
    again = api.register("js-valid", '{ "type" : "object", "properties": {"a": {"type": "string"}} }', "JSON")
    assert again.body["id"] == api.get("/subjects/js-valid/versions/1").body["id"]
    bad = api.register("js-invalid", {"type": "object", "properties": {"a": {"type": 12}}}, "JSON")
    assert bad.status == 422 and bad.body["error_code"] == 42201
    assert api.get("/subjects/js-valid/versions/1").body["schemaType"] == "JSON"


@pytest.mark.parametrize("old,new,ok", [
    (obj({"a": {"type": "string"}}, closed=True), obj({"a": {"type": "string"}, "b": {"type": "integer"}},
                                                       closed=True), True),     # added to a closed model
    (obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}, "b": {"type": "integer"}}), False),  # open
    (obj({"a": {"type": "integer"}}), obj({"a": {"type": "number"}}), True),     # widened
    (obj({"a": {"type": "number"}}), obj({"a": {"type": "integer"}}), False),    # narrowed
    (obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}}, required=["a"]), False),
    (obj({"a": {"type": "string", "enum": ["x"]}}), obj({"a": {"type": "string", "enum": ["x", "y"]}}), True),
    (obj({"a": {"type": "string", "enum": ["x", "y"]}}), obj({"a": {"type": "string", "enum": ["x"]}}), False),
    (obj({"a": {"type": "string"}, "b": {"type": "string"}}, closed=True), obj({"a": {"type": "string"}},
                                                                               closed=True), False),
])
def test_json_schema_backward_compatibility(api, request, old, new, ok):
    subject = f"js-compat-{request.node.callspec.id}"
    api.register(subject, old, "JSON")
    answer = api.register(subject, new, "JSON")
    assert answer.status == (200 if ok else 409), answer


def test_json_schema_references(api):
    api.register("js-address", {"type": "object", "properties": {"city": {"type": "string"}}}, "JSON")
    refs = [{"name": "address.json", "subject": "js-address", "version": 1}]
    order = {"type": "object", "properties": {"to": {"$ref": "address.json"}}}
    sid = api.register("js-order", order, "JSON", refs).body["id"]
    assert api.get(f"/schemas/ids/{sid}").body["references"] == refs
    assert api.get("/subjects/js-address/versions/1/referencedby").body == [sid]


PROTO_V1 = 'syntax = "proto3";\npackage shop;\nmessage Order {\n  int32 id = 1;\n  string item = 2;\n}\n'


@pytest.mark.parametrize("new,ok", [
    (PROTO_V1.replace("  string item = 2;\n", "  string item = 2;\n  double price = 3;\n"), True),   # field added
    (PROTO_V1.replace("  string item = 2;\n", ""), True),                                           # field removed
    (PROTO_V1.replace("int32 id = 1", "int64 id = 1"), True),                     # same wire type
    (PROTO_V1.replace("int32 id = 1", "string id = 1"), False),                   # another wire type
    (PROTO_V1.replace("string item = 2", "repeated string item = 2"), False),
    (PROTO_V1.replace("message Order", "message Purchase"), False),               # the message is gone
])
def test_protobuf_compatibility(api, request, new, ok):
    subject = f"pb-compat-{request.node.callspec.id}"
    assert api.register(subject, PROTO_V1, "PROTOBUF").status == 200
    answer = api.register(subject, new, "PROTOBUF")
    assert answer.status == (200 if ok else 409), answer


def test_protobuf_text_and_serialized_forms(api):
    sid = api.register("pb-forms", PROTO_V1, "PROTOBUF").body["id"]
    text = api.get(f"/schemas/ids/{sid}")
    assert text.body["schema"] == PROTO_V1 and text.body["schemaType"] == "PROTOBUF"
    serialized = api.get(f"/schemas/ids/{sid}", format="serialized").body["schema"]
    # the same schema as a base64 descriptor is the same schema: the same version is found
    found = api.post("/subjects/pb-forms", {"schema": serialized, "schemaType": "PROTOBUF"})
    assert found.status == 200 and found.body["version"] == 1
    bad = api.register("pb-bad", 'syntax = "proto3";\nmessage M { int32 a = 1 }\n', "PROTOBUF")
    assert bad.status == 422 and bad.body["error_code"] == 42201 and "Expected" in bad.body["message"]
    garbage = api.register("pb-bad", "bm90IGEgZGVzY3JpcHRvcg", "PROTOBUF")
    assert garbage.status == 422 and garbage.body["error_code"] == 42201


def test_a_protobuf_descriptor_is_answered_as_proto_text(api):
    """What Confluent's serializers register (a base64 descriptor) reads back as .proto text, and as the
    descriptor with ?format=serialized."""
    sid = api.register("pb-descriptor-src", PROTO_V1, "PROTOBUF").body["id"]
    serialized = api.get(f"/schemas/ids/{sid}", format="serialized").body["schema"]
    registered = api.register("pb-descriptor", serialized, "PROTOBUF")
    assert registered.status == 200
    text = api.get("/subjects/pb-descriptor/versions/1").body["schema"]
    assert text.startswith('syntax = "proto3";\npackage shop;') and "int32 id = 1;" in text
    assert api.get("/subjects/pb-descriptor/versions/1", format="serialized").body["schema"] == serialized
    assert api.post("/subjects/pb-descriptor", {"schema": PROTO_V1, "schemaType": "PROTOBUF"}).body["version"] == 1

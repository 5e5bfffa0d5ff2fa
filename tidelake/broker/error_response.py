"""Error responses derived from the JSON schema.

Kafka's Java broker hand-writes getErrorResponse() per request class. Here it is derived from the
message spec instead, so every registered API (and every version the spec defines) gets one:
  * every int16 field named ``...ErrorCode`` gets the error code, ``ErrorMessage`` gets a message;
  * a struct level that carries an error code is where the error is reported: its arrays stay empty;
  * a level without one is filled by echoing the request's matching array, item by item, copying the
    identifying fields (topic names/ids, partition indexes, resource names, group ids …), down to the
    level that carries the error code (Produce per partition, DescribeConfigs per resource …);
  * a response array that no request array describes (DescribeLogDirs' log dirs) gets one item
    carrying the error, so the client sees it rather than an empty success.
Everything else takes the spec's default (offsets, epochs, ids without one: -1, as Kafka answers).
"""
from __future__ import annotations

from typing import Any

from tidelake.broker.registry import ApiDeclaration


def _is_error_code(f) -> bool:
    return f.type_str == "int16" and f._name.endswith("ErrorCode")


def _is_error_message(f) -> bool:
    return f.type_str == "string" and f._name == "ErrorMessage"


def _untagged(struct, version: int) -> list:
    return [f for f in struct._fields if f.for_version_q(version) and not f.tagged_field_q(version)]


def _item_struct(f):
    return f.array_of if f.is_struct_array() else f


def _carries_error(struct, version: int) -> bool:
    """Whether ``struct`` (or something nested in it) has an error code field at ``version``."""
    for f in _untagged(struct, version):
        if _is_error_code(f) or ((f.is_struct() or f.is_struct_array())
                                 and _carries_error(_item_struct(f), version)):
            return True
    return False


def _is_partition_key(f) -> bool:
    return f._name == "Index" or f._name.removesuffix("Index").endswith("Partition")


def _identifies(f) -> bool:
    """Fields that name an item (echoed) rather than describe it (e.g. epochs, offsets: not echoed)."""
    return (f.type_str in ("string", "uuid", "int8") or bool(f._entity_type) or bool(f._json.get("mapKey"))
            or _is_partition_key(f))


def _same_key(resp_field, req_field) -> bool:
    """Does the request field identify the same thing as the response field (so it may be echoed)?"""
    if resp_field.type_str != req_field.type_str or resp_field.is_array() or req_field.is_array():
        return False
    if not (_identifies(resp_field) and _identifies(req_field)):
        return False
    if resp_field._name == req_field._name:
        return True
    if resp_field._name.removesuffix("Index") == req_field._name.removesuffix("Index"):
        return True  # Fetch: Partition -> PartitionIndex
    entity = resp_field._entity_type
    return bool(entity) and entity == req_field._entity_type  # DescribeLogDirs: Topic -> Name


def _match_request_array(resp_array, req_struct, version: int, taken: set):
    """The request array (struct or scalar) whose items the response array answers, or None."""
    item = _item_struct(resp_array)
    best, best_score = None, 0
    for q in _untagged(req_struct, version):
        if not q.is_array() or q.name in taken:
            continue
        if q.is_struct_array():
            score = sum(1 for rf in _untagged(item, version) for qf in _untagged(q.array_of, version)
                        if _same_key(rf, qf))
        else:  # e.g. DeleteTopics v0 TopicNames []string -> Responses[Name ...]
            score = int(any(_scalar_key(item, q, version) is rf for rf in _untagged(item, version)))
        if q._name == resp_array._name and (score or q.is_struct_array() == resp_array.is_struct_array()):
            score += 100
        if score > best_score:
            best, best_score = q, score
    return best


def _scalar_key(item_struct, scalar_array, version: int):
    """The response item field a scalar request array element identifies (same entity, else same type)."""
    fields = [f for f in _untagged(item_struct, version) if not f.is_array() and not f.is_struct()
              and not _is_error_code(f) and f.type_str == scalar_array.array_of.type_str]
    entity = scalar_array._entity_type
    for f in fields:
        if entity and f._entity_type == entity:
            return f
    return fields[0] if fields else None


_NONE_SUFFIXES = ("Offset", "Epoch", "Id", "Watermark")


def _default(f, version: int):
    if f._json.get("default") is None and (f.type_str == "int64" or (
            f.type_str in ("int16", "int32") and f._name.endswith(_NONE_SUFFIXES))):
        return -1  # Kafka's "no offset / no epoch / no id" where the spec gives no default
    if f.type_str in ("records", "bytes") and f.default is None and not f.nullable_for_version_q(version):
        return b""
    return f.default


def _build_error_struct(struct, data_class, req_field_struct, req, version: int, code: int, message: str,
                        *, top: bool, echo: dict | None = None):
    """One response struct at ``version`` answering request struct ``req`` (None: nothing to echo)."""
    fields = _untagged(struct, version)
    has_error_here = any(_is_error_code(f) for f in fields)
    req_fields = _untagged(req_field_struct, version) if req_field_struct is not None and req is not None else []
    values: dict[str, Any] = {}
    taken: set = set()
    for f in fields:
        if _is_error_code(f):
            values[f.name] = code
        elif _is_error_message(f):
            values[f.name] = message
        elif f.is_struct_array():
            values[f.name] = []
            if has_error_here or not _carries_error(f.array_of, version):
                continue
            q = _match_request_array(f, req_field_struct, version, taken) if req_fields else None
            if q is None:  # nothing in the request to echo: one item carrying the error
                values[f.name] = [_build_error_struct(f.array_of, f.data_class, None, None, version, code,
                                                      message, top=False)]
                continue
            taken.add(q.name)
            items = getattr(req, q.name, None) or []  # (fast decoders' objects may lack fields)
            if q.is_struct_array():
                values[f.name] = [_build_error_struct(f.array_of, f.data_class, q.array_of, it, version, code,
                                                      message, top=False) for it in items]
            else:
                key = _scalar_key(f.array_of, q, version)
                values[f.name] = [_build_error_struct(f.array_of, f.data_class, None, None, version, code,
                                                      message, top=False,
                                                      echo=None if key is None else {key.name: it})
                                  for it in items]
        elif f.is_struct():
            if f.nullable_for_version_q(version):
                values[f.name] = None
            else:
                values[f.name] = _build_error_struct(f, f.data_class, None, None, version, code, message,
                                                     top=False)
        else:
            source = None if top else next((q for q in req_fields if _same_key(f, q)), None)
            values[f.name] = _default(f, version) if source is None else \
                getattr(req, source.name, _default(f, version))
    values.update(echo or {})
    return data_class(**values)


def error_response(spec: ApiDeclaration, request, version: int, code: int, message: str | None = None):
    """A well-formed ``spec`` response at ``version`` reporting ``code`` wherever the schema lets it
    (see the module docstring); ``request`` is the decoded request, or None when it could not be decoded."""
    resp_cls = spec.response_cls
    if message is None:
        message = f"{spec.name.removesuffix('Request')} v{version}: error {code}"
    if spec.error_response is not None and request is not None:
        return spec.error_response(request, version, code, message)
    return _build_error_struct(resp_cls._struct, lambda **kw: resp_cls(version=version, **kw),
                               spec.request_cls._struct if request is not None else None, request, version,
                               code, message, top=True)

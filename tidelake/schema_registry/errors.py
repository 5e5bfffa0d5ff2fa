"""Confluent Schema Registry's error answers: an HTTP status, an ``error_code`` and a message, with the codes
and message texts of Confluent's ``rest/exceptions/Errors.java`` (clients match on the codes)."""
from __future__ import annotations


class RegistryError(Exception):
    """One error answer: ``{"error_code": code, "message": message}`` with HTTP ``status``."""

    def __init__(self, status: int, error_code: int, message: str):
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message

    def body(self) -> dict:
        return {"error_code": self.error_code, "message": self.message}


def subject_not_found(subject: str) -> RegistryError:
    return RegistryError(404, 40401, f"Subject '{subject}' not found.")


def version_not_found(version: int | str) -> RegistryError:
    return RegistryError(404, 40402, f"Version {version} not found.")


def schema_not_found(schema_id: int | None = None) -> RegistryError:
    return RegistryError(404, 40403, "Schema not found" if schema_id is None else f"Schema {schema_id} not found")


def subject_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently")


def subject_not_soft_deleted(subject: str) -> RegistryError:
    return RegistryError(404, 40405,
                         f"Subject '{subject}' was not deleted first before being permanently deleted")


def version_not_soft_deleted(subject: str, version: int) -> RegistryError:
    return RegistryError(404, 40407, f"Subject '{subject}' Version {version} was not deleted "
                                     "first before being permanently deleted")


def subject_compatibility_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40408, f"Subject '{subject}' does not have subject-level compatibility configured")


def subject_mode_not_configured(subject: str) -> RegistryError:
    return RegistryError(404, 40409, f"Subject '{subject}' does not have subject-level mode configured")


def incompatible_schema(messages: list[str]) -> RegistryError:
    return RegistryError(409, 409, "Schema being registered is incompatible with an earlier schema for subject; "
                                   + "; ".join(messages))


def invalid_schema(message: str) -> RegistryError:
    return RegistryError(422, 42201, message)


def invalid_version(version: str) -> RegistryError:
    return RegistryError(422, 42202, f"The specified version '{version}' is not a valid version id. "
                                     "Allowed values are between [1, 2^31-1] and the string \"latest\"")


def invalid_compatibility_level(level: object = None) -> RegistryError:
    return RegistryError(422, 42203, "Invalid compatibility level. Valid values are none, backward, forward, full, "
                                     "backward_transitive, forward_transitive, and full_transitive")


def invalid_mode(mode: object = None) -> RegistryError:
    return RegistryError(422, 42204, "Invalid mode. Valid values are READWRITE, READONLY, IMPORT.")


def operation_not_permitted(message: str) -> RegistryError:
    return RegistryError(422, 42205, message)


def reference_exists(schema_key: str) -> RegistryError:
    return RegistryError(422, 42206, f"One or more references exist to the schema {schema_key}.")


def id_does_not_match(message: str) -> RegistryError:
    return RegistryError(422, 42207, message)


def unprocessable(message: str) -> RegistryError:
    """A request body that is not the JSON the endpoint takes (Confluent's Jackson errors: 422, code 422)."""
    return RegistryError(422, 422, message)


def store_error(message: str) -> RegistryError:
    return RegistryError(500, 50001, message)


def operation_timeout(message: str) -> RegistryError:
    return RegistryError(500, 50002, message)


def forwarding_failed(message: str) -> RegistryError:
    return RegistryError(500, 50003, message)


def unknown_leader(message: str) -> RegistryError:
    return RegistryError(500, 50004, message)


def not_found(path: str) -> RegistryError:
    return RegistryError(404, 404, f"HTTP 404 Not Found: {path}")


def method_not_allowed() -> RegistryError:
    return RegistryError(405, 405, "HTTP 405 Method Not Allowed")

"""HTTP basic authentication of the REST API (Confluent's ``authentication.method=BASIC``), users given as the
broker's PLAIN users are (``user_NAME="PASSWORD"`` in a JAAS entry). The health endpoints stay open, so a load
balancer can probe without credentials."""
from __future__ import annotations

import base64
import binascii
import hmac
import json
from dataclasses import dataclass
from typing import Mapping

OPEN_PATHS = ("/health/live", "/health/ready")


@dataclass(frozen=True)
class BasicAuth:
    users: Mapping[str, str]
    realm: str

    def user_of(self, authorization: str | None) -> str | None:
        """The user the header proves, or None."""
        if not authorization or not authorization.lower().startswith("basic "):
            return None
        try:
            name, sep, password = base64.b64decode(authorization[6:].strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        expected = self.users.get(name)
        if not sep or expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            return None
        return name


class BasicAuthMiddleware:
    """Pure ASGI: a request without valid credentials gets 401, Confluent's JSON error and a Basic challenge."""

    def __init__(self, app, auth: BasicAuth):
        self.app = app
        self.auth = auth

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or ())
        raw = headers.get(b"authorization")
        if self.auth.user_of(raw.decode("latin-1") if raw else None) is not None:
            return await self.app(scope, receive, send)
        body = json.dumps({"error_code": 401, "message": "Unauthorized"}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/vnd.schemaregistry.v1+json"),
                                (b"www-authenticate", f'Basic realm="{self.auth.realm}"'.encode()),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

"""SASL: SaslHandshake (v0-1), SaslAuthenticate (v0-2), the raw tokens that follow a v0 handshake,
and the SCRAM credential APIs (KIP-554: AlterUserScramCredentials, DescribeUserScramCredentials).

The connection's authentication state (what may be sent before login) is the sans-IO
``Connection``'s; these handlers run the mechanism's server (``tidelake.security.sasl``), set the
session's principal on success, and on failure answer SASL_AUTHENTICATION_FAILED and close."""
from __future__ import annotations

import logging
import struct

from kafka.protocol.admin import (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
                                  DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse)
from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                 SaslHandshakeResponse)

from tidelake import errors
from tidelake.broker.context import BrokerContext, RequestContext
from tidelake.broker.access import cluster_whole, open_to_all
from tidelake.broker.registry import api
from tidelake.protocol.connection import AUTHENTICATED
from tidelake.protocol.framing import FramingError
from tidelake.security.acl.model import Operation
from tidelake.security.principal import user
from tidelake.security.sasl import SaslAuthenticationError
from tidelake.security.sasl.scram import (HASHES, MAX_ITERATIONS, MIN_ITERATIONS,
                                          credential_from_salted_password)
from tidelake.security.session import Session

log = logging.getLogger("tidelake.broker.sasl")

# KIP-554's mechanism codes
SCRAM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
SCRAM_NUMBERS = {v: k for k, v in SCRAM_CODES.items()}


def _enabled(broker: BrokerContext, session: Session) -> tuple[str, ...]:
    sec = broker.security.listeners.get(session.listener)
    return sec.mechanisms if sec is not None else ()


@api(SaslHandshakeRequest, SaslHandshakeResponse, 0, 1, access=open_to_all("the login itself"))
async def sasl_handshake(broker: BrokerContext, ctx: RequestContext, request):
    session = ctx.session
    conn = session.connection
    mechanisms = list(_enabled(broker, session))
    if conn is None or not mechanisms or conn.auth_state == AUTHENTICATED:
        # a non-SASL listener, or a second login (re-authentication, KIP-368, is not served)
        return SaslHandshakeResponse(version=ctx.api_version, error_code=errors.IllegalSaslState.code,
                                     mechanisms=mechanisms)
    server = broker.security.sasl_server(session.listener, request.mechanism)
    if server is None:
        conn.close_after_response()
        return SaslHandshakeResponse(version=ctx.api_version, error_code=errors.UnsupportedSaslMechanism.code,
                                     mechanisms=mechanisms)
    session.sasl, session.mechanism = server, request.mechanism
    conn.handshake_done(ctx.api_version)
    return SaslHandshakeResponse(version=ctx.api_version, error_code=errors.NONE, mechanisms=mechanisms)


def _step(session: Session, token: bytes) -> bytes:
    """One SASL step; completes the login (principal, connection state). Raises SaslAuthenticationError."""
    server = session.sasl
    reply = server.step(token)
    if server.complete:
        session.principal = user(server.username)
        session.sasl = None
        session.connection.authenticated()
        log.debug("%s authenticated as %s with %s on %s", session.client_host, session.principal,
                  session.mechanism, session.listener)
    return reply


@api(SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2, access=open_to_all("the login itself"))
async def sasl_authenticate(broker: BrokerContext, ctx: RequestContext, request):
    session = ctx.session
    version = ctx.api_version
    if session.sasl is None or session.connection is None:
        if session.connection is not None:
            session.connection.close_after_response()
        return SaslAuthenticateResponse(version=version, error_code=errors.IllegalSaslState.code,
                                        error_message="SaslAuthenticate before a SaslHandshake", auth_bytes=b"",
                                        session_lifetime_ms=0)
    try:
        reply = _step(session, bytes(request.auth_bytes or b""))
    except SaslAuthenticationError as e:
        log.info("authentication of %s with %s on %s failed: %s", session.client_host, session.mechanism,
                 session.listener, e)
        session.sasl = None
        session.connection.close_after_response()
        return SaslAuthenticateResponse(version=version, error_code=errors.SaslAuthenticationFailed.code,
                                        error_message=str(e), auth_bytes=b"", session_lifetime_ms=0)
    return SaslAuthenticateResponse(version=version, error_code=errors.NONE, error_message=None, auth_bytes=reply,
                                    session_lifetime_ms=0)


def raw_sasl_token(broker: BrokerContext, session: Session, frame) -> bytes:
    """A raw SASL token (after SaslHandshake v0): the reply, size-prefixed; a failure closes."""
    if session.sasl is None:
        raise FramingError("raw SASL token without a mechanism")
    try:
        reply = _step(session, bytes(frame))
    except SaslAuthenticationError as e:
        log.info("authentication of %s with %s on %s failed: %s", session.client_host, session.mechanism,
                 session.listener, e)
        raise FramingError(f"SASL authentication failed: {e}") from None
    return struct.pack(">i", len(reply)) + reply


# ------------------------------------------------------------------------------------------------
# KIP-554 SCRAM credentials
# ------------------------------------------------------------------------------------------------
_AR = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


def _scram_alter_failed(request, _version: int, code: int, message: str):
    """A failed request's answer: the error once per user it names (Kafka's getErrorResponse)."""
    names = dict.fromkeys(item.name for item in [*request.deletions, *request.upsertions])
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        _AR(user=name, error_code=code, error_message=message) for name in names])


@api(AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, 0, 0, access=cluster_whole(Operation.ALTER),
     error_response=_scram_alter_failed)
async def alter_user_scram_credentials(broker: BrokerContext, ctx: RequestContext, request):
    store = broker.security.store
    ops = [("delete", d) for d in request.deletions] + [("upsert", u) for u in request.upsertions]
    seen: dict[tuple[str, int], int] = {}
    for _kind, item in ops:
        seen[(item.name, item.mechanism)] = seen.get((item.name, item.mechanism), 0) + 1
    errors_by_user: dict[str, tuple[int, str | None]] = {}
    order: list[str] = []
    for _kind, item in ops:
        if item.name not in order:
            order.append(item.name)
    for name, mech in seen:
        if seen[(name, mech)] > 1:
            errors_by_user[name] = (errors.DuplicateResource.code,
                                    "A user credential cannot be altered twice in the same request")

    def fail(name: str, code: int, message: str) -> None:
        errors_by_user.setdefault(name, (code, message))

    changes = []
    for kind, item in ops:
        name = item.name
        if name in errors_by_user:
            continue
        mechanism = SCRAM_CODES.get(item.mechanism)
        if not name:
            fail(name, errors.UnacceptableCredential.code, "Username must not be empty")
        elif mechanism is None:
            fail(name, errors.UnsupportedSaslMechanism.code, f"Unknown SCRAM mechanism {item.mechanism}")
        elif kind == "delete":
            if store.credential(name, mechanism) is None:
                fail(name, errors.ResourceNotFound.code,
                     "Attempt to delete a user credential that does not exist")
            else:
                changes.append((name, mechanism, None))
        elif not MIN_ITERATIONS <= item.iterations <= MAX_ITERATIONS:
            fail(name, errors.UnacceptableCredential.code,
                 f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS} for {mechanism}")
        elif not item.salt or not item.salted_password:
            fail(name, errors.UnacceptableCredential.code, "Salt and salted password must not be empty")
        else:
            changes.append((name, mechanism, credential_from_salted_password(
                mechanism, bytes(item.salted_password), bytes(item.salt), item.iterations)))
    applied = False
    for name, mechanism, credential in changes:
        if name not in errors_by_user:
            store.set_credential(name, mechanism, credential, save=False)
            applied = True
    if applied:
        store.save()
    results = [_AR(user=name, error_code=errors_by_user.get(name, (errors.NONE, None))[0],
                   error_message=errors_by_user.get(name, (errors.NONE, None))[1]) for name in order]
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)


_DR = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult


@api(DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, 0, 0,
     access=cluster_whole(Operation.DESCRIBE))
async def describe_user_scram_credentials(broker: BrokerContext, ctx: RequestContext, request):
    store = broker.security.store

    def described(name: str) -> object:
        mechs = store.scram.get(name, {})
        if not mechs:
            return _DR(user=name, error_code=errors.ResourceNotFound.code,
                       error_message="Attempt to describe a user credential that does not exist",
                       credential_infos=[])
        infos = [_DR.CredentialInfo(mechanism=SCRAM_NUMBERS[m], iterations=c.iterations)
                 for m, c in sorted(mechs.items()) if m in HASHES]
        return _DR(user=name, error_code=errors.NONE, error_message=None, credential_infos=infos)

    if request.users is None or not request.users:
        results = [described(name) for name in sorted(store.scram)]
    else:
        names = [u.name for u in request.users]
        results = []
        for name in dict.fromkeys(names):
            if names.count(name) > 1:
                results.append(_DR(user=name, error_code=errors.DuplicateResource.code,
                                   error_message="Cannot describe the same user twice", credential_infos=[]))
            else:
                results.append(described(name))
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=errors.NONE, error_message=None,
                                                results=results)

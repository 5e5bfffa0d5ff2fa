"""A listener's SASL/OAUTHBEARER settings, as Kafka names them, into its token validator.

``listener.name.<l>.oauthbearer.sasl.jaas.config`` names ``OAuthBearerLoginModule`` (its ``unsecuredValidator*``
options configure the unsecured validator). ``sasl.oauthbearer.jwks.endpoint.url`` (or
``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` = ``OAuthBearerValidatorCallbackHandler``)
selects the JWKS validator, with ``sasl.oauthbearer.expected.issuer`` / ``.expected.audience`` /
``.sub.claim.name`` / ``.clock.skew.seconds`` / ``.jwks.endpoint.refresh.ms`` / ``.jwks.endpoint.retry.backoff.ms``,
each read ``listener.name.<l>.oauthbearer.<key>`` first. The defaults are Kafka's, and this is their home."""
from __future__ import annotations

from typing import Callable

from tidelake.security.jaas import JaasError, listener_login
from tidelake.security.jwks import JwksError, JwksKeySet, JwksSettings
from tidelake.security.oauth_tokens import JwksValidator, TokenValidator, UnsecuredJwsValidator

Lookup = Callable[[str], "str | None"]
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_HANDLER = "org.apache.kafka.common.security.oauthbearer.internals.unsecured." \
                    "OAuthBearerUnsecuredValidatorCallbackHandler"
JWKS_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                 "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")
DEFAULTS = {  # Kafka's defaults
    "sasl.oauthbearer.clock.skew.seconds": "30",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "3600000",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "100",
    "sasl.oauthbearer.sub.claim.name": "sub",
    "unsecuredValidatorPrincipalClaimName": "sub",
    "unsecuredValidatorScopeClaimName": "scope",
    "unsecuredValidatorRequiredScope": "",
    "unsecuredValidatorAllowableClockSkewMs": "0",
}


class OAuthConfigError(ValueError):
    """An OAUTHBEARER setting the broker cannot start with (the message names the key)."""


def _setting(lookup: Lookup, listener: str, name: str) -> tuple[str, str | None]:
    key = f"listener.name.{listener.lower()}.oauthbearer.{name}"
    value = lookup(key)
    return (key, value) if value is not None else (name, lookup(name))


def _number(key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise OAuthConfigError(f"{key}={value}: expected a whole number") from None
    if number < 0:
        raise OAuthConfigError(f"{key}={value}: must not be negative")
    return number


def oauthbearer_validator(lookup: Lookup, listener: str) -> TokenValidator:
    try:
        entry = listener_login(lookup, listener, "OAUTHBEARER", LOGIN_MODULE, f"{LOGIN_MODULE} required;")
    except JaasError as e:
        raise OAuthConfigError(str(e)) from None

    def get(name: str) -> tuple[str, str]:
        key, value = _setting(lookup, listener, name)
        return key, DEFAULTS[name] if value is None else value

    handler_key, handler = _setting(lookup, listener, "sasl.server.callback.handler.class")
    url_key, url = _setting(lookup, listener, "sasl.oauthbearer.jwks.endpoint.url")
    if handler not in (None, "", UNSECURED_HANDLER, *JWKS_HANDLERS):
        raise OAuthConfigError(f"{handler_key}={handler}: expected {JWKS_HANDLERS[0]} or {UNSECURED_HANDLER}")
    if handler == UNSECURED_HANDLER and url:
        raise OAuthConfigError(f"{url_key} is set but {handler_key} is the unsecured validator: it would be ignored")
    if handler in JWKS_HANDLERS or url:
        if not url:
            raise OAuthConfigError(f"{handler_key}={handler} needs sasl.oauthbearer.jwks.endpoint.url")
        settings = JwksSettings(url, _number(*get("sasl.oauthbearer.jwks.endpoint.refresh.ms")),
                                _number(*get("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms")))
        try:
            keys = JwksKeySet(settings)
        except JwksError as e:
            raise OAuthConfigError(str(e)) from None
        _, issuer = _setting(lookup, listener, "sasl.oauthbearer.expected.issuer")
        _, audience = _setting(lookup, listener, "sasl.oauthbearer.expected.audience")
        return JwksValidator(keys, issuer or None, tuple(a.strip() for a in (audience or "").split(",") if a.strip()),
                             get("sasl.oauthbearer.sub.claim.name")[1],
                             _number(*get("sasl.oauthbearer.clock.skew.seconds")))
    options = {name: entry.options.get(name, default) for name, default in DEFAULTS.items()
               if name.startswith("unsecured")}
    return UnsecuredJwsValidator(
        options["unsecuredValidatorPrincipalClaimName"], options["unsecuredValidatorScopeClaimName"],
        frozenset(options["unsecuredValidatorRequiredScope"].split()),
        _number(f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config unsecuredValidatorAllowableClockSkewMs",
                options["unsecuredValidatorAllowableClockSkewMs"]))

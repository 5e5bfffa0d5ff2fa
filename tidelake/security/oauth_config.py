"""A listener's SASL/OAUTHBEARER settings, as Kafka names them, into its token validator.

``listener.name.<l>.oauthbearer.sasl.jaas.config`` names ``OAuthBearerLoginModule`` (its ``unsecuredValidator*``
options configure the unsecured validator; their defaults are Kafka's, and ``UnsecuredOptions`` is their home).
``sasl.oauthbearer.jwks.endpoint.url`` (or ``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class`` =
``OAuthBearerValidatorCallbackHandler``) selects the JWKS validator, with ``sasl.oauthbearer.expected.issuer`` /
``.expected.audience`` / ``.sub.claim.name`` / ``.clock.skew.seconds`` / ``.jwks.endpoint.refresh.ms`` /
``.jwks.endpoint.retry.backoff.ms``, each read ``listener.name.<l>.oauthbearer.<key>`` first; these are broker
configs, typed and defaulted by the broker's config definitions (``BrokerSettings``)."""
from __future__ import annotations

from dataclasses import dataclass, fields

from tidelake.security.jaas import JaasEntry, JaasError, listener_login
from tidelake.security.jwks import JwksError, JwksKeySet, JwksSettings
from tidelake.security.oauth_tokens import JwksValidator, TokenValidator, UnsecuredJwsValidator
from tidelake.security.settings import BrokerSettings, listener_key

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
UNSECURED_HANDLER = "org.apache.kafka.common.security.oauthbearer.internals.unsecured." \
                    "OAuthBearerUnsecuredValidatorCallbackHandler"
JWKS_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
                 "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler")


class OAuthConfigError(ValueError):
    """An OAUTHBEARER setting the broker cannot start with (the message names the key)."""


@dataclass(frozen=True)
class UnsecuredOptions:
    """OAuthBearerLoginModule's ``unsecuredValidator*`` JAAS options, with Kafka's defaults."""
    unsecuredValidatorPrincipalClaimName: str = "sub"
    unsecuredValidatorScopeClaimName: str = "scope"
    unsecuredValidatorRequiredScope: str = ""
    unsecuredValidatorAllowableClockSkewMs: int = 0

    @classmethod
    def of(cls, entry: JaasEntry, key: str) -> "UnsecuredOptions":
        """The options ``entry`` sets (``key``: the JAAS config's name, for a bad number's message)."""
        given: dict[str, str | int] = {f.name: entry.options[f.name] for f in fields(cls) if f.name in entry.options}
        skew = "unsecuredValidatorAllowableClockSkewMs"
        if skew in given:
            try:
                given[skew] = int(given[skew])
            except ValueError:
                raise OAuthConfigError(f"{key} {skew}={given[skew]}: expected a whole number") from None
            if given[skew] < 0:
                raise OAuthConfigError(f"{key} {skew}={given[skew]}: must not be negative")
        return cls(**given)


def oauthbearer_validator(settings: BrokerSettings, listener: str) -> TokenValidator:
    try:
        entry = listener_login(settings.get, listener, "OAUTHBEARER", LOGIN_MODULE, f"{LOGIN_MODULE} required;")
    except JaasError as e:
        raise OAuthConfigError(str(e)) from None

    def key(name: str) -> str:
        return listener_key(settings, listener, name, "OAUTHBEARER")

    handler_key, url_key = key("sasl.server.callback.handler.class"), key("sasl.oauthbearer.jwks.endpoint.url")
    handler, url = settings.get_optional(handler_key), settings.get_optional(url_key)
    if handler not in (None, UNSECURED_HANDLER, *JWKS_HANDLERS):
        raise OAuthConfigError(f"{handler_key}={handler}: expected {JWKS_HANDLERS[0]} or {UNSECURED_HANDLER}")
    if handler == UNSECURED_HANDLER and url:
        raise OAuthConfigError(f"{url_key} is set but {handler_key} is the unsecured validator: it would be ignored")
    if handler in JWKS_HANDLERS or url:
        if not url:
            raise OAuthConfigError(f"{handler_key}={handler} needs sasl.oauthbearer.jwks.endpoint.url")
        try:
            keys = JwksKeySet(JwksSettings(url, settings.get_int(key("sasl.oauthbearer.jwks.endpoint.refresh.ms")),
                                           settings.get_int(key("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"))))
        except JwksError as e:
            raise OAuthConfigError(str(e)) from None
        return JwksValidator(keys, settings.get_optional(key("sasl.oauthbearer.expected.issuer")),
                             tuple(settings.get_list(key("sasl.oauthbearer.expected.audience"))),
                             settings.get_string(key("sasl.oauthbearer.sub.claim.name")),
                             settings.get_int(key("sasl.oauthbearer.clock.skew.seconds")))
    options = UnsecuredOptions.of(entry, f"listener.name.{listener.lower()}.oauthbearer.sasl.jaas.config")
    return UnsecuredJwsValidator(options.unsecuredValidatorPrincipalClaimName,
                                 options.unsecuredValidatorScopeClaimName,
                                 frozenset(options.unsecuredValidatorRequiredScope.split()),
                                 options.unsecuredValidatorAllowableClockSkewMs)

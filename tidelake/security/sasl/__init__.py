"""SASL servers, sans-IO: ``step(token) -> reply`` until ``complete``; a bad token raises
``SaslAuthenticationError`` (the broker answers SASL_AUTHENTICATION_FAILED and closes)."""
from __future__ import annotations


class SaslAuthenticationError(Exception):
    """Authentication failed: the message is what the client is told (never which part was wrong)."""


MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

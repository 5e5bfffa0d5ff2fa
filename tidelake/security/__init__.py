"""Security: who a connection is (TLS, SASL) and what it may do (ACLs).

Nothing here imports the broker: the broker builds ``SecurityConfig`` from its configs and asks
``Authorizer`` / the SASL servers; the sans-IO pieces (SCRAM, PLAIN, JAAS parsing, ACL matching) are
plain functions and classes that tests drive directly."""

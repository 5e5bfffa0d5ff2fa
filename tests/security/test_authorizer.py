"""Kafka's ACL rules: literal, wildcard and prefixed patterns, deny wins, implied DESCRIBE, super users,
allow.everyone.if.no.acl.found, filters (MATCH/ANY), persistence."""
from __future__ import annotations

from tidelake.security.acl.authorizer import Authorizer
from tidelake.security.acl.model import (AclBinding, AclBindingFilter, AclEntry, Operation as O, PatternType as P,
                                         Permission, ResourcePattern, ResourceType as R)
from tidelake.security.store import SecurityStore

ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(rtype, name, ptype, principal, op, perm=ALLOW, host="*"):
    return AclBinding(ResourcePattern(rtype, name, ptype), AclEntry(principal, host, op, perm))


def test_rules():
    a = Authorizer(super_users=frozenset({"User:admin"}), bindings=[
        acl(R.TOPIC, "orders", P.LITERAL, "User:alice", O.WRITE),
        acl(R.TOPIC, "logs-", P.PREFIXED, "User:alice", O.READ),
        acl(R.TOPIC, "logs-secret", P.LITERAL, "User:alice", O.ALL, DENY),
        acl(R.TOPIC, "*", P.LITERAL, "User:*", O.DESCRIBE),
        acl(R.GROUP, "g", P.LITERAL, "User:bob", O.READ, host="10.0.0.1"),
    ])
    ok = lambda p, op, t, n, host="127.0.0.1": a.authorize(p, host, op, t, n)  # noqa: E731
    assert ok("User:alice", O.WRITE, R.TOPIC, "orders")
    assert not ok("User:alice", O.READ, R.TOPIC, "orders")
    assert ok("User:alice", O.DESCRIBE, R.TOPIC, "orders")  # implied by WRITE (and by the wildcard)
    assert ok("User:alice", O.READ, R.TOPIC, "logs-app")
    assert not ok("User:alice", O.READ, R.TOPIC, "logs-secret")  # deny wins over the prefixed allow
    assert not ok("User:alice", O.DESCRIBE, R.TOPIC, "logs-secret")  # ... and over User:* DESCRIBE
    assert ok("User:carol", O.DESCRIBE, R.TOPIC, "anything")
    assert not ok("User:carol", O.READ, R.TOPIC, "anything")
    assert ok("User:bob", O.READ, R.GROUP, "g", "10.0.0.1") and not ok("User:bob", O.READ, R.GROUP, "g")
    assert not ok("User:bob", O.READ, R.GROUP, "no-acls")  # allow.everyone.if.no.acl.found=false
    assert ok("User:admin", O.DELETE, R.CLUSTER, "kafka-cluster")
    assert Authorizer(allow_everyone_if_no_acl_found=True).authorize("User:x", "h", O.READ, R.GROUP, "g")
    assert a.authorized_operations("User:alice", "h", R.TOPIC, "orders") == (1 << O.WRITE) | (1 << O.DESCRIBE)
    assert a.may_any("User:alice", "h", O.WRITE, R.TOPIC) and not a.may_any("User:carol", "h", O.WRITE, R.TOPIC)


def test_filters_and_changes_invalidate_the_cache(tmp_path):
    store = SecurityStore(tmp_path)
    a = Authorizer(on_change=store.set_acls)
    assert not a.authorize("User:alice", "h", O.READ, R.TOPIC, "t1")
    a.add([acl(R.TOPIC, "t", P.PREFIXED, "User:alice", O.READ), acl(R.TOPIC, "t1", P.LITERAL, "User:bob", O.READ)])
    assert a.authorize("User:alice", "h", O.READ, R.TOPIC, "t1")
    match = AclBindingFilter(R.ANY, "t1", P.MATCH, None, None, O.ANY, Permission.ANY)
    assert len(a.bindings(match)) == 2
    literal = AclBindingFilter(R.TOPIC, "t1", P.LITERAL, None, None, O.ANY, Permission.ANY)
    assert [b.entry.principal for b in a.bindings(literal)] == ["User:bob"]
    gone = a.remove(AclBindingFilter(R.ANY, None, P.ANY, "User:alice", None, O.ANY, Permission.ANY))
    assert len(gone) == 1
    assert not a.authorize("User:alice", "h", O.READ, R.TOPIC, "t1")
    # persisted: a new store reads what the authorizer wrote
    assert SecurityStore(tmp_path).acls == a.bindings()

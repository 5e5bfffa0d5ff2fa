"""`tidelake users` and `tidelake acls` (kafka-configs' SCRAM part and kafka-acls) and every client
command's `--command-config FILE` (Kafka's client properties) against a broker with SASL, TLS and an
authorizer."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from security_fixtures import PLAIN_JAAS, secured_broker
from tidelake.cli.main import cli
from tls_certs import make_pki

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}


def tl(bootstrap: str, config: str, *args: str, ok: bool = True, stdin: str | None = None):
    result = CliRunner().invoke(cli, [*args, "--bootstrap-server", bootstrap, "--command-config", config, "--timeout",
                                      "10"], input=stdin, catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, f"tidelake {' '.join(args)} -> {result.exit_code}\n{result.output}"
    return result


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli-security")
    pki = make_pki(d / "pki")
    with secured_broker(d / "data", pki, **AUTHORIZER) as b:
        admin = d / "admin.properties"
        admin.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                         f"sasl.jaas.config={PLAIN_JAAS.split(' user_')[0]};\n")
        carol = d / "carol.properties"
        carol.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                         "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                         'username="carol" password="carol-pw";\n'
                         f"ssl.truststore.type=PEM\nssl.truststore.location={pki.ca}\n")
        yield b, str(admin), str(carol), d


def test_users_acls_and_secured_console(env):
    b, admin, carol, _ = env
    sasl, sasl_ssl = b.bootstrap_for("SASL_PLAINTEXT"), b.bootstrap_for("SASL_SSL")
    tl(sasl, admin, "topics", "create", "ledger", "--partitions", "1")
    out = tl(sasl, admin, "users", "add", "carol", "--password", "carol-pw").output
    assert "SCRAM-SHA-256, SCRAM-SHA-512 credentials set" in out
    listed = json.loads(tl(sasl, admin, "users", "list", "--json").output)
    assert {(r["user"], r["mechanism"]) for r in listed} == {("carol", "SCRAM-SHA-256"), ("carol", "SCRAM-SHA-512")}
    # carol logs in but may not write yet
    r = tl(sasl_ssl, carol, "produce", "ledger", ok=False, stdin="a\n")
    assert r.exit_code != 0 and "TOPIC_AUTHORIZATION_FAILED" in r.output.upper().replace(" ", "_")
    tl(sasl, admin, "acls", "add", "--allow-principal", "User:carol", "--operation", "WRITE", "--operation", "READ",
       "--topic", "ledger")
    tl(sasl, admin, "acls", "add", "--allow-principal", "User:carol", "--operation", "READ", "--group", "carol-",
       "--resource-pattern-type", "prefixed")
    rows = json.loads(tl(sasl, admin, "acls", "list", "--json").output)
    assert {(r["name"], r["operation"], r["pattern_type"]) for r in rows} == {
        ("ledger", "WRITE", "LITERAL"), ("ledger", "READ", "LITERAL"), ("carol-", "READ", "PREFIXED")}
    tl(sasl_ssl, carol, "produce", "ledger", stdin="a\nb\n")
    out = tl(sasl_ssl, carol, "consume", "ledger", "--from-beginning", "--group", "carol-1", "--max-messages", "2",
             "--timeout-ms", "15000").output
    assert out.split()[:2] == ["a", "b"] and "Processed a total of 2 messages" in out
    # kafka-python based commands take the same properties: carol sees only her group
    groups = json.loads(tl(sasl_ssl, carol, "groups", "list", "--json").output)
    assert [g["group"] for g in groups] == ["carol-1"]
    # carol may not manage ACLs
    r = tl(sasl_ssl, carol, "acls", "list", ok=False)
    assert r.exit_code == 1 and "CLUSTER_AUTHORIZATION_FAILED" in r.output
    out = tl(sasl, admin, "acls", "remove", "--topic", "ledger").output
    assert out.count("Removed") == 2
    tl(sasl, admin, "users", "remove", "carol")
    assert json.loads(tl(sasl, admin, "users", "list", "--json").output) == []


def test_bad_command_config_is_one_line(env, tmp_path):
    b, *_ = env
    for text, message in [("security.protocol=SASL_SSL\n", "needs sasl.jaas.config"),
                          ("security.protcol=SSL\n", "unknown client security property 'security.protcol'"),
                          ("security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=x.jks\n",
                           "only PEM stores")]:
        f = tmp_path / "bad.properties"
        f.write_text(text)
        r = tl(b.bootstrap_for("SASL_SSL"), str(f), "topics", "list", ok=False)
        assert r.exit_code == 1
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and message in lines[0] and "Traceback" not in r.output, r.output

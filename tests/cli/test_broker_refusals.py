"""What the broker refused, said by the CLI as the broker said it (real `tidelake` processes against a broker with
SASL and an authorizer): a wrong password is "authentication failed" with the broker's reason, not a broker that
did not answer; a topic the user may not read is TOPIC_AUTHORIZATION_FAILED, not an unknown topic."""
from __future__ import annotations

import subprocess
import sys

import pytest

from security_fixtures import PLAIN_JAAS, add_scram_user, secured_broker
from tls_certs import make_pki

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required"


def run(bootstrap: str, config, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", *args, "--bootstrap-server", bootstrap,
                           "--command-config", str(config), "--timeout", "10"],
                          input=stdin, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("refusals")
    pki = make_pki(d / "pki")
    with secured_broker(d / "data", pki, **AUTHORIZER) as b:
        bootstrap = b.bootstrap_for("SASL_PLAINTEXT")
        admin = d / "admin.properties"
        admin.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                         f"sasl.jaas.config={PLAIN_JAAS.split(' user_')[0]};\n")
        add_scram_user(b, "dave", "dave-pw", {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                                               "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                                               "sasl.password": "admin-secret"})
        configs = {}
        for name, password in [("dave", "dave-pw"), ("wrong", "not-daves-pw")]:
            configs[name] = d / f"{name}.properties"
            configs[name].write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                                     f'sasl.jaas.config={SCRAM} username="dave" password="{password}";\n')
        yield bootstrap, admin, configs


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 1, result
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tidelake: error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("command", [["topics", "list"], ["consume", "t", "--max-messages", "1"],
                                     ["produce", "t"], ["transactions", "list"], ["groups", "list"]],
                         ids=lambda c: " ".join(c[:2]))
def test_a_wrong_password_is_named_as_the_broker_said(env, command):
    bootstrap, _, configs = env
    line = one_error_line(run(bootstrap, configs["wrong"], *command, stdin="v\n"))
    assert f"authentication failed at {bootstrap}" in line, line
    assert "invalid credentials" in line and "SCRAM-SHA-256" in line, line
    assert "no Kafka broker answered" not in line


def test_an_unauthorized_consume_says_topic_authorization_failed(env):
    bootstrap, admin, configs = env
    assert run(bootstrap, admin, "topics", "create", "payroll").returncode == 0
    assert run(bootstrap, admin, "produce", "payroll", stdin="salary\n").returncode == 0
    line = one_error_line(run(bootstrap, configs["dave"], "consume", "payroll", "--from-beginning",
                              "--max-messages", "1"))
    assert "cannot consume payroll: TOPIC_AUTHORIZATION_FAILED" in line, line
    # a topic that does not exist is still named so, and asking does not create it
    line = one_error_line(run(bootstrap, admin, "consume", "no-such-topic", "--max-messages", "1"))
    assert "cannot consume no-such-topic: UNKNOWN_TOPIC_OR_PART" in line, line
    listed = run(bootstrap, admin, "topics", "list")
    assert listed.returncode == 0 and "no-such-topic" not in listed.stdout.split()
    # allowed, dave reads it (in his group)
    for resource in (["--topic", "payroll"], ["--group", "dave-g"]):
        assert run(bootstrap, admin, "acls", "add", "--allow-principal", "User:dave", "--operation", "READ",
                   *resource).returncode == 0
    out = run(bootstrap, configs["dave"], "consume", "payroll", "--from-beginning", "--max-messages", "1",
              "--group", "dave-g")
    assert out.returncode == 0 and out.stdout.split() == ["salary"], out

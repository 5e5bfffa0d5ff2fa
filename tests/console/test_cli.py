"""``tidelake console`` start-up failures: one line on stderr naming what is wrong, no traceback (a broker that
does not answer: tests/cli/test_errors.py, with every broker command)."""
from __future__ import annotations

import json
import socket
import subprocess
import sys

from console_fixtures import ROOT


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tidelake.cli.main", "console", *args], capture_output=True,
                          text=True, timeout=60, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def test_a_malformed_listen_address_is_a_usage_error(broker) -> None:
    done = run("-b", broker.bootstrap_servers, "--listen", "localhost")
    assert done.returncode == 2
    assert "--listen" in done.stderr and "HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_busy_port_is_one_line(broker) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = run("-b", broker.bootstrap_servers, "--listen", f"127.0.0.1:{port}")
    assert done.returncode == 1
    assert one_line(done.stderr) == (f"tidelake: error: --listen 127.0.0.1:{port}: Address already in use "
                                     f"(tidelake console)")


def test_a_metrics_url_must_be_http(broker) -> None:
    done = run("-b", broker.bootstrap_servers, "--metrics-url", "localhost:9100/metrics")
    assert done.returncode == 2
    assert "--metrics-url" in done.stderr


def test_a_listen_beyond_loopback_or_actions_without_a_login_are_refused(broker) -> None:
    """Anyone on the network would see the pages, anyone on the host could compact tables: both need a login
    (before: served, unauthenticated)."""
    done = run("-b", broker.bootstrap_servers, "--listen", "0.0.0.0:0")
    assert done.returncode == 1
    assert one_line(done.stderr) == ("tidelake: error: --listen 0.0.0.0:0 (not loopback) needs a login: give "
                                     "--users-file FILE (tidelake console users add) or --oidc-jwks-url URL "
                                     "(tidelake console)")
    done = run("-b", broker.bootstrap_servers, "--allow-actions")
    assert done.returncode == 1
    assert one_line(done.stderr).startswith("tidelake: error: --allow-actions needs a login: give --users-file")
    done = run("-b", broker.bootstrap_servers, "--listen", "[::]:0", "--allow-actions")
    assert one_line(done.stderr).startswith("tidelake: error: --listen [::]:0 (not loopback) and --allow-actions "
                                            "need a login")


def test_login_settings_are_checked_at_start(broker, tmp_path) -> None:
    done = run("-b", broker.bootstrap_servers, "--users-file", str(tmp_path / "absent"))
    assert one_line(done.stderr).startswith(f"tidelake: error: {tmp_path / 'absent'}: no such users file")
    (tmp_path / "users").write_text("# a comment\nalice:admin:$argon2id$v=19$x\n")
    done = run("-b", broker.bootstrap_servers, "--users-file", str(tmp_path / "users"))
    assert one_line(done.stderr) == (f"tidelake: error: {tmp_path / 'users'}:2: user alice: role 'admin' is not one "
                                     f"of viewer, operator (tidelake console)")
    done = run("-b", broker.bootstrap_servers, "--oidc-jwks-url", (tmp_path / "no-jwks.json").as_uri())
    assert "tidelake: error: --oidc-jwks-url=file:" in one_line(done.stderr)
    assert "cannot read a JSON Web Key Set" in done.stderr
    done = run("-b", broker.bootstrap_servers, "--oidc-issuer", "https://idp.test")
    assert done.returncode == 2 and "--oidc-issuer need --oidc-jwks-url" in done.stderr
    (tmp_path / "not-a-cert.pem").write_text("nothing\n")
    done = run("-b", broker.bootstrap_servers, "--tls-cert", str(tmp_path / "not-a-cert.pem"),
               "--tls-key", str(tmp_path / "not-a-cert.pem"))
    assert one_line(done.stderr).startswith(f"tidelake: error: --tls-cert {tmp_path / 'not-a-cert.pem'} --tls-key")


def test_console_users_add_list_remove(tmp_path) -> None:
    users = tmp_path / "users"

    def users_cli(*args: str, password: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tidelake.cli.main", "console", "users", *args,
                               "--users-file", str(users)], input=password, capture_output=True, text=True,
                              timeout=60, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert users_cli("add", "alice", "--role", "operator", password="s3cret\n").returncode == 0
    assert users_cli("add", "bob", password="pw\n").stdout == f"User bob: viewer, added in {users}.\n"
    assert "s3cret" not in users.read_text() and users.stat().st_mode & 0o077 == 0
    assert users_cli("list").stdout.split() == ["USER", "ROLE", "alice", "operator", "bob", "viewer"]
    assert one_line(users_cli("add", "carol", password="").stderr).startswith("tidelake: error: the password is empty")
    assert one_line(users_cli("add", "a:b", password="x\n").stderr).startswith("tidelake: error: 'a:b': ")
    assert users_cli("remove", "alice").returncode == 0
    assert users_cli("list").stdout.split() == ["USER", "ROLE", "bob", "viewer"]
    assert one_line(users_cli("remove", "alice").stderr) == (f"tidelake: error: {users}: no user alice "
                                                             f"(tidelake console users remove)")


def test_a_browser_login_needs_an_issuer_that_answers(broker, tmp_path) -> None:
    from joserfc.jwk import RSAKey
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [RSAKey.generate_key(2048).as_dict(private=False)]}))
    jwks = ("--oidc-jwks-url", (tmp_path / "jwks.json").as_uri())
    done = run("-b", broker.bootstrap_servers, *jwks, "--oidc-client-id", "console")
    assert done.returncode == 2 and "--oidc-client-id needs --oidc-issuer" in done.stderr
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]   # bound, not listening: a connection is refused
        done = run("-b", broker.bootstrap_servers, *jwks, "--oidc-issuer", f"http://127.0.0.1:{port}",
                   "--oidc-client-id", "console")
    assert one_line(done.stderr).startswith(f"tidelake: error: --oidc-issuer http://127.0.0.1:{port}: cannot read "
                                            f"its discovery document http://127.0.0.1:{port}/.well-known/"
                                            f"openid-configuration")

"""``tidelake console``: the web console (``tidelake.console``) served by uvicorn in this one process, behind a
login (``--users-file``, ``--oidc-*``) and TLS (``--tls-cert/--tls-key``) when asked, and always when it listens
beyond loopback or offers actions; ``tidelake console users add|list|remove`` keep its users file.

(``console.py`` beside this file is the console producer/consumer, ``produce`` / ``consume``.)
"""
from __future__ import annotations

import ipaddress
import logging
import os
import socket
import ssl
import sys

import click

from tidelake.cli.errors import CliError, CommandGroup
from tidelake.listen_socket import ListenError, bind_listener
from tidelake.cli.kafka_client import BrokerConnection, broker_options
from tidelake.cli.output import json_option, print_json, print_rows
from tidelake.console.oidc_settings import CLIENT_SECRET_ENV, OidcSettings
from tidelake.console.roles import ROLES, VIEWER


def _listen_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{text!r}: expected HOST:PORT (PORT 0 picks a free one)", param_hint="--listen")
    return host.strip("[]"), int(port)


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before the server starts, so a busy port is one error line and port 0's
    choice can be printed."""
    try:
        sock = bind_listener(host, port)
    except ListenError as e:
        raise CliError(f"--listen {host}:{port}: {e.strerror}") from None
    sock.set_inheritable(True)
    return sock


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:   # a host name: it may resolve anywhere
        return False


def _tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """The certificate and key checked before the server starts: a bad file is one line, not uvicorn's stack."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise click.UsageError("--tls-cert and --tls-key go together (the certificate chain and its private key)")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise CliError(f"--tls-cert {cert} --tls-key {key}: {e.strerror or e}") from None
    return context


def _oidc_settings(jwks_url, issuer, audiences, role_claim, principal_claim, client_id) -> OidcSettings | None:
    if client_id is not None and issuer is None:
        raise click.UsageError("--oidc-client-id needs --oidc-issuer (whose discovery document names its endpoints)")
    if jwks_url is None:
        given = [o for o, v in (("--oidc-issuer", issuer), ("--oidc-audience", audiences),
                                ("--oidc-client-id", client_id)) if v]
        if given:
            raise click.UsageError(f"{' and '.join(given)} need --oidc-jwks-url (where the issuer's keys are)")
        return None
    if not jwks_url.startswith(("http://", "https://", "file:")):
        raise click.BadParameter(f"{jwks_url!r}: expected an https://, http:// or file: URL",
                                 param_hint="--oidc-jwks-url")
    return OidcSettings(jwks_url, issuer, tuple(audiences), role_claim, principal_claim, client_id=client_id,
                        client_secret=os.environ.get(CLIENT_SECRET_ENV) or None)


def _refuse_without_login(listen: str, host: str, allow_actions: bool, login: bool) -> None:
    """Beyond loopback anyone on the network reaches the pages; with actions anyone on this host may change
    state: either needs a login."""
    if login:
        return
    why = [w for w, on in ((f"--listen {listen} (not loopback)", not _is_loopback(host)),
                           ("--allow-actions", allow_actions)) if on]
    if why:
        raise CliError(f"{' and '.join(why)} need{'' if len(why) > 1 else 's'} a login: give --users-file FILE "
                       f"(tidelake console users add) or --oidc-jwks-url URL")


@click.group("console", cls=CommandGroup, invoke_without_command=True)
@click.pass_context
@broker_options
@click.option("--listen", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT",
              help="Where to serve the console (PORT 0 picks a free port; the address is printed). Beyond loopback "
                   "a login is required.")
@click.option("--tables", "tables_dir", type=click.Path(exists=True, file_okay=False), default=None, metavar="DIR",
              help="Show the tables in DIR (DIR itself, its children and grandchildren).")
@click.option("--pipelines", "pipelines_dir", type=click.Path(exists=True, file_okay=False), default=None,
              metavar="DIR", help="Show the pipelines configured by DIR/*.yaml (and their sink tables).")
@click.option("--metrics-url", default=None, metavar="URL",
              help="A broker's Prometheus endpoint (http://HOST:PORT/metrics) to chart.")
@click.option("--schema-registry-url", default=None, metavar="URL",
              help="A schema registry (Confluent's REST API, e.g. tidelake schema-registry) to show subjects of.")
@click.option("--schema-registry-user-info", default=None, metavar="USER:PASSWORD", envvar="SCHEMA_REGISTRY_USER_INFO",
              help="Basic auth credentials for --schema-registry-url.")
@click.option("--allow-actions", is_flag=True,
              help="Offer actions that change state (compact a table, reset a group's offsets), each confirmed, to "
                   "users of the operator role (a login is required).")
@click.option("--sample-interval", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
              metavar="SECONDS", help="How often to sample offsets, lag and metrics for the charts.")
@click.option("--users-file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              envvar="TIDELAKE_CONSOLE_USERS_FILE",
              help="Log in with HTTP basic against FILE's users (tidelake console users add; env "
                   "TIDELAKE_CONSOLE_USERS_FILE).")
@click.option("--oidc-jwks-url", default=None, metavar="URL",
              help="Accept OIDC bearer tokens (Authorization: Bearer JWT) signed by a key of this JWKS.")
@click.option("--oidc-issuer", default=None, metavar="URL", help="The iss a token must carry.")
@click.option("--oidc-audience", "oidc_audiences", multiple=True, metavar="AUD",
              help="An aud a token must name (repeatable: any one of them).")
@click.option("--oidc-role-claim", default=OidcSettings.role_claim, show_default=True,
              metavar="CLAIM", help="The claim naming the token's role (viewer or operator; a string or a list).")
@click.option("--oidc-principal-claim", default=OidcSettings.principal_claim, show_default=True,
              metavar="CLAIM", help="The claim naming the user.")
@click.option("--oidc-client-id", default=None, metavar="ID",
              help=f"Browsers log in through --oidc-issuer's provider as this client (the authorization-code "
                   f"flow; its secret, if any, from env {CLIENT_SECRET_ENV}; redirect URI "
                   f"https://HOST:PORT/oidc/callback).")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), default=None, metavar="FILE",
              help="Serve https with this certificate chain (PEM; with --tls-key).")
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), default=None, metavar="FILE",
              help="The private key of --tls-cert (PEM).")
def console(ctx: click.Context, conn: BrokerConnection, listen: str, tables_dir: str | None,
            pipelines_dir: str | None, metrics_url: str | None, schema_registry_url: str | None,
            schema_registry_user_info: str | None, allow_actions: bool, sample_interval: float,
            users_file: str | None, oidc_jwks_url: str | None, oidc_issuer: str | None,
            oidc_audiences: tuple[str, ...], oidc_role_claim: str, oidc_principal_claim: str,
            oidc_client_id: str | None, tls_cert: str | None, tls_key: str | None) -> None:
    """Serve the web console: topics, messages, consumer groups and lag, pipelines, tables, live charts."""
    if ctx.invoked_subcommand is not None:   # `console users ...`: the users file, no server
        return
    import uvicorn

    from tidelake.console.app import Console, ConsoleSettings, create_app
    from tidelake.console.oidc_login import OidcLoginError
    from tidelake.console.users_file import UsersFileError
    from tidelake.security.client_config import kafka_python_config
    from tidelake.security.jwks import JwksError

    for option, url in (("--metrics-url", metrics_url), ("--schema-registry-url", schema_registry_url)):
        if url is not None and not url.startswith(("http://", "https://")):
            raise click.BadParameter(f"{url!r}: expected an http:// or https:// URL", param_hint=option)
    host, port = _listen_address(listen)
    oidc = _oidc_settings(oidc_jwks_url, oidc_issuer, oidc_audiences, oidc_role_claim, oidc_principal_claim,
                          oidc_client_id)
    _refuse_without_login(listen, host, allow_actions, users_file is not None or oidc is not None)
    tls = _tls_context(tls_cert, tls_key)
    admin = conn.admin()   # the broker answers, or one error line within --timeout
    del admin
    settings = ConsoleSettings(client_config=conn.config(), timeout=conn.timeout,
                               kafka_python_config=kafka_python_config(conn.security) if conn.security else {},
                               tables_dir=tables_dir,
                               pipelines_dir=pipelines_dir, metrics_url=metrics_url, allow_actions=allow_actions,
                               sample_interval=sample_interval, schema_registry_url=schema_registry_url,
                               schema_registry_user_info=schema_registry_user_info, users_file=users_file, oidc=oidc)
    try:
        web = Console(settings)
    except (UsersFileError, JwksError, OidcLoginError) as e:
        raise CliError(str(e)) from None
    sock = _bind(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    from tidelake.cli.signals import on_stop_signals
    on_stop_signals()   # from here until it serves: as Ctrl-C (exit 130); then the server's own stop, below
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    login = " and ".join(w for w, on in (("basic", users_file), ("OIDC bearer", oidc),
                                         ("OIDC browser", oidc and oidc.client_id)) if on) or "no"
    click.echo(f"tidelake console on {'https' if tls else 'http'}://{shown}:{bound_port}/ (broker {conn.bootstrap}; "
               f"{'actions allowed' if allow_actions else 'read-only'}; {login} login)", err=False)
    logging.basicConfig(level=logging.DEBUG if conn.debug else logging.WARNING,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if users_file and tls is None and not _is_loopback(host):
        logging.getLogger("tidelake.console").warning(
            "basic login over plain http on %s: passwords cross the network readable (give --tls-cert/--tls-key)",
            host)
    app = create_app(settings, web)
    config = uvicorn.Config(app, log_level="debug" if conn.debug else "warning", access_log=conn.debug,
                            lifespan="on", timeout_graceful_shutdown=5, ssl_certfile=tls_cert, ssl_keyfile=tls_key)
    import contextlib

    class ConsoleServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            # cli/signals.py's rule, not uvicorn's (which re-raises the signal once drained: a SIGTERM'd console
            # died by it): the first SIGTERM/SIGINT drains and exits 0, a second stops at once
            on_stop_signals(lambda: setattr(self, "should_exit", True), lambda: setattr(self, "force_exit", True))
            yield

    ConsoleServer(config).run(sockets=[sock])


@console.group(cls=CommandGroup)
def users() -> None:
    """Add, list and remove the console's users (its --users-file)."""


def users_file_option(f):
    return click.option("--users-file", "path", type=click.Path(dir_okay=False), required=True, metavar="FILE",
                        envvar="TIDELAKE_CONSOLE_USERS_FILE",
                        help="The console's users file (env TIDELAKE_CONSOLE_USERS_FILE).")(f)


def _read(path: str, missing_ok: bool = False):
    from pathlib import Path

    from tidelake.console.users_file import UsersFileError, read_users
    if missing_ok and not Path(path).exists():
        return {}
    try:
        return read_users(path)
    except UsersFileError as e:
        raise CliError(str(e)) from None


def _password() -> str:
    """From a prompt (twice) on a terminal, else the first line of stdin: never from the command line."""
    if sys.stdin.isatty():
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise CliError("the password is empty (give it at the prompt, or as stdin's first line)")
    return password


@users.command()
@click.argument("name")
@click.option("--role", type=click.Choice(ROLES), default=VIEWER, show_default=True,
              help="viewer: sees the pages; operator: may also run actions (with --allow-actions).")
@users_file_option
def add(name: str, role: str, path: str) -> None:
    """Add user NAME (or change its password and role); the password is prompted for, or read from stdin."""
    from tidelake.console.users_file import ConsoleUser, hash_password, valid_name, write_users
    problem = valid_name(name)
    if problem:
        raise CliError(f"{name!r}: {problem}")
    known = _read(path, missing_ok=True)
    password = _password()
    write_users(path, {**known, name: ConsoleUser(name, role, hash_password(password))})
    click.echo(f"User {name}: {role}, {'password changed' if name in known else 'added'} in {path}.")


@users.command(name="list")
@users_file_option
@json_option
def list_users(path: str, as_json: bool) -> None:
    """List the users and their roles."""
    rows = [{"user": u.name, "role": u.role} for u in sorted(_read(path).values(), key=lambda u: u.name)]
    if as_json:
        print_json(rows)
        return
    print_rows(("USER", "ROLE"), [[r["user"], r["role"]] for r in rows])


@users.command()
@click.argument("name")
@users_file_option
def remove(name: str, path: str) -> None:
    """Remove user NAME."""
    from tidelake.console.users_file import write_users
    known = _read(path)
    if name not in known:
        raise CliError(f"{path}: no user {name}")
    write_users(path, {n: u for n, u in known.items() if n != name})
    click.echo(f"User {name}: removed from {path}.")

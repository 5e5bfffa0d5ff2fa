"""The command line's boundary to :mod:`tidelake.kafka_admin.share_groups`: its admin opened with
``--bootstrap-server``, ``--timeout`` and ``--command-config``, after the reachability check every command makes,
and its errors turned into the ``CliError`` lines the other commands print."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from tidelake.cli.errors import CliError
from tidelake.cli.kafka_client import BrokerConnection
from tidelake.kafka_admin.share_groups import (ShareAdminError, ShareAdminNoAnswer, ShareAdminUnreachable,
                                               ShareGroupAdmin)
from tidelake.security.client_config import kafka_python_config

CLIENT_ID = "tidelake-cli"


@contextmanager
def share_group_admin(conn: BrokerConnection) -> Iterator[ShareGroupAdmin]:
    """A ShareGroupAdmin for ``conn``, closed on leaving; its failures leave as CliError."""
    conn.admin()  # a down broker or a refused login: one line within --timeout, as every command
    try:
        with ShareGroupAdmin(conn.bootstrap, conn.timeout, CLIENT_ID, kafka_python_config(conn.security)) as admin:
            yield admin
    except ShareAdminUnreachable as e:
        raise conn.unreachable(e.detail) from e
    except ShareAdminNoAnswer as e:
        raise CliError(f"{e.what}: no answer within {conn.timeout:g}s (--timeout)") from e
    except ShareAdminError as e:
        raise CliError(str(e)) from e

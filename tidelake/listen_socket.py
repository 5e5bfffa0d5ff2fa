"""A server's listening socket, bound before the server starts: a busy port or an unknown host is one error
line from the caller (``ListenError``'s message), and port 0's choice can be read off before serving."""
from __future__ import annotations

import socket


class ListenError(OSError):
    """The host does not resolve or the address cannot be bound: ``strerror`` says which."""


def bind_listener(host: str, port: int, backlog: int = 128) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ListenError(e.errno, e.strerror) from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        raise ListenError(e.errno, e.strerror) from None
    sock.listen(backlog)
    return sock

"""The console's users file (``--users-file``): one user a line, ``NAME:ROLE:HASH``, the hash Argon2id's PHC
string (argon2-cffi, its default parameters, RFC 9106's second recommendation). ``#`` starts a comment.

``tidelake console users add|list|remove`` write it (whole, through a temporary file and a rename, mode 0600);
the console reads it again when its modification time changes, so a user added or removed counts at the next
request, no restart. A checked password is remembered (as its SHA-256, beside the hash it matched) so that the
browser's basic credentials, sent with every request, cost one Argon2 verification per user and password, not
one per request.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from tidelake.console.roles import ROLES

class UsersFileError(ValueError):
    """The users file cannot be read, or a line of it is not NAME:ROLE:HASH (the message names file:line)."""


@dataclass(frozen=True)
class ConsoleUser:
    name: str
    role: str
    password_hash: str


def valid_name(name: str) -> str | None:
    """Why ``name`` cannot be a user's name, or None."""
    if not name or name != name.strip():
        return "a user's name is not empty and has no spaces around it"
    if ":" in name or "\n" in name or name.startswith("#"):
        return "a user's name has no ':' or line break and does not start with '#'"
    return None


def read_users(path: str | os.PathLike) -> dict[str, ConsoleUser]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsersFileError(f"{path}: no such users file (create it with `tidelake console users add NAME "
                             f"--users-file {path}`)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsersFileError(f"{path}: cannot read the users file ({e})") from None
    users: dict[str, ConsoleUser] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, _, rest = line.partition(":")
        role, _, password_hash = rest.partition(":")
        where = f"{path}:{number}"
        if valid_name(name) or not password_hash.startswith("$argon2"):
            raise UsersFileError(f"{where}: expected NAME:ROLE:ARGON2-HASH (as `tidelake console users add` "
                                 f"writes it)")
        if role not in ROLES:
            raise UsersFileError(f"{where}: user {name}: role {role!r} is not one of {', '.join(ROLES)}")
        if name in users:
            raise UsersFileError(f"{where}: user {name} is listed twice")
        users[name] = ConsoleUser(name, role, password_hash)
    return users


def write_users(path: str | os.PathLike, users: dict[str, ConsoleUser]) -> None:
    path = Path(path)
    body = "".join(f"{u.name}:{u.role}:{u.password_hash}\n" for u in sorted(users.values(), key=lambda u: u.name))
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:   # mkstemp: mode 0600
            f.write("# tidelake console users: NAME:ROLE:ARGON2-HASH (tidelake console users add)\n" + body)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def hash_password(password: str) -> str:
    return PasswordHasher().hash(password)


class UsersFile:
    """The users file as the console reads it: re-read when it changes, passwords checked against it."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._mtime: int | None = None
        self._users: dict[str, ConsoleUser] = {}
        self._checked: dict[tuple[str, str], bytes] = {}   # (name, hash) -> SHA-256 of the password it matched
        self._dummy_hash: str | None = None
        self.users()   # at start: a console whose users file is unreadable does not start

    def users(self) -> dict[str, ConsoleUser]:
        with self._lock:
            try:
                mtime = self.path.stat().st_mtime_ns
            except FileNotFoundError:
                mtime = None
            if mtime != self._mtime or mtime is None:
                self._users = read_users(self.path)
                self._mtime = mtime
                self._checked = {k: v for k, v in self._checked.items()
                                 if k[0] in self._users and self._users[k[0]].password_hash == k[1]}
            return self._users

    def check(self, name: str, password: str) -> ConsoleUser | str:
        """The user when the password is theirs, else why not (said in the log, not to the client)."""
        user = self.users().get(name)
        if user is None:
            self._verify_nothing(password)
            return "no such user"
        digest = hashlib.sha256(password.encode("utf-8")).digest()
        key = (user.name, user.password_hash)
        with self._lock:
            known = self._checked.get(key)
        if known is not None and hmac.compare_digest(known, digest):
            return user
        try:
            PasswordHasher().verify(user.password_hash, password)
        except VerificationError:
            return "wrong password"
        except InvalidHashError:
            return f"the users file's hash for {name} is not an Argon2 hash"
        with self._lock:
            self._checked[key] = digest
        return user

    def _verify_nothing(self, password: str) -> None:
        """As long as a wrong password takes: an unknown name is not told apart by the answer's time."""
        with self._lock:
            if self._dummy_hash is None:
                self._dummy_hash = hash_password(secrets.token_urlsafe(16))
        try:
            PasswordHasher().verify(self._dummy_hash, password)
        except VerificationError:
            pass

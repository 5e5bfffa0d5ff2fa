"""What security state the broker persists: SCRAM credentials (KIP-554) and ACLs, in
``<data dir>/tidelake-security.json`` next to the broker metadata, written atomically (temp file,
fsync, rename, directory fsync) on every change, so a restart serves the same users and ACLs."""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from tidelake.fsutil import fsync_dir
from tidelake.security.acl.model import AclBinding
from tidelake.security.sasl.scram import ScramCredential

SECURITY_FILE = "tidelake-security.json"


class SecurityStore:
    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / SECURITY_FILE
        self._lock = threading.Lock()
        self.scram: dict[str, dict[str, ScramCredential]] = {}  # user -> mechanism -> credential
        self.acls: list[AclBinding] = []
        if self.path.exists():
            data = json.loads(self.path.read_text())
            self.scram = {user: {mech: ScramCredential.from_json(c) for mech, c in mechs.items()}
                          for user, mechs in data.get("scram", {}).items()}
            self.acls = [AclBinding.from_json(b) for b in data.get("acls", [])]

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.scram.get(user, {}).get(mechanism)

    def set_credential(self, user: str, mechanism: str, credential: ScramCredential | None, save: bool = True) -> None:
        """Upsert (or, with None, delete) one user's credential for one mechanism."""
        if credential is None:
            mechs = self.scram.get(user, {})
            mechs.pop(mechanism, None)
            if not mechs:
                self.scram.pop(user, None)
        else:
            self.scram.setdefault(user, {})[mechanism] = credential
        if save:
            self.save()

    def set_acls(self, bindings: list[AclBinding]) -> None:
        self.acls = list(bindings)
        self.save()

    def save(self) -> None:
        data = {"scram": {u: {m: c.to_json() for m, c in mechs.items()} for u, mechs in self.scram.items()},
                "acls": [b.to_json() for b in self.acls]}
        payload = json.dumps(data, indent=1, sort_keys=True).encode()
        with self._lock:
            tmp = self.path.with_name(self.path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # credentials: owner only
            try:
                os.write(fd, payload)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            fsync_dir(self.path.parent)

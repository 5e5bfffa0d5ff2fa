"""Shipping tidelake's own code to a cluster's executors.

On a cluster (any master but ``local``), the pipeline adds a zip of the ``tidelake`` package the driver
runs to the Spark context (``SparkContext.addPyFile``): every executor puts it at the front of its Python
path, so its tasks run the driver's exact code, whatever tidelake the worker machines have installed
(possibly none). Third-party packages (pyarrow, confluent-kafka, ...) are not shipped: each worker runs
the same Python environment as the driver (``PYSPARK_PYTHON`` names the same interpreter path everywhere).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile

import tidelake

_zips: dict[str, str] = {}


def package_zip() -> str:
    """A zip of the running ``tidelake`` package (sources and package data, no bytecode), written once
    per process into a temporary directory; its name carries a hash of the contents."""
    root = os.path.dirname(os.path.abspath(tidelake.__file__))
    if root in _zips and os.path.exists(_zips[root]):
        return _zips[root]
    members = []
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for n in sorted(names):
            if not n.endswith((".pyc", ".pyo")):
                full = os.path.join(dirpath, n)
                members.append((full, os.path.join("tidelake", os.path.relpath(full, root))))
    digest = hashlib.sha256()
    for full, arc in members:
        digest.update(arc.encode())
        with open(full, "rb") as f:
            digest.update(f.read())
    path = os.path.join(tempfile.mkdtemp(prefix="tidelake-ship-"), f"tidelake-{digest.hexdigest()[:12]}.zip")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for full, arc in members:
            z.write(full, arc)
    _zips[root] = path
    return path

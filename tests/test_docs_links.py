"""The README and docs link only files inside the repository, and every linked file exists."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")


def test_links_stay_inside_the_repository_and_resolve():
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in LINK.findall(doc.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            resolved = (doc.parent / target).resolve()
            assert ROOT in resolved.parents or resolved == ROOT, f"{doc.name} links outside the repository: {target}"
            assert resolved.exists(), f"{doc.name} links a missing file: {target}"

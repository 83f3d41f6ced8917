"""Add the sha256 of every file to the manifests of packs written before bench verified packs.

    python scripts/pack_sha256.py results/reference

Only each ``pack.json`` is rewritten (its ``files`` and ``manifest_sha256`` keys added or replaced,
everything else kept in its order); no Parquet or journal file is touched. ``bench export --format pack`` writes the key itself.
Run it only on packs known to be good (as committed): it records what the files hold now.
"""
import json
import sys
from pathlib import Path

from bench.storage import packed


def main(roots: list[str]) -> None:
    for root in roots:
        for p in packed.packs_under(Path(root)):
            f = p / packed.MANIFEST
            manifest = json.loads(f.read_text())
            manifest[packed.FILES] = packed.file_hashes(p)
            manifest = packed.sealed(manifest)
            f.write_text(json.dumps(manifest, indent=2) + "\n")
            print(f"{f}: {len(manifest[packed.FILES])} files")


if __name__ == "__main__":
    main(sys.argv[1:] or ["results/reference"])

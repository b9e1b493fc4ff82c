#!/usr/bin/env python3
"""Write a one-layer container image as a tar that both ``docker load`` and
``ctr -n k8s.io image import`` accept.

The archive is an OCI image layout (``oci-layout``, ``index.json``, ``blobs/sha256/*``)
that also carries a Docker ``manifest.json`` pointing at the same blobs: docker 25+
reads either, older docker reads ``manifest.json``, containerd reads ``index.json``
(and names the image from the ``io.containerd.image.name`` annotation).

Everything is deterministic: blobs are content-addressed, the layer is used as given
(uncompressed, so its digest is also its diff_id), tar entries are sorted and stamped
with ``--created`` (seconds since the epoch, normally SOURCE_DATE_EPOCH), owner root.
The same inputs give the same bytes, hence the same image digests.

Standard library only: it runs with the system python3 before any virtualenv exists.

    oci_archive.py --layer rootfs.tar --name headroom.local/debian-base:0123abcd4567 \
        --created 1764460800 --cmd '["bash"]' --label k=v --out image.tar

Prints one JSON object: name, manifest/config/layer digests, archive path and size.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import io
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def canonical_json(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def descriptor(media_type: str, digest: str, size: int, **extra: Any) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": size, **extra}


def split_name(name: str) -> tuple[str, str]:
    """'repo/name:tag' -> ('repo/name', 'tag'); a missing tag is 'latest'."""
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = name.rsplit(":", 1)
        return repo, tag
    return name, "latest"


class DeterministicTar:
    """A tar writer whose entries carry a fixed mtime and root ownership."""

    def __init__(self, path: Path, mtime: int) -> None:
        self.tar = tarfile.open(path, "w", format=tarfile.PAX_FORMAT)
        self.mtime = mtime

    def _info(self, name: str, size: int, mode: int = 0o644) -> tarfile.TarInfo:
        ti = tarfile.TarInfo(name)
        ti.size, ti.mode, ti.mtime = size, mode, self.mtime
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = "root"
        return ti

    def add_dir(self, name: str) -> None:
        ti = self._info(name, 0, 0o755)
        ti.type = tarfile.DIRTYPE
        self.tar.addfile(ti)

    def add_bytes(self, name: str, data: bytes) -> None:
        self.tar.addfile(self._info(name, len(data)), io.BytesIO(data))

    def add_file(self, name: str, path: Path) -> None:
        with open(path, "rb") as f:
            self.tar.addfile(self._info(name, path.stat().st_size), f)

    def close(self) -> None:
        self.tar.close()


def build(args: argparse.Namespace) -> dict[str, Any]:
    layer = Path(args.layer)
    layer_digest = sha256_file(layer)
    layer_size = layer.stat().st_size
    created = dt.datetime.fromtimestamp(args.created, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    labels = dict(kv.split("=", 1) for kv in args.label)
    env = [f"PATH={DEFAULT_PATH}", *args.env]
    cfg: dict[str, Any] = {"Env": env, "Labels": labels}
    if args.entrypoint:
        cfg["Entrypoint"] = json.loads(args.entrypoint)
    if args.cmd:
        cfg["Cmd"] = json.loads(args.cmd)
    if args.workdir:
        cfg["WorkingDir"] = args.workdir
    config = {
        "architecture": args.arch,
        "os": "linux",
        "created": created,
        "config": cfg,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
        "history": [{"created": created, "created_by": args.created_by}],
    }
    config_bytes = canonical_json(config)
    config_digest = hashlib.sha256(config_bytes).hexdigest()

    repo, tag = split_name(args.name)
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": descriptor(OCI_CONFIG, config_digest, len(config_bytes)),
        "layers": [descriptor(OCI_LAYER_TAR, layer_digest, layer_size)],
        "annotations": {"org.opencontainers.image.created": created},
    }
    manifest_bytes = canonical_json(manifest)
    manifest_digest = hashlib.sha256(manifest_bytes).hexdigest()
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            descriptor(
                OCI_MANIFEST,
                manifest_digest,
                len(manifest_bytes),
                annotations={
                    "io.containerd.image.name": f"{repo}:{tag}",
                    "org.opencontainers.image.ref.name": tag,
                },
                platform={"architecture": args.arch, "os": "linux"},
            )
        ],
    }
    docker_manifest = [
        {
            "Config": f"blobs/sha256/{config_digest}",
            "RepoTags": [f"{repo}:{tag}"],
            "Layers": [f"blobs/sha256/{layer_digest}"],
        }
    ]

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=out.parent, prefix=".oci-", delete=False) as tmp:
        tmp_path = Path(tmp.name)
    try:
        t = DeterministicTar(tmp_path, args.created)
        t.add_dir("blobs")
        t.add_dir("blobs/sha256")
        blobs = sorted(
            [(config_digest, config_bytes), (manifest_digest, manifest_bytes), (layer_digest, None)],
            key=lambda b: b[0],
        )
        for digest, data in blobs:
            if data is None:
                t.add_file(f"blobs/sha256/{digest}", layer)
            else:
                t.add_bytes(f"blobs/sha256/{digest}", data)
        t.add_bytes("index.json", canonical_json(index))
        t.add_bytes("manifest.json", canonical_json(docker_manifest))
        t.add_bytes("oci-layout", canonical_json({"imageLayoutVersion": "1.0.0"}))
        t.close()
        shutil.move(tmp_path, out)
    finally:
        tmp_path.unlink(missing_ok=True)
    return {
        "name": f"{repo}:{tag}",
        "manifest_digest": f"sha256:{manifest_digest}",
        "config_digest": f"sha256:{config_digest}",
        "layer_digest": f"sha256:{layer_digest}",
        "archive": str(out),
        "archive_sha256": sha256_file(out),
        "archive_bytes": out.stat().st_size,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layer", required=True, help="uncompressed tar of the root filesystem")
    p.add_argument("--name", required=True, help="image reference, e.g. headroom.local/x:tag")
    p.add_argument("--out", required=True, help="archive to write")
    p.add_argument("--created", type=int, required=True, help="timestamp (epoch seconds)")
    p.add_argument("--arch", default="amd64")
    p.add_argument("--entrypoint", help="JSON list")
    p.add_argument("--cmd", help="JSON list")
    p.add_argument("--workdir")
    p.add_argument("--env", action="append", default=[], help="KEY=value (PATH is set)")
    p.add_argument("--label", action="append", default=[], help="key=value")
    p.add_argument("--created-by", default="scripts/images/build.sh")
    args = p.parse_args(argv)
    json.dump(build(args), sys.stdout, indent=2, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

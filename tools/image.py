#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kproxy's container image without a Docker daemon or a registry: a root
file system made by mmdebstrap from Debian 12's packages, holding exactly
the Dockerfile's runtime stage (its packages, read from the Dockerfile; the
stripped binary at /usr/local/bin/kproxy and its kube-proxy link; its
ENTRYPOINT), written as one OCI image archive that `docker load`, `podman
load` and `ctr import` take.

usage: tools/image.py --binary BUILD/kproxy --version VERSION --out FILE.tar
                      [--dockerfile Dockerfile] [--rootfs-tar FILE]

Reproducible: with the same packages in the archive and the same binary,
two runs write the same bytes. SOURCE_DATE_EPOCH (default: the time of the
repository's last commit) is every file's and the image's date; mmdebstrap
honours it, and everything this script writes is sorted and dated by it.

The root file system is debian:12-slim's: minbase (what the debian:12
images hold: Essential and required packages, and apt), /usr merged by
symlinks as debootstrap does (not the usrmerge package, which would bring
perl), and the slim images' dpkg filters (no documentation but copyright
files, no man pages or locales). --rootfs-tar keeps the file system's tar.
"""
import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dockerfile  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE = "bookworm"
# debian:12-slim's dpkg filters (debuerreotype's slimification).
SLIM = ["path-exclude=/usr/share/doc/*", "path-include=/usr/share/doc/*/copyright",
        "path-exclude=/usr/share/man/*", "path-exclude=/usr/share/groff/*", "path-exclude=/usr/share/info/*",
        "path-exclude=/usr/share/lintian/*", "path-exclude=/usr/share/linda/*", "path-exclude=/usr/share/locale/*"]
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
OCI = "application/vnd.oci.image."


def source_date_epoch():
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return int(os.environ["SOURCE_DATE_EPOCH"])
    p = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%ct"], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    return int(p.stdout.strip()) if p.returncode == 0 and p.stdout.strip() else 0


def debian_arch():
    return subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE, text=True,
                          check=True).stdout.strip()


def rootfs(binary, packages, epoch, out):
    """The root file system as a tar at out, by mmdebstrap."""
    with tempfile.TemporaryDirectory(prefix="kproxy-image-") as d:
        stripped = os.path.join(d, "kproxy")
        subprocess.run(["install", "-s", "-m", "0755", binary, stripped], check=True)
        os.utime(stripped, (epoch, epoch))
        args = ["mmdebstrap", "--variant=minbase", "--format=tar",
                "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
                "--include=" + ",".join(packages)]
        args += ["--dpkgopt=" + o for o in SLIM]
        args += ["--customize-hook=copy-in " + stripped + " /usr/local/bin",
                 '--customize-hook=ln -s kproxy "$1/usr/local/bin/kube-proxy"',
                 # The runtime mounts its own: the build machine's stay out.
                 '--customize-hook=: > "$1/etc/resolv.conf"',
                 '--customize-hook=: > "$1/etc/hostname"',
                 SUITE, out]
        env = dict(os.environ, SOURCE_DATE_EPOCH=str(epoch))
        p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            sys.exit("image: mmdebstrap failed (%d):\n%s" % (p.returncode, p.stdout[-4000:]))


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def blob(data, media):
    return {"mediaType": OCI + media, "digest": digest(data), "size": len(data)}


def add(tar, name, data, epoch):
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), epoch, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    tar.addfile(info, io.BytesIO(data))


def archive(layer_tar, version, entrypoint, epoch, out):
    """The OCI image archive at out: an OCI image layout (oci-layout,
    index.json, blobs/), and docker's manifest.json naming the same blobs,
    so loaders of either form take it."""
    with open(layer_tar, "rb") as f:
        raw = f.read()
    layer = gzip.compress(raw, compresslevel=9, mtime=0)
    created = datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    labels = {
        "org.opencontainers.image.title": "kproxy",
        "org.opencontainers.image.description": "Kubernetes service proxy in C, a drop-in replacement for kube-proxy",
        "org.opencontainers.image.version": version,
        "org.opencontainers.image.created": created,
        "org.opencontainers.image.base.name": "debian:12-slim",
        "org.opencontainers.image.licenses": "Apache-2.0",
    }
    config = json.dumps({
        "architecture": debian_arch(), "os": "linux", "created": created,
        "config": {"Entrypoint": entrypoint, "Env": ["PATH=" + PATH], "Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [digest(raw)]},
        "history": [{"created": created, "created_by": "tools/image.py: mmdebstrap minbase %s, the Dockerfile's "
                                                      "runtime stage" % SUITE}],
    }, sort_keys=True, separators=(",", ":")).encode()
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": OCI + "manifest.v1+json",
        "config": blob(config, "config.v1+json"), "layers": [blob(layer, "layer.v1.tar+gzip")],
        "annotations": {"org.opencontainers.image.created": created},
    }, sort_keys=True, separators=(",", ":")).encode()
    index = json.dumps({
        "schemaVersion": 2, "mediaType": OCI + "index.v1+json",
        "manifests": [dict(blob(manifest, "manifest.v1+json"), annotations={
            "io.containerd.image.name": "docker.io/library/kproxy:" + version,
            "org.opencontainers.image.ref.name": version})],
    }, sort_keys=True, separators=(",", ":")).encode()
    path = lambda d: "blobs/sha256/" + d.split(":", 1)[1]  # noqa: E731
    docker = json.dumps([{"Config": path(digest(config)), "RepoTags": ["kproxy:" + version],
                          "Layers": [path(digest(layer))]}], separators=(",", ":")).encode()
    tmp = out + ".tmp"
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, epoch
            tar.addfile(info)
        for data in sorted((config, manifest, layer), key=digest):
            add(tar, path(digest(data)), data, epoch)
        add(tar, "index.json", index, epoch)
        add(tar, "manifest.json", docker, epoch)
        add(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}', epoch)
    os.replace(tmp, out)
    return len(raw), len(layer)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dockerfile", default=os.path.join(ROOT, "Dockerfile"))
    ap.add_argument("--rootfs-tar", help="keep the root file system's tar here (default: a temporary file)")
    a = ap.parse_args()

    stage = dockerfile.runtime(a.dockerfile)
    epoch = source_date_epoch()
    with tempfile.TemporaryDirectory(prefix="kproxy-image-") as d:
        fs = a.rootfs_tar or os.path.join(d, "rootfs.tar")
        rootfs(a.binary, dockerfile.apt_installed(stage), epoch, fs)
        size, compressed = archive(fs, a.version, dockerfile.entrypoint(stage), epoch, a.out)
    print("image: %s (kproxy:%s): %.1f MB of files, %.1f MB compressed" % (a.out, a.version, size / 1e6,
                                                                          compressed / 1e6))


if __name__ == "__main__":
    main()

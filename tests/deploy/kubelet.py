#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Runs one container of an unpacked image as the kubelet (through runc)
would, where no container runtime can: the caller has already entered the
pod's network namespace (the node's, for hostNetwork) and new mount and PID
namespaces (`unshare --mount --pid --fork --propagation private`), so this
process is PID 1 there. It mounts what a runtime mounts (proc, sysfs, a
/dev with the usual devices) and the pod's volumes, chroots into the image's
root file system, keeps only the capabilities the container is granted (the
image's own setpriv), and execs the container's command, which becomes
PID 1 as in a container.

usage: kubelet.py SPEC.json
SPEC: {"rootfs": DIR, "argv": [...], "env": {NAME: VALUE},
       "mounts": [{"source": PATH, "target": PATH, "readonly": BOOL}],
       "capabilities": null (privileged: all) or ["NET_ADMIN", ...],
       "privileged": BOOL,
       "masks": {PATH_IN_CONTAINER: SCRATCH_FILE}}
"masks" binds a scratch file over a machine-wide setting (the conntrack
hash size in /sys/module), so that a test never changes the machine's own.
"""
import json
import os
import subprocess
import sys

DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


def mount(*args):
    subprocess.run(["mount"] + list(args), check=True)


def bind(source, target, readonly=False):
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "a").close()
    mount("--bind", source, target)
    if readonly:
        mount("-o", "remount,bind,ro", target)


def resolve(root, path):
    """path inside the image, its symlinks followed within root (as a
    runtime's securejoin does): /var/run -> /run must not lead to the
    machine's /run."""
    parts, done, hops = [p for p in path.split("/") if p], root, 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            done = os.path.dirname(done) if done != root else root
            continue
        nxt = os.path.join(done, part)
        if os.path.islink(nxt):
            hops += 1
            if hops > 40:
                raise OSError("too many symlinks in " + path)
            target = os.readlink(nxt)
            parts = [p for p in target.split("/") if p] + parts
            if target.startswith("/"):
                done = root
            continue
        done = nxt
    return done


def main():
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    root = spec["rootfs"]
    inside = lambda p: resolve(root, p)  # noqa: E731

    # What runc mounts: a /proc of the new PID namespace, sysfs (read-only
    # unless privileged), a /dev of its own with the usual devices.
    mount("-t", "proc", "proc", inside("/proc"))
    mount("-t", "sysfs", "-o", "rw" if spec.get("privileged") else "ro", "sysfs", inside("/sys"))
    mount("-t", "tmpfs", "-o", "mode=755,nosuid", "tmpfs", inside("/dev"))
    for d in DEVICES:
        bind("/dev/" + d, inside("/dev/" + d))
    for d in ("pts", "shm", "mqueue"):
        os.makedirs(inside("/dev/" + d), exist_ok=True)
    mount("-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "shm", inside("/dev/shm"))
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, inside("/dev/" + name))
    for target, scratch in spec.get("masks", {}).items():
        if os.path.exists(inside(target)):
            bind(scratch, inside(target))
    for m in spec["mounts"]:
        bind(m["source"], inside(m["target"]), m.get("readonly", False))

    os.chroot(root)
    os.chdir("/")
    argv = spec["argv"]
    caps = spec.get("capabilities")
    if caps is not None:
        # Root's uid with only these: the bounding set caps what exec
        # gives root; the inheritable set what its children keep.
        names = ",".join(["-all"] + ["+" + c.lower() for c in caps])
        argv = ["/usr/bin/setpriv", "--inh-caps=" + names, "--bounding-set=" + names, "--"] + argv
    os.execve(argv[0], argv, spec["env"])


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: Apache-2.0
"""The Dockerfile as data: its stages, the packages each installs with
apt-get, and the runtime stage's entry point. One reader for the image
builder (tools/image.py, which takes the runtime packages from here, so the
two images cannot drift apart) and for the tests that check the file.
"""
import json
import re
import shlex


def stages(text):
    """[{"from": image, "name": alias, "lines": [instruction, ...]}], with
    continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#")))
    out = []
    for line in text.splitlines():
        line = " ".join(line.split())
        if not line:
            continue
        m = re.match(r"(?i)^FROM (\S+)(?: AS (\S+))?$", line)
        if m:
            out.append({"from": m.group(1), "name": m.group(2), "lines": []})
        else:
            if not out:
                raise ValueError("instruction before FROM: " + line)
            out[-1]["lines"].append(line)
    return out


def apt_installed(stage):
    """The package names that a stage's `apt-get install` commands name."""
    pkgs = []
    for line in stage["lines"]:
        if not line.upper().startswith("RUN "):
            continue
        for cmd in re.split(r"&&|;", line[4:]):
            words = shlex.split(cmd)
            while words and "=" in words[0]:      # VAR=value apt-get ...
                words.pop(0)
            if words[:2] == ["apt-get", "install"]:
                pkgs += [w for w in words[2:] if not w.startswith("-")]
    return pkgs


def entrypoint(stage):
    """The stage's ENTRYPOINT, exec form, as a list."""
    found = [l for l in stage["lines"] if l.upper().startswith("ENTRYPOINT ")]
    if len(found) != 1:
        raise ValueError("want one ENTRYPOINT in the stage, found %d" % len(found))
    return json.loads(found[0].split(None, 1)[1])


def runtime(path):
    """The last stage of the Dockerfile at path (the image users run)."""
    with open(path) as f:
        return stages(f.read())[-1]

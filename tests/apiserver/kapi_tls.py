# SPDX-License-Identifier: Apache-2.0
"""Certificates (made with the openssl CLI) and the kubeconfig for clients.

Principle of the TLS directory: it outlives one server process.  The CA is
made once and kept, so a test that restarts the server (same --tls-dir) keeps
its clients' trust; the server certificate is remade whenever the wanted
subjectAltNames change.  Generation runs under a lock file, so two servers
started on the same directory at once do not interleave.
"""
import fcntl
import json
import os
import secrets
import ssl
import subprocess
import tempfile

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args, cwd):
    r = subprocess.run(["openssl"] + list(args), cwd=cwd, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (args[0], r.stderr.strip()))


def _san_entry(s):
    s = s.strip()
    if s.startswith(("IP:", "DNS:")):
        return s
    try:
        import ipaddress
        ipaddress.ip_address(s)
        return "IP:" + s
    except ValueError:
        return "DNS:" + s


def ensure_certs(tls_dir, extra_sans=()):
    """Makes tls_dir/{ca,server}.{crt,key} as needed; returns (crt, key, ca) paths."""
    os.makedirs(tls_dir, exist_ok=True)
    d = os.path.abspath(tls_dir)
    sans = ["IP:127.0.0.1", "IP:::1", "DNS:localhost"]
    for s in extra_sans:
        e = _san_entry(s)
        if e not in sans:
            sans.append(e)
    want = ",".join(sans)
    with open(os.path.join(d, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (os.path.exists(os.path.join(d, "ca.crt")) and
                os.path.exists(os.path.join(d, "ca.key"))):
            _openssl("req", "-x509", *EC, "-keyout", "ca.key.tmp", "-out", "ca.crt.tmp",
                     "-days", "3650", "-subj", "/CN=kapi-ca",
                     "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                     "-addext", "subjectKeyIdentifier=hash", cwd=d)
            os.rename(os.path.join(d, "ca.key.tmp"), os.path.join(d, "ca.key"))
            os.rename(os.path.join(d, "ca.crt.tmp"), os.path.join(d, "ca.crt"))
            for f in ("server.crt", "server.sans"):
                if os.path.exists(os.path.join(d, f)):
                    os.unlink(os.path.join(d, f))
        sans_file = os.path.join(d, "server.sans")
        have = open(sans_file).read() if os.path.exists(sans_file) else None
        if have != want or not os.path.exists(os.path.join(d, "server.crt")):
            with open(os.path.join(d, "server.ext"), "w") as f:
                f.write("basicConstraints=critical,CA:FALSE\n"
                        "keyUsage=critical,digitalSignature,keyEncipherment\n"
                        "extendedKeyUsage=serverAuth\n"
                        "subjectKeyIdentifier=hash\n"
                        "authorityKeyIdentifier=keyid\n"
                        "subjectAltName=%s\n" % want)
            _openssl("req", "-new", *EC, "-keyout", "server.key.tmp", "-out", "server.csr",
                     "-subj", "/CN=kapi", cwd=d)
            _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                     "-set_serial", "0x" + secrets.token_hex(16), "-days", "825", "-sha256",
                     "-extfile", "server.ext", "-out", "server.crt.tmp", cwd=d)
            os.rename(os.path.join(d, "server.key.tmp"), os.path.join(d, "server.key"))
            os.rename(os.path.join(d, "server.crt.tmp"), os.path.join(d, "server.crt"))
            with open(sans_file, "w") as f:
                f.write(want)
            os.unlink(os.path.join(d, "server.csr"))
    return os.path.join(d, "server.crt"), os.path.join(d, "server.key"), os.path.join(d, "ca.crt")


def server_context(crt, key):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(crt, key)
    ctx.set_alpn_protocols(["http/1.1"])   # no HTTP/2: clients fall back to 1.1
    return ctx


def atomic_write(path, text):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".kapi-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def write_kubeconfig(path, server_url, ca_path, token):
    """Writes a kubeconfig the way `kubectl config view --raw` prints one;
    scalars are JSON strings, which YAML reads as double-quoted strings."""
    q = json.dumps
    lines = ["apiVersion: v1", "kind: Config", "clusters:", "- cluster:"]
    if ca_path:
        lines.append("    certificate-authority: %s" % q(os.path.abspath(ca_path)))
    lines += ["    server: %s" % q(server_url), "  name: kapi",
              "contexts:", "- context:", "    cluster: kapi", "    namespace: default",
              "    user: kapi", "  name: kapi", "current-context: kapi", "preferences: {}",
              "users:", "- name: kapi"]
    lines += ["  user:", "    token: %s" % q(token)] if token is not None else ["  user: {}"]
    atomic_write(path, "\n".join(lines) + "\n")

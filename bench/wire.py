#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""JSON against protobuf on the wire (issue 35): `make bench-wire`.

usage: bench/wire.py [--changes N] [--repeat R] [--json FILE] BUILD_DIR [SIZES...]

For each size (default 10000 100000) services of 10 endpoints
(bench/gen_cluster.py), the stand-in API server (tests/apiserver/kapi.py,
on loopback, no TLS) serves the state, and in one run, side by side:

 1. bytes of the initial lists (services and EndpointSlices, resourceVersion
    0 as the reflector asks), as sent in each format, plain and gzipped (the
    API server compresses lists over 128 KiB for a client that accepts it,
    as client-go's does);
 2. --changes (default 1000) endpoint changes written to the API while a
    watch of EndpointSlices is open in each format: the bytes each watch
    carried (what one node receives per change);
 3. kproxy's CPU to read those bodies (build/bench-wire: the client's own
    list and watch paths), best of --repeat, to the tree and on into the
    model, and the peak RSS of reading the list;
 4. a fleet on paper: per change, bytes and decode CPU times 5,000 nodes.

No kernel is touched: only loopback and files under a scratch directory.
"""
import argparse
import gzip
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KAPI = os.path.join(ROOT, "tests", "apiserver", "kapi.py")
PROTOBUF = "application/vnd.kubernetes.protobuf"
FLEET = 5000


def start_kapi(tmp, state):
    port_file = os.path.join(tmp, "ports")
    p = subprocess.Popen([sys.executable, KAPI, "--state", state, "--port-file", port_file,
                          "--history-size", "100000", "--exit-with-parent"],
                         stdout=open(os.path.join(tmp, "kapi.log"), "w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while not os.path.exists(port_file):
        if p.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("kapi did not start; see " + os.path.join(tmp, "kapi.log"))
        time.sleep(0.1)     # the state loads first: polling for the port file
    with open(port_file) as f:
        return p, int(f.read().split()[0])


def get(port, path, accept, gz):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    h = {"Accept": accept}
    if gz:
        h["Accept-Encoding"] = "gzip"
    c.request("GET", path, headers=h)
    r = c.getresponse()
    raw = r.read()
    c.close()
    if r.status != 200:
        raise SystemExit("GET %s: %d" % (path, r.status))
    body = gzip.decompress(raw) if r.getheader("Content-Encoding") == "gzip" else raw
    return len(raw), body


class Watch(threading.Thread):
    """One watch, its body kept raw (the chunks' payload) until n events came."""

    def __init__(self, port, path, accept, n):
        super().__init__(daemon=True)
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        self.c.request("GET", path, headers={"Accept": accept})
        self.r = self.c.getresponse()
        self.framed = PROTOBUF in (self.r.getheader("Content-Type") or "")
        self.n, self.body, self.events = n, bytearray(), 0
        self.start()

    def run(self):
        while self.events < self.n:
            if self.framed:
                head = self.r.read(4)
                if len(head) < 4:
                    return
                self.body += head + self.r.read(int.from_bytes(head, "big"))
            else:
                line = self.r.readline()
                if not line:
                    return
                self.body += line
            self.events += 1


def churn(port, n, slices):
    """n endpoint changes: a slice's first address replaced, over the slices."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(n):
        ns, name, addr = slices[i % len(slices)]
        octet = 1 + (i // len(slices)) % 250
        doc = {"endpoints": [{"addresses": [addr.rsplit(".", 1)[0] + ".%d" % octet],
                              "conditions": {"ready": True, "serving": True, "terminating": False},
                              "nodeName": "node-%d" % (i % 50)}]}
        c.request("PATCH", "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices/%s" % (ns, name),
                  body=json.dumps(doc), headers={"Content-Type": "application/merge-patch+json"})
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise SystemExit("PATCH %s/%s: %d" % (ns, name, r.status))
    c.close()


def bench_wire(build, args, repeat):
    out = subprocess.run([os.path.join(build, "bench-wire")] + args + [str(repeat)], capture_output=True,
                         text=True, check=True).stdout
    return {k: (float(v) if k not in ("format",) else v) for k, v in (f.split("=") for f in out.split())}


def one_size(build, n, changes, repeat, tmp):
    state = os.path.join(tmp, "state.json")
    with open(state, "w") as f:
        subprocess.run([sys.executable, os.path.join(HERE, "gen_cluster.py"), "--unique-nodeports", str(n), "10",
                        "node-0"], stdout=f, check=True)
    t0 = time.monotonic()
    kapi, port = start_kapi(tmp, state)
    load_s = time.monotonic() - t0
    row = {"services": n, "endpoints": 10, "changes": changes, "kapi_load_s": round(load_s, 1)}
    try:
        for fmt, accept in (("json", "application/json"), ("protobuf", PROTOBUF + ", */*")):
            for res, path, src in (("services", "/api/v1/services?resourceVersion=0", 0),
                                   ("slices", "/apis/discovery.k8s.io/v1/endpointslices?resourceVersion=0", 1)):
                plain, body = get(port, path, accept, False)
                gz, _ = get(port, path, accept, True)
                f = os.path.join(tmp, "%s-%s" % (res, fmt))
                with open(f, "wb") as out:
                    out.write(body)
                r = bench_wire(build, ["list", f, str(src)], repeat)
                row.update({"%s_%s_bytes" % (fmt, res): plain, "%s_%s_gzip_bytes" % (fmt, res): gz,
                            "%s_%s_tree_cpu_s" % (fmt, res): r["tree_cpu"],
                            "%s_%s_model_cpu_s" % (fmt, res): r["model_cpu"],
                            "%s_%s_peak_rss_mib" % (fmt, res): r["peak_rss_mib"]})
                os.unlink(f)
        # The churn, both watches open on it.
        _, body = get(port, "/apis/discovery.k8s.io/v1/endpointslices?limit=%d" % min(n, 2000),
                      "application/json", False)
        doc = json.loads(body)
        slices = [(o["metadata"]["namespace"], o["metadata"]["name"], o["endpoints"][0]["addresses"][0])
                  for o in doc["items"]]
        rv = doc["metadata"]["resourceVersion"]
        path = "/apis/discovery.k8s.io/v1/endpointslices?watch=1&resourceVersion=%s" % rv
        watches = {"json": Watch(port, path, "application/json", changes),
                   "protobuf": Watch(port, path, PROTOBUF + ", */*", changes)}
        churn(port, changes, slices)
        for fmt, w in watches.items():
            w.join(120)
            if w.events < changes:
                raise SystemExit("the %s watch saw %d of %d events" % (fmt, w.events, changes))
            f = os.path.join(tmp, "watch-" + fmt)
            with open(f, "wb") as out:
                out.write(w.body)
            r = bench_wire(build, ["watch", f], repeat)
            row.update({"%s_watch_bytes" % fmt: len(w.body), "%s_watch_tree_cpu_s" % fmt: r["tree_cpu"],
                        "%s_watch_model_cpu_s" % fmt: r["model_cpu"]})
    finally:
        kapi.kill()
        kapi.wait()
    return row


def ratio(a, b):
    return a / b if b else float("nan")


def table(rows):
    lines = ["| services x 10 endpoints | | JSON | protobuf | protobuf / JSON |", "|---|---|---:|---:|---:|"]
    for r in rows:
        n = "%dk" % (r["services"] // 1000)

        def add(what, j, p, fmt):
            lines.append("| %s | %s | %s | %s | %.2f |" % (n, what, fmt(j), fmt(p), ratio(p, j)))
        mb = lambda v: "%.1f MB" % (v / 1e6)
        ms = lambda v: "%.0f ms" % (v * 1e3)
        for res in ("services", "slices"):
            add("%s list, bytes" % res, r["json_%s_bytes" % res], r["protobuf_%s_bytes" % res], mb)
            add("%s list, gzipped" % res, r["json_%s_gzip_bytes" % res], r["protobuf_%s_gzip_bytes" % res], mb)
            add("%s list, CPU to tree" % res, r["json_%s_tree_cpu_s" % res], r["protobuf_%s_tree_cpu_s" % res], ms)
            add("%s list, CPU to model" % res, r["json_%s_model_cpu_s" % res], r["protobuf_%s_model_cpu_s" % res],
                ms)
            add("%s list, peak RSS" % res, r["json_%s_peak_rss_mib" % res], r["protobuf_%s_peak_rss_mib" % res],
                lambda v: "%.0f MiB" % v)
        c = r["changes"]
        add("per change, watch bytes", r["json_watch_bytes"] / c, r["protobuf_watch_bytes"] / c,
            lambda v: "%.0f B" % v)
        add("per change, CPU to tree", r["json_watch_tree_cpu_s"] / c, r["protobuf_watch_tree_cpu_s"] / c,
            lambda v: "%.1f us" % (v * 1e6))
        add("per change, CPU to model", r["json_watch_model_cpu_s"] / c, r["protobuf_watch_model_cpu_s"] / c,
            lambda v: "%.1f us" % (v * 1e6))
        add("per change x %d nodes, bytes" % FLEET, r["json_watch_bytes"] / c * FLEET,
            r["protobuf_watch_bytes"] / c * FLEET, mb)
        add("per change x %d nodes, CPU to model" % FLEET, r["json_watch_model_cpu_s"] / c * FLEET,
            r["protobuf_watch_model_cpu_s"] / c * FLEET, ms)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--changes", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("build")
    ap.add_argument("sizes", nargs="*", type=int, default=[10000, 100000])
    a = ap.parse_args()
    rows = []
    for n in a.sizes:
        tmp = tempfile.mkdtemp(prefix="kproxy-wire-")
        try:
            rows.append(one_size(os.path.abspath(a.build), n, a.changes, a.repeat, tmp))
        finally:
            shutil.rmtree(tmp, True)
        print(json.dumps(rows[-1]), file=sys.stderr)
    print(table(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

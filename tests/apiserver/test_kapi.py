# SPDX-License-Identifier: Apache-2.0
"""Tests of kapi, the stand-in API server: the protocol over TLS with a
token, faults, restarts, and the real kubectl against it.

Run from the project root:  python3 -m unittest tests/apiserver/test_kapi.py

Every server listens on 127.0.0.1 with port 0; tests wait for its port file
and for stream data with deadlines, never for fixed sleeps.  Servers are
stopped in class cleanups, and started with --exit-with-parent, so none
outlives the test run.
"""
import email.utils
import gzip
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
KAPI = os.path.join(HERE, "kapi.py")
TOKEN = "kapi-test-token"
KUBE_PROXY_SELECTOR = "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"


def service(name, ns="default", labels=None, port=80, cluster_ip=None):
    spec = {"selector": {"app": name}, "ports": [{"name": "http", "port": port,
                                                  "targetPort": 8080}]}
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    md = {"name": name, "namespace": ns}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Service", "metadata": md, "spec": spec}


STATE = {
    "kind": "List", "apiVersion": "v1", "items": [
        service("web", labels={"app": "web", "tier": "front"}, cluster_ip="10.96.1.1"),
        service("db", labels={"app": "db", "tier": "back"}, cluster_ip="10.96.1.2"),
        service("headless", labels={"service.kubernetes.io/headless": ""}),
        service("other-proxy", labels={"service.kubernetes.io/service-proxy-name": "x"}),
        service("sys", ns="kube-system", labels={"app": "sys"}),
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "web-abc", "namespace": "default",
                      "labels": {"kubernetes.io/service-name": "web"}},
         "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
         "endpoints": [{"addresses": ["10.1.0.5"], "conditions": {"ready": True}}]},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}},
    ]}

STATE_YAML = """\
# multi-document YAML, as for kubectl apply -f
---
apiVersion: v1
kind: Service
metadata:
  name: yaml-svc
  namespace: yaml
  creationTimestamp: 2025-01-01T00:00:00Z
spec:
  clusterIP: 10.96.2.2
  ports:
  - port: 53
    protocol: UDP
---
apiVersion: v1
kind: Node
metadata:
  name: yaml-node
"""


class WatchStream:
    """A watch read off the socket by hand, so a test can tell a clean end
    (terminating chunk) from a cut connection, and wait for data with a
    deadline without wrecking the stream (http.client cannot, after a timeout)."""

    def __init__(self, kapi, path, timeout=5.0):
        raw = socket.create_connection(("127.0.0.1", kapi.port), timeout=timeout)
        self.sock = kapi.ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                           "Accept: application/json\r\nUser-Agent: test-kapi\r\n\r\n" %
                           (path, TOKEN)).encode())
        self.buf = b""
        self.data = b""
        self.ended = False
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in self.buf:
            self._recv(deadline)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {k.lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        if self.status != 200:
            n = int(self.headers.get("content-length", 0))
            while len(self.buf) < n:
                self._recv(deadline)
            self.error = json.loads(self.buf[:n])

    def _recv(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no data before the deadline")
        self.sock.settimeout(left)
        try:
            d = self.sock.recv(65536)
        except socket.timeout:
            raise TimeoutError("no data before the deadline")
        except (ConnectionError, ssl.SSLError) as e:
            raise EOFError("connection cut: %s" % e)
        if not d:
            raise EOFError("connection closed without the terminating chunk")
        self.buf += d

    def _chunk(self, deadline):
        while b"\r\n" not in self.buf:
            self._recv(deadline)
        size_line, _ = self.buf.split(b"\r\n", 1)
        size = int(size_line.split(b";")[0], 16)
        start = len(size_line) + 2
        while len(self.buf) < start + size + 2:
            self._recv(deadline)
        if size == 0:
            self.ended = True
        self.data += self.buf[start:start + size]
        self.buf = self.buf[start + size + 2:]

    def next(self, timeout=5.0):
        """The next event; None after a clean end; EOFError if cut; TimeoutError."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.data:
            if self.ended:
                return None
            self._chunk(deadline)
        line, self.data = self.data.split(b"\n", 1)
        return json.loads(line)

    def next_non_bookmark(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            ev = self.next(max(0.01, deadline - time.monotonic()))
            if ev is None or ev["type"] != "BOOKMARK":
                return ev

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Kapi:
    """One server process."""

    def __init__(self, workdir, *extra, state=()):
        self.workdir = workdir
        self.tls = os.path.join(workdir, "tls")
        self.port_file = os.path.join(workdir, "ports")
        if os.path.exists(self.port_file):
            os.unlink(self.port_file)
        argv = [sys.executable, KAPI, "--listen", "127.0.0.1:0", "--tls-dir", self.tls,
                "--token", TOKEN, "--port-file", self.port_file,
                "--control-listen", "127.0.0.1:0", "--exit-with-parent"]
        for s in state:
            argv += ["--state", s]
        self.log = open(os.path.join(workdir, "kapi.log"), "ab")
        self.proc = subprocess.Popen(argv + list(extra), stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        deadline = time.monotonic() + 20
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None:
                raise RuntimeError("kapi exited with %d; see %s" % (self.proc.returncode,
                                                                    self.log.name))
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("kapi did not write its port file")
            time.sleep(0.02)   # polling for the port file, not waiting for readiness
        with open(self.port_file) as f:
            self.port, self.cport = [int(l) for l in f.read().split()]
        self.ctx = ssl.create_default_context(cafile=os.path.join(self.tls, "ca.crt"))
        self.kubeconfig = os.path.join(self.tls, "kubeconfig")

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def check_log(self):
        """The server must not have logged a traceback (an unhandled error)."""
        with open(self.log.name, errors="replace") as f:
            text = f.read()
        if "Traceback" in text:
            raise AssertionError("kapi logged an error:\n" + text[-3000:])

    def request(self, method, path, body=None, ctype="application/json", token=TOKEN,
                headers=None):
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=10)
        try:
            h = dict(headers or {})
            if token is not None:
                h["Authorization"] = "Bearer " + token
            if body is not None:
                body = body if isinstance(body, bytes) else json.dumps(body).encode()
                h["Content-Type"] = ctype
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            raw = r.read()
            if r.getheader("Content-Encoding") == "gzip":
                raw = gzip.decompress(raw)
            doc = json.loads(raw) if raw and "json" in r.getheader("Content-Type", "") else raw
            return r.status, r, doc
        finally:
            conn.close()

    def ok(self, method, path, body=None, ctype="application/json", expect=(200, 201)):
        status, _, doc = self.request(method, path, body, ctype)
        if status not in expect:
            raise AssertionError("%s %s: %d %s" % (method, path, status, doc))
        return doc

    def control(self, path, body=None, timeout=15):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.cport, path), data=data,
                                     method="POST" if data is not None else "GET")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            return dict(json.loads(e.read()), httpStatus=e.code)

    def rv(self):
        return int(self.control("/state")["resourceVersion"])

    def watch(self, path, timeout=5.0):
        w = WatchStream(self, path, timeout)
        return w


class KapiCase(unittest.TestCase):
    extra_args = ()

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kapi-test-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, True)
        state = os.path.join(cls.tmp, "state.json")
        with open(state, "w") as f:
            json.dump(STATE, f)
        cls.k = Kapi(cls.tmp, *cls.extra_args, state=[state])
        cls.addClassCleanup(cls.k.check_log)   # cleanups run last-first: after stop()
        cls.addClassCleanup(cls.k.stop)

    def setUp(self):
        self.streams = []
        self.addCleanup(self._cleanup)

    def _cleanup(self):
        for s in self.streams:
            s.close()
        self.k.control("/fault/clear", {})

    def watch(self, path, timeout=5.0):
        w = self.k.watch(path, timeout)
        self.streams.append(w)
        return w

    def create(self, ns, name, labels=None, port=80):
        return self.k.ok("POST", "/api/v1/namespaces/%s/services" % ns,
                         service(name, ns, labels, port))


class ApiTest(KapiCase):
    extra_args = ("--bookmark-interval", "0.5")

    def test_auth(self):
        status, _, doc = self.k.request("GET", "/api/v1/services", token=None)
        self.assertEqual(status, 401)
        self.assertEqual((doc["kind"], doc["reason"], doc["code"]), ("Status", "Unauthorized", 401))
        self.assertEqual(self.k.request("GET", "/api/v1/services", token="wrong")[0], 401)
        self.assertEqual(self.k.request("GET", "/api/v1/services")[0], 200)
        self.assertEqual(self.k.request("GET", "/healthz", token=None)[0], 200)

    def test_list_shapes(self):
        doc = self.k.ok("GET", "/api/v1/services")
        self.assertEqual((doc["kind"], doc["apiVersion"]), ("ServiceList", "v1"))
        self.assertTrue(doc["metadata"]["resourceVersion"].isdigit())
        web = [s for s in doc["items"] if s["metadata"]["name"] == "web"][0]
        for f in ("resourceVersion", "uid", "creationTimestamp", "generation"):
            self.assertIn(f, web["metadata"])
        self.assertEqual((web["kind"], web["apiVersion"]), ("Service", "v1"))
        doc = self.k.ok("GET", "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices")
        self.assertEqual(doc["kind"], "EndpointSliceList")
        self.assertEqual(doc["items"][0]["apiVersion"], "discovery.k8s.io/v1")
        self.assertEqual(self.k.ok("GET", "/api/v1/nodes/node-1")["kind"], "Node")
        status, _, doc = self.k.request("GET", "/api/v1/namespaces/default/services/nope")
        self.assertEqual((status, doc["reason"]), (404, "NotFound"))

    def test_pagination(self):
        for i in range(7):
            self.create("page", "svc-%d" % i)
        seq = self.k.control("/state")["requests"]
        first = self.k.ok("GET", "/api/v1/namespaces/page/services?limit=3")
        names = [s["metadata"]["name"] for s in first["items"]]
        self.assertEqual(names, ["svc-0", "svc-1", "svc-2"])
        self.assertEqual(first["metadata"]["remainingItemCount"], 4)
        snap = first["metadata"]["resourceVersion"]
        # Changes after the first page do not show in the later ones.
        self.k.ok("DELETE", "/api/v1/namespaces/page/services/svc-4")
        self.create("page", "svc-9")
        cont = first["metadata"]["continue"]
        remaining = []
        while cont:
            page = self.k.ok("GET", "/api/v1/namespaces/page/services?limit=3&continue=" +
                             urllib.parse.quote(cont))
            self.assertEqual(page["metadata"]["resourceVersion"], snap)
            names += [s["metadata"]["name"] for s in page["items"]]
            cont = page["metadata"].get("continue")
            remaining.append(page["metadata"].get("remainingItemCount"))
        self.assertEqual(names, ["svc-%d" % i for i in range(7)])
        self.assertEqual(remaining, [1, None])
        # Across namespaces, in pages of 2: the same objects as one list.
        whole = self.k.ok("GET", "/api/v1/services")
        keys, cont = [], ""
        while True:
            page = self.k.ok("GET", "/api/v1/services?limit=2" +
                             ("&continue=" + urllib.parse.quote(cont) if cont else ""))
            keys += [(s["metadata"]["namespace"], s["metadata"]["name"]) for s in page["items"]]
            cont = page["metadata"].get("continue")
            if not cont:
                break
            self.assertEqual(page["metadata"]["remainingItemCount"], len(whole["items"]) - len(keys))
        self.assertEqual(keys, [(s["metadata"]["namespace"], s["metadata"]["name"])
                                for s in whole["items"]])
        paths = [r["path"] for r in self.k.control("/requests?since=%d" % seq)["requests"]]
        self.assertTrue(any("limit=3" in p and "continue=" in p for p in paths))
        # A continue token whose snapshot has been compacted away: 410.
        self.k.control("/fault/compact", {})
        status, _, doc = self.k.request("GET", "/api/v1/namespaces/page/services?limit=3&"
                                        "continue=" + urllib.parse.quote(first["metadata"]
                                                                         ["continue"]))
        self.assertEqual((status, doc["reason"], doc["code"]), (410, "Expired", 410))
        self.assertIn("continue", doc["metadata"])

    def test_exact_rv_list(self):
        self.create("exact", "a")
        rv = self.k.rv()
        self.create("exact", "b")
        old = self.k.ok("GET", "/api/v1/namespaces/exact/services?resourceVersion=%d&"
                               "resourceVersionMatch=Exact" % rv)
        self.assertEqual([s["metadata"]["name"] for s in old["items"]], ["a"])
        self.assertEqual(old["metadata"]["resourceVersion"], str(rv))
        self.k.control("/fault/compact", {})
        status, _, doc = self.k.request("GET", "/api/v1/namespaces/exact/services?"
                                               "resourceVersion=%d&resourceVersionMatch=Exact" % rv)
        self.assertEqual((status, doc["kind"], doc["reason"]), (410, "Status", "Expired"))

    def test_selectors(self):
        def names(q):
            doc = self.k.ok("GET", "/api/v1/services?" + urllib.parse.urlencode(q))
            return sorted(s["metadata"]["name"] for s in doc["items"])
        self.assertNotIn("headless", names({"labelSelector": KUBE_PROXY_SELECTOR}))
        self.assertNotIn("other-proxy", names({"labelSelector": KUBE_PROXY_SELECTOR}))
        self.assertIn("web", names({"labelSelector": KUBE_PROXY_SELECTOR}))
        self.assertEqual(names({"labelSelector": "app=web"}), ["web"])
        self.assertEqual(names({"labelSelector": "tier"}), ["db", "web"])
        self.assertEqual(names({"labelSelector": "tier,tier!=front"}), ["db"])
        self.assertEqual(names({"labelSelector": "tier in (front,back),app notin (db)"}), ["web"])
        self.assertEqual(names({"fieldSelector": "metadata.name=db"}), ["db"])
        self.assertEqual(names({"fieldSelector": "metadata.namespace=kube-system"}), ["sys"])
        self.assertEqual(names({"fieldSelector": "metadata.namespace!=default",
                                "labelSelector": "app in (web,db,sys)"}), ["sys"])
        status, _, doc = self.k.request("GET", "/api/v1/services?labelSelector=a%3D%3D%3D")
        self.assertEqual((status, doc["reason"]), (400, "BadRequest"))
        status, _, _ = self.k.request("GET", "/api/v1/services?fieldSelector=spec.type%3Dx")
        self.assertEqual(status, 400)

    def test_watch_replay_and_initial(self):
        rv = self.k.rv()
        self.create("replay", "r1")
        self.k.ok("PATCH", "/api/v1/namespaces/replay/services/r1",
                  {"metadata": {"labels": {"x": "1"}}}, "application/merge-patch+json")
        self.k.ok("DELETE", "/api/v1/namespaces/replay/services/r1")
        w = self.watch("/api/v1/namespaces/replay/services?watch=1&resourceVersion=%d" % rv)
        evs = [w.next() for _ in range(3)]
        self.assertEqual([e["type"] for e in evs], ["ADDED", "MODIFIED", "DELETED"])
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
        self.assertEqual(rvs, sorted(rvs))
        self.assertEqual(evs[1]["object"]["metadata"]["labels"]["x"], "1")
        # No resourceVersion: the current state as ADDED events first.
        w2 = self.watch("/api/v1/namespaces/default/services?watch=true&timeoutSeconds=1")
        got = set()
        while True:
            ev = w2.next(5)
            if ev is None:
                break
            self.assertEqual(ev["type"], "ADDED")
            got.add(ev["object"]["metadata"]["name"])
        self.assertEqual(got, {"web", "db", "headless", "other-proxy"})
        # The watch-list form: initial events, then a bookmark marking their end.
        w3 = self.watch("/api/v1/namespaces/default/services?watch=1&sendInitialEvents=true&"
                        "resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
        evs = [w3.next() for _ in range(5)]
        self.assertEqual([e["type"] for e in evs], ["ADDED"] * 4 + ["BOOKMARK"])
        self.assertEqual(evs[4]["object"]["metadata"]["annotations"],
                         {"k8s.io/initial-events-end": "true"})

    def test_bookmarks_and_timeout(self):
        rv = self.k.rv()
        w = self.watch("/api/v1/services?watch=1&allowWatchBookmarks=true&resourceVersion=%d&"
                       "timeoutSeconds=2" % rv)
        ev = w.next(3)
        self.assertEqual(ev["type"], "BOOKMARK")
        self.assertEqual(set(ev["object"]), {"kind", "apiVersion", "metadata"})
        self.assertEqual(ev["object"]["metadata"], {"resourceVersion": str(rv)})
        t0 = time.monotonic()
        while ev is not None:      # bookmarks, then the clean end at timeoutSeconds
            ev = w.next(4)
        self.assertLess(time.monotonic() - t0, 3.5)
        # Without allowWatchBookmarks there are none.
        w2 = self.watch("/api/v1/services?watch=1&resourceVersion=%d&timeoutSeconds=1" % rv)
        self.assertIsNone(w2.next(3))

    def test_compacted_rv_gives_410(self):
        rv = self.k.rv()
        self.create("compact", "c1")
        self.k.control("/fault/compact", {})
        w = self.watch("/api/v1/services?watch=1&resourceVersion=%d" % rv)
        self.assertEqual(w.status, 200)
        ev = w.next()
        self.assertEqual(ev["type"], "ERROR")
        self.assertEqual((ev["object"]["kind"], ev["object"]["code"], ev["object"]["reason"]),
                         ("Status", 410, "Expired"))
        self.assertIsNone(w.next())
        # The current resourceVersion is still fine.
        w2 = self.watch("/api/v1/services?watch=1&resourceVersion=%d&timeoutSeconds=1" %
                        self.k.rv())
        self.assertIsNone(w2.next(3))

    def test_rv0_list_is_whole(self):
        # resourceVersion=0 is the watch cache's: it ignores limit (the
        # reflector's first list). Other lists honour it.
        for i in range(4):
            self.create("zero", "z-%d" % i)
        doc = self.k.ok("GET", "/api/v1/namespaces/zero/services?resourceVersion=0&limit=2")
        self.assertEqual(len(doc["items"]), 4)
        self.assertNotIn("continue", doc["metadata"])
        doc = self.k.ok("GET", "/api/v1/namespaces/zero/services?limit=2")
        self.assertEqual(len(doc["items"]), 2)
        self.assertIn("continue", doc["metadata"])

    def test_watch_unreadable_rv_is_invalid(self):
        # A version the server cannot parse: 422 Invalid, as kube-apiserver
        # answers a watch (its storage's InvalidError); a list says 400.
        status, _, doc = self.k.request("GET", "/api/v1/services?watch=1&resourceVersion=abc")
        self.assertEqual((status, doc["reason"], doc["code"]), (422, "Invalid", 422))
        self.assertIn('resourceVersion: Invalid value: "abc"', doc["message"])
        status, _, doc = self.k.request("GET", "/api/v1/services?resourceVersion=abc")
        self.assertEqual(status, 400)

    def test_fault_inject(self):
        # Any line to the open watches of a resource: a bookmark whose
        # resourceVersion no server would send, an event of a given size.
        w = self.watch("/api/v1/services?watch=1&resourceVersion=%d" % self.k.rv())
        wn = self.watch("/api/v1/nodes?watch=1&resourceVersion=%d" % self.k.rv())
        self.assertTrue(self.k.control("/wait?watches=2&timeout=5")["ok"])
        bm = {"type": "BOOKMARK", "object": {"kind": "Service", "apiVersion": "v1",
                                             "metadata": {"resourceVersion": "not-a-number"}}}
        r = self.k.control("/fault/inject", {"resource": "services", "event": bm})
        self.assertEqual(r["watches"], 1)
        self.assertEqual(w.next(), bm)
        big = {"type": "MODIFIED", "object": {"kind": "Service", "metadata": {"name": "big"}}}
        r = self.k.control("/fault/inject", {"event": big, "padTo": 200000})
        self.assertEqual(r["bytes"], 200000)
        for stream in (w, wn):
            ev = stream.next()
            self.assertEqual(ev["object"]["metadata"]["name"], "big")
            self.assertEqual(len(json.dumps(ev, separators=(",", ":"))) + 1, 200000)
        # A watch opened later does not get what was sent before.
        w2 = self.watch("/api/v1/services?watch=1&resourceVersion=%d&timeoutSeconds=1" %
                        self.k.rv())
        self.assertIsNone(w2.next(3))

    def test_future_rv(self):
        status, _, doc = self.k.request("GET", "/api/v1/services?resourceVersion=%d" %
                                        (self.k.rv() + 1000))
        self.assertEqual((status, doc["reason"]), (504, "Timeout"))
        self.assertEqual(doc["details"]["causes"][0]["reason"], "ResourceVersionTooLarge")

    def test_label_selector_watch_follows_labels(self):
        self.create("sel", "s1", labels={"app": "x"})
        self.create("sel", "s2", labels={"app": "y"})
        rv = self.k.rv()
        w = self.watch("/api/v1/namespaces/sel/services?watch=1&labelSelector=app%%3Dx&"
                       "resourceVersion=%d" % rv)
        self.k.ok("PATCH", "/api/v1/namespaces/sel/services/s1",
                  {"metadata": {"labels": {"app": None}}}, "application/merge-patch+json")
        ev = w.next()
        self.assertEqual(ev["type"], "DELETED")
        self.assertEqual(ev["object"]["metadata"]["name"], "s1")
        self.assertEqual(int(ev["object"]["metadata"]["resourceVersion"]), rv + 1)
        self.assertEqual(ev["object"]["metadata"]["labels"], {"app": "x"})  # the old content
        self.k.ok("PATCH", "/api/v1/namespaces/sel/services/s2",
                  [{"op": "replace", "path": "/metadata/labels/app", "value": "x"}],
                  "application/json-patch+json")
        ev = w.next()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "s2"))
        self.k.ok("PATCH", "/api/v1/namespaces/sel/services/s2",
                  {"metadata": {"annotations": {"a": "b"}}},
                  "application/strategic-merge-patch+json")
        self.assertEqual(w.next()["type"], "MODIFIED")

    def test_node_ports(self):
        def make(name, typ, **extra):
            doc = service(name, "np")
            doc["spec"].update(type=typ, **extra)
            return self.k.ok("POST", "/api/v1/namespaces/np/services", doc)["spec"]["ports"][0]
        self.assertTrue(30000 <= make("np1", "NodePort")["nodePort"] <= 32767)
        self.assertTrue(30000 <= make("lb1", "LoadBalancer")["nodePort"] <= 32767)
        # As the real server: no node port unless asked for, or given.
        self.assertNotIn("nodePort", make("lb2", "LoadBalancer", allocateLoadBalancerNodePorts=False))
        doc = service("lb3", "np")
        doc["spec"].update(type="LoadBalancer", allocateLoadBalancerNodePorts=False)
        doc["spec"]["ports"][0]["nodePort"] = 31999
        got = self.k.ok("POST", "/api/v1/namespaces/np/services", doc)["spec"]["ports"][0]
        self.assertEqual(got["nodePort"], 31999)

    def test_writes(self):
        obj = self.create("wr", "w1")
        self.assertEqual(obj["spec"]["clusterIP"][:3], "10.")   # allocated
        status, _, doc = self.k.request("POST", "/api/v1/namespaces/wr/services",
                                        service("w1", "wr"))
        self.assertEqual((status, doc["reason"]), (409, "AlreadyExists"))
        stale = dict(obj, metadata=dict(obj["metadata"]))
        self.k.ok("PATCH", "/api/v1/namespaces/wr/services/w1", {"metadata": {"labels":
                                                                              {"k": "v"}}},
                  "application/merge-patch+json")
        status, _, doc = self.k.request("PUT", "/api/v1/namespaces/wr/services/w1", stale)
        self.assertEqual((status, doc["reason"]), (409, "Conflict"))
        cur = self.k.ok("GET", "/api/v1/namespaces/wr/services/w1")
        cur["spec"]["ports"][0]["port"] = 81
        new = self.k.ok("PUT", "/api/v1/namespaces/wr/services/w1", cur)
        self.assertEqual(new["metadata"]["generation"], 2)
        self.assertGreater(int(new["metadata"]["resourceVersion"]),
                           int(cur["metadata"]["resourceVersion"]))
        status, _, _ = self.k.request("PATCH", "/api/v1/namespaces/wr/services/w1", {},
                                      "application/apply-patch+yaml")
        self.assertEqual(status, 415)
        gone = self.k.ok("DELETE", "/api/v1/namespaces/wr/services/w1")
        self.assertEqual(gone["metadata"]["name"], "w1")
        status, _, doc = self.k.request("DELETE", "/api/v1/namespaces/wr/services/w1")
        self.assertEqual((status, doc["kind"], doc["reason"]), (404, "Status", "NotFound"))
        ns = self.k.ok("GET", "/api/v1/namespaces/wr")   # auto-created
        self.assertEqual(ns["status"]["phase"], "Active")

    def test_fault_drop_watches(self):
        rv = self.k.rv()
        ws = [self.watch("/api/v1/services?watch=1&resourceVersion=%d" % rv),
              self.watch("/apis/discovery.k8s.io/v1/endpointslices?watch=1&resourceVersion=%d"
                         % rv)]
        self.assertTrue(self.k.control("/wait?watches=2&timeout=5")["ok"])
        self.create("drop", "d1")
        self.assertEqual(ws[0].next()["type"], "ADDED")   # mid-stream
        self.assertEqual(self.k.control("/fault/drop-watches", {})["dropped"], 2)
        for w in ws:
            with self.assertRaises(EOFError):
                w.next()
        w = self.watch("/api/v1/services?watch=1&resourceVersion=%d" % self.k.rv())
        self.k.control("/wait?watches=1&resource=services&timeout=5")
        self.k.control("/fault/drop-watches", {"mode": "partial"})
        with self.assertRaises(EOFError):
            w.next()

    def test_fault_errors(self):
        self.k.control("/fault/error", {"count": 2, "code": 500})
        for _ in range(2):
            status, _, doc = self.k.request("GET", "/api/v1/services")
            self.assertEqual((status, doc["kind"], doc["code"]), (500, "Status", 500))
        self.assertEqual(self.k.request("GET", "/api/v1/services")[0], 200)
        self.k.control("/fault/error", {"count": 1, "code": 429})
        status, resp, _ = self.k.request("GET", "/api/v1/services")
        self.assertEqual((status, resp.getheader("Retry-After")), (429, "1"))
        # Retry-After as an HTTP date, on a 503.
        self.k.control("/fault/error", {"count": 1, "code": 503, "retryAfterDateIn": 3})
        t = time.time()
        status, resp, _ = self.k.request("GET", "/api/v1/services")
        self.assertEqual(status, 503)
        at = email.utils.parsedate_to_datetime(resp.getheader("Retry-After")).timestamp()
        self.assertTrue(t + 1 <= at <= t + 4, (t, at))
        # The request log marks an injected error, with the Retry-After sent.
        last = self.k.control("/requests")["requests"][-1]
        self.assertEqual((last["status"], last.get("fault"), last.get("retryAfter")),
                         (503, True, resp.getheader("Retry-After")))
        # Only requests of a user agent; the state says when the last came.
        self.k.control("/fault/error", {"count": 1, "code": 500, "agent": "kproxy/"})
        self.assertEqual(self.k.request("GET", "/api/v1/services")[0], 200)
        before = self.k.control("/state")["faults"]["errorsServed"]
        status, _, _ = self.k.request("GET", "/api/v1/services", headers={"User-Agent": "kproxy/1"})
        self.assertEqual(status, 500)
        st = self.k.control("/state")["faults"]
        self.assertEqual(st["errorsServed"], before + 1)
        self.assertLessEqual(abs(st["lastErrorAt"] - time.time()), 5)
        # A window: every matching request fails until it ends. It opens
        # when the server takes the control request, so t0 is read first.
        t0 = time.monotonic()
        self.k.control("/fault/error", {"seconds": 0.6, "code": 500, "match": "/nodes"})
        self.assertEqual(self.k.request("GET", "/api/v1/services")[0], 200)
        while time.monotonic() - t0 < 0.4:
            self.assertEqual(self.k.request("GET", "/api/v1/nodes")[0], 500)
        deadline = time.monotonic() + 5
        while self.k.request("GET", "/api/v1/nodes")[0] == 500:
            self.assertLess(time.monotonic(), deadline, "the window never ended")
        self.assertGreaterEqual(time.monotonic() - t0, 0.6)

    def test_fault_stall(self):
        w = self.watch("/api/v1/namespaces/stall/services?watch=1&allowWatchBookmarks=true&"
                       "resourceVersion=%d" % self.k.rv())
        self.assertEqual(w.next(3)["type"], "BOOKMARK")
        self.k.control("/fault/stall", {"seconds": 1.5})
        self.create("stall", "st1")
        with self.assertRaises(TimeoutError):   # nothing, not even bookmarks
            w.next(1.0)
        ev = w.next_non_bookmark(4)   # the same connection carries on
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "st1"))

    def test_discovery(self):
        self.assertEqual(self.k.ok("GET", "/api")["versions"], ["v1"])
        groups = self.k.ok("GET", "/apis")["groups"]
        self.assertIn("discovery.k8s.io", [g["name"] for g in groups])
        res = self.k.ok("GET", "/api/v1")["resources"]
        self.assertEqual({r["name"] for r in res}, {"services", "nodes", "namespaces"})
        self.assertEqual(self.k.request("GET", "/openapi/v2")[0], 404)


PROTOBUF = "application/vnd.kubernetes.protobuf"


def pb_fields(data):
    """[(number, value)] of one protobuf message: varints as ints,
    length-delimited fields as bytes (the only wire types the API uses)."""
    i, out = 0, []

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7f) << shift
            shift += 7
            if b < 0x80:
                return v
    while i < len(data):
        tag = varint()
        if tag & 7 == 0:
            out.append((tag >> 3, varint()))
        elif tag & 7 == 2:
            n = varint()
            out.append((tag >> 3, data[i:i + n]))
            i += n
        else:
            raise ValueError("wire type %d" % (tag & 7))
    return out


def pb_get(data, *path):
    """The values at a path of field numbers (the last one's, every one)."""
    vals = [data]
    for number in path:
        vals = [v for d in vals for n, v in pb_fields(d) if n == number]
    return vals


def unwrap(body):
    """(apiVersion, kind, raw) of a body in the envelope."""
    assert body[:4] == b"k8s\x00", body[:20]
    u = body[4:]
    return (pb_get(u, 1, 1)[0].decode(), pb_get(u, 1, 2)[0].decode(), pb_get(u, 2)[0])


class ProtobufTest(KapiCase):
    """What a client asking for protobuf (client-go's default) gets."""
    extra_args = ("--bookmark-interval", "0.5")
    ASK = {"Accept": PROTOBUF + ", */*"}

    def test_list_and_get(self):
        status, r, body = self.k.request("GET", "/api/v1/services", headers=self.ASK)
        self.assertEqual((status, r.getheader("Content-Type")), (200, PROTOBUF))
        av, kind, raw = unwrap(body)
        self.assertEqual((av, kind), ("v1", "ServiceList"))
        names = sorted(pb_get(raw, 2, 1, 1))
        want = sorted(o["metadata"]["name"].encode() for o in self.k.ok("GET", "/api/v1/services")["items"])
        self.assertEqual(names, want)
        self.assertTrue(pb_get(raw, 1, 2)[0].isdigit())            # ListMeta.resourceVersion
        # ServicePort.targetPort 8080 as IntOrString {type 0, intVal 8080}
        self.assertIn(8080, pb_get(raw, 2, 2, 1, 4, 2))
        status, r, body = self.k.request("GET", "/api/v1/namespaces/default/services/web", headers=self.ASK)
        av, kind, raw = unwrap(body)
        self.assertEqual((kind, pb_get(raw, 2, 3)), ("Service", [b"10.96.1.1"]))
        status, r, body = self.k.request("GET", "/apis/discovery.k8s.io/v1/endpointslices", headers=self.ASK)
        av, kind, raw = unwrap(body)
        self.assertEqual((av, kind), ("discovery.k8s.io/v1", "EndpointSliceList"))
        self.assertEqual(pb_get(raw, 2, 2, 2, 1), [1])              # endpoints[0].conditions.ready

    def test_negotiation(self):
        def ctype(path, accept):
            return self.k.request("GET", path, headers={"Accept": accept})[1].getheader("Content-Type")
        self.assertEqual(ctype("/api/v1/services", "application/json, " + PROTOBUF), "application/json")
        self.assertEqual(ctype("/api/v1/services", PROTOBUF), PROTOBUF)
        # A Table is JSON; a kind without a protobuf form here (as a CRD) is JSON.
        self.assertEqual(ctype("/api/v1/services", "application/json;as=Table;v=v1;g=meta.k8s.io"),
                         "application/json")
        self.assertEqual(ctype("/api/v1/namespaces", PROTOBUF + ", */*"), "application/json")
        # An error is a Status in protobuf.
        status, r, body = self.k.request("GET", "/api/v1/namespaces/default/services/nope", headers=self.ASK)
        av, kind, raw = unwrap(body)
        self.assertEqual((status, kind, pb_get(raw, 6), pb_get(raw, 4)), (404, "Status", [404], [b"NotFound"]))

    def test_watch_frames(self):
        conn = http.client.HTTPSConnection("127.0.0.1", self.k.port, context=self.k.ctx, timeout=10)
        try:
            conn.request("GET", "/api/v1/services?watch=1&allowWatchBookmarks=true",
                         headers=dict(self.ASK, Authorization="Bearer " + TOKEN))
            r = conn.getresponse()
            self.assertEqual(r.getheader("Content-Type"), PROTOBUF + ";stream=watch")
            types, kinds = [], set()
            while "BOOKMARK" not in types:
                n = int.from_bytes(r.read(4), "big")
                ev = r.read(n)
                types.append(pb_get(ev, 1)[0].decode())
                kinds.add(unwrap(pb_get(ev, 2, 1)[0])[1])
            self.assertGreaterEqual(types.count("ADDED"), 5)
            self.assertEqual(kinds, {"Service"})
        finally:
            conn.close()


class JsonOnlyTest(KapiCase):
    """--json-only: a resource answered in JSON whatever is asked."""
    extra_args = ("--json-only", "services")

    def test_json_only(self):
        ask = {"Accept": PROTOBUF + ", */*"}
        self.assertEqual(self.k.request("GET", "/api/v1/services", headers=ask)[1].getheader("Content-Type"),
                         "application/json")
        self.assertEqual(self.k.request("GET", "/api/v1/nodes", headers=ask)[1].getheader("Content-Type"),
                         PROTOBUF)


class ServiceCIDRTest(KapiCase):
    """ServiceCIDRs (networking.k8s.io/v1): the default one a 1.33+ server
    makes from its service range, validation, and an older server's 404."""
    extra_args = ("--service-cidr", "10.96.0.0/16")

    def test_default_and_writes(self):
        path = "/apis/networking.k8s.io/v1/servicecidrs"
        doc = self.k.ok("GET", path)
        self.assertEqual(doc["kind"], "ServiceCIDRList")
        self.assertEqual([(i["metadata"]["name"], i["spec"]["cidrs"]) for i in doc["items"]],
                         [("kubernetes", ["10.96.0.0/16"])])
        w = self.watch(path + "?watch=1&resourceVersion=%s" % doc["metadata"]["resourceVersion"])
        extra = {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "extra"},
                 "spec": {"cidrs": ["10.97.0.0/24", "fd00:97::/112"]}}
        self.k.ok("POST", path, extra)
        ev = w.next_non_bookmark()
        self.assertEqual((ev["type"], ev["object"]["spec"]["cidrs"]), ("ADDED", ["10.97.0.0/24", "fd00:97::/112"]))
        for cidrs, field in ((["10.98.0.1/24"], "spec.cidrs[0]"), (["300.0.0.0/8"], "spec.cidrs[0]"),
                             (["10.98.0.0/24", "10.99.0.0/24"], "spec.cidrs"), ([], "spec.cidrs")):
            bad = dict(extra, metadata={"name": "bad"}, spec={"cidrs": cidrs})
            status, _, doc = self.k.request("POST", path, bad)
            self.assertEqual((status, doc["details"]["causes"][0]["field"]), (422, field), doc)
        changed = dict(extra, spec={"cidrs": ["10.97.1.0/24"]})
        status, _, _ = self.k.request("PUT", path + "/extra", changed)
        self.assertEqual(status, 422)       # immutable
        self.k.ok("DELETE", path + "/extra")
        self.assertEqual(w.next_non_bookmark()["type"], "DELETED")

    def test_older_server(self):
        tmp = tempfile.mkdtemp(prefix="kapi-old-")
        self.addCleanup(shutil.rmtree, tmp, True)
        old = Kapi(tmp, "--disable-resource", "servicecidrs")
        self.addCleanup(old.check_log)
        self.addCleanup(old.stop)
        self.assertEqual(old.request("GET", "/apis/networking.k8s.io/v1/servicecidrs")[0], 404)
        self.assertNotIn("networking.k8s.io", [g["name"] for g in old.ok("GET", "/apis")["groups"]])
        self.assertEqual(old.request("GET", "/api/v1/services")[0], 200)


class NoWatchCacheTest(KapiCase):
    """A server without a watch cache reads resourceVersion=0 lists from
    etcd, in pages (what makes client-go's reflector keep paging)."""
    extra_args = ("--no-watch-cache",)

    def test_rv0_list_in_pages(self):
        for i in range(3):
            self.create("nocache", "n-%d" % i)
        doc = self.k.ok("GET", "/api/v1/namespaces/nocache/services?resourceVersion=0&limit=2")
        self.assertEqual(len(doc["items"]), 2)
        self.assertIn("continue", doc["metadata"])


class RestartTest(unittest.TestCase):
    """A restart keeps the CA and the state; a higher --initial-rv makes the
    old process's resourceVersions too old (410), as a new etcd would."""

    def test_restart(self):
        tmp = tempfile.mkdtemp(prefix="kapi-restart-")
        self.addCleanup(shutil.rmtree, tmp, True)
        state = os.path.join(tmp, "state.yaml")
        with open(state, "w") as f:
            f.write(STATE_YAML)
        a = Kapi(tmp, state=[state])
        self.addCleanup(a.check_log)
        self.addCleanup(a.stop)
        svc = a.ok("GET", "/api/v1/namespaces/yaml/services/yaml-svc")
        self.assertEqual(svc["metadata"]["creationTimestamp"], "2025-01-01T00:00:00Z")
        self.assertEqual(svc["spec"]["ports"][0]["protocol"], "UDP")
        old_rv = a.rv()
        first = a.ok("GET", "/api/v1/namespaces?limit=1")
        w = WatchStream(a, "/api/v1/services?watch=1&resourceVersion=%d" % old_rv)
        self.addCleanup(w.close)
        a.control("/wait?watches=1&timeout=5")
        a.stop(signal.SIGKILL)
        with self.assertRaises(EOFError):
            w.next()
        b = Kapi(tmp, "--initial-rv", str(old_rv + 100), state=[state])
        self.addCleanup(b.check_log)
        self.addCleanup(b.stop)
        b.ctx = a.ctx    # the old CA still verifies the new server
        svc2 = b.ok("GET", "/api/v1/namespaces/yaml/services/yaml-svc")
        self.assertEqual(svc2["metadata"]["uid"], svc["metadata"]["uid"])
        self.assertGreater(int(svc2["metadata"]["resourceVersion"]), old_rv + 100)
        w2 = WatchStream(b, "/api/v1/services?watch=1&resourceVersion=%d" % old_rv)
        self.addCleanup(w2.close)
        ev = w2.next()
        self.assertEqual((ev["type"], ev["object"]["code"]), ("ERROR", 410))
        status, _, doc = b.request("GET", "/api/v1/namespaces?limit=1&continue=" +
                                   urllib.parse.quote(first["metadata"]["continue"]))
        self.assertEqual((status, doc["reason"]), (410, "Expired"))


@unittest.skipUnless(shutil.which("kubectl"), "kubectl is not installed")
class KubectlTest(KapiCase):
    SVC = """\
apiVersion: v1
kind: Service
metadata:
  name: demo
  namespace: kt
  labels:
    app: demo
spec:
  selector:
    app: demo
  ports:
  - name: http
    port: %d
    targetPort: 8080
"""

    def kubectl(self, *args, check=True):
        env = dict(os.environ, KUBECONFIG=self.k.kubeconfig, HOME=self.tmp)
        r = subprocess.run(["kubectl", "--cache-dir", os.path.join(self.tmp, "cache")] +
                           list(args), env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        if check and r.returncode != 0:
            raise AssertionError("kubectl %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
        return r

    def manifest(self, port):
        path = os.path.join(self.tmp, "svc-%d.yaml" % port)
        with open(path, "w") as f:
            f.write(self.SVC % port)
        return path

    def test_kubectl(self):
        v1, v2 = self.manifest(80), self.manifest(8080)
        rv = self.k.rv()
        all_kt = self.watch("/api/v1/namespaces/kt/services?watch=1&allowWatchBookmarks=true&"
                            "resourceVersion=%d" % rv)
        tier = self.watch("/api/v1/services?watch=1&labelSelector=tier%%3Dweb&resourceVersion=%d"
                          % rv)

        self.kubectl("create", "-f", v1, "--validate=false")
        ev = all_kt.next_non_bookmark()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "demo"))

        out = json.loads(self.kubectl("get", "services", "-A", "-o", "json").stdout)
        names = {(i["metadata"]["namespace"], i["metadata"]["name"]) for i in out["items"]}
        self.assertIn(("kt", "demo"), names)
        self.assertIn(("default", "web"), names)
        table = self.kubectl("get", "services", "-n", "kt").stdout
        self.assertIn("demo", table)
        self.assertIn("CLUSTER-IP", table)

        self.kubectl("label", "service", "demo", "-n", "kt", "tier=web")
        ev = all_kt.next_non_bookmark()
        self.assertEqual(ev["type"], "MODIFIED")
        self.assertEqual(ev["object"]["metadata"]["labels"]["tier"], "web")
        self.assertEqual(tier.next()["type"], "ADDED")

        self.kubectl("label", "service", "demo", "-n", "kt", "tier-")
        ev = all_kt.next_non_bookmark()
        self.assertEqual(ev["type"], "MODIFIED")
        self.assertNotIn("tier", ev["object"]["metadata"]["labels"])
        ev = tier.next()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("DELETED", "demo"))

        self.kubectl("replace", "-f", v2, "--validate=false")
        ev = all_kt.next_non_bookmark()
        self.assertEqual(ev["type"], "MODIFIED")
        self.assertEqual(ev["object"]["spec"]["ports"][0]["port"], 8080)
        got = json.loads(self.kubectl("get", "-f", v2, "-o", "json").stdout)
        self.assertEqual(got["spec"]["ports"][0]["port"], 8080)

        self.kubectl("delete", "-f", v2)
        ev = all_kt.next_non_bookmark()
        self.assertEqual((ev["type"], ev["object"]["metadata"]["name"]), ("DELETED", "demo"))
        r = self.kubectl("get", "-f", v2, check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("NotFound", r.stderr)

        paths = [e["path"] for e in self.k.control("/requests")["requests"]]
        self.assertTrue(any(p.startswith("/api/v1/namespaces/kt/services?") and
                            "fieldValidation=Ignore" in p for p in paths))


if __name__ == "__main__":
    unittest.main()

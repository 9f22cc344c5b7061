#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Programming and packet-path benchmark of the kproxy daemon.

usage: bench/programming.py [options] BUILD_DIR [SIZES...]     (as root)

For each N in SIZES (default 1000 10000 20000 50000, services of --endpoints
endpoints each from bench/gen_cluster.py --unique-nodeports), and for a
one-service baseline, in each mode of --modes (default both):

 1. scratch network namespaces kpb<pid>-node (kproxy and the stand-in API
    server tests/apiserver/kapi.py, HTTPS + token, with the generated
    state), kpb<pid>-pod (the endpoint IPs of two services, one TCP server)
    and kpb<pid>-cl (a client pod). Everything is deleted on exit, also on
    failure and Ctrl-C; the root namespace is never touched.
 2. first load: kproxy is started (--iptables-min-sync-period 0, which both
    modes read) and build/bench/nftprobe polls the kernel (single-object
    netlink requests, about 1 ms apart) for the first service's map
    element, then the last service's element, service chain and endpoint
    chains, then (nftables) every service-ips element. Reported with
    kproxy's own "First sync done in N ms" and its CPU time.
 3. one-endpoint changes: a PUT of one EndpointSlice straight to the API
    server replaces one endpoint IP; t0 is when the harness sends it (the
    write commits before the answer, which can arrive after the kernel
    has the change: with 16 shards at 1k a change takes 2 ms); the probe,
    already polling, reports when the new endpoint's chain exists, the
    service chain goes to it and no longer to the old one (and the
    service's map element still goes to the service chain).
    Spread over the N services, every 10th on the last one.
 4. kproxy's RSS after the changes; its CPU per change.
 5. packet path: new TCP connections/s and connect() latency from the
    client pod to the cluster IP of the first and of the last plain
    ClusterIP service (DNAT to one of its endpoints in the pod namespace),
    and straight to a pod IP for reference.
 6. optionally (--default-period-changes), kproxy restarted with the
    default min sync period (1 s) and changes spaced 1.5 s apart.

Results: stdout, and a section of bench/RESULTS.md (replaced if present,
appended otherwise; bench/run.sh writes the file's head). Medians with
min-max; compare within one run, the machine is small and shared.
"""
import argparse
import base64
import ctypes
import datetime
import gzip
import hashlib
import http.client
import json
import os
import platform
import random
import re
import shutil
import shlex
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOKEN = "kproxy-bench-token-0123456789"
NODE = "node-0"
NODE_IP = "192.168.0.2"
CLUSTER_CIDR = "10.128.0.0/9"
GW = "10.128.0.1"            # the node's address on every pod veth, as netlab does
CLIENT_IP = "10.128.0.100"   # in node-0's pod CIDR (gen_cluster: 10.128.0.0/24)
NEW_EP_BASE = (10 << 24) | (200 << 16)   # replacement endpoint IPs: 10.200.0.0 up, unused by gen_cluster
CLONE_NEWNET = 0x40000000
SECTION = "## Programming latency and packet path"


CONTENT_TYPE = None    # --content-type

def log(*a):
    print(*a, flush=True)


class BenchError(Exception):
    pass


class Interrupted(BaseException):
    pass


def _on_signal(signum, frame):
    raise Interrupted("signal %d" % signum)


# --- names, as kproxy (and upstream) derive them ---------------------------

def b32(s, n):
    return base64.b32encode(hashlib.sha256(s.encode()).digest()).decode()[:n]


def nft_body(base):
    """tests/golden-nft/nftname.py: the hash-prefixed name body."""
    s = b32(base, 8) + "-" + base
    return s[:237] + "..." if len(s) > 240 else s


class Names:
    """Chain names of one service port (TCP, port name "http") and its endpoints."""

    def __init__(self, mode, ns, name, port_name="http", target_port=8080):
        self.mode, self.ns, self.name, self.pn, self.tp = mode, ns, name, port_name, target_port

    def service(self):
        if self.mode == "nftables":
            return "service-" + nft_body("%s/%s/tcp/%s" % (self.ns, self.name, self.pn))
        return "KUBE-SVC-" + b32("%s/%s:%stcp" % (self.ns, self.name, self.pn), 16)

    def endpoint(self, ip):
        if self.mode == "nftables":
            return "endpoint-" + nft_body("%s/%s/tcp/%s__%s/%d" % (self.ns, self.name, self.pn, ip, self.tp))
        return "KUBE-SEP-" + b32("%s/%s:%stcp%s:%d" % (self.ns, self.name, self.pn, ip, self.tp), 16)

    def ep_prefix(self):
        return "endpoint-" if self.mode == "nftables" else "KUBE-SEP-"


def ip_str(a):
    return "%d.%d.%d.%d" % (a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255)


# --- statistics ------------------------------------------------------------

def pct(v, p):
    """Nearest-rank percentile of a non-empty list."""
    s = sorted(v)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 1)) - 1))
    return s[k]


def med_range(v, fmt="%.0f"):
    if not v:
        return "-"
    return (fmt + " (" + fmt + "–" + fmt + ")") % (statistics.median(v), min(v), max(v))


# --- the run ---------------------------------------------------------------

class Run:
    """Namespaces, processes and files of one benchmark run; close() removes
    them all (processes by their own ids, namespaces by name)."""

    def __init__(self, build, args):
        self.build = os.path.abspath(build)
        self.args = args
        self.prefix = "kpb%d" % os.getpid()
        self.tmp = tempfile.mkdtemp(prefix="kproxy-bench-")
        self.namespaces = []
        self.procs = {}
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.root_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
        self.kproxy_bin = os.path.join(self.build, "kproxy")
        self.probe_bin = os.path.join(self.build, "bench", "nftprobe")
        for b in (self.kproxy_bin, self.probe_bin, os.path.join(self.build, "bench", "dp_client"),
                  os.path.join(self.build, "bench", "dp_server")):
            if not os.access(b, os.X_OK):
                raise BenchError("%s is missing; build it with `make bench` (or the bench tools target)" % b)

    def ns(self, short):
        return "%s-%s" % (self.prefix, short)

    def sh(self, args, ns=None, check=True, timeout=600, input=None):
        cmd = (["ip", "netns", "exec", self.ns(ns)] if ns else []) + [str(a) for a in args]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout,
                           input=input)
        if check and p.returncode != 0:
            raise BenchError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
        return p

    def add_ns(self, short):
        subprocess.run(["ip", "netns", "add", self.ns(short)], check=True)
        self.namespaces.append(self.ns(short))
        self.sh(["ip", "link", "set", "lo", "up"], ns=short)

    def del_ns(self, short):
        name = self.ns(short)
        if name in self.namespaces:
            # Empty the tables first, synchronously, so that freeing a large
            # table does not run in the background of the next measurement.
            subprocess.run(["ip", "netns", "exec", name, "nft", "flush", "ruleset"], stderr=subprocess.DEVNULL,
                           timeout=900)
            subprocess.run(["ip", "netns", "del", name], stderr=subprocess.DEVNULL)
            self.namespaces.remove(name)

    def spawn(self, key, args, ns=None, logfile=None, stdout=None, cpu=None):
        cmd = (["ip", "netns", "exec", self.ns(ns)] if ns else []) + (
            ["taskset", "-c", str(cpu)] if cpu is not None else []) + [str(a) for a in args]
        out = open(logfile, "ab") if logfile else (stdout or subprocess.DEVNULL)
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT if logfile else subprocess.DEVNULL,
                             start_new_session=True)
        if logfile:
            out.close()
        self.procs[key] = p
        return p

    def kill(self, key, sig=signal.SIGKILL):
        p = self.procs.pop(key, None)
        if p and p.poll() is None:
            try:
                os.killpg(p.pid, sig)
                p.wait(timeout=30)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        return p

    def close(self):
        for key in list(self.procs):
            self.kill(key)
        self.setns_root()
        for n in list(reversed(self.namespaces)):
            subprocess.run(["ip", "netns", "exec", n, "nft", "flush", "ruleset"], stderr=subprocess.DEVNULL)
            subprocess.run(["ip", "netns", "del", n], stderr=subprocess.DEVNULL)
        self.namespaces = []
        if os.environ.get("KEEP_BENCH_TMP"):
            log("bench files kept in", self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # Only the harness's own sockets to the API server enter the node
    # namespace, and only while they are created.
    def setns(self, short):
        fd = os.open("/run/netns/" + self.ns(short), os.O_RDONLY)
        try:
            if self.libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
        finally:
            os.close(fd)

    def setns_root(self):
        if self.libc.setns(self.root_ns, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns back to the root namespace")

    def verify_clean(self):
        """Nothing of this run is left: no namespace, no rules in the root namespace."""
        problems = []
        mine = [l.split()[0] for l in subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True)
                .stdout.splitlines() if l.startswith(self.prefix + "-")]
        if mine:
            problems.append("namespaces left: %s" % " ".join(mine))
        for fam in ("ip", "ip6"):
            if subprocess.run(["nft", "list", "table", fam, "kube-proxy"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0:
                problems.append("root namespace has table %s kube-proxy" % fam)
        for t in ("nat", "filter"):
            out = subprocess.run(["iptables-save", "-t", t], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True).stdout
            if re.search(r"^:KUBE-(SERVICES|NODEPORTS|POSTROUTING|MARK-MASQ|PROXY-CANARY)", out, re.M):
                problems.append("root namespace has KUBE- chains in %s" % t)
        return problems


# --- the API server --------------------------------------------------------

class Api:
    def __init__(self, run, state, node="node", key="kapi"):
        self.run, self.node = run, node
        tls = os.path.join(run.tmp, "tls-" + key)
        portfile = os.path.join(run.tmp, key + ".port")
        if os.path.exists(portfile):
            os.unlink(portfile)
        t = time.monotonic()
        run.spawn(key, [sys.executable, os.path.join(ROOT, "tests", "apiserver", "kapi.py"),
                           "--listen", "127.0.0.1:0", "--tls-dir", tls, "--token", TOKEN,
                           "--port-file", portfile, "--control-listen", "127.0.0.1:0", "--state", state,
                           "--history-size", "10000"],
                  ns=node, logfile=os.path.join(run.tmp, key + ".log"))
        while not os.path.exists(portfile):
            if run.procs[key].poll() is not None:
                raise BenchError("the API server exited: %s" % tail(os.path.join(run.tmp, key + ".log")))
            if time.monotonic() - t > 600:
                raise BenchError("the API server did not start in 600 s")
            time.sleep(0.05)
        self.startup_s = time.monotonic() - t
        with open(portfile) as f:
            self.port = int(f.read().split()[0])
        self.kubeconfig = os.path.join(tls, "kubeconfig")
        self.ctx = ssl.create_default_context(cafile=os.path.join(tls, "ca.crt"))
        self.conn = None

    def _connect(self):
        self.run.setns(self.node)
        try:
            c = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=120)
            c.connect()
        finally:
            self.run.setns_root()
        return c

    def request(self, method, path, body=None, gz=False, accept="application/json"):
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = self._connect()
            try:
                headers = {"Authorization": "Bearer " + TOKEN, "Accept": accept}
                if gz:
                    headers["Accept-Encoding"] = "gzip"
                data = None
                if body is not None:
                    data = json.dumps(body).encode()
                    headers["Content-Type"] = "application/json"
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                payload = r.read()
                if r.status >= 300:
                    raise BenchError("%s %s: %d %s" % (method, path, r.status, payload[:300]))
                return payload
            except (http.client.HTTPException, ConnectionError, OSError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise

    def list_time(self, limit=500):
        """What listing everything costs at the API server, alone: paginated and
        gzipped as kproxy asks (limit=500), without decoding the answers."""
        t = time.monotonic()
        for path in ("/api/v1/services", "/apis/discovery.k8s.io/v1/endpointslices"):
            cont = None
            while True:
                q = "?limit=%d" % limit + ("&continue=" + cont if cont else "")
                body = self.request("GET", path + q, gz=True)
                if body[:2] == b"\x1f\x8b":
                    body = gzip.decompress(body)
                m = re.search(rb'"continue": *"([^"]+)"', body)
                if not m:
                    break
                cont = m.group(1).decode()
        took = time.monotonic() - t
        # kproxy's own lists (resourceVersion=0: whole, from the watch
        # cache) in its format, once, so the stand-in holds each object's
        # protobuf as the API server's watch cache holds serialized objects:
        # kproxy's cold start then waits on its own reading, not on the
        # stand-in's Python encoder, which costs far more than Go's.
        if CONTENT_TYPE != "application/json":
            for path in ("/api/v1/services", "/apis/discovery.k8s.io/v1/endpointslices"):
                self.request("GET", path + "?resourceVersion=0", gz=True,
                             accept="application/vnd.kubernetes.protobuf, */*")
        return took


def tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


# --- cluster state ---------------------------------------------------------

class Cluster:
    def __init__(self, run, n, m, tag=""):
        self.n, self.m = n, m
        gen_n = max(n, 2)
        p = subprocess.run([sys.executable, os.path.join(HERE, "gen_cluster.py"), "--unique-nodeports",
                            str(gen_n), str(m), NODE], stdout=subprocess.PIPE, check=True)
        doc = json.loads(p.stdout)
        if run.args.no_affinity:
            for o in doc["items"]:
                if o["kind"] == "Service":
                    o["spec"].pop("sessionAffinity", None)
        if n == 1:
            # The one-service baseline: gen_cluster's service 1, a plain ClusterIP service.
            doc["items"] = [o for o in doc["items"] if o["kind"] == "Node" or
                            o["metadata"]["name"] in ("svc1", "svc1-abcde")]
        self.state = os.path.join(run.tmp, "state-%d%s.json" % (n, tag))
        with open(self.state, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        self.services = []      # in generation order
        slices = {}
        for o in doc["items"]:
            if o["kind"] == "EndpointSlice":
                slices[(o["metadata"]["namespace"], o["metadata"]["labels"]["kubernetes.io/service-name"])] = o
        for o in doc["items"]:
            if o["kind"] != "Service":
                continue
            md, spec = o["metadata"], o["spec"]
            sl = slices[(md["namespace"], md["name"])]
            self.services.append({
                "ns": md["namespace"], "name": md["name"], "ip": spec["clusterIP"],
                "plain": not spec.get("type") and not spec.get("sessionAffinity"),
                "slice": sl, "changes": 0})
        self.plain = [s for s in self.services if s["plain"]]
        self.next_ip = NEW_EP_BASE

    def endpoints(self, svc):
        return [e["addresses"][0] for e in svc["slice"]["endpoints"]]


SHARDS = 0     # --nft-shards: kproxy's --nftables-shards in nftables mode


def shard_table(svc):
    """The nftables table that holds svc's nat side (render_nft_shard(): FNV-1a 64 of "ns/name")."""
    if not SHARDS:
        return "kube-proxy"
    h = 0xcbf29ce484222325
    for b in ("%s/%s" % (svc["ns"], svc["name"])).encode():
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return "kube-proxy-%d" % (1 + h % SHARDS)


def nat_tables():
    return ",".join("kube-proxy-%d" % i for i in range(1, SHARDS + 1)) if SHARDS else "kube-proxy"


def shard_flags():
    return ["--nftables-shards", str(SHARDS)] if SHARDS else []


def expected_service_ips(run, cluster):
    """How many service-ips elements kproxy writes for this state, from `kproxy render`."""
    p = subprocess.run([run.kproxy_bin, "render", "--proxy-mode", "nftables", "--hostname-override", NODE,
                        "--cluster-cidr", CLUSTER_CIDR, "--host-addresses", NODE_IP + "/24"] + shard_flags() +
                       [cluster.state], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
    return len(re.findall(rb"^add element ip kube-proxy(?:-\d+)? service-ips ", p.stdout, re.M))


# --- kproxy ----------------------------------------------------------------

KLOG_TIME = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d)\.(\d{6}) ")


def klog_epoch(line):
    m = KLOG_TIME.match(line)
    if not m:
        return None
    mo, d, h, mi, s, us = (int(x) for x in m.groups())
    year = datetime.datetime.now(datetime.timezone.utc).year     # kproxy logs UTC
    return datetime.datetime(year, mo, d, h, mi, s, us, tzinfo=datetime.timezone.utc).timestamp()


STATE_DIR = True        # --no-state-dir: without it


def state_flags(run):
    """--state-dir, as the DaemonSet manifest gives it: a restart in
    iptables mode then writes only the chains that changed."""
    if not STATE_DIR:
        return []
    d = os.path.join(run.tmp, "state")
    os.makedirs(d, exist_ok=True)
    return ["--state-dir", d]


class Kproxy:
    def __init__(self, run, api, mode, min_sync, extra=(), key="kproxy"):
        self.run, self.mode, self.key = run, mode, key
        self.logfile = os.path.join(run.tmp, "%s-%s.log" % (key, mode))
        # A profiler in front of kproxy, e.g. "valgrind --tool=massif --massif-out-file=/tmp/kp.massif".
        wrap = shlex.split(os.environ.get("BENCH_KPROXY_WRAP", ""))
        args = wrap + [run.kproxy_bin, "--proxy-mode", mode, "--kubeconfig", api.kubeconfig,
                "--hostname-override", NODE, "--cluster-cidr", CLUSTER_CIDR,
                "--iptables-min-sync-period", min_sync,
                "--healthz-bind-address", "127.0.0.1:10256", "--metrics-bind-address", "127.0.0.1:10249",
                "-v=2"] + (shard_flags() if mode == "nftables" else []) + state_flags(run) + \
            (["--kube-api-content-type", CONTENT_TYPE] if CONTENT_TYPE else []) + list(extra)
        with open(self.logfile, "a") as f:
            f.write("=== start %s\n" % " ".join(args))
        self.log_offset = os.path.getsize(self.logfile)
        self.t_start_wall = time.time()
        self.t_start = time.monotonic()
        self.proc = run.spawn(key, args, ns=api.node, logfile=self.logfile)

    def output(self):
        with open(self.logfile, errors="replace") as f:
            f.seek(self.log_offset)
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def wait_log(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.output().splitlines():
                m = re.search(pattern, line)
                if m:
                    return line, m
            if not self.alive():
                raise BenchError("kproxy exited:\n" + tail(self.logfile))
            time.sleep(0.05)
        raise BenchError("kproxy did not log %r in %d s:\n%s" % (pattern, timeout, tail(self.logfile)))

    def log_time(self, pattern):
        """Seconds from kproxy's start to the first log line matching pattern (klog wall clock)."""
        for line in self.output().splitlines():
            if re.search(pattern, line):
                t = klog_epoch(line)
                return t - self.t_start_wall if t else None
        return None

    def cpu(self):
        """(self, children) CPU seconds from /proc/PID/stat."""
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tck = os.sysconf("SC_CLK_TCK")
        ut, st, cut, cst = (int(fields[i]) for i in (11, 12, 13, 14))
        return (ut + st) / tck, (cut + cst) / tck

    def mem(self):
        out = {}
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                    out[k] = int(v.split()[0]) / 1024.0
        return out

    def stop(self):
        self.run.kill(self.key, signal.SIGTERM)


# --- the probe -------------------------------------------------------------

class Probe:
    """One nftprobe process, polling until its condition groups hold."""

    def __init__(self, run, mode, conds, timeout_s, ready=False):
        args = [run.probe_bin, "-n", run.ns("node"), "-t", str(int(timeout_s * 1000))]
        if mode == "iptables":
            args += ["-T", "nat"]
        if ready:
            args.append("-r")
        self.proc = subprocess.Popen(args + conds, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if ready:
            line = self.proc.stdout.readline()
            if line.startswith("ok"):
                self.early = line
            elif line.strip() != "polling":
                raise BenchError("nftprobe: %r %s" % (line, self.proc.stderr.read()))
            else:
                self.early = None

    def results(self, alive=None):
        """The CLOCK_MONOTONIC times at which the groups held, in order (fewer
        after a timeout). alive(): false when waiting makes no sense any more."""
        while alive:
            try:
                self.proc.wait(timeout=0.1)
                break
            except subprocess.TimeoutExpired:
                if not alive():
                    self.kill()
                    raise BenchError("kproxy exited")
        out, err = self.proc.communicate()
        if getattr(self, "early", None):
            out = self.early + out
        times = [float(m) for m in re.findall(r"^ok group=\d+ mono=(\S+)", out, re.M)]
        if self.proc.returncode == 2:
            raise BenchError("nftprobe failed: " + err.strip())
        return times

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def probe_once(run, mode, *words, table="kube-proxy"):
    args = [run.probe_bin, "-n", run.ns("node"), "-T", "nat" if mode == "iptables" else table] + list(words)
    return subprocess.run(args, stdout=subprocess.PIPE, text=True).stdout


class Perf:
    """With --perf DIR: a flat `perf record` of kproxy over one phase, and its
    top symbols in DIR/<name>.txt."""

    def __init__(self, run, kp, name):
        self.run, self.name, self.p = run, name, None
        if not run.args.perf:
            return
        os.makedirs(run.args.perf, exist_ok=True)
        self.data = os.path.join(run.args.perf, name + ".data")
        self.p = subprocess.Popen(["perf", "record", "-g", "-F", "999", "-o", self.data, "-p", str(kp.proc.pid)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self):
        if not self.p:
            return
        self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        txt = os.path.join(self.run.args.perf, self.name + ".txt")
        with open(txt, "w") as f:
            subprocess.run(["perf", "report", "--stdio", "--no-children", "--sort", "dso,symbol", "-i", self.data],
                           stdout=f, stderr=subprocess.DEVNULL)
        top = [l for l in open(txt) if re.match(r"\s+\d+\.\d+%", l)][:8]
        log("  perf %s (%s):\n%s" % (self.name, txt, "".join("    " + l.strip()[:110] + "\n" for l in top).rstrip()))
        self.p = None


def verify_probe(run, cluster, mode):
    """Checks nftprobe's answers against `nft list table` / `iptables-save`
    for a few services (small N only: listing is slow at scale)."""
    picks = [cluster.services[0], cluster.services[len(cluster.services) // 2], cluster.services[-1]]
    if mode == "nftables":
        text = run.sh(["nft", "list", "ruleset", "ip"], ns="node").stdout
        chains = {name: body for name, body in re.findall(r"^\tchain (\S+) \{\n(.*?)^\t\}$", text, re.M | re.S)}
        maps = "".join(re.findall(r"^\tmap service-ips \{\n(.*?)^\t\}$", text, re.M | re.S))
        elems = dict(re.findall(r"([0-9.]+) \. tcp \. (?:\d+) : goto ([^\s,}]+)", maps))
        count = sum(int(probe_once(run, mode, "show-count", "service-ips", table=t).strip() or -1)
                    for t in nat_tables().split(","))
        nelems = len(re.findall(r" : (?:goto|jump|drop|accept)", maps))
        if count != nelems:
            raise BenchError("probe: service-ips has %d elements, nft lists %d" % (count, nelems))
    else:
        text = run.sh(["iptables-save", "-t", "nat"], ns="node").stdout
        chains = {}
        for c, target in re.findall(r"^-A (KUBE-SVC-\S+) .*-j (\S+)", text, re.M):
            chains.setdefault(c, "")
            chains[c] += "jump %s\n" % target
    for svc in picks:
        nm = Names(mode, svc["ns"], svc["name"])
        want = []
        for t in re.findall(r"(?:goto|jump) (\S+)", chains.get(nm.service(), "")):
            if t not in want:
                want.append(t)
        got = probe_once(run, mode, "show-chain", nm.service(), table=shard_table(svc)).split()
        if sorted(got) != sorted(want) or not got:
            raise BenchError("probe: %s goes to %s, the listing says %s" % (nm.service(), got, want))
        if mode == "nftables":
            got = probe_once(run, mode, "show-elem", "service-ips", "%s,tcp,80" % svc["ip"],
                             table=shard_table(svc)).strip()
            if got != "goto " + elems.get(svc["ip"], "?"):
                raise BenchError("probe: service-ips %s is %r, nft lists goto %s" % (svc["ip"], got,
                                                                                  elems.get(svc["ip"])))


# --- topology --------------------------------------------------------------

def build_node(run, node="node"):
    run.add_ns(node)
    run.sh(["sysctl", "-qw", "net.ipv4.ip_forward=1"], ns=node)
    run.sh(["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"], ns=node)
    # The node's own address (its Node object's InternalIP) on a link of its
    # own (a veth pair inside the namespace: no dummy driver here).
    run.sh(["ip", "link", "add", "node0", "type", "veth", "peer", "name", "node0p"], ns=node)
    run.sh(["ip", "link", "set", "node0p", "up"], ns=node)
    run.sh(["ip", "addr", "add", NODE_IP + "/24", "dev", "node0"], ns=node)
    run.sh(["ip", "link", "set", "node0", "up"], ns=node)


def pod_veth(run, short, host_if, ips, node="node"):
    """A pod namespace behind the node on a point-to-point veth: /32 addresses,
    the node owns GW on its end."""
    run.add_ns(short)
    run.sh(["ip", "link", "add", host_if, "netns", run.ns(node), "type", "veth",
            "peer", "name", "eth0", "netns", run.ns(short)])
    run.sh(["ip", "addr", "add", GW + "/32", "dev", host_if], ns=node)
    run.sh(["ip", "link", "set", host_if, "up"], ns=node)
    batch = "".join("route add %s/32 dev %s\n" % (ip, host_if) for ip in ips)
    run.sh(["ip", "-batch", "-"], ns=node, input=batch)
    batch = "".join("addr add %s/32 dev eth0\n" % ip for ip in ips)
    run.sh(["ip", "-batch", "-"], ns=short, input=batch)
    run.sh(["ip", "link", "set", "eth0", "up"], ns=short)
    run.sh(["ip", "route", "add", GW, "dev", "eth0"], ns=short)
    run.sh(["ip", "route", "add", "default", "via", GW], ns=short)


def conntrack_short(run, node="node"):
    # Short conntrack TIME_WAIT/CLOSE timeouts in the node namespace so a few
    # hundred thousand connections do not fill the table (as perf/bench_dataplane.sh).
    for k in ("time_wait", "close", "last_ack", "fin_wait", "close_wait"):
        run.sh(["sysctl", "-qw", "net.netfilter.nf_conntrack_tcp_timeout_%s=1" % k], ns=node, check=False)


# --- phases ----------------------------------------------------------------

def first_load(run, cluster, api, mode, args):
    """Starts kproxy; returns (kproxy, result dict)."""
    first, last = cluster.services[0], cluster.services[-1]
    fn, ln = Names(mode, first["ns"], first["name"]), Names(mode, last["ns"], last["name"])
    last_eps = cluster.endpoints(last)
    if mode == "nftables":
        g0 = ["in", shard_table(first), "elem", "service-ips", "%s,tcp,80" % first["ip"], fn.service()]
        g1 = ["in", shard_table(last), "elem", "service-ips", "%s,tcp,80" % last["ip"], ln.service(),
              "jumps", ln.service(), ln.ep_prefix(), str(len(last_eps)), "chain", ln.endpoint(last_eps[-1])]
        g2 = ["in", nat_tables(), "count", "service-ips", str(cluster.expected_elems)]
        conds = g0 + ["then"] + g1 + ["then"] + g2
    else:
        g0 = ["chain", fn.service()]
        g1 = ["jumps", ln.service(), ln.ep_prefix(), str(len(last_eps)), "chain", ln.endpoint(last_eps[-1])]
        conds = g0 + ["then"] + g1
    # The probe runs before kproxy starts: its polls find nothing until the
    # first transaction lands. Only kproxy's first load is timed, not kapi's.
    probe = Probe(run, mode, conds, args.load_timeout, ready=True)
    kp = Kproxy(run, api, mode, "0")
    perf = Perf(run, kp, "%s-%d-load" % (mode, cluster.n))
    try:
        times = probe.results(kp.alive)
    except BenchError:
        raise BenchError("kproxy exited during its first load:\n" + tail(kp.logfile))
    finally:
        perf.stop()
        probe.kill()
    r = {"probe_groups": [t - kp.t_start for t in times]}
    if len(times) < (3 if mode == "nftables" else 2):
        raise BenchError("first load: the kernel did not carry the last service's rules in %d s "
                         "(groups seen: %s)\n%s" % (args.load_timeout, r["probe_groups"], tail(kp.logfile)))
    r["first_service_s"] = times[0] - kp.t_start
    r["last_service_s"] = times[1] - kp.t_start
    r["complete_s"] = times[2] - kp.t_start if mode == "nftables" else None
    line, m = kp.wait_log(r"First sync done in (\d+) ms", args.load_timeout)
    r["first_sync_ms"] = int(m.group(1))
    r["lists_done_s"] = kp.log_time(r"Initial lists of Services, EndpointSlices(, ServiceCIDRs)? and Node")
    r["cpu_self_s"], r["cpu_children_s"] = kp.cpu()
    r.update(kp.mem())
    return kp, r


def change_one(run, cluster, api, kp, mode, svc, timeout):
    """Replaces one endpoint IP of svc; returns the latency (s) from sending
    the PUT, or None on timeout, and how long the PUT took to be answered.
    The write commits in between: kproxy can have programmed the kernel
    before the answer arrives, so latency from the answer can be negative."""
    eps = svc["slice"]["endpoints"]
    j = svc["changes"] % len(eps)
    svc["changes"] += 1
    old = eps[j]["addresses"][0]
    new = ip_str(cluster.next_ip)
    cluster.next_ip += 1
    nm = Names(mode, svc["ns"], svc["name"])
    conds = (["in", shard_table(svc)] if mode == "nftables" else []) + [
        "chain", nm.endpoint(new), "jump", nm.service(), nm.endpoint(new), "!jump", nm.service(), nm.endpoint(old)]
    if mode == "nftables":
        conds += ["elem", "service-ips", "%s,tcp,80" % svc["ip"], nm.service()]
    probe = Probe(run, mode, conds, timeout, ready=True)
    try:
        if probe.early:
            raise BenchError("the probe saw the change before it was made: %s" % conds)
        eps[j]["addresses"] = [new]
        sl = svc["slice"]
        path = "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices/%s" % (
            sl["metadata"]["namespace"], sl["metadata"]["name"])
        t0 = time.monotonic()
        api.request("PUT", path, sl)
        put_s = time.monotonic() - t0
        try:
            times = probe.results(kp.alive)
        except BenchError:
            raise BenchError("kproxy exited during the changes:\n" + tail(kp.logfile))
    finally:
        probe.kill()
    return (times[0] - t0 if times else None), put_s


def pick_changes(cluster, count, seed):
    """count services spread over the N (every 10th change on the last one), in a shuffled order."""
    n = len(cluster.services)
    last = cluster.services[-1]
    k_spread = count - count // 10
    spread = [cluster.services[round(i * (n - 1) / max(1, k_spread - 1))] for i in range(k_spread)]
    picks = spread + [last] * (count // 10)
    random.Random(seed).shuffle(picks)
    return picks


def changes(run, cluster, api, kp, mode, count, gap_s, timeout, seed):
    picks = pick_changes(cluster, count, seed)
    lat, lat_last, puts, timeouts = [], [], [], 0
    self0, cpu0 = kp.cpu()[0], sum(kp.cpu())
    last = cluster.services[-1]
    perf = Perf(run, kp, "%s-%d-changes-%s" % (mode, cluster.n, "0" if gap_s < 1 else "1s"))
    for i, svc in enumerate(picks):
        if not kp.alive():
            raise BenchError("kproxy exited during the changes:\n" + tail(kp.logfile))
        t, put_s = change_one(run, cluster, api, kp, mode, svc, timeout)
        puts.append(put_s)
        if t is None:
            timeouts += 1
        else:
            lat.append(t)
            if svc is last:
                lat_last.append(t)
        if (i + 1) % 20 == 0:
            log("    %d/%d changes, p50 so far %.1f ms" % (i + 1, count, 1e3 * statistics.median(lat) if lat else -1))
        time.sleep(gap_s + random.random() * gap_s / 2)
    cpu, cpu_self = sum(kp.cpu()) - cpu0, kp.cpu()[0] - self0
    perf.stop()
    return {"n": len(lat), "timeouts": timeouts, "lat": lat, "lat_last": lat_last, "put": puts,
            "cpu_per_change_ms": 1e3 * cpu / max(1, count), "cpu_self_per_change_ms": 1e3 * cpu_self / max(1, count)}


def change_floor(run, cluster, reps=9):
    """iptables mode: what any one-service change costs the tool and the
    kernel, whoever sends it. The last service's chains (its KUBE-SVC chain
    and KUBE-SEP chains, as the loaded table holds them) flushed and written
    again by one `iptables-restore --noflush` alone, reps times into the
    node's loaded table: the same kind of transaction as kproxy's change
    (new rules that jump, so the kernel validates the table's jump graph).
    Median and min wall time, s."""
    svc = cluster.services[-1]
    chain = Names("iptables", svc["ns"], svc["name"]).service()
    by_chain = {}
    for line in run.sh(["iptables-save", "-t", "nat"], ns="node").stdout.splitlines():
        if line.startswith("-A "):
            by_chain.setdefault(line.split(None, 2)[1], []).append(line)
    rules = by_chain.get(chain, [])
    seps = sorted(set(re.findall(r"-j (KUBE-SEP-\w+)", "\n".join(rules))))
    if not rules or not seps:
        raise BenchError("change floor: %s or its endpoint chains are not in the kernel" % chain)
    text = "\n".join(["*nat"] + [":%s - [0:0]" % c for c in [chain] + seps] + rules +
                     [line for c in seps for line in by_chain.get(c, [])] + ["COMMIT", ""])
    times = []
    for _ in range(reps):
        t0 = time.monotonic()
        run.sh(["iptables-restore", "--noflush"], ns="node", input=text)
        times.append(time.monotonic() - t0)
    return {"median_s": statistics.median(times), "min_s": min(times), "reps": reps}


# --- packet path -----------------------------------------------------------

def client(run, ip, port, secs, cl="cl"):
    p = run.sh(["taskset", "-c", "0", os.path.join(run.build, "bench", "dp_client"), ip, port, secs],
               ns=cl, check=False, timeout=secs + 60)
    m = re.search(r"conns=(\d+) fails=(\d+) secs=(\S+) cps=(\S+) connect_us p50=(\S+) p99=(\S+) "
                  r"total_us min=(\S+) p50=(\S+) p90=(\S+) p99=(\S+) max=(\S+)", p.stdout)
    if p.returncode != 0 or not m or int(m.group(1)) == 0:
        raise BenchError("dp_client to %s:%s: %s %s" % (ip, port, p.stdout.strip(), p.stderr.strip()))
    keys = ("conns", "fails", "secs", "cps", "connect_p50", "connect_p99", "total_min", "total_p50",
            "total_p90", "total_p99", "total_max")
    return dict(zip(keys, (float(x) for x in m.groups())))


def pick_targets(run, cluster, mode):
    """The first and last plain ClusterIP services (no NodePort, no affinity):
    by generation order in nftables mode (a map lookup: the order does not
    matter), by position in KUBE-SERVICES in iptables mode (a linear chain)."""
    if mode == "nftables" or len(cluster.plain) == 1:
        return cluster.plain[0], cluster.plain[-1]
    by_chain = {Names(mode, s["ns"], s["name"]).service(): s for s in cluster.plain}
    order = [by_chain[c] for c in probe_once(run, mode, "show-chain", "KUBE-SERVICES").split() if c in by_chain]
    if not order:
        raise BenchError("no KUBE-SVC chains found in KUBE-SERVICES")
    return order[0], order[-1]


def pods_and_client(run, node, pod, cl, ips):
    """A pod namespace holding ips (one dp_server on CPU 1) and a client pod, behind node."""
    pod_veth(run, pod, "vpod", ips, node=node)
    pod_veth(run, cl, "vcl", [CLIENT_IP], node=node)
    run.sh(["sysctl", "-qw", "net.ipv4.ip_local_port_range=1024 65535"], ns=cl)
    run.sh(["sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1"], ns=cl)
    run.sh(["sysctl", "-qw", "net.core.somaxconn=4096"], ns=pod)
    run.sh(["sysctl", "-qw", "net.ipv4.tcp_max_syn_backlog=4096"], ns=pod)
    conntrack_short(run, node)
    run.spawn("dp_server-" + pod, [os.path.join(run.build, "bench", "dp_server"), "8080"], ns=pod, cpu=1)


def dataplane(run, cluster, mode, args):
    """Connections to the first and last service of this cluster and, in the
    same time window (runs interleaved), to the one service of a one-service
    cluster on a second node namespace with its own kproxy: the machine's
    speed drifts by tens of percent over an hour, so "N services vs 1" is
    only fair measured side by side."""
    first, last = pick_targets(run, cluster, mode)
    targets = [("first", first, "cl")] + ([("last", last, "cl")] if last is not first else [])
    ips = sorted({ip for _, s, _ in targets for ip in cluster.endpoints(s)})
    res = {"first": "%s/%s" % (first["ns"], first["name"]), "last": "%s/%s" % (last["ns"], last["name"])}
    ref = None
    try:
        pods_and_client(run, "node", "pod", "cl", ips)
        if cluster.n > 1 and not args.no_ref:
            ref = Cluster(run, 1, args.endpoints, tag="ref")
            build_node(run, "rnode")
            api = Api(run, ref.state, node="rnode", key="kapi-ref")
            kp = Kproxy(run, api, mode, "0", key="kproxy-ref")
            kp.wait_log(r"First sync done in (\d+) ms", 60)
            pods_and_client(run, "rnode", "rpod", "rcl", ref.endpoints(ref.services[0]))
            targets.append(("ref", ref.services[0], "rcl"))
        time.sleep(0.3)
        for _, s, cl in targets:
            client(run, s["ip"], 80, 0.3, cl)    # warm-up, and does it work at all
        runs = {name: [] for name, _, _ in targets}
        runs["direct"] = []

        def measure(name, ip, port, cl):
            # A run in which something else took the CPU (on this shared
            # 2-core machine: p99 of whole connections above 5x their p50,
            # a clean run is below 2x) is repeated, twice at most.
            for attempt in range(3):
                d = client(run, ip, port, args.dp_seconds, cl)
                d["disturbed"] = d["total_p99"] > 5 * d["total_p50"]
                d["attempt"] = attempt
                log("    %-6s %s: %6.0f conns/s, connect() p50 %5.1f us p99 %6.1f us, whole p50 %5.1f us "
                    "p99 %7.1f us, fails %d%s" % (name, ip, d["cps"], d["connect_p50"], d["connect_p99"],
                                                 d["total_p50"], d["total_p99"], d["fails"],
                                                 ", disturbed" if d["disturbed"] else ""))
                time.sleep(1.5)           # let the 1 s conntrack TIME_WAIT entries drain
                if not d["disturbed"]:
                    break
            runs[name].append(d)

        for _ in range(args.dp_runs):
            for name, s, cl in targets:
                measure(name, s["ip"], 80, cl)
        for _ in range(max(1, args.dp_runs // 2)):
            measure("direct", cluster.endpoints(first)[0], 8080, "cl")
        if "last" not in runs:
            runs["last"] = runs["first"]
        res["runs"] = runs
    finally:
        for key in ("dp_server-pod", "dp_server-rpod", "kproxy-ref", "kapi-ref"):
            run.kill(key)
        for short in ("cl", "pod", "rcl", "rpod", "rnode"):
            run.del_ns(short)
    return res


# --- one size ---------------------------------------------------------------

def run_size(run, n, mode, args):
    log("== %s mode, %d service%s x %d endpoints" % (mode, n, "" if n == 1 else "s", args.endpoints))
    cluster = Cluster(run, n, args.endpoints)
    cluster.expected_elems = expected_service_ips(run, cluster) if mode == "nftables" else None
    res = {"n": n, "mode": mode, "loadavg": open("/proc/loadavg").read().split()[0],
           "params": {"endpoints": args.endpoints, "dp_runs": args.dp_runs, "dp_seconds": args.dp_seconds,
                      "tree": args.tree, "no_affinity": args.no_affinity}}
    log("  load average before: %s" % res["loadavg"])
    build_node(run)
    try:
        api = Api(run, cluster.state)
        res["kapi_start_s"] = api.startup_s
        res["kapi_list_s"] = api.list_time()
        log("  API server up in %.1f s; listing everything from it takes %.2f s" %
            (api.startup_s, res["kapi_list_s"]))
        kp, ld = first_load(run, cluster, api, mode, args)
        res["load"] = ld
        log("  first load: kernel has the first service at %.3f s, the last at %.3f s%s; kproxy: lists done "
            "at %s, \"First sync done in %d ms\", CPU %.2f s + %.2f s in children, RSS %.0f MiB" % (
                ld["first_service_s"], ld["last_service_s"],
                ", every service-ips element at %.3f s" % ld["complete_s"] if ld["complete_s"] else "",
                "%.3f s" % ld["lists_done_s"] if ld["lists_done_s"] is not None else "?",
                ld["first_sync_ms"], ld["cpu_self_s"], ld["cpu_children_s"], ld.get("VmRSS", 0)))
        res["settle_s"] = settle(kp)
        if args.floor and n > args.floor_max:
            log("  kernel floor: skipped above --floor-max %d" % args.floor_max)
        elif args.floor:
            res["floor_s"], res["floor_cpu_s"] = kernel_floor(run, cluster, mode)
        if res.get("floor_s"):
            lists_done = ld["lists_done_s"] or 0
            log("  kernel floor: the same rules through %s alone in %.2f s (CPU %.2f s); kproxy's first load "
                "(lists done -> last service) %.2f s, %.2fx the floor" % (
                    "nft -f" if mode == "nftables" else "iptables-restore", res["floor_s"], res["floor_cpu_s"],
                    ld["last_service_s"] - lists_done, (ld["last_service_s"] - lists_done) / res["floor_s"]))
        if n <= 1000:
            verify_probe(run, cluster, mode)
            log("  probe agrees with %s" % ("`nft list table`" if mode == "nftables" else "`iptables-save`"))
        if args.dp_runs:
            res["dp"] = dataplane(run, cluster, mode, args)
            dp = res["dp"]["runs"]
            log("  packet path: conns/s first %s, last %s, direct %s; connect() p50 us first %s, last %s" % (
                med_range([d["cps"] for d in dp["first"]]), med_range([d["cps"] for d in dp["last"]]),
                med_range([d["cps"] for d in dp["direct"]]),
                med_range([d["connect_p50"] for d in dp["first"]], "%.1f"),
                med_range([d["connect_p50"] for d in dp["last"]], "%.1f")))
        count = args.changes if mode == "nftables" else args.ipt_changes
        if count:
            settle(kp)
            c = changes(run, cluster, api, kp, mode, count, args.gap, args.change_timeout, args.seed)
            res["changes"] = c
            log("  %s" % change_line("min sync 0", c))
            if mode == "iptables":
                res["change_floor"] = f = change_floor(run, cluster)
                log("  change floor: one service's chains rewritten by iptables-restore --noflush alone, median "
                    "%.1f ms (min %.1f) of %d; kproxy's p50 is %.2fx that" % (
                        1e3 * f["median_s"], 1e3 * f["min_s"], f["reps"],
                        pct(c["lat"], .5) / f["median_s"] if c["lat"] else 0))
        res["mem"] = kp.mem()
        heap = ""
        with open(kp.logfile, errors="replace") as f:
            for line in f:
                if "heap: " in line:
                    heap = line.split("heap: ", 1)[1].strip()    # its last full sync's
        log("  kproxy RSS %.0f MiB (peak %.0f MiB; anonymous %.0f, files %.0f; malloc after its last full sync: "
            "%s)" % (res["mem"].get("VmRSS", 0), res["mem"].get("VmHWM", 0), res["mem"].get("RssAnon", 0),
                     res["mem"].get("RssFile", 0), heap or "not logged"))
        if args.resync:
            res["resync_ms"] = full_resync(run, api, kp, mode, args.load_timeout)
            res["mem_after_resync"] = m = kp.mem()
            log("  full resync over the loaded table (the hourly one; forced by %s): %d ms; RSS after it %.0f MiB" % (
                "removing the canary" if mode == "iptables" else "a Node label", res["resync_ms"],
                m.get("VmRSS", 0)))
        if args.default_period_changes:
            kp.stop()
            kp = Kproxy(run, api, mode, "1s")
            _, m = kp.wait_log(r"First sync done in (\d+) ms", args.load_timeout)
            res["restart_sync_ms"] = int(m.group(1))
            settle(kp)
            c = changes(run, cluster, api, kp, mode, args.default_period_changes, 1.5, args.change_timeout,
                        args.seed + 1)
            res["changes_1s"] = c
            log("  restart with --iptables-min-sync-period 1s: \"First sync done in %d ms\"; %s" % (
                res["restart_sync_ms"], change_line("min sync 1s", c)))
        kp.stop()
    finally:
        run.kill("kproxy")
        run.kill("kapi")
        run.del_ns("node")
    return res


def kernel_floor(run, cluster, mode):
    """The tool alone: kproxy's rules for the cluster (`kproxy render`) fed
    in one run to `nft -f` (nftables mode) or to iptables-restore (iptables
    mode; without --noflush, its fastest, linear mode, which the daemon
    cannot use: it would flush other users' rules) in an empty scratch
    namespace, with the kernel's jump rules into KUBE-SERVICES in place as
    the daemon has them. Returns wall seconds and the tool's CPU seconds."""
    out = os.path.join(run.tmp, "floor-%s-%d.txt" % (mode, cluster.n))
    with open(out, "w") as f:
        subprocess.run([run.kproxy_bin, "render", "--proxy-mode", mode, "--hostname-override", NODE,
                        "--cluster-cidr", CLUSTER_CIDR, "--host-addresses", "127.0.0.1/8,%s/24" % NODE_IP,
                        "--host-nfacct=false", "--host-random-fully=true", "--host-tcp-be-liberal=false"] +
                       (shard_flags() if mode == "nftables" else []) + [cluster.state],
                       stdout=f, stderr=subprocess.DEVNULL, check=True, timeout=900)
    run.add_ns("floor")
    try:
        if mode == "iptables":
            for chain in ("PREROUTING", "OUTPUT"):
                run.sh(["iptables", "-t", "nat", "-N", "KUBE-SERVICES"], ns="floor", check=False)
                run.sh(["iptables", "-t", "nat", "-I", chain, "-j", "KUBE-SERVICES"], ns="floor")
            cmd = ["iptables-restore", "-w", "5"]
        else:
            cmd = ["nft", "-f", "-"]
        t0 = time.monotonic()
        r0 = os.times()
        with open(out) as f:
            p = subprocess.run(["ip", "netns", "exec", run.ns("floor")] + cmd, stdin=f, timeout=1800,
                               stdout=subprocess.DEVNULL)
        if p.returncode != 0:
            # nft -f of 50k services x 10 endpoints needs more than 7 GB and
            # is killed by the OOM killer on a 24 GB machine: no floor then.
            log("  kernel floor: %s failed (%s)" % (cmd[0], "killed" if p.returncode < 0 else p.returncode))
            return None, None
        wall = time.monotonic() - t0
        r1 = os.times()
        cpu = (r1.children_user - r0.children_user) + (r1.children_system - r0.children_system)
    finally:
        run.del_ns("floor")
        os.unlink(out)
    return wall, cpu


def full_resync(run, api, kp, mode, timeout):
    """A full sync of the loaded table while kproxy runs, as its hourly one;
    returns its duration from kproxy's log. iptables mode: the mangle canary
    is removed, which makes kproxy resync everything at its next check
    (every --iptables-sync-period). nftables mode: a new label on kproxy's
    Node asks for a full sync, which (nobody else having changed the table)
    checks the table against what kproxy's last sync left."""
    seen = len(re.findall(r"Sync \d+ \(full\) done in", kp.output()))
    if mode == "iptables":
        run.sh(["iptables", "-t", "mangle", "-X", "KUBE-PROXY-CANARY"], ns="node")
    else:
        path = "/api/v1/nodes/" + NODE
        obj = json.loads(api.request("GET", path))
        obj["metadata"].setdefault("labels", {})["bench.kproxy.io/resync"] = str(time.monotonic_ns())
        api.request("PUT", path, obj)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.findall(r"Sync \d+ \(full\) done in (\d+) ms", kp.output())
        if len(found) > seen:
            return int(found[seen])
        if not kp.alive():
            raise BenchError("kproxy exited during the resync:\n" + tail(kp.logfile))
        time.sleep(0.2)
    raise BenchError("no full resync within %d s" % timeout)


def settle(kp, limit=60):
    """Waits until kproxy is idle (no CPU time used over a second); returns the wait."""
    t = time.monotonic()
    while time.monotonic() - t < limit:
        c0 = sum(kp.cpu())
        time.sleep(1)
        if sum(kp.cpu()) - c0 < 0.02:
            break
    return time.monotonic() - t


def change_line(what, c):
    lat = [1e3 * x for x in c["lat"]]
    if not lat:
        return "%s: no change seen (%d timeouts)" % (what, c["timeouts"])
    return ("%s: %d changes, API write -> kernel p50 %.1f ms, p99 %.1f ms, max %.1f ms, last service p50 %s; "
            "the PUT answered in p50 %s; %d timeouts; kproxy CPU %.1f ms per change (%.1f ms its own)" % (
                what, len(lat), pct(lat, .5), pct(lat, .99), max(lat),
                "%.1f ms" % statistics.median([1e3 * x for x in c["lat_last"]]) if c["lat_last"] else "-",
                put_p50(c),
                c["timeouts"], c["cpu_per_change_ms"], c.get("cpu_self_per_change_ms", float("nan"))))


# --- report -----------------------------------------------------------------

def ms(v):
    return "%.0f ms" % (1e3 * v) if v < 10 else "%.1f s" % v


def put_p50(c):
    return "%.1f ms" % (1e3 * statistics.median(c["put"])) if c.get("put") else "-"


def lat_cells(c):
    lat = [1e3 * x for x in c["lat"]]
    if not lat:
        return ["0", "-", "-", "-", "-", put_p50(c)]
    last = [1e3 * x for x in c["lat_last"]]
    return [str(len(lat)) + (" (%d timeouts)" % c["timeouts"] if c["timeouts"] else ""),
            "%.1f ms" % pct(lat, .5), "%.1f ms" % pct(lat, .99), "%.1f ms" % max(lat),
            "%.1f ms" % statistics.median(last) if last else "-", put_p50(c)]


def disturbed(d):
    return d.get("disturbed", d["total_p99"] > 5 * d["total_p50"])


def services_cell(r):
    """A row's size, and its shards when nftables mode ran with them."""
    return "%d%s" % (r["n"], " (%d shards)" % r["shards"] if r.get("shards") else "")


def report(results, args):
    P = results[0].get("params") or {"endpoints": args.endpoints, "dp_runs": args.dp_runs,
                                      "dp_seconds": args.dp_seconds, "tree": args.tree}
    out = []
    w = out.append
    rev = P.get("tree")
    if not rev:
        try:
            rev = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True).stdout.strip()
        except OSError:
            rev = ""
    w(SECTION + "\n\n")
    w("Generated by `bench/programming.py` on %s%s: kproxy daemon in scratch network namespaces, "
      "services of %s endpoints from `bench/gen_cluster.py --unique-nodeports`, served by the stand-in API "
      "server (`tests/apiserver/kapi.py`, HTTPS, token). The kernel is observed with `bench/nftprobe` "
      "(single-object nf_tables netlink requests polled about every millisecond), not through kproxy's "
      "log. Medians with min–max; the machine is small and shared, so compare within one run.\n\n" % (
          time.strftime("%Y-%m-%d %H:%M"), " (tree %s)" % rev if rev else "",
          "%d%s" % (P["endpoints"], " (ClientIP affinity removed)" if P.get("no_affinity") else "")))
    w("### First load\n\nTimes from kproxy's start to the kernel carrying the last service's map element, "
      "service chain and all of its endpoint chains (iptables mode: its KUBE-SVC chain and KUBE-SEP chains), "
      "the first service's map element (iptables mode: its KUBE-SVC chain), and every `service-ips` element. "
      "They include kproxy listing everything from the stand-in API server, whose own cost is the *lists "
      "alone* column (the same paginated, gzipped lists, without decoding; kapi is Python); *lists done → "
      "last service* starts at kproxy's log line saying its lists are complete, and is the part to compare "
      "with a file-based load. *First sync done in* is kproxy's own log line. CPU: kproxy's own (user + "
      "system, which includes the kernel's work in its netlink calls) and its waited-for children's (`nft`, "
      "`iptables-restore`), at the end of the load. *Kernel floor*: the same rules (`kproxy render` of the "
      "cluster) in one run of `nft -f`, or of `iptables-restore` in its flushing mode (linear; the daemon "
      "must use --noflush, which is quadratic in one run, so it restores in pieces), into an empty namespace; "
      "*× floor* is *lists done → last service* over it. *Restart*: the first sync of kproxy restarted over "
      "its own loaded rules (`First sync done in`). *Full resync*: a full sync of the loaded "
      "table while kproxy runs, as the hourly one, after the changes; forced in iptables mode by removing the "
      "canary chain, in nftables mode by a new label on kproxy's Node (nobody else having changed the table, "
      "kproxy checks it against what its last sync left instead of rewriting it).\n\n")
    w("| mode | services | start → last service | lists done → last service | kernel floor | × floor | First sync "
      "done in | restart | full resync | start → first service | start → all elements | kproxy's lists done | "
      "lists alone (kapi) | CPU self + children | RSS |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    for r in results:
        ld = r["load"]
        lists = ld["lists_done_s"]
        floor = r.get("floor_s")
        w("| %s | %s | %s | **%s** | %s | %s | %d ms | %s | %s | %s | %s | %s | %s | %.2f + %.2f s | %.0f MiB |\n" % (
            r["mode"], services_cell(r), ms(ld["last_service_s"]),
            ms(ld["last_service_s"] - lists) if lists is not None else "?",
            ms(floor) if floor else "–",
            "%.2f" % ((ld["last_service_s"] - (lists or 0)) / floor) if floor else "–", ld["first_sync_ms"],
            ms(r["restart_sync_ms"] / 1e3) if r.get("restart_sync_ms") else "–",
            ms(r["resync_ms"] / 1e3) if r.get("resync_ms") else "–",
            ms(ld["first_service_s"]), ms(ld["complete_s"]) if ld["complete_s"] else "–",
            ms(lists) if lists is not None else "?", ms(r["kapi_list_s"]),
            ld["cpu_self_s"], ld["cpu_children_s"], ld.get("VmRSS", 0)))
    if any("changes" in r or "changes_1s" in r for r in results):
        # Runs before 2026-11-26 took t0 at the PUT's answer and did not time the PUT.
        at_answer = any(k in r and "put" not in r[k] for r in results for k in ("changes", "changes_1s"))
        w("\n### One-endpoint change: API write to kernel\n\nOne endpoint IP of one service is replaced by a "
          "PUT of its EndpointSlice; %s, t1 the first " % (
              "t0 is the API server's answer (the write is committed)" if at_answer else
              "t0 is when the harness sends it (the write commits before the answer, and kproxy can "
              "program the kernel before the answer arrives: *PUT answered* is how long the answer took, "
              "the most t0 can be early)") +
          "poll that finds the new endpoint chain, the service chain going to it and not to the old one, and "
          "the service's map element going to the service chain. Services spread over the N, every 10th "
          "change on the last one; a short pause between changes. *min sync 1s*: kproxy restarted with the "
          "default `--iptables-min-sync-period`, changes 1.5 s apart. CPU: kproxy's own plus its children's "
          "(`iptables-restore`; the kernel's work in nftables mode is kproxy's own system time) over the "
          "whole phase, per change, and in brackets kproxy's own. *Tool alone* (iptables mode): the last "
          "service's chains flushed and written again by one `iptables-restore --noflush` into the loaded "
          "table, without kproxy (median of 9): what the tool and the kernel's validation of the table cost "
          "any one-service change. RSS: after the changes.\n\n")
        w("| mode | services | min sync period | changes | p50 | p99 | max | last service p50 | PUT answered "
          "(p50) | CPU per change (kproxy's own) | tool alone | p50 / tool alone | RSS (peak) |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
        for r in results:
            for key, period in (("changes", "0"), ("changes_1s", "1s")):
                if key in r:
                    c = r[key]
                    mem = r.get("mem", {})
                    fl = r.get("change_floor") if key == "changes" else None
                    own = c.get("cpu_self_per_change_ms")
                    w("| %s | %s | %s | %s | %.1f ms%s | %s | %s | %s |\n" % (
                        r["mode"], services_cell(r), period, " | ".join(lat_cells(c)), c["cpu_per_change_ms"],
                        " (%.1f)" % own if own is not None else "",
                        "%.1f ms" % (1e3 * fl["median_s"]) if fl else "–",
                        "%.2f" % (pct(c["lat"], .5) / fl["median_s"]) if fl and c["lat"] else "–",
                        "%.0f (%.0f) MiB" % (mem.get("VmRSS", 0), mem.get("VmHWM", 0)) if key == "changes"
                        else "–"))
    dps = [r for r in results if "dp" in r]
    if dps:
        w("\n### Packet path: new connections to the first and the last service\n\nA client pod "
          "(%s, pinned to CPU 0) opens, uses and closes one TCP connection at a time to a service's cluster "
          "IP; the node namespace DNATs it to one of the service's %d endpoints in a pod namespace (one server "
          "pinned to CPU 1). *first*/*last*: the first and last plain ClusterIP services (nftables: by "
          "generation order; iptables: by position in KUBE-SERVICES). *1 service*: the same, at the same "
          "time, against a second node namespace whose own kproxy serves a one-service cluster (the machine's "
          "speed drifts by tens of percent over a run, so only side-by-side runs compare). %d runs of %g s "
          "each, interleaved; *direct*: to a pod IP without DNAT. Conntrack TIME_WAIT/CLOSE timeouts in the "
          "node namespaces are 1 s. *best*: the ratio of the fastest runs (interference only slows runs "
          "down). A run whose whole-connection p99 exceeds 5x its p50 (something else had the CPU; clean "
          "runs stay under 2x) is repeated up to twice; *disturbed* counts the runs that stayed so.\n\n" % (
              CLIENT_IP, P["endpoints"], P["dp_runs"], P["dp_seconds"]))
        w("| mode | services | first: conns/s | last: conns/s | 1 service: conns/s | **last / 1 service** "
          "(best) | last / first (best) | connect() p50 first / last / 1 service | direct: conns/s | disturbed |\n"
          "|---|---|---|---|---|---|---|---|---|---|\n")
        base = {r["mode"]: [d["cps"] for d in r["dp"]["runs"]["first"]] for r in dps if r["n"] == 1}
        for r in dps:
            runs = r["dp"]["runs"]
            f = [d["cps"] for d in runs["first"]]
            la = [d["cps"] for d in runs["last"]]
            ref = [d["cps"] for d in runs.get("ref", [])] or (None if r["n"] == 1 else base.get(r["mode"]))
            kinds = ["first", "direct"] + (["last"] if r["n"] > 1 else []) + (["ref"] if "ref" in runs else [])
            nd = sum(1 for k in kinds for d in runs[k] if disturbed(d))
            nt = sum(len(runs[k]) for k in kinds)
            p50 = lambda k: "%.1f" % statistics.median(d["connect_p50"] for d in runs[k]) if runs.get(k) else "–"
            w("| %s | %s | %s | %s | %s | %s | %.2f (%.2f) | %s / %s / %s µs | %s | %d of %d |\n" % (
                r["mode"], services_cell(r), med_range(f), med_range(la),
                med_range(ref) + ("" if "ref" in runs or not ref else " (earlier)") if ref else "–",
                "**%.2f** (%.2f)" % (statistics.median(la) / statistics.median(ref), max(la) / max(ref))
                if ref else "–",
                statistics.median(la) / statistics.median(f), max(la) / max(f),
                p50("first"), p50("last"), p50("ref"),
                med_range([d["cps"] for d in runs["direct"]]), nd, nt))
    return "".join(out)


def write_results(path, section):
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        cpu = ""
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        text = "# kproxy benchmark results\n\nMachine: %s, %d cores, Linux %s.\n" % (
            cpu or platform.machine(), os.cpu_count(), platform.release())
    m = re.search(r"^%s.*?(?=^## |\Z)" % re.escape(SECTION), text, re.M | re.S)
    if m:
        text = text[:m.start()] + section + ("\n" if text[m.end():] else "") + text[m.end():]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", help="build directory with kproxy and bench/{nftprobe,dp_client,dp_server}")
    ap.add_argument("sizes", nargs="*", type=int, help="service counts (default: $BENCH_PROG_SIZES or "
                    "1000 10000 20000 50000)")
    # An empty $BENCH_MODES (a make that exports it unset) means the default.
    ap.add_argument("--modes", default=os.environ.get("BENCH_MODES") or "nftables iptables",
                    help="nftables and/or iptables, space- or comma-separated (default both; $BENCH_MODES)")
    ap.add_argument("--endpoints", type=int, default=10)
    ap.add_argument("--changes", type=int, default=100, help="one-endpoint changes per size, nftables mode")
    ap.add_argument("--ipt-changes", type=int, default=100, help="the same in iptables mode")
    ap.add_argument("--default-period-changes", type=int, default=100,
                    help="changes with the default min sync period (1 s); 0 skips that phase")
    ap.add_argument("--gap", type=float, default=0.2, help="pause between changes, s (plus up to half again)")
    ap.add_argument("--change-timeout", type=float, default=120)
    ap.add_argument("--load-timeout", type=float, default=900)
    ap.add_argument("--dp-runs", type=int, default=5, help="packet-path runs per service; 0 skips it")
    ap.add_argument("--dp-seconds", type=float, default=3)
    ap.add_argument("--no-baseline", action="store_true", help="no one-service cluster of its own")
    ap.add_argument("--no-ref", action="store_true",
                    help="no one-service reference node next to each size's packet path")
    ap.add_argument("--ipt-max", type=int, default=20000,
                    help="iptables mode skips larger sizes (its first load takes minutes at 50k)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-state-dir", dest="state_dir", action="store_false",
                    help="run kproxy without --state-dir (an iptables restart then writes every chain)")
    ap.add_argument("--nft-shards", type=int, default=0,
                    help="nftables mode with kproxy's --nftables-shards N (the services' nat side in N tables)")
    ap.add_argument("--nft-one-table-max", type=int, default=50000,
                    help="without --nft-shards, nftables mode runs larger sizes with 16 shards (a first load "
                         "into one table is quadratic in the kernel: minutes at 50k)")
    ap.add_argument("--floor-max", type=int, default=50000,
                    help="no kernel floor above this size (nft -f runs out of memory at 50k on 24 GB)")
    ap.add_argument("--results", default=os.path.join(HERE, "RESULTS.md"), help="'' to write no file")
    ap.add_argument("--json", help="also write every raw number to this file")
    ap.add_argument("--perf", metavar="DIR", help="perf record kproxy during the first load and the changes")
    ap.add_argument("--from-json", metavar="FILE", help="only write the report of an earlier run's --json")
    ap.add_argument("--no-resync", dest="resync", action="store_false",
                    help="skip the forced full resync over the loaded table")
    ap.add_argument("--no-floor", dest="floor", action="store_false",
                    help="skip the kernel floor (the same rules through nft -f / iptables-restore alone)")
    ap.add_argument("--no-affinity", action="store_true",
                    help="no ClientIP affinity (gen_cluster gives it to 1 service in 13; nftables mode makes a "
                         "named set per endpoint of those)")
    ap.add_argument("--tree", help="what the report names as the tree measured (default: git describe)")
    ap.add_argument("--content-type", help="kproxy's --kube-api-content-type (default: kproxy's, protobuf)")
    args = ap.parse_args()
    global SHARDS, STATE_DIR, CONTENT_TYPE
    CONTENT_TYPE = args.content_type
    SHARDS = args.nft_shards
    STATE_DIR = args.state_dir
    if args.from_json:
        with open(args.from_json) as f:
            results = json.load(f)
        section = report(results, args)
        log(section)
        if args.results:
            write_results(args.results, section)
        return
    if os.geteuid() != 0:
        sys.exit("programming.py needs root (network namespaces)")
    sizes = args.sizes or [int(x) for x in os.environ.get("BENCH_PROG_SIZES", "1000 10000 20000 50000").split()]
    if not args.no_baseline and 1 not in sizes:
        sizes = [1] + sizes
    modes = [m for m in re.split(r"[\s,]+", args.modes) if m]
    if not modes:
        sys.exit("programming.py: no mode to measure (--modes)")
    for m in modes:
        if m not in ("nftables", "iptables"):
            sys.exit("unknown mode %r" % m)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    run = Run(args.build, args)
    results, failed = [], None
    try:
        for mode in modes:
            for n in sizes:
                if mode == "iptables" and n > args.ipt_max:
                    log("== iptables mode, %d services: skipped (above --ipt-max %d)" % (n, args.ipt_max))
                    continue
                SHARDS = args.nft_shards
                if mode == "nftables" and not SHARDS and n > args.nft_one_table_max:
                    SHARDS = 16
                    log("== nftables mode, %d services: with 16 shards (above --nft-one-table-max %d)" % (
                        n, args.nft_one_table_max))
                try:
                    results.append(dict(run_size(run, n, mode, args), shards=SHARDS if mode == "nftables" else 0))
                except BenchError as e:
                    failed = "%s mode, N=%d: %s" % (mode, n, e)
                    log("FAILED: " + failed)
                    break
    except Interrupted as e:
        failed = "interrupted (%s)" % e
        log(failed)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)      # a second Ctrl-C must not stop the clean-up
        run.close()
        problems = run.verify_clean()
        for p in problems:
            log("NOT CLEAN: " + p)
    if results:
        section = report(results, args)
        if failed:
            section += "\nThe run stopped early: %s\n" % failed.splitlines()[0]
        log("")
        log(section)
        if args.results:
            write_results(args.results, section)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=1)
    if failed or problems:
        sys.exit(1)


if __name__ == "__main__":
    main()

# SPDX-License-Identifier: Apache-2.0
"""A small cluster in network namespaces, for kproxy's end-to-end tests.

Topology (every name carries a per-run prefix; nothing touches the root
namespace's rules or routes, and everything is deleted on exit):

   client pod ─┐                                   ┌─ pods of node 2
   pods of    ─┤ node1 ──── 192.168.50.0/24 ──── node2
   node 1      │ (kproxy, stand-in API server)
               └ routes: 10.244.1.x/32 to each pod, 10.244.2.0/24 via node2,
                 10.96.0.0/16 (cluster IPs) into the pod side

Pods get /32 addresses on point-to-point veths (the node owns .1 on each),
so all pod traffic crosses the node's netfilter, as with most CNIs.
"""
import atexit
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
NODE_IPS = {"node-1": "192.168.50.11", "node-2": "192.168.50.12"}
NODE_POD_NET = {"node-1": "10.244.1", "node-2": "10.244.2"}
TOKEN = "e2e-token-0123456789"
_lab_numbers = itertools.count(1)


class LabError(Exception):
    pass


def wait_for(what, cond, timeout=10.0, interval=0.05):
    """Polls cond() until it returns a true value; returns it. The state is
    polled, never assumed after a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise LabError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(interval)


class Lab:
    def __init__(self, build, mode="iptables"):
        self.build = os.path.abspath(build)
        self.kproxy_bin = os.path.join(self.build, "kproxy")
        self.mode = mode
        # Unique per Lab, so that both modes' labs can live in one process.
        self.prefix = "kpe%d-%d" % (os.getpid(), next(_lab_numbers))
        self.tmp = tempfile.mkdtemp(prefix="kproxy-e2e-")
        # --state-dir: what kproxy keeps across its restarts (a DaemonSet's /run/kproxy).
        self.state_dir = os.path.join(self.tmp, "state")
        os.mkdir(self.state_dir)
        self.namespaces = []
        self.procs = {}
        self.pods = {}
        self.kproxy = None
        self.kproxy_log = None
        self.api_port = None
        self.control_port = None
        atexit.register(self.close)

    # --- plumbing ---

    def ns(self, short):
        return "%s-%s" % (self.prefix, short)

    def run(self, args, ns=None, check=True, input=None, timeout=60):
        cmd = (["ip", "netns", "exec", self.ns(ns)] if ns else []) + list(args)
        p = subprocess.run(cmd, input=input, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        if check and p.returncode != 0:
            raise LabError("%s failed (%d): %s" % (" ".join(cmd), p.returncode, p.stderr.strip()))
        return p

    def add_ns(self, short):
        self.run(["ip", "netns", "add", self.ns(short)])
        self.namespaces.append(self.ns(short))
        self.run(["ip", "link", "set", "lo", "up"], ns=short)

    def spawn(self, key, args, ns=None, log=None):
        cmd = (["ip", "netns", "exec", self.ns(ns)] if ns else []) + list(args)
        out = open(log, "ab") if log else subprocess.DEVNULL
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT if log else subprocess.DEVNULL,
                             start_new_session=True)
        if log:
            out.close()         # the child has its own copy
        self.procs[key] = p
        return p

    def kill(self, key, sig=signal.SIGKILL):
        p = self.procs.pop(key, None)
        if p and p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        return p

    def close(self):
        for key in list(self.procs):
            self.kill(key)
        for n in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", n], stderr=subprocess.DEVNULL)
        self.namespaces = []
        # A file system a test mounted under tmp (a cgroup2 mount is the
        # machine's whole hierarchy) is never walked by the removal.
        with open("/proc/self/mounts") as f:
            mounted = [l.split()[1] for l in f if l.split()[1].startswith(self.tmp + "/")]
        for m in sorted(mounted, reverse=True):
            subprocess.run(["umount", "-l", m], stderr=subprocess.DEVNULL)
        if os.environ.get("KEEP_E2E_TMP"):
            print("e2e files kept in", self.tmp, file=sys.stderr)
        elif not any(os.path.ismount(m) for m in mounted):
            shutil.rmtree(self.tmp, ignore_errors=True)

    # --- topology ---

    def build_topology(self):
        for n in ("n1", "n2"):
            self.add_ns(n)
            self.run(["sysctl", "-qw", "net.ipv4.ip_forward=1"], ns=n)
            self.run(["sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0"], ns=n)
        self.run(["ip", "link", "add", "eth0", "netns", self.ns("n1"), "type", "veth",
                  "peer", "name", "eth0", "netns", self.ns("n2")])
        for n, node in (("n1", "node-1"), ("n2", "node-2")):
            self.run(["ip", "addr", "add", NODE_IPS[node] + "/24", "dev", "eth0"], ns=n)
            self.run(["ip", "link", "set", "eth0", "up"], ns=n)
        self.run(["ip", "route", "add", "10.244.2.0/24", "via", NODE_IPS["node-2"]], ns="n1")
        self.run(["ip", "route", "add", "10.244.1.0/24", "via", NODE_IPS["node-1"]], ns="n2")
        # Host-originated traffic to cluster IPs needs a route before the
        # nat OUTPUT chain rewrites it; node 2 sends cluster-IP traffic to node 1.
        self.run(["ip", "route", "add", "10.96.0.0/16", "dev", "eth0"], ns="n1")
        self.run(["ip", "route", "add", "10.96.0.0/16", "via", NODE_IPS["node-1"]], ns="n2")

    def add_pod(self, name, node, index, serve=True):
        """A pod namespace with IP 10.244.<node>.<index>/32 behind the node."""
        nshort = "n1" if node == "node-1" else "n2"
        ip = "%s.%d" % (NODE_POD_NET[node], index)
        short = "p-%s" % name
        self.add_ns(short)
        host_if = "v%s" % name[-12:]
        self.run(["ip", "link", "add", host_if, "netns", self.ns(nshort), "type", "veth",
                  "peer", "name", "eth0", "netns", self.ns(short)])
        gw = NODE_POD_NET[node] + ".1"
        self.run(["ip", "addr", "add", gw + "/32", "dev", host_if], ns=nshort)
        self.run(["ip", "link", "set", host_if, "up"], ns=nshort)
        self.run(["ip", "route", "add", ip + "/32", "dev", host_if], ns=nshort)
        self.run(["ip", "addr", "add", ip + "/32", "dev", "eth0"], ns=short)
        self.run(["ip", "link", "set", "eth0", "up"], ns=short)
        self.run(["ip", "route", "add", gw, "dev", "eth0"], ns=short)
        self.run(["ip", "route", "add", "default", "via", gw], ns=short)
        self.pods[name] = {"ip": ip, "node": node, "ns": short}
        if serve:
            ready = os.path.join(self.tmp, "ready-" + name)
            self.spawn("pod-" + name, [sys.executable, os.path.join(HERE, "podserver.py"), name, ip, "8080",
                                       "5353", ready], ns=short)
            wait_for("pod %s to listen" % name, lambda: os.path.exists(ready))
        return ip

    # --- API server and kubectl ---

    def start_apiserver(self, extra=(), initial_rv=None, state=None):
        tls = os.path.join(self.tmp, "tls")
        portfile = os.path.join(self.tmp, "kapi.port")
        if os.path.exists(portfile):
            os.unlink(portfile)
        # A restarted API server comes back on the same ports, as a real one
        # does behind its service address.
        args = [sys.executable, os.path.join(ROOT, "tests", "apiserver", "kapi.py"),
                "--listen", "127.0.0.1:%d" % (self.api_port or 0), "--tls-dir", tls, "--token", TOKEN,
                "--port-file", portfile, "--control-listen", "127.0.0.1:%d" % (self.control_port or 0),
                "--bookmark-interval", "1"] + list(extra)
        if initial_rv:
            args += ["--initial-rv", str(initial_rv)]
        for s in state or ():
            args += ["--state", s]
        self.spawn("kapi", args, ns="n1", log=os.path.join(self.tmp, "kapi.log"))

        def ports():
            try:
                with open(portfile) as f:
                    lines = f.read().split()
            except OSError:
                return None
            return lines if len(lines) >= 2 else None
        p = wait_for("the API server's port file", ports, timeout=20)
        self.api_port, self.control_port = int(p[0]), int(p[1])
        self.kubeconfig = os.path.join(tls, "kubeconfig")

    def stop_apiserver(self):
        self.kill("kapi")

    def kubectl(self, *args, input=None, check=True):
        return self.run(["kubectl", "--kubeconfig", self.kubeconfig, "--request-timeout", "10s"] + list(args),
                        ns="n1", input=input, check=check)

    def apply_objects(self, verb, objs):
        doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
        return self.kubectl(verb, "--validate=false", "-f", "-", input=doc)

    def fault(self, what, body=None):
        data = json.dumps(body or {})
        return self.run(["curl", "-sf", "-X", "POST", "-H", "Content-Type: application/json", "-d", data,
                         "http://127.0.0.1:%d/fault/%s" % (self.control_port, what)], ns="n1")

    def state_requests(self):
        """The API server's log of requests: {"time", "method", "path", "userAgent", ...}."""
        return json.loads(self.run(["curl", "-sf", "http://127.0.0.1:%d/requests" % self.control_port],
                                   ns="n1").stdout)["requests"]

    def state(self):
        return json.loads(self.run(["curl", "-sf", "http://127.0.0.1:%d/state" % self.control_port], ns="n1").stdout)

    # --- kproxy ---

    @staticmethod
    def content_type_args():
        """The wire format: kproxy's default (protobuf) unless the run asks
        for another (KPROXY_E2E_CONTENT_TYPE=application/json)."""
        ct = os.environ.get("KPROXY_E2E_CONTENT_TYPE")
        return ["--kube-api-content-type", ct] if ct else []

    def start_kproxy(self, *extra, mode=None, env_path=None):
        """Starts kproxy in n1 (with env_path: that PATH and no other)."""
        self.kproxy_log = os.path.join(self.tmp, "kproxy.log")
        args = (["env", "PATH=" + env_path] if env_path else []) + [self.kproxy_bin, "--proxy-mode", mode or self.mode, "--kubeconfig", self.kubeconfig,
                "--hostname-override", "node-1",
                "--cluster-cidr", "10.244.0.0/16", "--healthz-bind-address", "127.0.0.1:10256",
                "--metrics-bind-address", "127.0.0.1:10249", "--watch-idle-timeout", "4s",
                "--iptables-sync-period", "4s", "--state-dir", self.state_dir, "-v=2"] + \
            self.content_type_args() + list(extra)
        with open(self.kproxy_log, "a") as f:
            f.write("=== start %s\n" % " ".join(args))
        self.kproxy = self.spawn("kproxy", args, ns="n1", log=self.kproxy_log)

    def stop_kproxy(self, sig=signal.SIGTERM):
        p = self.kill("kproxy", sig)
        self.kproxy = None
        return p.returncode if p else None

    def kproxy_output(self):
        try:
            with open(self.kproxy_log) as f:
                return f.read()
        except OSError:
            return ""

    def nat(self):
        return self.run(["iptables-save", "-t", "nat"], ns="n1").stdout

    def nft(self):
        """kproxy's nftables table as `nft list` prints it; "" if there is none."""
        return self.run(["nft", "list", "table", "ip", "kube-proxy"], ns="n1", check=False).stdout

    def frontends(self):
        """What userspace mode serves now (/debug/backend): "address IP"
        lines, and a line per open frontend; "" if kproxy does not answer."""
        return self.run(["curl", "-s", "-f", "http://127.0.0.1:10249/debug/backend"], ns="n1", check=False).stdout

    def rules(self, mode=None):
        """The kernel's rules of a mode (default: the lab's): the nat table
        in iptables mode, the kube-proxy table in nftables mode; in
        userspace mode, its frontends."""
        mode = mode or self.mode
        if mode == "userspace":
            return self.frontends()
        return self.nat() if mode == "iptables" else self.nft()

    def targets(self, svc, port, rules=None, mode=None):
        """Sorted "ip:port" DNAT targets of service port svc ("ns/name") port,
        read from the kernel (or from rules, as rules() returned them)."""
        mode = mode or self.mode
        if rules is None:
            rules = self.rules(mode)
        if mode == "iptables":
            return dnat_targets(rules, "%s:%s" % (svc, port))
        if mode == "userspace":
            return frontend_targets(rules, "%s:%s" % (svc, port))
        return nft_targets(rules, svc, port)

    def leftovers(self, mode):
        """Whatever a mode left in the kernel: KUBE-* lines of iptables-save
        (but KUBE-FIREWALL, which kubelet owns too) or the kube-proxy tables (and shards)."""
        if mode == "userspace":
            return [l for l in self.run(["ip", "-o", "link", "show"], ns="n1").stdout.splitlines()
                    if " kube-proxy0:" in l]
        if mode == "iptables":
            return [l for t in ("nat", "filter", "mangle")
                    for l in self.run(["iptables-save", "-t", t], ns="n1").stdout.splitlines()
                    if "KUBE-" in l and "KUBE-FIREWALL" not in l]
        return re.findall(r"^table (ip6? kube-proxy(?:-\d+)?)$", self.run(["nft", "list", "tables"], ns="n1").stdout,
                          re.M)

    def healthz(self, path="healthz"):
        p = self.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:10256/" + path],
                     ns="n1", check=False)
        return p.stdout.strip()

    def wait_healthy(self, what="kproxy's /healthz to answer 200", timeout=20):
        """Waits for /healthz to answer 200; fails at once if kproxy exited."""
        def healthy():
            if self.kproxy is None or self.kproxy.poll() is not None:
                raise LabError("kproxy exited (%s) while waiting for %s:\n%s"
                               % (self.kproxy and self.kproxy.returncode, what, self.kproxy_output()[-2000:]))
            return self.healthz() == "200"
        return wait_for(what, healthy, timeout=timeout)

    def wait_rules(self, what, pred, timeout=15, mode=None):
        """Waits until the kernel's rules (as rules() returns them) satisfy
        pred: the kernel is the truth, not kproxy's log."""
        return wait_for(what, lambda: pred(self.rules(mode)), timeout=timeout)

    def wait_targets(self, what, svc, port, want, timeout=15, mode=None):
        """Waits until service port svc/port DNATs to exactly want (ip:port strings)."""
        want = sorted(want)
        return self.wait_rules(what, lambda r: self.targets(svc, port, r, mode) == want, timeout, mode)

    def restart_under_traffic(self, sig, host, port, seconds=6, ns="p-cl", mode=None):
        """Restarts kproxy (stopped with sig; in another mode if given) while
        a client in ns loops new connections to host:port for `seconds`,
        starting a second before the stop; returns the client's summary.
        The loop is paced (2 ms between tries, some 400 a second, a hundred
        or more inside the restart): unpaced it makes 2,000 a second, each
        leaving a TIME_WAIT in ns for a minute, and the restarts of one class
        run the client's netns out of its 28,000 ephemeral ports
        (EADDRNOTAVAIL), a failure of the test, not of the proxy."""
        result = {}

        def loop():
            result["r"] = self.client(ns, host, port, 0, "--until-seconds", str(seconds), "--interval", "0.002")
        t = threading.Thread(target=loop)
        t.start()
        time.sleep(1)   # traffic before, during and after the restart
        self.stop_kproxy(sig)
        self.start_kproxy(mode=mode)
        self.wait_healthy("healthz after restart")
        t.join(timeout=60)
        return result["r"]

    def client(self, ns, host, port, count=300, *flags):
        p = self.run([sys.executable, os.path.join(HERE, "client.py"), host, str(port), str(count)] + list(flags),
                     ns=ns, timeout=300)
        return json.loads(p.stdout)


def frontend_targets(text, svc_port):
    """The endpoints userspace mode sends svc_port's cluster-IP traffic to,
    from /debug/backend's text (sorted "ip:port"; [] without a frontend)."""
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 5 and f[0] in ("tcp", "udp") and f[2] == svc_port and f[3] == "internal":
            return sorted(f[f.index("->") + 1:])
    return []


def dnat_targets(nat, comment):
    """The endpoints a service port DNATs to, read from iptables-save output
    (which, with the nf_tables backend, quotes every comment and reorders
    matches)."""
    return sorted(re.findall(r'^-A KUBE-SEP-\S+ .*--comment "?%s"? .*-j DNAT --to-destination (\S+)'
                             % re.escape(comment), nat, re.M))


def nft_chains(ruleset):
    """{chain name: [rule, ...]} of an `nft list table` output."""
    return {name: [l.strip() for l in body.splitlines() if l.strip()]
            for name, body in re.findall(r"^\tchain (\S+) \{\n(.*?)^\t\}$", ruleset, re.M | re.S)}


def nft_elements(ruleset, name):
    """The elements of set or map `name`, as a set of strings ("10.96.0.10 . tcp . 80 : goto ...")."""
    block = re.search(r"^\t(?:set|map) %s \{\n(.*?)^\t\}$" % re.escape(name), ruleset, re.M | re.S)
    elements = block and re.search(r"^\t\telements = \{ (.*?) \}$", block.group(1), re.M | re.S)
    return {e.strip() for e in elements.group(1).split(",")} if elements else set()


def nft_targets(ruleset, svc, port):
    """The endpoints service port svc ("ns/name") port DNATs to in an `nft
    list table` output: the dnat targets of the endpoint chains that its
    service chain jumps to, if something (a map element, a chain) jumps to
    that service chain. Stale or unreferenced chains do not count."""
    chains = nft_chains(ruleset)
    out = []
    for name, body in chains.items():
        if not re.fullmatch(r"service-[A-Z0-9]{8}-%s/[a-z]+/%s" % (re.escape(svc), re.escape(port)), name):
            continue
        if not re.search(r"(?:goto|jump) %s(?=[\s,}]|$)" % re.escape(name), ruleset, re.M):
            continue
        for ep in sorted(set(re.findall(r"(?:goto|jump) (endpoint-\S+)", "\n".join(body)))):
            out += re.findall(r"dnat to (\S+)", "\n".join(chains.get(ep, [])))
    return sorted(out)


def service(name, ip, port=80, target=8080, proto="TCP", typ=None, node_port=None, etp=None, affinity=None,
            ns="default"):
    spec = {"clusterIP": ip, "clusterIPs": [ip],
            "ports": [{"name": "p", "port": port, "targetPort": target, "protocol": proto}]}
    if typ:
        spec["type"] = typ
    if node_port:
        spec["ports"][0]["nodePort"] = node_port
    if etp:
        spec["externalTrafficPolicy"] = etp
    if affinity:
        spec["sessionAffinity"] = "ClientIP"
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def slice_(name, svc, endpoints, port=8080, proto="TCP", ns="default", port_name="p"):
    """endpoints: list of (ip, node) or (ip, node, ready)."""
    eps = []
    for e in endpoints:
        ready = e[2] if len(e) > 2 else True
        eps.append({"addresses": [e[0]], "nodeName": e[1],
                    "conditions": {"ready": ready, "serving": ready, "terminating": False}})
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": ns, "labels": {"kubernetes.io/service-name": svc}},
            "addressType": "IPv4", "ports": [{"name": port_name, "port": port, "protocol": proto}], "endpoints": eps}


def node(name):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"podCIDR": NODE_POD_NET[name] + ".0/24", "podCIDRs": [NODE_POD_NET[name] + ".0/24"]},
            "status": {"addresses": [{"type": "InternalIP", "address": NODE_IPS[name]}]}}


class BpfScratch:
    """What socket load balancing needs of a node, of a test's own: a
    cgroup2 mount and a bpf filesystem mounted under dir, and a cgroup
    created in the former (never the machine's root cgroup). close()
    empties and removes the cgroups and unmounts both, also after a
    failure."""

    def __init__(self, dir, name):
        self.cgroot = os.path.join(dir, "cgroup2")
        self.bpffs = os.path.join(dir, "bpffs")
        self.cgroups = []
        os.makedirs(self.cgroot)
        os.makedirs(self.bpffs)
        try:
            subprocess.run(["mount", "-t", "cgroup2", "none", self.cgroot], check=True)
            subprocess.run(["mount", "-t", "bpf", "bpf", self.bpffs], check=True)
            self.cgroup = self.mkcgroup(os.path.join(self.cgroot, "%s-%d" % (name, os.getpid())))
        except Exception:
            self.close()
            raise

    def mkcgroup(self, path):
        os.makedirs(path)
        self.cgroups.append(path)
        return path

    def close(self):
        for cg in reversed(self.cgroups):
            if not os.path.isdir(cg):
                continue
            def procs():
                with open(os.path.join(cg, "cgroup.procs")) as f:
                    return f.read().split()
            for pid in procs():
                subprocess.run(["kill", "-9", pid], stderr=subprocess.DEVNULL)
            wait_for("the test cgroup %s empty" % cg, lambda: not procs())
            os.rmdir(cg)
        self.cgroups = []
        for m in (self.bpffs, self.cgroot):
            if os.path.ismount(m):
                subprocess.run(["umount", m])

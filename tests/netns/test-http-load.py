#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kproxy's HTTP servers keep answering under connection floods
(http/mhd-conns.h): the health server (/healthz), a health-check node
port and the metrics server (/metrics), each under

  idle       1000 connections that send nothing;
  slowloris  300 connections that send half a request and then a header
             line every --trickle seconds;
  burst      300 connections opened at once and then all closed, three
             times in a row (once left the health server deaf for good).

Half of each load comes from one address (127.0.0.2), which meets the
limit per client; the other half from 100 addresses (127.0.1.x), which
meets the server's limit. While a load is held, probes from the load's
own address (a kubelet on the same host as the attacker) and from another
one (127.0.0.1) must be answered within 1 s; once the load is closed,
kproxy's open files must come back to what they were before it.

kproxy runs in the namespace kp-http-<pid>-n1 against the stand-in API
server (tests/e2e/netlab.py), with its servers on that namespace's
loopback; the loads and the probes are sockets this process opens after
entering the namespace (setns).

Usage: tests/netns/test-http-load.py BUILD_DIR [--hold S] [--trickle S]
       [--only SERVER[/LOAD]]   (root; iproute2, python3, kubectl, nft)
Prints a table of the figures (probe latency, kproxy's open files before,
during and after each load, and how many of the load's connections kproxy
closed); exits 1 if any check failed.

Network safety: the lab's namespaces are deleted on exit, also on failure.
"""
import argparse
import ctypes
import os
import resource
import selectors
import socket
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
from netlab import Lab, LabError, node, service, slice_, wait_for  # noqa: E402

CLONE_NEWNET = 0x40000000
HCNP_PORT = 32000
NODE_IP = "192.168.50.11"       # on the namespace's lo: the node's address
SERVERS = {                     # name: (address, port, path)
    "healthz": ("127.0.0.1", 10256, "/healthz"),
    "hcnp": (NODE_IP, HCNP_PORT, "/"),     # nftables mode's nodePortAddresses: the node's IPs
    "metrics": ("127.0.0.1", 10249, "/metrics"),
}
LOAD_ADDR, OTHER_ADDR = "127.0.0.2", "127.0.0.1"
SPREAD_ADDRS = ["127.0.1.%d" % i for i in range(1, 101)]
ANSWER_WITHIN = 1.0             # seconds, the bound for a probe
PROBE_TIMEOUT = 3.0             # a probe slower than this is a failure anyway

passed = failed = 0


def result(name, ok, why=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   %s" % name, flush=True)
    else:
        failed += 1
        print("FAIL %s: %s" % (name, why), flush=True)


def enter_netns(name):
    """Moves this (single-threaded) process into the namespace: sockets
    opened afterwards live there."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/run/netns/" + name, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns(%s): %s" % (name, os.strerror(e)))
    finally:
        os.close(fd)


def probe(addr, port, path, src):
    """One request on a fresh connection from src; returns (status or
    None, seconds from connect to the end of the answer)."""
    t0 = time.monotonic()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(PROBE_TIMEOUT)
    try:
        s.bind((src, 0))
        s.connect((addr, port))
        s.sendall(b"GET %s HTTP/1.1\r\nHost: node\r\nConnection: close\r\n\r\n" % path.encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        status = int(data.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        status = None
    finally:
        s.close()
    return status, time.monotonic() - t0


class Load:
    """n connections to addr:port, opened at once, every other one from
    LOAD_ADDR and the rest spread over SPREAD_ADDRS; with head, each sends
    it (half a request) and trickle() adds a header line."""

    def __init__(self, addr, port, n, head=None):
        self.sel = selectors.DefaultSelector()
        self.socks = []
        self.closed_by_server = 0
        self.lines = 0
        self.trickling = head is not None
        for i in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.bind((LOAD_ADDR if i % 2 == 0 else SPREAD_ADDRS[(i // 2) % len(SPREAD_ADDRS)], 0))
            try:
                s.connect((addr, port))
            except BlockingIOError:
                pass
            self.socks.append(s)
            self.sel.register(s, selectors.EVENT_WRITE)
        # The kernel completes the handshakes (the listen backlog is 4096)
        # whether or not kproxy accepts them.
        pending, deadline = set(self.socks), time.monotonic() + 10
        while pending and time.monotonic() < deadline:
            for key, _ in self.sel.select(timeout=0.5):
                pending.discard(key.fileobj)
                self.sel.unregister(key.fileobj)
        if pending:
            raise LabError("%d of %d connections did not complete" % (len(pending), n))
        for s in self.socks:
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                raise LabError("a load connection failed")
            if head:
                try:
                    s.send(head)
                except OSError:
                    pass        # already let go of: pump() sees it
            self.sel.register(s, selectors.EVENT_READ)

    def pump(self, timeout=0.0):
        """Notices the connections kproxy closed (EOF or reset)."""
        for key, _ in self.sel.select(timeout=timeout):
            s = key.fileobj
            try:
                if s.recv(65536):
                    continue
            except BlockingIOError:
                continue
            except OSError:
                pass
            self.sel.unregister(s)
            self.closed_by_server += 1

    def open(self):
        return len(self.sel.get_map())

    def trickle(self):
        if not self.trickling:
            return
        self.lines += 1
        for key in list(self.sel.get_map().values()):
            try:
                key.fileobj.send(b"X-Slow-%d: 1\r\n" % self.lines)
            except OSError:
                pass

    def close(self):
        self.sel.close()
        for s in self.socks:
            s.close()


class Figures:
    def __init__(self, name):
        self.name = name
        self.latencies = []
        self.probes = self.fails = 0
        self.fds_during = []
        self.fds_before = self.fds_after = None
        self.closed_by_server = 0

    def row(self):
        lat = sorted(self.latencies) or [float("nan")]
        return "%-20s %5d %4d %7.1f %7.1f %7.1f %6d %6d %6s %7d" % (
            self.name, self.probes, self.fails, 1000 * lat[0], 1000 * statistics.median(lat),
            1000 * lat[-1], self.fds_before, max(self.fds_during or [0]),
            "-" if self.fds_after is None else self.fds_after, self.closed_by_server)


HEADER = "%-20s %5s %4s %7s %7s %7s %6s %6s %6s %7s" % (
    "server/load", "probes", "fail", "min ms", "med ms", "max ms", "fds0", "fds-max", "fds1", "closed")


class Bench:
    def __init__(self, lab, args):
        self.lab = lab
        self.args = args
        self.pid = lab.kproxy.pid       # ip netns exec execs kproxy: the same process
        self.rows = []

    def fds(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))

    def probe_into(self, fig, server, src):
        status, took = probe(*SERVERS[server], src)
        fig.probes += 1
        if status is None or took > ANSWER_WITHIN:
            fig.fails += 1
        if status is not None:
            fig.latencies.append(took)
        fig.fds_during.append(self.fds())
        return status, took

    def settle(self, fig, base):
        """Waits for kproxy's open files to come back to base."""
        try:
            wait_for("kproxy's open files back to %d" % base, lambda: self.fds() <= base, timeout=10)
        except LabError:
            pass
        fig.fds_after = self.fds()

    def hold(self, fig, server, load):
        """Probes (alternating sources) while load is held for --hold s."""
        end, next_line = time.monotonic() + self.args.hold, time.monotonic() + self.args.trickle
        i = 0
        while time.monotonic() < end:
            load.pump(0.05)
            if time.monotonic() >= next_line:
                load.trickle()
                next_line += self.args.trickle
            self.probe_into(fig, server, LOAD_ADDR if i % 2 == 0 else OTHER_ADDR)
            i += 1
            load.pump(0.1)
        load.pump(0.2)
        fig.closed_by_server = load.closed_by_server

    def run(self, server, kind):
        addr, port, path = SERVERS[server]
        fig = Figures("%s/%s" % (server, kind))
        base = fig.fds_before = self.fds()
        if kind == "burst":
            for _ in range(3):
                load = Load(addr, port, 300)
                fig.fds_during.append(self.fds())
                load.close()
                # The first probe right after the closes, then a few more.
                for j in range(3):
                    self.probe_into(fig, server, LOAD_ADDR if j % 2 else OTHER_ADDR)
        else:
            head = None
            if kind == "slowloris":
                head = b"GET %s HTTP/1.1\r\nHost: node\r\n" % path.encode()
            load = Load(addr, port, 1000 if kind == "idle" else 300, head)
            try:
                self.hold(fig, server, load)
            finally:
                load.close()
        self.settle(fig, base)
        self.rows.append(fig)
        name = fig.name
        result("%s: every probe answered within %.0f s" % (name, ANSWER_WITHIN),
               fig.fails == 0 and fig.latencies, "%d of %d late or unanswered; answered in %s"
               % (fig.fails, fig.probes, ", ".join("%.3f s" % x for x in fig.latencies)))
        result("%s: open files back to %d after the load (%s)" % (name, base, fig.fds_after),
               fig.fds_after is not None and fig.fds_after <= base, "still %s" % fig.fds_after)
        if kind != "burst":
            # Else the probes above prove nothing: a server that dropped
            # every connection at once would pass them.
            result("%s: the load was held (up to %d open files)" % (name, max(fig.fds_during)),
                   max(fig.fds_during) > base + 16, "never more than %d" % max(fig.fds_during))


def build_lab(build):
    lab = Lab(build, "nftables")
    lab.prefix = "kp-http-%d" % os.getpid()
    lab.add_ns("n1")
    lab.run(["ip", "addr", "add", NODE_IP + "/24", "dev", "lo"], ns="n1")
    lab.start_apiserver()
    lb = service("lb", "10.96.0.60", typ="LoadBalancer", node_port=30090, etp="Local")
    lb["spec"]["healthCheckNodePort"] = HCNP_PORT
    lab.apply_objects("create", [node("node-1"), lb, slice_("lb-1", "lb", [("10.244.1.10", "node-1")])])
    lab.start_kproxy()
    lab.wait_healthy()
    wait_for("the health-check node port", lambda: lab.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://%s:%d/" % (NODE_IP, HCNP_PORT)],
        ns="n1", check=False).stdout == "200", timeout=20)
    return lab


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--hold", type=float, default=2.0, help="seconds each idle/slowloris load is held")
    ap.add_argument("--trickle", type=float, default=1.0, help="seconds between a slowloris client's lines")
    ap.add_argument("--only", default="", help="SERVER or SERVER/LOAD")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root for network namespaces")
    started = time.monotonic()
    lab = build_lab(args.build)
    try:
        # kproxy keeps the limit on open files it was started with; this
        # process needs more than 1000 for the idle load.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
        enter_netns(lab.ns("n1"))
        bench = Bench(lab, args)
        for server in SERVERS:
            for kind in ("idle", "slowloris", "burst"):
                if args.only and args.only not in (server, "%s/%s" % (server, kind)):
                    continue
                bench.run(server, kind)
                if lab.kproxy.poll() is not None:
                    result("kproxy still running", False, lab.kproxy_output()[-2000:])
                    return
        result("kproxy still running", lab.kproxy.poll() is None)
        print(HEADER)
        for fig in bench.rows:
            print(fig.row())
    finally:
        lab.close()
        print("%d passed, %d failed (%.0f s)" % (passed, failed, time.monotonic() - started))


if __name__ == "__main__":
    main()
    sys.exit(1 if failed else 0)

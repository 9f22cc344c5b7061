# SPDX-License-Identifier: Apache-2.0
"""The end-to-end suite (test_e2e.Suite) in userspace mode: kproxy holds the
service addresses on kube-proxy0 and forwards each connection itself. The
tests that apply run as in the packet-filter modes, "the rules" being what
kproxy serves (/debug/backend); the tests of conntrack and of packet-filter
details are skipped, each saying why. Its own: no netfilter object in the
node namespace, and none created where the iptables, ip6tables and nft
commands do not exist at all.

Run as root: KPROXY_BUILD=build python3 tests/e2e/test_userspace.py
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netlab import NODE_IPS, slice_, wait_for  # noqa: E402
import promtext  # noqa: E402
from test_e2e import UPSTREAM, Suite  # noqa: E402


def skip(why):
    def test(self):
        self.skipTest(why)
    return test


class E2EUserspace(Suite, unittest.TestCase):
    MODE, OTHER = "userspace", "nftables"

    def assert_first_sync_rules(self):
        lab = self.lab
        text = lab.frontends()
        # A service without endpoints has its address and no frontend: its
        # port is closed.
        self.assertIn("address 10.96.0.30\n", text)
        self.assertNotIn("default/empty", text)
        self.assertRegex(text, r"(?m)^tcp 10\.96\.0\.10:80 default/web:p internal -> ")
        self.assertRegex(text, r"(?m)^udp 10\.96\.0\.53:53 default/dns:p internal -> ")
        self.assertRegex(text, r"(?m)^tcp 0\.0\.0\.0:30080 default/np:p external -> ")
        addrs = lab.run(["ip", "-o", "addr", "show", "dev", "kube-proxy0"], ns="n1").stdout
        for ip in ("10.96.0.10", "10.96.0.20", "10.96.0.30", "10.96.0.53"):
            self.assertIn(" %s/32 " % ip, addrs)
        self.assert_no_netfilter_objects()

    def assert_no_netfilter_objects(self):
        ruleset = self.lab.run(["nft", "list", "ruleset"], ns="n1").stdout
        self.assertEqual(ruleset.strip(), "", "netfilter objects in the node namespace")

    def assertUpstreamShape(self, m):
        """Upstream has no userspace mode any more: every family is one
        kube-proxy 1.34 serves in nftables mode, with its shape, or one of
        kproxy's own kproxy_userspace_ families."""
        up = promtext.upstream_families(UPSTREAM, "nftables")
        for name, fam in m.items():
            if name.startswith("kproxy_userspace_"):
                self.assertIn(fam["type"], ("counter", "gauge"), name)
                continue
            self.assertIn(name, up, "%s is not a family of nftables mode" % name)
            self.assertEqual(fam["type"], up[name][0], name)
        self.assertNotIn("kubeproxy_conntrack_reconciler_deleted_entries_total", m)

    def test_07_nodeport_local_policy_keeps_client_ip(self):
        # Policy Local still picks only this node's endpoints, but the
        # endpoint sees the node's address: kproxy made the connection.
        r = self.client(NODE_IPS["node-1"], 30081, 100, ns="n2")
        self.assertEqual(r["errors"], {})
        self.assertEqual(r["replies"], {"a2": 100})
        self.assertNotIn(NODE_IPS["node-2"], r["peers"])

    def test_08b_udp_flow_to_a_service_scaled_to_zero_is_rejected(self):
        # A live UDP flow (one client socket) to a service that loses its
        # last endpoint: the frontend closes with its sessions, and the
        # flow's next datagram is refused (port unreachable).
        lab = self.lab

        def answered():
            return promtext.value(self.scrape(), "kproxy_userspace_bytes_total", direction="to_clients",
                                  protocol="udp")
        before = answered()
        proc = subprocess.Popen(
            ["ip", "netns", "exec", lab.ns("p-cl"), sys.executable,
             os.path.join(os.path.dirname(__file__), "client.py"), "10.96.0.53", "53", "0", "--udp",
             "--same-socket", "--connected", "--until-seconds", "25", "--timeout", "0.3", "--interval", "0.05"],
            stdout=subprocess.PIPE, text=True)
        try:
            wait_for("the flow's datagrams answered", lambda: answered() > before, timeout=20)
            self.replace_slice(slice_("dns-1", "dns", [], port=5353, proto="UDP"))
            lab.wait_targets("dns without endpoints", "default/dns", "p", [])
            out, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        r = json.loads(out)
        self.assertGreater(r["replies"].get("a2", 0), 0, "the flow was not live before: %s" % r)
        self.assertGreater(r["errors"].get("ECONNREFUSED", 0), 0, r)
        self.replace_slice(slice_("dns-1", "dns", [(self.ip["a2"], "node-1")], port=5353, proto="UDP"))
        lab.wait_targets("dns back at a2", "default/dns", "p", self.eps("a2", port=5353))
        r = self.client("10.96.0.53", 53, 5, "--udp")
        self.assertEqual(r["replies"], {"a2": 5}, r)

    # --- restarts: the sockets handed to a successor (docs/userspace.md) ---

    def surge_restart(self, *extra):
        """Starts a successor beside the running kproxy (a DaemonSet update
        with maxSurge), waits for the hand-over, then stops the old one as
        the kubelet would (SIGTERM). Returns the old one's exit status."""
        lab = self.lab
        mark = len(lab.kproxy_output())
        lab.procs["kproxy-old"] = lab.procs.pop("kproxy")
        lab.start_kproxy(*extra)
        # Both ends say so (each in its own time: the two processes write
        # the one log file).
        wait_for("the old kproxy to hand its sockets over",
                 lambda: "Handed the node over to a successor" in lab.kproxy_output()[mark:], timeout=20)
        wait_for("the new kproxy to take them", lambda: re.search(
            r"Took \d+ service sockets from the process this one replaces", lab.kproxy_output()[mark:]), timeout=20)
        # The kubelet deletes the old pod once the new one is ready.
        lab.wait_healthy("the successor's /healthz (its bind retried once the old one let go)")
        return lab.kill("kproxy-old", signal.SIGTERM).returncode

    def test_13_stopped_proxy_keeps_rules_restart_applies_changes(self):
        # Stopped with no successor, nothing forwards: connections are
        # refused at once (the addresses stay, so nothing leaves the node
        # for them). A pod replaced meanwhile is served after the restart.
        lab, ip = self.lab, self.ip
        self.assertEqual(lab.stop_kproxy(signal.SIGTERM), 0)
        # Its last line says what a stop leaves: no rules in this mode.
        self.assertRegex(lab.kproxy_output(), r"Received signal Terminated, exiting; new connections to services on "
                         r"this node are refused until kproxy runs again\n")
        self.assertNotIn("rules stay", lab.kproxy_output())
        self.assertIn(" 10.96.0.10/32 ", lab.run(["ip", "-o", "addr", "show", "dev", "kube-proxy0"], ns="n1").stdout)
        r = self.client("10.96.0.10", 80, 5)
        self.assertEqual(r["errors"], {"ECONNREFUSED": 5}, r)
        self.assertLess(r["max_connect_ms"], 500, r)
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["a2"], "node-1"), (ip["a4"], "node-1")]))
        lab.start_kproxy()
        self.wait_web("a4 in web's frontend after the restart", "a1", "a2", "a4", timeout=20)
        r = self.client("10.96.0.10", 80, 300)
        self.assertEqual(r["errors"], {})
        self.assertIn("a4", r["replies"])
        self.assertNotIn("a3", r["replies"])

    def test_14_restart_under_traffic_fails_no_connection(self):
        # TCP and UDP clients loop through a surge restart: not one fails.
        # Each paced at about 1000 tries a second: flat out, on two shared
        # cores, the single-threaded pod servers fall seconds behind now
        # and then with or without a restart, which is not what this tests.
        lab = self.lab
        results = {}

        def loop(key, *flags):
            results[key] = lab.client("p-cl", *flags)
        threads = [threading.Thread(target=loop, args=("tcp", "10.96.0.10", 80, 0, "--until-seconds", "6",
                                                       "--interval", "0.001")),
                   threading.Thread(target=loop, args=("udp", "10.96.0.53", 53, 0, "--udp", "--until-seconds", "6",
                                                       "--timeout", "1", "--interval", "0.001"))]
        for t in threads:
            t.start()
        time.sleep(1)   # traffic before, during and after
        self.assertEqual(self.surge_restart(), 0)
        for t in threads:
            t.join(timeout=60)
        for key in ("tcp", "udp"):
            self.assertEqual(results[key]["errors"], {}, "%s: %s" % (key, results[key]))
            self.assertGreater(results[key]["attempts"], 100, key)

    def test_14b_surge_readiness_is_the_successors(self):
        # On the host network both pods' /healthz answer on one port
        # (SO_REUSEPORT): from the moment the successor starts until it has
        # taken the sockets, neither is ready, so the new pod's readiness
        # probe cannot pass on the old process's answer; the old one serves
        # its clients meanwhile. The successor's lists are held back (429,
        # Retry-After: 1) so that window lasts.
        lab = self.lab
        self.assertEqual(lab.healthz(), "200")
        mark = len(lab.kproxy_output())
        lab.fault("error", {"code": 429, "retryAfter": 1, "seconds": 4, "match": "/api/v1/services"})
        lab.procs["kproxy-old"] = lab.procs.pop("kproxy")
        lab.start_kproxy()
        wait_for("the old kproxy to hear of its successor",
                 lambda: "A successor is starting" in lab.kproxy_output()[mark:], timeout=10)
        self.assertNotIn("Took", lab.kproxy_output()[mark:])
        codes = [lab.healthz() for _ in range(20)]
        self.assertEqual(set(codes), {"503"}, codes)
        self.assertEqual(lab.healthz("livez"), "200")
        r = self.client("10.96.0.10", 80, 20)
        self.assertEqual(r["errors"], {}, r)
        self.assertNotIn("Took", lab.kproxy_output()[mark:], "the window closed before the probes")
        wait_for("the successor to take the sockets", lambda: re.search(
            r"Took \d+ service sockets from the process this one replaces", lab.kproxy_output()[mark:]), timeout=30)
        lab.wait_healthy("the successor's /healthz")
        self.assertEqual(lab.kill("kproxy-old", signal.SIGTERM).returncode, 0)
        r = self.client("10.96.0.10", 80, 20)
        self.assertEqual(r["errors"], {}, r)

    def test_15_sigkill_restart_under_traffic_fails_no_connection(self):
        # A crash closes every socket with the process: connections are
        # refused (never hang) until the restarted kproxy has bound its
        # frontends, and then all succeed.
        lab = self.lab
        lab.stop_kproxy(signal.SIGKILL)
        r = self.client("10.96.0.10", 80, 3)
        self.assertEqual(r["errors"], {"ECONNREFUSED": 3}, r)
        lab.start_kproxy()
        self.wait_web("web served after the crash", "a1", "a2", "a4")
        r = self.client("10.96.0.10", 80, 300)
        self.assertEqual(r["errors"], {}, r)

    def test_15c_switch_to_the_other_mode_and_back(self):
        # Into userspace mode: the other mode's rules serve until the
        # frontends are bound, then go. A connection in flight at that
        # instant may fail (its NAT binding stops applying with the last
        # nat chain: docs/userspace.md), no more than that. Out of it: its
        # sockets close with it, so connections are refused until the new
        # mode's first sync, and not after.
        lab = self.lab
        # conntrack's entries of this mode's connections, one each way (made
        # where anything else on the node has conntrack on, and in the
        # instant a NAT mode's table comes or goes), from client ports below
        # the ephemeral range. The NAT mode deletes them with the addresses:
        # left, one catches a client that reuses its port, whose connection
        # is then never DNAT-ed and goes to an address no longer local.
        stale = {20001: ["-s", "10.244.1.100", "-d", "10.96.0.10", "--sport", "20001", "--dport", "80",
                         "-r", "10.96.0.10", "-q", "10.244.1.100", "--reply-port-src", "80",
                         "--reply-port-dst", "20001"],
                 20002: ["-s", "10.96.0.10", "-d", "10.244.1.100", "--sport", "80", "--dport", "20002",
                         "-r", "10.244.1.100", "-q", "10.96.0.10", "--reply-port-src", "20002",
                         "--reply-port-dst", "80"]}

        def entries(port):
            out = lab.run(["conntrack", "-L", "-p", "tcp"], ns="n1", check=False).stdout
            return [l for l in out.splitlines() if re.search(r"port=%d " % port, l)]
        for port, tuple_ in stale.items():
            lab.run(["conntrack", "-I", "-p", "tcp", "--state", "ESTABLISHED", "-t", "3600", "-u", "ASSURED"]
                    + tuple_, ns="n1")
            self.assertEqual(len(entries(port)), 1, port)
        r = lab.restart_under_traffic(signal.SIGTERM, "10.96.0.10", 80, mode="nftables")
        self.assertEqual(set(r["errors"]) - {"ECONNREFUSED"}, set(), r)
        lab.wait_targets("web's rules in nftables mode", "default/web", "p", self.eps("a1", "a2", "a4"),
                         mode="nftables")
        wait_for("kube-proxy0 gone", lambda: lab.leftovers("userspace") == [], timeout=20)
        for port in stale:
            wait_for("userspace mode's conntrack entry from port %d deleted" % port, lambda: not entries(port),
                     timeout=10)
            r = self.client("10.96.0.10", 80, 1, "--bind-port", str(port))
            self.assertEqual(r["errors"], {}, "from port %d: %s" % (port, r))
        r = self.client("10.96.0.10", 80, 60)
        self.assertEqual(r["errors"], {}, r)
        r = lab.restart_under_traffic(signal.SIGTERM, "10.96.0.10", 80)
        self.assertEqual(set(r["errors"]) - {"timeout", "ECONNRESET"}, set(), r)
        self.assertLessEqual(sum(r["errors"].values()), 2, r)
        self.assertGreater(r["attempts"], 100)
        self.wait_web("web served in userspace mode", "a1", "a2", "a4")
        wait_for("nftables mode's table gone", lambda: lab.leftovers("nftables") == [], timeout=20)
        self.assert_no_netfilter_objects()

        # Its DNAT-ed conntrack entries went with it: a client port reused
        # on such an entry would not reach the listener.
        def dnat_entries():
            out = lab.run(["conntrack", "-L", "-d", "10.96.0.10"], ns="n1", check=False).stdout
            return [l for l in out.splitlines() if re.search(r"dst=10\.96\.0\.10 .*src=10\.244\.", l)]
        wait_for("the NAT mode's conntrack entries deleted", lambda: not dnat_entries(), timeout=10)
        r = self.client("10.96.0.10", 80, 60)
        self.assertEqual(r["errors"], {})
        self.assertEqual(sorted(r["replies"]), ["a1", "a2", "a4"])

    def test_17_no_packet_filter_tools_needed(self):
        # A node without iptables, ip6tables or nft: kproxy in this mode
        # runs none (they are not on its PATH at all), serves, follows a
        # change, and leaves no netfilter object in the node namespace.
        lab, ip = self.lab, self.ip
        lab.stop_kproxy(signal.SIGTERM)
        lab.run([lab.kproxy_bin, "--cleanup", "--state-dir", lab.state_dir], ns="n1")
        lab.run(["nft", "flush", "ruleset"], ns="n1")
        empty = os.path.join(lab.tmp, "empty-bin")
        os.makedirs(empty, exist_ok=True)
        mark = len(lab.kproxy_output())
        lab.start_kproxy(env_path=empty)
        lab.wait_healthy("healthz without packet-filter tools")
        self.replace_slice(slice_("web-1", "web", [(ip["a2"], "node-1"), (ip["a3"], "node-1")]))
        self.wait_web("web at a2 and a3", "a2", "a3")
        r = self.client("10.96.0.10", 80, 100)
        self.assertEqual(r["errors"], {})
        self.assertEqual(sorted(r["replies"]), ["a2", "a3"])
        self.assert_no_netfilter_objects()
        legacy = shutil.which("iptables-legacy-save")
        if legacy:
            self.assertEqual(lab.run([legacy], ns="n1").stdout.strip(), "")
        log = lab.kproxy_output()[mark:]
        self.assertNotRegex(log, r"(?m)^E\d{4} ", "errors logged without the tools:\n" + log[-3000:])
        lab.stop_kproxy(signal.SIGTERM)
        lab.start_kproxy()
        lab.wait_healthy()

    def test_02c_trace_names_the_rule_that_decided(self):
        # No table holds the service: the trace sees the packet come in and
        # no rule of kproxy's (the frontend takes it in a socket); the
        # connection is served all the same.
        out = self.trace(lambda: self.assertEqual(self.client("10.96.0.10", 80, 1)["errors"], {}),
                         "--destination", "10.96.0.10:80")
        self.assertRegex(out, r"^packet 1: %s:\d+ -> 10.96.0.10:80 tcp" % self.ip["cl"])
        self.assertNotIn("KUBE-", out)
        self.assertNotIn("kube-proxy", out)

    # The packet-filter modes' own.
    test_02f_trace_json = skip("no table holds a service: test_02c's own version shows what a trace sees")
    test_06b_localhost_nodeport_is_counted = skip("iptables mode's nfacct counter")
    test_08c_udp_flow_to_a_deleted_service_is_not_delivered = skip(
        "conntrack entries: userspace mode's sessions end with their frontend (test_08b)")
    test_08d_conntrack_reconciler_deletions_are_counted = skip("no conntrack reconciler without conntrack NAT")
    test_11b_service_cidrs_drop_unallocated_cluster_ips = skip("the packet-filter modes' drop rule")
    test_15b_live_udp_flow_survives_a_restart = skip("conntrack entries across a restart")


if __name__ == "__main__":
    unittest.main(verbosity=2)

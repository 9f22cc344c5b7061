# SPDX-License-Identifier: Apache-2.0
"""--socket-lb beside nftables and iptables mode, end to end: the lab of test_e2e, with
kproxy's hooks attached to a cgroup this test creates (under a cgroup2
mount of its own) and pinned in a bpf filesystem it mounts; the clients of
the pod namespace run inside that cgroup unless a test says otherwise.
What the sockets do is checked from outside: the endpoints reached, the
source they see, conntrack holding no DNAT entry for translated
connections, the address getpeername() returns, and that a client outside
the cgroup is still served by the rules.

Run as root: KPROXY_BUILD=build python3 tests/e2e/test_socketlb.py
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netlab import BpfScratch, service, slice_, wait_for  # noqa: E402
import promtext  # noqa: E402
from test_e2e import Suite  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class SocketLB:
    """The tests, beside the mode a subclass (also a TestCase) names."""
    MODE = OTHER = None
    lab = None

    @classmethod
    def setUpClass(cls):
        Suite.setUpClass.__func__(cls)
        try:
            cls.scratch = BpfScratch(cls.lab.tmp, "kp-e2e")
        except Exception:
            cls.tearDownClass()
            raise
        cls.bpffs, cls.cg = cls.scratch.bpffs, cls.scratch.cgroup
        cls.pins = os.path.join(cls.bpffs, "kproxy")

    @classmethod
    def tearDownClass(cls):
        lab = cls.lab
        if lab:
            for key in list(lab.procs):
                lab.kill(key)
            if getattr(cls, "scratch", None):
                cls.scratch.close()
        Suite.tearDownClass.__func__(cls)

    # --- helpers ---

    def start(self, *extra):
        self.lab.start_kproxy("--socket-lb", "--socket-lb-cgroup", self.cg, "--socket-lb-pin-dir", self.pins,
                              *extra)
        self.lab.wait_healthy()

    def in_cgroup(self, args, timeout=120):
        """Runs args (a command in the pod namespace p-cl) inside the test's cgroup."""
        cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cg,
               "ip", "netns", "exec", self.lab.ns("p-cl")] + list(args)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True).stdout

    def client(self, host, port, count, *flags, inside=True):
        args = [sys.executable, os.path.join(HERE, "client.py"), host, str(port), str(count)] + list(flags)
        if inside:
            return json.loads(self.in_cgroup(args))
        return self.lab.client("p-cl", host, port, count, *flags)

    def dnat_entries(self, ip):
        out = self.lab.run(["conntrack", "-L", "-d", ip], ns="n1", check=False).stdout
        return [l for l in out.splitlines() if "src=10.244." in l.split("dst=%s" % ip, 1)[-1]]

    def replace_slice(self, obj):
        self.lab.apply_objects("replace", [obj])

    def wait_served(self, what, *pods, host="10.96.0.10", port=80):
        """Waits until clients in the cgroup reach exactly these pods."""
        want = set(pods)
        wait_for(what, lambda: set(self.client(host, port, 30)["replies"]) == want, timeout=15)

    def scrape(self):
        out = self.lab.run(["curl", "-sf", "http://127.0.0.1:10249/metrics"], ns="n1").stdout
        return promtext.parse(out)

    def metric(self, name):
        fam = self.scrape().get(name)
        return list(fam["samples"].values())[0] if fam and fam["samples"] else None

    # --- the tests, in order ---

    def test_00_render_prints_the_maps(self):
        # `kproxy render --socket-lb`: what the maps would hold for the
        # cluster as the API has it, one line per translated service port.
        lab = self.lab
        state = os.path.join(lab.tmp, "state.json")
        with open(state, "w") as f:
            f.write(lab.kubectl("get", "services,endpointslices,nodes", "-A", "-o", "json").stdout)
        # On the node: node ports are on its addresses.
        out = lab.run([lab.kproxy_bin, "render", "--socket-lb", "--proxy-mode", self.MODE,
                       "--hostname-override", "node-1", state], ns="n1").stdout
        lines = out.splitlines()
        self.assertIn("tcp 10.96.0.10:80 default/web:p internal -> %s:8080" % self.ip["a1"], lines)
        self.assertIn("udp 10.96.0.53:53 default/dns:p internal -> %s:5353" % self.ip["a1"], lines)
        self.assertTrue(any(l.startswith("tcp 10.96.0.40:80 default/sticky:p internal affinity=") for l in lines),
                        out)
        # No entry for a port without endpoints.
        self.assertNotIn("10.96.0.30", out)
        # Node ports, on every node address (iptables mode's default) or the
        # node's InternalIP (nftables mode's); ETP Local too goes to the
        # cluster endpoints for this node's own clients.
        self.assertRegex(out, r"(?m)^tcp (0\.0\.0\.0|192\.168\.50\.11):30080 default/np:p external -> "
                         r"%s:8080 %s:8080$" % (re.escape(self.ip["a1"]), re.escape(self.ip["b1"])))
        self.assertRegex(out, r"(?m)^tcp (0\.0\.0\.0|192\.168\.50\.11):30081 default/npl:p external -> "
                         r"%s:8080 %s:8080$" % (re.escape(self.ip["a2"]), re.escape(self.ip["b2"])))

    def test_01_translated_in_the_socket(self):
        lab, ip = self.lab, self.ip
        lab.run(["conntrack", "-F"], ns="n1", check=False)
        self.start()
        body = json.loads(lab.run(["curl", "-s", "http://127.0.0.1:10256/healthz"], ns="n1").stdout)
        self.assertEqual(body["socketLB"], "on", body)
        self.assertEqual(sorted(os.listdir(self.pins)), [
            "connect4", "connect6", "getpeername4", "getpeername6", "recvmsg4", "recvmsg6", "sendmsg4",
            "sendmsg6", "socklb_affinity", "socklb_revnat", "socklb_services", "socklb_slots",
            "socklb_translations"])
        r = self.client("10.96.0.10", 80, 100)
        self.assertEqual(r["replies"], {"a1": 100}, r)
        # The pod sees the client itself, and no DNAT happened: the
        # connection went to the pod's address from the start.
        self.assertEqual(r["peers"], {ip["cl"]: 100}, r)
        self.assertEqual(self.dnat_entries("10.96.0.10"), [])
        self.assertEqual(self.metric("kproxy_socket_lb_enabled"), 1)
        self.assertGreaterEqual(self.metric("kproxy_socket_lb_translations_total"), 100)
        self.assertGreaterEqual(self.metric("kproxy_socket_lb_services"), 4)

    def test_02_outside_the_cgroup_the_rules_serve(self):
        r = self.client("10.96.0.10", 80, 20, inside=False)
        self.assertEqual(r["replies"], {"a1": 20}, r)
        self.assertGreater(len(self.dnat_entries("10.96.0.10")), 0)

    def test_03_spread_and_removal(self):
        ip = self.ip
        self.lab.run(["conntrack", "-F"], ns="n1", check=False)
        self.replace_slice(slice_("web-1", "web", [(ip[p], "node-1") for p in ("a1", "a2", "a4")]))
        self.wait_served("web at a1, a2, a4", "a1", "a2", "a4")
        r = self.client("10.96.0.10", 80, 600)
        self.assertEqual(r["errors"], {}, r)
        # Each 200 +- 5 sd (sqrt(600 * 1/3 * 2/3) = 11.5).
        for p in ("a1", "a2", "a4"):
            self.assertLessEqual(abs(r["replies"].get(p, 0) - 200), 58, r)
        self.assertEqual(self.dnat_entries("10.96.0.10"), [], "served by the rules, not the maps")
        self.replace_slice(slice_("web-1", "web", [(ip["a2"], "node-1")]))
        self.wait_served("web at a2 only", "a2")

    def test_04_the_application_sees_the_service_address(self):
        out = self.in_cgroup([sys.executable, "-c", """
import socket
t = socket.create_connection(("10.96.0.10", 80), timeout=2)
print("%s:%d" % t.getpeername(), t.recv(64).split()[0].decode())
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(2)
u.sendto(b"ping", ("10.96.0.53", 53))
data, src = u.recvfrom(64)
print("%s:%d" % src, data.split()[0].decode())
"""])
        self.assertEqual(out.split("\n")[:2], ["10.96.0.10:80 a2", "10.96.0.53:53 a1"])

    def test_05_affinity(self):
        r = self.client("10.96.0.40", 80, 60)
        self.assertEqual(r["errors"], {}, r)
        self.assertEqual(len(r["replies"]), 1, r)
        self.assertEqual(self.dnat_entries("10.96.0.40"), [], "served by the rules, not the maps")

    def test_05b_internal_traffic_policy_local(self):
        # Endpoints on both nodes; this node's clients reach only its own.
        lab, ip = self.lab, self.ip
        svc = service("itl", "10.96.0.50")
        svc["spec"]["internalTrafficPolicy"] = "Local"
        lab.apply_objects("create", [svc, slice_("itl-1", "itl", [(ip["a3"], "node-1"), (ip["b1"], "node-2")])])
        wait_for("itl translated", lambda: self.client("10.96.0.50", 80, 1)["replies"], timeout=15)
        lab.run(["conntrack", "-F"], ns="n1", check=False)     # a try the rules took before the maps
        r = self.client("10.96.0.50", 80, 60)
        self.assertEqual(r["replies"], {"a3": 60}, r)
        self.assertEqual(self.dnat_entries("10.96.0.50"), [], "served by the rules, not the maps")

    def test_06_no_endpoints_left_to_the_rules(self):
        # No entry in the maps: the rules reject it, as before.
        r = self.client("10.96.0.30", 80, 3)
        self.assertEqual(r["errors"], {"ECONNREFUSED": 3}, r)

    def test_06b_node_ports_and_external_ips_for_local_clients(self):
        # The node's own address on a node port, and an external IP: the
        # clients of this node connect to an endpoint directly (it sees the
        # client, conntrack has no DNAT entry), to the cluster's endpoints
        # also under ETP Local, as the rules route this node's traffic.
        lab, ip = self.lab, self.ip
        node_ip = "192.168.50.11"
        ext = service("ext", "10.96.0.70")
        ext["spec"]["externalIPs"] = ["192.0.2.70"]
        lab.apply_objects("create", [ext, slice_("ext-1", "ext", [(ip["a3"], "node-1")])])
        wait_for("ext translated", lambda: self.client("192.0.2.70", 80, 1, "--timeout", "0.5")["replies"],
                 timeout=15)
        lab.run(["conntrack", "-F"], ns="n1", check=False)
        for host, port, pods in ((node_ip, 30080, {"a1", "b1"}), (node_ip, 30081, {"a2", "b2"}),
                                 ("192.0.2.70", 80, {"a3"})):
            r = self.client(host, port, 60)
            self.assertEqual(r["errors"], {}, r)
            self.assertEqual(set(r["replies"]), pods, "%s:%d %s" % (host, port, r))
            self.assertEqual(r["peers"], {ip["cl"]: 60}, "%s:%d %s" % (host, port, r))
            self.assertEqual(self.dnat_entries(host), [], "%s:%d served by the rules" % (host, port))
        # Deleted: the entry goes with it.
        lab.kubectl("delete", "service", "ext")
        wait_for("ext no longer translated",
                 lambda: not self.client("192.0.2.70", 80, 1, "--timeout", "0.5")["replies"], timeout=15)

    def test_06c_an_external_ip_on_a_node_port(self):
        # A service whose external IP and port are the node's address and
        # np's node port: the rules match the external IP first, and so do
        # the maps, also after a restart's full sync plans both at once.
        lab, ip = self.lab, self.ip
        node_ip = "192.168.50.11"
        clash = service("clash", "10.96.0.71", port=30080)
        clash["spec"]["externalIPs"] = [node_ip]
        lab.apply_objects("create", [clash, slice_("clash-1", "clash", [(ip["a4"], "node-1")])])
        wait_for("the external IP translated", lambda: self.client(node_ip, 30080, 5)["replies"] == {"a4": 5},
                 timeout=15)
        lab.stop_kproxy(signal.SIGTERM)
        self.start()
        lab.run(["conntrack", "-F"], ns="n1", check=False)
        r = self.client(node_ip, 30080, 30)
        self.assertEqual(r["replies"], {"a4": 30}, r)
        self.assertEqual(r["peers"], {ip["cl"]: 30}, r)
        lab.kubectl("delete", "service", "clash")
        wait_for("np's node port again", lambda: set(self.client(node_ip, 30080, 30)["replies"]) == {"a1", "b1"},
                 timeout=15)

    def test_07_stopped_keeps_translating_restart_applies_changes(self):
        lab, ip = self.lab, self.ip
        lab.stop_kproxy(signal.SIGTERM)
        lab.run(["conntrack", "-F"], ns="n1", check=False)
        r = self.client("10.96.0.10", 80, 50)
        self.assertEqual(r["replies"], {"a2": 50}, r)
        self.assertEqual(self.dnat_entries("10.96.0.10"), [])
        self.replace_slice(slice_("web-1", "web", [(ip["a3"], "node-1")]))
        lab.kubectl("delete", "service", "itl")
        r = self.client("10.96.0.10", 80, 20)
        self.assertEqual(r["replies"], {"a2": 20}, "a change applied with kproxy stopped: %s" % r)
        self.assertTrue(self.client("10.96.0.50", 80, 1)["replies"], "a deletion applied while stopped")
        self.start()
        self.wait_served("web at a3 after the restart", "a3")
        # The service deleted meanwhile is gone from the maps too: the
        # rules answer for its address (nothing there now).
        r = self.client("10.96.0.50", 80, 1, "--timeout", "0.5")
        self.assertEqual(r["replies"], {}, r)

    def test_07b_udp_follows_a_replaced_endpoint(self):
        # Unconnected UDP: each datagram is translated when it is sent, so
        # the flow moves with the maps (no conntrack entry to go stale).
        proc = subprocess.Popen(
            ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cg, "ip", "netns", "exec",
             self.lab.ns("p-cl"), sys.executable, os.path.join(HERE, "client.py"), "10.96.0.53", "53", "0", "--udp",
             "--same-socket", "--until-seconds", "6", "--timeout", "0.2", "--interval", "0.01"],
            stdout=subprocess.PIPE, text=True)
        time.sleep(1)
        self.replace_slice(slice_("dns-1", "dns", [(self.ip["a2"], "node-1")], port=5353, proto="UDP"))
        out, _ = proc.communicate(timeout=30)
        r = json.loads(out)
        self.assertGreater(r["replies"].get("a1", 0), 0, r)
        self.assertGreater(r["replies"].get("a2", 0), 0, "the UDP flow never reached the new endpoint: %s" % r)
        self.assertEqual(r["errors"], {}, r)
        self.assertEqual(self.client("10.96.0.53", 53, 10, "--udp")["replies"], {"a2": 10})

    def test_07c_connected_udp_leaves_a_removed_endpoint(self):
        # A connect()ed UDP socket keeps the endpoint it was translated to.
        # When that endpoint leaves the service, kproxy closes the socket in
        # the client's namespace (sock_diag SOCK_DESTROY): the application's
        # next call fails once, and its new socket reaches a live endpoint.
        # a2's pod still answers: left open, the socket would stay with it.
        # Beside it, a socket connected to a2's own address (not
        # translated) is left alone though a2 leaves the service.
        self.assertEqual(self.metric("kproxy_socket_lb_udp_sockets_closed_total"), 0)
        procs = [subprocess.Popen(
            ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.cg, "ip", "netns", "exec",
             self.lab.ns("p-cl"), sys.executable, os.path.join(HERE, "client.py"), host, port, "0", "--udp",
             "--connected", "--same-socket", "--reconnect", "--until-seconds", "6", "--timeout", "0.2",
             "--interval", "0.01"],
            stdout=subprocess.PIPE, text=True) for host, port in (("10.96.0.53", "53"), (self.ip["a2"], "5353"))]
        time.sleep(1)   # traffic before and after the change
        self.replace_slice(slice_("dns-1", "dns", [(self.ip["a1"], "node-1")], port=5353, proto="UDP"))
        r, direct = (json.loads(p.communicate(timeout=30)[0]) for p in procs)
        self.assertGreater(r["replies"].get("a2", 0), 0, r)
        self.assertGreater(r["replies"].get("a1", 0), 0, "the connected socket stayed with the old endpoint: %s" % r)
        self.assertLessEqual(set(r["errors"]), {"ECONNABORTED", "EDESTADDRREQ", "timeout"}, r)
        self.assertLessEqual(sum(r["errors"].values()), 2, r)
        self.assertEqual(set(direct["replies"]), {"a2"}, direct)
        self.assertEqual(direct["errors"], {}, direct)
        self.assertEqual(self.metric("kproxy_socket_lb_udp_sockets_closed_total"), 1)

    def test_08_restarts_under_traffic_fail_no_connection(self):
        lab = self.lab
        for sig in (signal.SIGTERM, signal.SIGKILL):
            result = {}

            def loop():
                result["r"] = self.client("10.96.0.10", 80, 0, "--until-seconds", "5", "--interval", "0.001")
            t = threading.Thread(target=loop)
            t.start()
            time.sleep(1)
            lab.stop_kproxy(sig)
            self.start()
            t.join(timeout=60)
            r = result["r"]
            self.assertEqual(r["errors"], {}, "%s: %s" % (sig, r))
            self.assertEqual(r["replies"], {"a3": r["attempts"]}, r)
            self.assertGreater(r["attempts"], 100)

    def test_09_cleanup_unpins(self):
        lab = self.lab
        lab.stop_kproxy(signal.SIGTERM)
        lab.run([lab.kproxy_bin, "--cleanup", "--socket-lb-pin-dir", self.pins], ns="n1")
        self.assertEqual(os.listdir(self.pins), [])
        # Nothing translates any more (and --cleanup took the rules too).
        r = self.client("10.96.0.10", 80, 3, "--timeout", "0.5")
        self.assertNotIn("a3", r["replies"], r)


    def test_10_programs_not_set_up_the_rules_serve(self):
        # A cgroup that does not exist: the hooks cannot attach. kproxy
        # says so (log, /healthz, metric) and runs on the rules alone.
        lab = self.lab
        mark = len(lab.kproxy_output())
        lab.start_kproxy("--socket-lb", "--socket-lb-cgroup", "/nonexistent-kp-cgroup", "--socket-lb-pin-dir",
                         self.pins)
        lab.wait_healthy()
        body = json.loads(lab.run(["curl", "-s", "http://127.0.0.1:10256/healthz"], ns="n1").stdout)
        self.assertTrue(body["socketLB"].startswith("off: "), body)
        self.assertEqual(self.metric("kproxy_socket_lb_enabled"), 0)
        log = lab.kproxy_output()[mark:]
        self.assertRegex(log, r"(?m)^E\d{4} .*Failed to open cgroup /nonexistent-kp-cgroup")
        self.assertRegex(log, r"(?m)^E\d{4} .*Running without socket-lb")
        lab.run(["conntrack", "-F"], ns="n1", check=False)
        r = self.client("10.96.0.10", 80, 20)
        self.assertEqual(r["replies"], {"a3": 20}, r)
        self.assertGreater(len(self.dnat_entries("10.96.0.10")), 0, "not served by the rules")
        lab.stop_kproxy(signal.SIGTERM)


class E2ESocketLBNftables(SocketLB, unittest.TestCase):
    MODE, OTHER = "nftables", "iptables"


class E2ESocketLBIptables(SocketLB, unittest.TestCase):
    MODE, OTHER = "iptables", "nftables"


if __name__ == "__main__":
    unittest.main(verbosity=2)

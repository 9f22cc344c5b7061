# SPDX-License-Identifier: Apache-2.0
"""The allow-lists against the externalIPs hijack (CVE-2020-8554,
docs/security.md), end to end in every mode: an attacker's services claim
the API server's address (spec.externalIPs) and an address outside the
lists (an external IP and a load-balancer ingress IP); traffic to those
addresses from a pod, from the node and from a host outside the cluster
still reaches the real owner, while an allowed external IP is served and
the rest of the attacker's services (cluster IP, node port) works. The
log and the metric name each refusal; the API server moving away admits
the address with a sync of that service alone; a restart with wider
lists programs it without rewriting the rest.

Topology: the lab of test_e2e (node-1 runs kproxy), plus
  - the API server's address: node-2's 192.168.50.12, port 6443, in
    default/kubernetes' EndpointSlice, served there by "apiserver";
  - 198.51.100.20 on node-2's loopback, port 80, served by "owner";
  - a host outside the cluster, 192.168.60.2, routed through node-1.

Run as root: KPROXY_BUILD=build python3 tests/e2e/test_allowlist.py
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
from netlab import BpfScratch, Lab, NODE_IPS, node, service, slice_, wait_for  # noqa: E402
import promtext  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("KPROXY_BUILD", "build")

API_IP, API_PORT = NODE_IPS["node-2"], 6443
OUT_IP = "198.51.100.20"
GOOD_IP = "203.0.113.10"
OUTSIDE_IP = "192.168.60.2"
LISTS = ("--external-ip-cidrs", "203.0.113.0/24,192.168.50.0/24", "--load-balancer-ip-cidrs", "203.0.113.0/24")
WIDER = ("--external-ip-cidrs", "203.0.113.0/24,192.168.50.0/24,198.51.100.0/24",
         "--load-balancer-ip-cidrs", "203.0.113.0/24")


def api_slice(ip):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "kubernetes", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": "kubernetes"}},
            "addressType": "IPv4", "ports": [{"name": "https", "port": API_PORT, "protocol": "TCP"}],
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True, "serving": True}}]}


class AllowList:
    """The tests; a subclass (also a TestCase) names the mode."""
    MODE = None
    SOCKET_LB = False
    lab = None

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root for network namespaces")
        cls.lab = lab = Lab(BUILD, cls.MODE)
        cls.scratch = None
        try:
            lab.build_topology()
            cls.ip = {"a1": lab.add_pod("a1", "node-1", 10), "ev": lab.add_pod("ev", "node-1", 11),
                      "cl": lab.add_pod("cl", "node-1", 100, serve=False)}
            cls.owners(lab)
            if cls.SOCKET_LB:
                cls.scratch = BpfScratch(lab.tmp, "kp-allow")
            lab.start_apiserver()
            ev = [(cls.ip["ev"], "node-1")]
            kube = service("kubernetes", "10.96.0.1", port=443, target=API_PORT)
            web = service("web", "10.96.0.10")
            web["spec"]["externalIPs"] = [GOOD_IP]
            hijack_api = service("api", "10.96.0.60", port=API_PORT, ns="evil")
            hijack_api["spec"]["externalIPs"] = [API_IP]
            hijack_out = service("out", "10.96.0.61", ns="evil")
            hijack_out["spec"]["externalIPs"] = [OUT_IP]
            hijack_lb = service("lb", "10.96.0.62", typ="LoadBalancer", node_port=30090, etp="Cluster", ns="evil")
            hijack_lb["status"] = {"loadBalancer": {"ingress": [{"ip": OUT_IP}]}}
            lab.apply_objects("create", [
                node("node-1"), node("node-2"), kube, api_slice(API_IP),
                web, slice_("web-1", "web", [(cls.ip["a1"], "node-1")]),
                hijack_api, slice_("api-1", "api", ev, ns="evil"),
                hijack_out, slice_("out-1", "out", ev, ns="evil"),
                hijack_lb, slice_("lb-1", "lb", ev, ns="evil"),
            ])
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def owners(cls, lab):
        """The real owners on node-2, and the outside host behind node-1."""
        lab.run(["ip", "addr", "add", OUT_IP + "/32", "dev", "lo"], ns="n2")
        lab.run(["ip", "route", "add", OUT_IP + "/32", "via", API_IP], ns="n1")
        # Node-originated traffic to the allowed external IP needs a route
        # before the nat OUTPUT hook rewrites it (userspace mode holds it).
        lab.run(["ip", "route", "add", "203.0.113.0/24", "dev", "eth0"], ns="n1")
        for name, ip, port in (("apiserver", API_IP, API_PORT), ("owner", OUT_IP, 80)):
            ready = os.path.join(lab.tmp, "ready-" + name)
            lab.spawn("own-" + name, [sys.executable, os.path.join(HERE, "podserver.py"), name, ip, str(port),
                                      str(5300 + port % 100), ready], ns="n2")
            wait_for("%s to listen" % name, lambda: os.path.exists(ready))
        lab.add_ns("x")
        lab.run(["ip", "link", "add", "ext0", "netns", lab.ns("n1"), "type", "veth",
                 "peer", "name", "eth0", "netns", lab.ns("x")])
        lab.run(["ip", "addr", "add", "192.168.60.1/24", "dev", "ext0"], ns="n1")
        lab.run(["ip", "link", "set", "ext0", "up"], ns="n1")
        lab.run(["ip", "addr", "add", OUTSIDE_IP + "/24", "dev", "eth0"], ns="x")
        lab.run(["ip", "link", "set", "eth0", "up"], ns="x")
        lab.run(["ip", "route", "add", "default", "via", "192.168.60.1"], ns="x")
        lab.run(["ip", "route", "add", "192.168.60.0/24", "via", NODE_IPS["node-1"]], ns="n2")

    @classmethod
    def tearDownClass(cls):
        lab = cls.lab
        if not lab:
            return
        out = lab.kproxy_output()
        if os.environ.get("E2E_SHOW_LOG"):
            sys.stderr.write(out)
        for key in list(lab.procs):
            lab.kill(key)
        if cls.scratch:
            cls.scratch.close()
        lab.close()
        reports = re.findall(r"^.*(?:runtime error:|ERROR: (?:Address|Leak)Sanitizer).*$", out, re.M)
        if reports:
            raise AssertionError("sanitizer reports in kproxy's log:\n" + "\n".join(reports[:5]))

    # --- helpers ---

    def start(self, *lists):
        extra = list(lists)
        if self.SOCKET_LB:
            extra += ["--socket-lb", "--socket-lb-cgroup", self.scratch.cgroup,
                      "--socket-lb-pin-dir", os.path.join(self.scratch.bpffs, "kproxy")]
        self.lab.start_kproxy(*extra)
        self.lab.wait_healthy()

    def client(self, where, host, port, count=8, *flags):
        """count connections from a pod (in the socket-lb cgroup, if any), the node, or the outside host."""
        lab = self.lab
        args = [sys.executable, os.path.join(HERE, "client.py"), host, str(port), str(count), "--timeout", "2"]
        args += list(flags)
        if where == "pod" and self.SOCKET_LB:
            cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.scratch.cgroup,
                   "ip", "netns", "exec", lab.ns("p-cl")] + args
            return json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True).stdout)
        return lab.client({"pod": "p-cl", "node": "n1", "outside": "x"}[where], host, port, count, *args[4:])

    def replies(self, where, host, port, count=8):
        return self.client(where, host, port, count)["replies"]

    def scrape(self):
        out = self.lab.run(["curl", "-sf", "http://127.0.0.1:10249/metrics"], ns="n1").stdout
        return promtext.parse(out)

    def refused(self, lst, reason):
        fam = self.scrape().get("kproxy_service_ips_refused")
        if not fam:
            return None
        return fam["samples"].get(("kproxy_service_ips_refused", (("list", lst), ("reason", reason))))

    def wait_served(self, what, where, host, port, name):
        wait_for(what, lambda: self.replies(where, host, port, 4) == {name: 4}, timeout=20)

    # --- the tests, in order ---

    def test_01_refused_addresses_capture_nothing(self):
        lab = self.lab
        self.start(*LISTS)
        # The allowed external IP is served from everywhere.
        for where in ("pod", "node", "outside"):
            self.wait_served("%s: %s:80 served by web" % (where, GOOD_IP), where, GOOD_IP, 80, "a1")
        # The hijacked addresses reach their real owners from everywhere.
        for where in ("pod", "node", "outside"):
            self.assertEqual(self.replies(where, API_IP, API_PORT), {"apiserver": 8}, where)
            self.assertEqual(self.replies(where, OUT_IP, 80), {"owner": 8}, where)
        # The rest of the attacker's services works: cluster IP, node port.
        self.assertEqual(self.replies("pod", "10.96.0.60", API_PORT), {"ev": 8})
        self.assertEqual(self.replies("pod", NODE_IPS["node-1"], 30090), {"ev": 8})
        # The log names each refusal once; the metric counts them by reason.
        out = lab.kproxy_output()
        for line in ("Service evil/api: not programming its externalIP %s: an address of the API server "
                     "(default/kubernetes), which --external-ip-cidrs admits only when it lists it alone (/32)"
                     % API_IP,
                     "Service evil/out: not programming its externalIP %s: not in --external-ip-cidrs" % OUT_IP,
                     "Service evil/lb: not programming its load-balancer IP %s: not in --load-balancer-ip-cidrs"
                     % OUT_IP):
            self.assertEqual(out.count(line), 1, line)
        self.assertEqual(self.refused("externalIPs", "api-server"), 1)
        self.assertEqual(self.refused("externalIPs", "not-allowed"), 1)
        self.assertEqual(self.refused("loadBalancerIPs", "not-allowed"), 1)
        self.assertEqual(self.refused("externalIPs", "node-address"), 0)

    def test_02_api_server_moves_away(self):
        # The API server's endpoint moves: its old address is an ordinary
        # one inside the list now, and evil/api takes it, in a partial sync;
        # it moves back and the address is refused again.
        lab = self.lab
        lab.apply_objects("replace", [api_slice("192.168.50.13")])
        self.wait_served("evil/api to take %s" % API_IP, "pod", API_IP, API_PORT, "ev")
        out = lab.kproxy_output()
        self.assertIn("Service evil/api: programming its externalIP %s, which --external-ip-cidrs admits now"
                      % API_IP, out)
        after = out.split("admits now", 1)[1]
        self.assertRegex(after, r"Sync \d+ \(partial\) done")
        self.assertNotRegex(after.split("(partial) done", 1)[0], r"Sync \d+ \(full\) done")
        self.assertEqual(self.refused("externalIPs", "api-server"), 0)
        lab.apply_objects("replace", [api_slice(API_IP)])
        self.wait_served("the API server to own %s again" % API_IP, "pod", API_IP, API_PORT, "apiserver")
        self.assertEqual(self.refused("externalIPs", "api-server"), 1)
        for where in ("node", "outside"):
            self.assertEqual(self.replies(where, API_IP, API_PORT), {"apiserver": 8}, where)

    def test_03_restart_with_wider_lists(self):
        # A restart with 198.51.100.0/24 allowed: evil/out's external IP is
        # programmed (evil/lb's ingress IP still refused by its own list);
        # the allowed service is served without a failure meanwhile.
        lab = self.lab
        result = {}

        def loop():
            result["r"] = self.client("pod", GOOD_IP, 80, 0, "--until-seconds", "6", "--interval", "0.002")
        t = threading.Thread(target=loop)
        t.start()
        time.sleep(1)   # traffic before, during and after the restart (as Lab.restart_under_traffic)
        if self.MODE == "userspace":
            # Userspace mode is the data path: it restarts as a DaemonSet
            # update with maxSurge does, the sockets handed to the successor.
            mark = len(lab.kproxy_output())
            lab.procs["kproxy-old"] = lab.procs.pop("kproxy")
            self.start(*WIDER)
            wait_for("the old kproxy to hand its sockets over",
                     lambda: "Handed the node over to a successor" in lab.kproxy_output()[mark:], timeout=20)
            lab.kill("kproxy-old", signal.SIGTERM)
        else:
            lab.stop_kproxy()
            self.start(*WIDER)
        t.join(timeout=60)
        r = result["r"]
        self.assertEqual(set(r["replies"]), {"a1"}, r)
        self.assertEqual(sum(r["errors"].values()), 0, r)
        self.wait_served("evil/out to take %s" % OUT_IP, "pod", OUT_IP, 80, "ev")
        self.assertEqual(self.refused("externalIPs", "not-allowed"), 0)
        self.assertEqual(self.refused("loadBalancerIPs", "not-allowed"), 1)


    def untouched(self):
        """What a rewrite of default/web's rules would change: iptables
        mode's packet counters of its chains (a chain written again starts
        at 0), nftables mode's rule handles (a rule written again gets a
        new one), userspace mode's frontend line."""
        lab = self.lab
        if self.MODE == "iptables":
            save = lab.run(["iptables-save", "-c", "-t", "nat"], ns="n1").stdout
            return sorted(l for l in save.splitlines() if "default/web:p" in l and "KUBE-SERVICES" not in l)
        if self.MODE == "nftables":
            table = lab.run(["nft", "-a", "list", "table", "ip", "kube-proxy"], ns="n1").stdout
            return sorted(l.strip() for l in table.splitlines() if "default/web/" in l and "# handle" in l)
        return sorted(l for l in lab.frontends().splitlines() if "default/web:p" in l)

    def test_04_restart_with_narrower_lists_rewrites_only_what_changed(self):
        # Back to the first lists: evil/out loses 198.51.100.20 again, and
        # default/web's rules are left as they are in the kernel.
        lab = self.lab
        self.assertEqual(self.replies("pod", GOOD_IP, 80), {"a1": 8})
        before = self.untouched()
        self.assertTrue(before)
        if self.MODE == "iptables":
            self.assertTrue(any(not l.startswith("[0:0]") for l in before), before)
        if self.MODE == "userspace":
            mark = len(lab.kproxy_output())
            lab.procs["kproxy-old"] = lab.procs.pop("kproxy")
            self.start(*LISTS)
            wait_for("the old kproxy to hand its sockets over",
                     lambda: "Handed the node over to a successor" in lab.kproxy_output()[mark:], timeout=20)
            lab.kill("kproxy-old", signal.SIGTERM)
        else:
            lab.stop_kproxy()
            self.start(*LISTS)
        self.wait_served("the owner to have %s again" % OUT_IP, "pod", OUT_IP, 80, "owner")
        # (Userspace mode's /debug/backend answers once the successor's
        # metrics server has bound its port, which the old one held.)
        self.assertEqual(wait_for("default/web's rules to be readable", self.untouched, timeout=20), before)
        self.assertEqual(self.refused("externalIPs", "not-allowed"), 1)


class E2EAllowListIptables(AllowList, unittest.TestCase):
    MODE = "iptables"


class E2EAllowListNftables(AllowList, unittest.TestCase):
    MODE = "nftables"


class E2EAllowListUserspace(AllowList, unittest.TestCase):
    MODE = "userspace"


class E2EAllowListSocketLB(AllowList, unittest.TestCase):
    MODE = "nftables"
    SOCKET_LB = True


if __name__ == "__main__":
    unittest.main(verbosity=2)

# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests of kproxy in nftables mode (the interim whole-table
apply): the same two-node namespace cluster as test_e2e.py, checked with
real connections, plus switching a node between the two modes.

Run as root: KPROXY_BUILD=build python3 -m unittest -v tests/e2e/test_e2e_nft.py
"""
import os
import re
import signal
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netlab import Lab, NODE_IPS, dnat_targets, node, service, slice_, wait_for  # noqa: E402

BUILD = os.environ.get("KPROXY_BUILD", "build")


def nft_targets(ruleset, base):
    """Endpoints a service port's endpoint chains DNAT to, from `nft list`."""
    pat = r"chain endpoint-\S+-%s__\S+ \{[^}]*?dnat to (\S+)" % re.escape(base)
    return sorted(re.findall(pat, ruleset, re.S))


class E2ENft(unittest.TestCase):
    lab = None

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root for network namespaces")
        cls.lab = lab = Lab(BUILD)
        try:
            lab.build_topology()
            cls.ip = {}
            for i, name in enumerate(("a1", "a2", "a3"), start=10):
                cls.ip[name] = lab.add_pod(name, "node-1", i)
            cls.ip["b1"] = lab.add_pod("b1", "node-2", 10)
            cls.ip["cl"] = lab.add_pod("cl", "node-1", 100, serve=False)
            lab.start_apiserver()
            lab.apply_objects("create", [
                node("node-1"), node("node-2"),
                service("web", "10.96.0.10"),
                slice_("web-1", "web", [(cls.ip["a1"], "node-1")]),
                service("np", "10.96.0.20", typ="NodePort", node_port=30080, etp="Cluster"),
                slice_("np-1", "np", [(cls.ip["a1"], "node-1"), (cls.ip["b1"], "node-2")]),
                service("empty", "10.96.0.30"),
                service("sticky", "10.96.0.40", affinity=True),
                slice_("sticky-1", "sticky", [(cls.ip[p], "node-1") for p in ("a1", "a2", "a3")]),
            ])
        except Exception:
            lab.close()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.lab:
            if os.environ.get("E2E_SHOW_LOG"):
                sys.stderr.write(cls.lab.kproxy_output())
            cls.lab.close()

    def ruleset(self):
        return self.lab.run(["nft", "list", "table", "ip", "kube-proxy"], ns="n1", check=False).stdout

    def client(self, host, port, count=300, *flags, ns="p-cl"):
        return self.lab.client(ns, host, port, count, *flags)

    def test_01_first_sync(self):
        self.lab.start_kproxy("--proxy-mode", "nftables")
        wait_for("/healthz 200", lambda: self.lab.healthz() == "200", timeout=20)
        self.assertEqual(nft_targets(self.ruleset(), "default/web/tcp/p"), [self.ip["a1"] + ":8080"])
        # No iptables-mode rules in nftables mode.
        self.assertNotIn("KUBE-SERVICES", self.lab.nat())

    def test_02_spread_over_three(self):
        ip = self.ip
        self.lab.apply_objects("replace", [slice_("web-1", "web", [(ip[p], "node-1") for p in ("a1", "a2", "a3")])])
        wait_for("3 endpoints", lambda: len(nft_targets(self.ruleset(), "default/web/tcp/p")) == 3, timeout=15)
        r = self.client("10.96.0.10", 80, 600)
        self.assertEqual(r["errors"], {})
        self.assertEqual(sorted(r["replies"]), ["a1", "a2", "a3"])
        for pod, n in r["replies"].items():
            self.assertTrue(140 <= n <= 260, "%s got %d of 600: %s" % (pod, n, r["replies"]))

    def test_03_no_endpoints_refused(self):
        r = self.client("10.96.0.30", 80, 5, "--timeout", "3")
        self.assertEqual(r["errors"], {"ECONNREFUSED": 5})
        self.assertLess(r["max_connect_ms"], 500)

    def test_04_affinity_sticks(self):
        r = self.client("10.96.0.40", 80, 60)
        self.assertEqual(r["errors"], {})
        self.assertEqual(len(r["replies"]), 1, r["replies"])

    def test_05_nodeport_reaches_both_nodes(self):
        r = self.client(NODE_IPS["node-1"], 30080, 200, ns="n2")
        self.assertEqual(r["errors"], {})
        self.assertEqual(sorted(r["replies"]), ["a1", "b1"])

    def test_06_restart_under_traffic(self):
        r = self.lab.restart_under_traffic(signal.SIGKILL, "10.96.0.10", 80, seconds=5,
                                           start_args=("--proxy-mode", "nftables"))
        self.assertEqual(r["errors"], {}, r)

    def test_07_switch_to_iptables_and_back(self):
        lab, ip = self.lab, self.ip
        lab.stop_kproxy(signal.SIGTERM)
        lab.start_kproxy()      # iptables mode
        lab.wait_rules("iptables rules", lambda nat: len(dnat_targets(nat, "default/web:p")) == 3, timeout=20)
        self.assertEqual(self.ruleset(), "")    # the nftables table is gone
        r = self.client("10.96.0.10", 80, 60)
        self.assertEqual(r["errors"], {})
        lab.stop_kproxy(signal.SIGTERM)
        lab.start_kproxy("--proxy-mode", "nftables")
        wait_for("nftables rules", lambda: len(nft_targets(self.ruleset(), "default/web/tcp/p")) == 3, timeout=20)
        self.assertNotIn("KUBE-SERVICES", lab.nat())
        r = self.client("10.96.0.10", 80, 60)
        self.assertEqual(r["errors"], {})
        self.assertEqual(sorted(r["replies"]), ["a1", "a2", "a3"])
        lab.stop_kproxy(signal.SIGTERM)
        p = lab.run([lab.kproxy_bin, "--cleanup"], ns="n1", check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.ruleset(), "")


if __name__ == "__main__":
    unittest.main(verbosity=2)

# SPDX-License-Identifier: Apache-2.0
"""End-to-end tests: kproxy in a node namespace, programming the real
kernel from a stand-in API server driven by the real kubectl, checked with
real connections from pod and node namespaces. The same tests run in both
proxy modes (E2EIptables, E2ENftables), each mode in its own lab.

Run as root: KPROXY_BUILD=build python3 -m unittest -v tests/e2e/test_e2e.py
(one mode: KPROXY_BUILD=build python3 tests/e2e/test_e2e.py E2ENftables).
The tests run in order (test_NN_*), each building on the cluster state the
previous ones left.
"""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netlab import (LabError, Lab, NODE_IPS, nft_chains, nft_elements, node, service, slice_,  # noqa: E402
                    wait_for)
import promtext  # noqa: E402

BUILD = os.environ.get("KPROXY_BUILD", "build")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The families kube-proxy 1.34 serves, per mode (also read by tests/unit/http/test-metrics.c).
UPSTREAM = os.path.join(ROOT, "tests", "unit", "metrics-upstream.txt")
# The maps and sets of the nftables table whose elements kproxy owns (the
# affinity sets' elements are the kernel's).
NFT_MAPS = ("service-ips", "service-nodeports", "no-endpoint-services", "no-endpoint-nodeports", "cluster-ips",
            "nodeport-ips", "firewall-ips")


def slurp(path):
    with open(path) as f:
        return f.read()


def steady(rules):
    """A rules dump without what changes by itself: iptables-save's
    timestamped comments, the expiry countdowns of affinity set elements."""
    return [re.sub(r" expires \S+?(?=[\s,}]|$)", "", l) for l in rules.splitlines() if not l.startswith("#")]


def table_state(ruleset):
    """What kproxy programs in its nftables table: every chain with its
    rules, and the elements of its maps and sets."""
    return nft_chains(ruleset), {m: nft_elements(ruleset, m) for m in NFT_MAPS}


def describe_diff(want, got):
    """What differs between two table_state()s, for a failure message."""
    (wc, wm), (gc, gm) = want, got
    out = ["chain %s %s" % (c, "missing" if c not in gc else "added" if c not in wc else "changed: %s" % gc[c])
           for c in sorted(set(wc) | set(gc)) if wc.get(c) != gc.get(c)]
    out += ["%s: missing %s, added %s" % (m, sorted(wm[m] - gm[m]), sorted(gm[m] - wm[m]))
            for m in NFT_MAPS if wm[m] != gm[m]]
    return "; ".join(out) or "none"


class Suite:
    """The tests of both modes: a subclass (also a TestCase) sets MODE and
    OTHER and adds the mode's own checks."""
    MODE = OTHER = None
    lab = None

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root for network namespaces")
        cls.lab = lab = Lab(BUILD, cls.MODE)
        try:
            lab.build_topology()
            cls.ip = {}
            for i, name in enumerate(("a1", "a2", "a3", "a4"), start=10):
                cls.ip[name] = lab.add_pod(name, "node-1", i)
            for i, name in enumerate(("b1", "b2"), start=10):
                cls.ip[name] = lab.add_pod(name, "node-2", i)
            cls.ip["cl"] = lab.add_pod("cl", "node-1", 100, serve=False)
            lab.start_apiserver()
            lab.apply_objects("create", [
                node("node-1"), node("node-2"),
                service("web", "10.96.0.10"),
                slice_("web-1", "web", [(cls.ip["a1"], "node-1")]),
                service("np", "10.96.0.20", typ="NodePort", node_port=30080, etp="Cluster"),
                slice_("np-1", "np", [(cls.ip["a1"], "node-1"), (cls.ip["b1"], "node-2")]),
                service("npl", "10.96.0.21", typ="NodePort", node_port=30081, etp="Local"),
                slice_("npl-1", "npl", [(cls.ip["a2"], "node-1"), (cls.ip["b2"], "node-2")]),
                service("empty", "10.96.0.30"),
                service("sticky", "10.96.0.40", affinity=True),
                slice_("sticky-1", "sticky", [(cls.ip[p], "node-1") for p in ("a1", "a2", "a3")]),
                service("dns", "10.96.0.53", port=53, target=5353, proto="UDP"),
                slice_("dns-1", "dns", [(cls.ip["a1"], "node-1")], port=5353, proto="UDP"),
            ])
        except Exception:
            lab.close()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.lab:
            out = cls.lab.kproxy_output()
            if os.environ.get("E2E_SHOW_LOG"):
                sys.stderr.write(out)
            cls.lab.close()
            # Sanitizer builds: a report from any kproxy run of the class
            # fails it, even one a test did not look at.
            reports = re.findall(r"^.*(?:runtime error:|ERROR: (?:Address|Leak)Sanitizer).*$", out, re.M)
            if reports:
                raise AssertionError("sanitizer reports in kproxy's log:\n" + "\n".join(reports[:5]))

    def client(self, host, port, count=300, *flags, ns="p-cl"):
        return self.lab.client(ns, host, port, count, *flags)

    def replace_slice(self, obj):
        self.lab.apply_objects("replace", [obj])

    def eps(self, *pods, port=8080):
        return sorted("%s:%d" % (self.ip[p], port) for p in pods)

    def wait_web(self, what, *pods, timeout=15):
        """Waits until the kernel sends web's port p to exactly these pods."""
        self.lab.wait_targets(what, "default/web", "p", self.eps(*pods), timeout=timeout)

    def assertKproxyRunning(self):
        self.assertIsNotNone(self.lab.kproxy)
        self.assertIsNone(self.lab.kproxy.poll(), "kproxy exited:\n" + self.lab.kproxy_output()[-3000:])

    # --- the tests ---

    def test_01_first_sync_and_health(self):
        lab = self.lab
        lab.start_kproxy()
        lab.wait_healthy()
        self.assertEqual(lab.targets("default/web", "p"), self.eps("a1"))
        self.assertEqual(lab.leftovers(self.OTHER), [], "%s mode's rules" % self.OTHER)
        self.assert_first_sync_rules()
        self.assertKproxyRunning()
        # The wire format: protobuf with no flag (kube-proxy's default), JSON
        # when the run asks for it; every list kproxy made was answered so.
        want = os.environ.get("KPROXY_E2E_CONTENT_TYPE") or "application/vnd.kubernetes.protobuf"
        lists = [e for e in lab.state_requests() if e["userAgent"].startswith("kproxy/") and
                 "watch=1" not in e["path"] and e.get("status") == 200]
        self.assertTrue(lists)
        self.assertEqual({e.get("contentType") for e in lists}, {want}, lists)
        self.assertEqual({e.get("accept") for e in lists}, {want + ", */*"})

    def test_01b_leaving_node_fails_healthz_not_livez(self):
        lab = self.lab
        lab.kubectl("taint", "nodes", "node-1", "ToBeDeletedByClusterAutoscaler=1:NoSchedule")
        wait_for("/healthz to fail on a node marked for deletion", lambda: lab.healthz() == "503", timeout=20)
        self.assertEqual(lab.healthz("livez"), "200")
        lab.kubectl("taint", "nodes", "node-1", "ToBeDeletedByClusterAutoscaler-")
        lab.wait_healthy("/healthz to recover")

    def test_01b2_deleted_node_is_told_once(self):
        # kproxy keeps a deleted Node's last version (its addresses); a
        # relist of nodes (here after a 410 on the watch) must not report
        # it deleted again, as it did once per relist before.
        lab = self.lab
        told = lambda: lab.kproxy_output().count("Node node-1 was deleted")
        lists = lambda: len(re.findall(r"nodes\S*: listed ", lab.kproxy_output()))
        lab.kubectl("delete", "node", "node-1")
        wait_for("kproxy to see its Node deleted", lambda: told() == 1, timeout=20)
        wait_for("/healthz to fail without the Node", lambda: lab.healthz() == "503", timeout=20)
        before = lists()
        lab.fault("error", {"count": 1, "code": 410, "match": "nodes"})
        lab.fault("drop-watches")
        # The relist logs its end after it told what it did not list.
        wait_for("kproxy to relist nodes", lambda: lists() > before, timeout=30)
        self.assertEqual(told(), 1, "the deleted Node was reported again by the relist")
        lab.apply_objects("create", [node("node-1")])
        lab.wait_healthy("/healthz back with the Node")
        self.assertKproxyRunning()

    def scrape(self):
        out = self.lab.run(["curl", "-sf", "http://127.0.0.1:10249/metrics"], ns="n1").stdout
        return promtext.parse(out)

    def assertUpstreamShape(self, m):
        """Every family of a scrape is one kube-proxy 1.34 serves in this
        mode (tests/unit/metrics-upstream.txt), with its type, stability
        prefix and label names."""
        up = promtext.upstream_families(UPSTREAM, self.MODE)
        for name, fam in m.items():
            self.assertIn(name, up, "%s is not a family of %s mode" % (name, self.MODE))
            typ, labels, stability = up[name]
            self.assertEqual(fam["type"], typ, name)
            if stability == "-":
                self.assertFalse(fam["help"].startswith("["), name)
            else:
                self.assertTrue(fam["help"].startswith("[%s] " % stability), "%s: %s" % (name, fam["help"]))
            for sname, lbls in fam["samples"]:
                self.assertEqual({k for k, _ in lbls if k != "le"}, labels, "%s %s" % (sname, lbls))

    def test_01c_metrics_move_with_syncs(self):
        lab, ip = self.lab, self.ip
        v4 = {"ip_family": "IPv4"}
        m = self.scrape()
        self.assertUpstreamShape(m)
        syncs = promtext.value(m, "kubeproxy_sync_proxy_rules_duration_seconds",
                               "kubeproxy_sync_proxy_rules_duration_seconds_count", **v4)
        self.assertGreaterEqual(syncs, 1)
        self.assertGreaterEqual(promtext.value(m, "kubeproxy_sync_full_proxy_rules_duration_seconds",
                                               "kubeproxy_sync_full_proxy_rules_duration_seconds_count", **v4), 1)
        iptables_rules = promtext.value(m, "kubeproxy_sync_proxy_rules_iptables_total", table="nat", **v4)
        if self.MODE == "iptables":
            self.assertGreater(iptables_rules, 10)
            # The nfacct counters exist once the first full sync made them.
            for name in ("kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
                         "kubeproxy_iptables_localhost_nodeports_accepted_packets_total"):
                self.assertGreaterEqual(promtext.value(m, name), 0, name)
        else:
            self.assertIsNone(iptables_rules)     # not a family of nftables mode, as upstream
            self.assertNotIn("kubeproxy_iptables_localhost_nodeports_accepted_packets_total", m)
        self.assertGreater(promtext.value(m, "process_resident_memory_bytes"), 0)
        last = promtext.value(m, "kubeproxy_sync_proxy_rules_last_timestamp_seconds", **v4)
        self.assertGreater(last, time.time() - 300)
        self.assertGreater(promtext.value(m, "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds", **v4), 0)
        # npl (ETP Local) has a local endpoint on node-1: none without one.
        for policy in ("internal", "external"):
            self.assertEqual(promtext.value(m, "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
                                            traffic_policy=policy, **v4), 0, policy)
        # The API client as client-go counts it: the three lists and their watches.
        host = "127.0.0.1:%d" % lab.api_port
        self.assertGreaterEqual(promtext.value(m, "rest_client_requests_total", code="200", host=host,
                                               method="GET"), 6)
        self.assertGreaterEqual(promtext.value(m, "rest_client_request_duration_seconds",
                                               "rest_client_request_duration_seconds_count", host=host,
                                               verb="GET"), 3)
        self.assertEqual(promtext.value(m, "rest_client_transport_cache_entries"), 1)
        info = [lbls for (_, lbls) in m["kubernetes_build_info"]["samples"]]
        self.assertEqual(len(info), 1)
        with open(os.path.join(ROOT, "VERSION")) as f:
            self.assertIn(("git_version", "v" + f.read().strip()), info[0])
        # A change with the EndpointSlice controller's trigger-time annotation:
        # one more sync, and one network-programming observation.
        sl = slice_("web-1", "web", [(ip["a1"], "node-1")])
        sl["metadata"]["annotations"] = {"endpoints.kubernetes.io/last-change-trigger-time":
                                         time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        self.replace_slice(sl)

        def moved():
            m2 = self.scrape()
            n = promtext.value(m2, "kubeproxy_network_programming_duration_seconds",
                               "kubeproxy_network_programming_duration_seconds_count", **v4)
            return m2 if n and n >= 1 else None
        m2 = wait_for("a network-programming observation", moved, timeout=20)
        self.assertUpstreamShape(m2)
        self.assertGreater(promtext.value(m2, "kubeproxy_sync_proxy_rules_duration_seconds",
                                          "kubeproxy_sync_proxy_rules_duration_seconds_count", **v4), syncs)
        self.assertGreaterEqual(promtext.value(m2, "kubeproxy_sync_partial_proxy_rules_duration_seconds",
                                               "kubeproxy_sync_partial_proxy_rules_duration_seconds_count", **v4), 1)
        self.assertGreaterEqual(promtext.value(m2, "kubeproxy_sync_proxy_rules_endpoint_changes_total"), 1)
        self.assertEqual(promtext.value(m2, "kubeproxy_sync_proxy_rules_endpoint_changes_pending"), 0)
        mode = lab.run(["curl", "-sf", "http://127.0.0.1:10249/proxyMode"], ns="n1").stdout
        self.assertEqual(mode.strip(), self.MODE)
        cz = json.loads(lab.run(["curl", "-sf", "http://127.0.0.1:10249/configz"], ns="n1").stdout)
        self.assertIn("kubeproxy.config.k8s.io", cz)

    def test_01d_health_check_node_port(self):
        lab, ip = self.lab, self.ip
        lb = service("lb", "10.96.0.60", typ="LoadBalancer", node_port=30090, etp="Local")
        lb["spec"]["healthCheckNodePort"] = 32000
        lab.apply_objects("create", [lb, slice_("lb-1", "lb", [(ip["a2"], "node-1"), (ip["b2"], "node-2")])])

        def probe():
            p = lab.run(["curl", "-s", "-w", "\n%{http_code}", "http://%s:32000/" % NODE_IPS["node-1"]],
                        ns="n2", check=False)
            if p.returncode != 0:
                return None
            body, _, code = p.stdout.rpartition("\n")
            return int(code), json.loads(body)
        code, body = wait_for("the health-check node port to open", probe, timeout=20)
        self.assertEqual(code, 200)
        self.assertEqual(body["service"], {"namespace": "default", "name": "lb"})
        self.assertEqual(body["localEndpoints"], 1)
        self.replace_slice(slice_("lb-1", "lb", [(ip["b2"], "node-2")]))
        code, body = wait_for("no local endpoints", lambda: (probe() or (0, {}))[0] == 503 and probe(), timeout=20)
        self.assertEqual(body["localEndpoints"], 0)
        lab.kubectl("delete", "service", "lb")
        wait_for("the health-check node port to close", lambda: probe() is None, timeout=20)

    def test_01e_bind_problems(self):
        lab = self.lab
        # A second kproxy that can never reach its API server (so it never
        # syncs beside the running one), on ports the running one holds.
        base = [lab.kproxy_bin, "--proxy-mode", self.MODE, "--kubeconfig", lab.kubeconfig,
                "--master", "https://127.0.0.1:1", "--hostname-override", "node-1"]
        cases = (("--healthz-bind-address", "127.0.0.1:10256"),
                 ("--metrics-bind-address", "127.0.0.1:10249"),
                 ("--metrics-bind-address", "192.0.2.1:10249"))
        # --bind-address-hard-fail: a clear error at start-up naming the address.
        for flag, addr in cases:
            args = base + ["--bind-address-hard-fail", flag, addr]
            if flag == "--metrics-bind-address":
                args += ["--healthz-bind-address", "127.0.0.1:10266"]
            p = lab.run(args, ns="n1", check=False, timeout=20)
            self.assertNotEqual(p.returncode, 0, addr)
            self.assertIn(addr.rsplit(":", 1)[0], p.stderr)
        # Upstream's default: the error is logged, the bind retried, and the
        # proxy runs on.
        for flag, addr in cases:
            args = base + [flag, addr]
            if flag == "--metrics-bind-address":
                args += ["--healthz-bind-address", "127.0.0.1:10266"]
            log = os.path.join(lab.tmp, "bind-retry.log")
            with open(log, "w") as err:
                proc = subprocess.Popen(["ip", "netns", "exec", lab.ns("n1")] + args, stdout=subprocess.DEVNULL,
                                        stderr=err)
            try:
                # The error, then the start-up going on past it.
                wait_for("the bind error of %s, then kproxy running" % addr,
                         lambda: proc.poll() is not None or re.search(
                             r"cannot listen on %s.*\n(.*\n)*.*running for node" % re.escape(addr.rsplit(":", 1)[0]),
                             slurp(log)), timeout=20)
                alive = proc.poll() is None
            finally:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=10)
            self.assertTrue(alive, "kproxy exited on a bind error without --bind-address-hard-fail:\n"
                            + slurp(log)[-2000:])
        p = lab.run(base + ["--metrics-bind-address", "300.1.1.1:10249"], ns="n1", check=False, timeout=20)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("metrics", p.stderr)
        self.assertKproxyRunning()

    def test_01f_api_request_rate_is_limited(self):
        # --kube-api-qps/--kube-api-burst: client-go's token bucket over
        # every request but watches. At 2 per second with a burst of 1, a
        # restart's lists reach the API server at least 0.5 s apart
        # (without the limit they all arrive within milliseconds).
        lab = self.lab
        lab.stop_kproxy(signal.SIGTERM)
        t0 = time.time()
        lab.start_kproxy("--kube-api-qps", "2", "--kube-api-burst", "1")
        lab.wait_healthy("healthz with a rate limit", timeout=30)
        self.assertTrue(any("watch=1" in e["path"] for e in lab.state_requests()
                            if e["userAgent"].startswith("kproxy/") and e["time"] >= t0))

        def ours():
            reqs = lab.state_requests()
            return sorted(e["time"] for e in reqs if e["userAgent"].startswith("kproxy/") and e["time"] >= t0
                          and "watch=1" not in e["path"])
        times = wait_for("the restart's lists", lambda: len(ours()) >= 3 and ours(), timeout=20)
        gaps = [b - a for a, b in zip(times, times[1:])][:2]
        self.assertTrue(all(g >= 0.4 for g in gaps), "requests closer than 0.5 s: %s" % gaps)
        # client-go's rest_client_rate_limiter_duration_seconds: the lists'
        # waits for a token (watches are not counted there).
        m = self.scrape()
        host = {"host": "127.0.0.1:%d" % lab.api_port, "verb": "GET"}
        self.assertGreaterEqual(promtext.value(m, "rest_client_rate_limiter_duration_seconds",
                                               "rest_client_rate_limiter_duration_seconds_count", **host), 3)
        self.assertGreater(promtext.value(m, "rest_client_rate_limiter_duration_seconds",
                                          "rest_client_rate_limiter_duration_seconds_sum", **host), 0.4)
        lab.stop_kproxy(signal.SIGTERM)
        lab.start_kproxy()
        lab.wait_healthy("healthz without the limit")

    def test_01i_min_sync_period_spaces_syncs(self):
        # --iptables-min-sync-period: changes in a burst are applied by
        # syncs at least that far apart, several changes to a sync.
        lab, ip = self.lab, self.ip
        lab.stop_kproxy(signal.SIGTERM)
        lab.start_kproxy("--iptables-min-sync-period", "2s")
        lab.wait_healthy("healthz with a 2 s minimum sync period")
        mark = len(lab.kproxy_output())
        sets = (("a1", "a2"), ("a1", "a3"), ("a2", "a3"), ("a1", "a2", "a3"), ("a2",))
        for pods in sets:
            self.replace_slice(slice_("web-1", "web", [(ip[p], "node-1") for p in pods]))
            time.sleep(0.2)     # a burst of changes, not a wait for a state
        self.wait_web("the last change applied", "a2", timeout=20)
        starts = []
        for l in lab.kproxy_output()[mark:].splitlines():
            m = re.match(r"I\d{4} (\d\d):(\d\d):(\d\d\.\d+) .*\"Syncing %s rules\" ipFamily=\"IPv4\"" % self.MODE, l)
            if m:
                starts.append(int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)))
        self.assertTrue(1 <= len(starts) < len(sets), "%d syncs for %d changes" % (len(starts), len(sets)))
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        self.assertTrue(all(g >= 1.9 for g in gaps), "syncs closer than 2 s: %s" % gaps)
        lab.stop_kproxy(signal.SIGTERM)
        lab.start_kproxy()
        lab.wait_healthy("healthz with the default period")
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1")]))
        self.wait_web("web back at a1", "a1")

    def test_01g_api_errors_are_counted_by_status(self):
        # client-go's rest_client_requests_total counts a request by the
        # status its response starts with: a watch refused once with a 503.
        lab = self.lab
        count = lambda m, code: promtext.value(m, "rest_client_requests_total", code=code,
                                              host="127.0.0.1:%d" % lab.api_port, method="GET") or 0
        before = count(self.scrape(), "503")
        lab.fault("error", {"count": 1, "code": 503, "match": "services"})
        lab.fault("drop-watches")
        m = wait_for("the refused request counted", lambda: (lambda m: m if count(m, "503") > before else None)(
            self.scrape()), timeout=20)
        self.assertEqual(count(m, "503"), before + 1)
        self.assertUpstreamShape(m)
        self.assertKproxyRunning()

    def test_01h_local_policy_without_local_endpoints_is_counted(self):
        # Both modes count a Local policy that finds no endpoint on this node
        # (nftables mode counted none before: its partial syncs render only
        # the changed services).
        lab, ip = self.lab, self.ip
        metric = "kubeproxy_sync_proxy_rules_no_local_endpoints_total"
        self.replace_slice(slice_("npl-1", "npl", [(ip["b2"], "node-2")]))

        def counted():
            m = self.scrape()
            return m if promtext.value(m, metric, ip_family="IPv4", traffic_policy="external") == 1 else None
        m = wait_for("npl's external policy counted without a local endpoint", counted, timeout=20)
        self.assertEqual(promtext.value(m, metric, ip_family="IPv4", traffic_policy="internal"), 0)
        self.replace_slice(slice_("npl-1", "npl", [(ip["a2"], "node-1"), (ip["b2"], "node-2")]))
        wait_for("npl's local endpoint back",
                 lambda: promtext.value(self.scrape(), metric, ip_family="IPv4", traffic_policy="external") == 0,
                 timeout=20)

    def test_02_spread_one_then_three(self):
        r = self.client("10.96.0.10", 80, 300)
        self.assertEqual(r["errors"], {})
        self.assertEqual(r["replies"], {"a1": 300})
        ip = self.ip
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["a2"], "node-1"),
                                                   (ip["a3"], "node-1")]))
        self.wait_web("3 endpoints for web", "a1", "a2", "a3")
        r = self.client("10.96.0.10", 80, 600)
        self.assertEqual(r["errors"], {})
        # Each endpoint gets 1/3: 200 of 600 expected; binomial sd ~11.5, so
        # [140, 260] is more than 5 sd wide on each side.
        self.assertEqual(sorted(r["replies"]), ["a1", "a2", "a3"])
        for pod, n in r["replies"].items():
            self.assertTrue(140 <= n <= 260, "%s got %d of 600: %s" % (pod, n, r["replies"]))

    def test_02b_explain_agrees_from_dump_api_and_daemon(self):
        """kproxy explain gives one answer from a kubectl dump, from the API
        server and from the running daemon (/debug/explain), and its
        endpoints are those the kernel's rules send the service to."""
        lab = self.lab
        self.assertKproxyRunning()
        dump = os.path.join(lab.tmp, "explain-state.json")
        with open(dump, "w") as f:
            f.write(lab.kubectl("get", "services,endpointslices,nodes,servicecidrs", "-A", "-o", "json").stdout)
        base = [lab.kproxy_bin, "explain", "--proxy-mode", self.MODE, "--hostname-override", "node-1",
                "--cluster-cidr", "10.244.0.0/16", "--output", "json"]
        for src, dst in ((self.ip["cl"], "10.96.0.10:80"), (NODE_IPS["node-2"], NODE_IPS["node-1"] + ":30081"),
                         (self.ip["cl"], "10.96.0.30:80"), (self.ip["cl"], "10.96.0.99:80")):
            q = ["--source", src, "--destination", dst]
            answers = {
                "dump": lab.run(base + q + [dump], ns="n1").stdout,
                "api": lab.run(base + q + ["--kubeconfig", lab.kubeconfig], ns="n1").stdout,
                "daemon": lab.run(base + q + ["--daemon", "http://127.0.0.1:10249"], ns="n1").stdout,
            }
            parsed = {k: json.loads(v) for k, v in answers.items()}
            with self.subTest(destination=dst):
                self.assertEqual(parsed["dump"], parsed["api"])
                self.assertEqual(parsed["dump"], parsed["daemon"])
        j = json.loads(lab.run(base + ["--source", self.ip["cl"], "--destination", "10.96.0.10:80", dump],
                               ns="n1").stdout)
        self.assertEqual(j["verdict"], "forward")
        self.assertEqual(sorted(e["address"] for e in j["endpoints"] if e["selected"]),
                         lab.targets("default/web", "p"))
        # A bad query is the daemon's 400, naming the field.
        out = lab.run(["curl", "-s", "-w", "%{http_code}", "http://127.0.0.1:10249/debug/explain?source=x"],
                      ns="n1", check=False).stdout
        self.assertTrue(out.endswith("400") and "source" in out, out)

    def trace(self, traffic, *args, packet_header=True):
        """Runs kproxy trace in node 1 with args, starts traffic() once it
        says it is armed, and returns what it printed."""
        lab = self.lab
        p = subprocess.Popen(["ip", "netns", "exec", lab.ns("n1"), lab.kproxy_bin, "trace", "--packets", "1",
                              "--timeout", "20s", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        try:
            line = p.stderr.readline()
            if "armed" not in line:
                self.fail("kproxy trace did not arm: " + line + p.communicate(timeout=30)[1])
            traffic()
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 0, err)
        self.assertNotIn("kproxy-trace", lab.run(["nft", "list", "tables"], ns="n1").stdout)
        if packet_header:
            self.assertIn("packet 1:", out, err)
        return out

    def test_02c_trace_names_the_rule_that_decided(self):
        """kproxy trace prints the kernel's walk of real packets: a pod's
        connection to a service, a node port from outside, a packet a
        foreign rule drops, a packet to an unallocated cluster IP."""
        lab, nft = self.lab, self.MODE == "nftables"
        # From pod a4, not the usual client: the packets that are dropped
        # here make the node answer with ICMP errors, whose per-host rate
        # limit test_04 needs whole for its client.
        src = self.ip["a4"]
        out = self.trace(lambda: self.client("10.96.0.10", 80, 1, ns="p-a4"), "--destination", "10.96.0.10:80")
        self.assertIn("default/web", out)
        dnat = [l for l in out.splitlines() if ("dnat to" if nft else "-j DNAT") in l]
        self.assertTrue(dnat and "=> accept" in dnat[0], out)
        self.assertIn("now %s:" % src, out)          # the translated packet, as the kernel saw it next

        out = self.trace(lambda: self.client(NODE_IPS["node-1"], 30080, 1, ns="n2"),
                         "--destination", NODE_IPS["node-1"] + ":30080")
        self.assertIn("default/np" if not nft else "service-nodeports", out)
        self.assertTrue(any(("dnat to" if nft else "-j DNAT") in l for l in out.splitlines()), out)

        # A firewall's rule of its own table, not kproxy's.
        lab.run(["nft", "-f", "-"], ns="n1", input=(
            "table ip planted {\n chain forward_drop {\n  type filter hook forward priority 0;\n"
            "  ip saddr %s tcp dport 8080 drop comment \"planted drop\"\n }\n}\n" % src))
        try:
            out = self.trace(lambda: self.client("10.96.0.10", 80, 1, "--timeout", "2", ns="p-a4"),
                             "--destination", "10.96.0.10:80")
        finally:
            lab.run(["nft", "delete", "table", "ip", "planted"], ns="n1")
        drop = [l for l in out.splitlines() if "planted drop" in l]
        self.assertTrue(drop and drop[0].rstrip().endswith("=> drop") and " planted forward_drop:" in drop[0], out)

        out = self.trace(lambda: self.client("10.96.0.99", 80, 1, "--timeout", "2", ns="p-a4"), "--destination",
                         "10.96.0.99:80")
        if nft:
            self.assertIn("Drop traffic to unallocated ClusterIPs", out)
        else:
            self.assertIn("KUBE-SERVICES: end of chain", out)
            self.assertNotIn("DNAT", out)

    def test_02f_trace_json(self):
        """kproxy trace --output json: an object per event, a line each."""
        out = self.trace(lambda: self.client("10.96.0.10", 80, 1, ns="p-a4"), "--destination", "10.96.0.10:80",
                         "--output", "json", packet_header=False)
        events = [json.loads(l) for l in out.splitlines()]
        self.assertTrue(events and all(e["packet"] == 1 for e in events), out)
        nat = [e for e in events if e["verdict"] == "accept" and e["rule"] and
               ("dnat to" in e["rule"] or "-j DNAT" in e["rule"])]
        self.assertEqual(len(nat), 1, out)
        self.assertEqual(nat[0]["type"], "rule")
        self.assertGreater(nat[0]["handle"], 0)
        # The packet's addresses come with its first event in a hook: the
        # client's before the DNAT, the endpoint's after it.
        now = [e["packetNow"] for e in events if e["packetNow"]]
        self.assertTrue(now and now[0].startswith(self.ip["a4"] + ":") and "-> 10.96.0.10:80 tcp" in now[0], now)
        self.assertTrue(any("-> 10.244." in n for n in now[1:]), now)

    def test_02d_trace_leaves_nothing_armed(self):
        lab = self.lab
        for sig in (signal.SIGTERM, signal.SIGKILL):
            p = subprocess.Popen(["ip", "netns", "exec", lab.ns("n1"), lab.kproxy_bin, "trace", "--destination",
                                  "10.96.0.10:80"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            self.assertIn("armed", p.stderr.readline())
            self.assertIn("kproxy-trace", lab.run(["nft", "list", "tables"], ns="n1").stdout)
            p.send_signal(sig)
            p.wait(timeout=20)
            p.stderr.close()
            self.assertEqual(p.returncode, 0 if sig == signal.SIGTERM else -signal.SIGKILL)
            self.assertNotIn("kproxy-trace", lab.run(["nft", "list", "tables"], ns="n1").stdout, sig)
        # A table a kernel without owned tables kept: --cleanup removes it
        # (in a namespace of its own: --cleanup removes kproxy's rules too).
        lab.add_ns("tr")
        lab.run(["nft", "add", "table", "ip", "kproxy-trace"], ns="tr")
        out = lab.run([lab.kproxy_bin, "--cleanup"], ns="tr")
        self.assertIn("left by kproxy trace", out.stderr)
        self.assertNotIn("kproxy-trace", lab.run(["nft", "list", "tables"], ns="tr").stdout)

    def test_02e_debug_rules_is_what_render_prints(self):
        """/debug/rules: the mode's text for the model the daemon holds,
        as `kproxy render` prints it for a dump of the same cluster; a
        second request within its period is refused (429)."""
        lab = self.lab
        dump = os.path.join(lab.tmp, "rules-state.json")
        with open(dump, "w") as f:
            f.write(lab.kubectl("get", "services,endpointslices,nodes,servicecidrs", "-A", "-o", "json").stdout)
        lab.wait_healthy()
        get = ["curl", "-s", "-w", "\\n%{http_code}", "http://127.0.0.1:10249/debug/rules"]
        body, code = lab.run(get, ns="n1").stdout.rsplit("\n", 1)
        again = lab.run(get, ns="n1").stdout.rsplit("\n", 1)[1]
        self.assertEqual((code, again), ("200", "429"))
        self.assertIn("nothing pending", body)
        sections = re.split(r"(?m)^# (IPv\d, .*)\n", body)
        mine = dict(zip(sections[1::2], sections[2::2]))
        render = lab.run([lab.kproxy_bin, "render", "--proxy-mode", self.MODE, "--hostname-override", "node-1",
                          "--cluster-cidr", "10.244.0.0/16", dump], ns="n1").stdout
        self.assertEqual(mine["IPv4, " + self.MODE], render)

    def test_03_removed_endpoint_gets_no_traffic(self):
        ip = self.ip
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["a2"], "node-1")]))
        self.wait_web("a3 gone from web", "a1", "a2")
        r = self.client("10.96.0.10", 80, 300)
        self.assertEqual(r["errors"], {})
        self.assertNotIn("a3", r["replies"])
        self.assertEqual(sorted(r["replies"]), ["a1", "a2"])

    def test_04_no_endpoints_is_refused_at_once(self):
        # Five tries: the kernel rate-limits ICMP errors to one host (a burst
        # of about six, then one a second), REJECT's answers included.
        r = self.client("10.96.0.30", 80, 5, "--timeout", "3")
        self.assertEqual(r["errors"], {"ECONNREFUSED": 5})
        self.assertLess(r["max_connect_ms"], 500)

    def test_05_session_affinity_sticks(self):
        r = self.client("10.96.0.40", 80, 60)
        self.assertEqual(r["errors"], {})
        self.assertEqual(len(r["replies"]), 1, r["replies"])

    def test_06_nodeport_cluster_policy_reaches_both_nodes(self):
        r = self.client(NODE_IPS["node-1"], 30080, 200, ns="n2")
        self.assertEqual(r["errors"], {})
        self.assertEqual(sorted(r["replies"]), ["a1", "b1"])
        # Masqueraded: the pods see one of node 1's addresses (the one facing
        # them), never the client's.
        self.assertNotIn(NODE_IPS["node-2"], r["peers"])
        self.assertTrue(set(r["peers"]) <= {NODE_IPS["node-1"], "10.244.1.1"}, r["peers"])

    def test_06b_localhost_nodeport_is_counted(self):
        # iptables mode counts connections to a NodePort on 127.0.0.1 in an
        # nfacct counter (upstream's check before moving to nftables mode,
        # which has no localhost NodePorts); the metric reads it at scrape time.
        name = "kubeproxy_iptables_localhost_nodeports_accepted_packets_total"
        before = promtext.value(self.scrape(), name)
        r = self.client("127.0.0.1", 30080, 5, ns="n1")
        after = promtext.value(self.scrape(), name)
        if self.MODE != "iptables":
            self.assertIsNone(after)
            return
        self.assertEqual(r["errors"], {})
        # Only a connection's first packet passes the nat table.
        self.assertEqual(after - before, 5)

    def test_06c_load_balancer_source_ranges(self):
        """loadBalancerSourceRanges are access control: a client inside the
        ranges reaches the load-balancer IP, one outside gets nothing (no
        answer at all, as the rules' DROP gives), in every mode; the
        service's cluster IP stays open to both."""
        lab = self.lab
        svc = service("lbsr", "10.96.0.70", typ="LoadBalancer", node_port=30070, etp="Cluster")
        svc["spec"]["loadBalancerSourceRanges"] = [self.ip["cl"] + "/32", "198.51.100.0/24"]
        svc["status"] = {"loadBalancer": {"ingress": [{"ip": "203.0.113.70"}]}}
        lab.apply_objects("create", [svc, slice_("lbsr-1", "lbsr", [(self.ip["a1"], "node-1")])])
        lab.run(["ip", "route", "replace", "203.0.113.70/32", "via", NODE_IPS["node-1"]], ns="n2")
        # A real node routes the address onwards (its default route): the
        # rules' drop, not a missing route, must be what stops it there.
        lab.run(["ip", "route", "replace", "203.0.113.70/32", "dev", "eth0"], ns="n1")
        try:
            lab.wait_targets("lbsr's endpoints", "default/lbsr", "p", self.eps("a1"))
            r = self.client("203.0.113.70", 80, 20)
            self.assertEqual((r["errors"], r["replies"]), ({}, {"a1": 20}), "from inside the ranges")
            # Node 2 is outside: its SYNs are dropped, not refused.
            r = self.client("203.0.113.70", 80, 3, "--timeout", "0.5", ns="n2")
            self.assertEqual((r["errors"], r["replies"]), ({"timeout": 3}, {}), "from outside the ranges")
            r = self.client("10.96.0.70", 80, 5, ns="n2")
            self.assertEqual((r["errors"], r["replies"]), ({}, {"a1": 5}), "the cluster IP from node 2")
            if self.MODE == "userspace":
                self.assertRegex(lab.frontends(), r"(?m)^tcp 203\.0\.113\.70:80 default/lbsr:p external "
                                 r"sources=10\.244\.1\.100/32,198\.51\.100\.0/24 -> ")
        finally:
            for n in ("n1", "n2"):
                lab.run(["ip", "route", "del", "203.0.113.70/32"], ns=n, check=False)
            lab.kubectl("delete", "service", "lbsr", "--wait=false")
            lab.kubectl("delete", "endpointslice", "lbsr-1", "--wait=false")

    def test_07_nodeport_local_policy_keeps_client_ip(self):
        r = self.client(NODE_IPS["node-1"], 30081, 100, ns="n2")
        self.assertEqual(r["errors"], {})
        self.assertEqual(r["replies"], {"a2": 100})
        self.assertEqual(r["peers"], {NODE_IPS["node-2"]: 100})

    def test_08_udp_flow_follows_a_replaced_endpoint(self):
        r = self.client("10.96.0.53", 53, 5, "--udp", "--same-socket")
        self.assertEqual(r["replies"], {"a1": 5})
        # The same client socket keeps its 5-tuple: without the conntrack
        # cleanup its entry would keep pointing at a1 for as long as it talks.
        proc = subprocess.Popen(
            ["ip", "netns", "exec", self.lab.ns("p-cl"), sys.executable,
             os.path.join(os.path.dirname(__file__), "client.py"), "10.96.0.53", "53", "0", "--udp",
             "--same-socket", "--until-seconds", "8", "--timeout", "0.2"],
            stdout=subprocess.PIPE, text=True)
        self.replace_slice(slice_("dns-1", "dns", [(self.ip["a2"], "node-1")], port=5353, proto="UDP"))
        self.lab.wait_targets("dns moved to a2", "default/dns", "p", self.eps("a2", port=5353))
        out, _ = proc.communicate(timeout=30)
        r = json.loads(out)
        self.assertGreater(r["replies"].get("a2", 0), 0, "the live UDP flow never reached the new endpoint: %s" % r)

    def test_08b_udp_flow_to_a_service_scaled_to_zero_is_rejected(self):
        # A live UDP flow keeps its conntrack entry DNAT-ed to the endpoint
        # it started with. When the service loses its last endpoint, that
        # entry must go, so the flow's next datagram meets the reject rule
        # (ICMP port unreachable: ECONNREFUSED on a connected socket) instead
        # of following the entry to the old pod (or into a black hole, once
        # the pod is gone) for as long as the client sends.
        lab = self.lab
        proc = subprocess.Popen(
            ["ip", "netns", "exec", lab.ns("p-cl"), sys.executable,
             os.path.join(os.path.dirname(__file__), "client.py"), "10.96.0.53", "53", "0", "--udp",
             "--same-socket", "--connected", "--until-seconds", "25", "--timeout", "0.3", "--interval", "0.05",
             "--bind-port", "40853"],
            stdout=subprocess.PIPE, text=True)
        try:
            # This flow's entry (earlier tests' entries to a2 may still be
            # there) has seen a reply: the flow is live (under load the client
            # may take a while to start).
            wait_for("the UDP flow's answered conntrack entry", lambda: any(
                "sport=40853 dport=53" in l and "UNREPLIED" not in l for l in lab.run(
                    ["conntrack", "-L", "-p", "udp", "-d", "10.96.0.53"], ns="n1", check=False).stdout.splitlines()),
                timeout=20)
            self.replace_slice(slice_("dns-1", "dns", [], port=5353, proto="UDP"))
            lab.wait_targets("dns without endpoints", "default/dns", "p", [])
            out, _ = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        r = json.loads(out)
        self.assertGreater(r["replies"].get("a2", 0), 0, "the flow was not live before: %s" % r)
        self.assertGreater(r["errors"].get("ECONNREFUSED", 0), 0,
                           "the live flow was not rejected after the service lost its endpoints: %s" % r)
        self.replace_slice(slice_("dns-1", "dns", [(self.ip["a2"], "node-1")], port=5353, proto="UDP"))
        lab.wait_targets("dns back at a2", "default/dns", "p", self.eps("a2", port=5353))
        r = self.client("10.96.0.53", 53, 5, "--udp")
        self.assertEqual(r["replies"], {"a2": 5}, r)

    def test_08c_udp_flow_to_a_deleted_service_is_not_delivered(self):
        # The same for a service deleted outright: its frontends are gone
        # from the model, but a live flow's entry DNAT-ed to its old pod
        # must go too (upstream 1.34 leaves it: #141371, after 1.34).
        lab, ip = self.lab, self.ip
        lab.apply_objects("create", [service("dns2", "10.96.0.54", port=53, target=5353, proto="UDP"),
                                     slice_("dns2-1", "dns2", [(ip["a3"], "node-1")], port=5353, proto="UDP")])
        lab.wait_targets("dns2 at a3", "default/dns2", "p", self.eps("a3", port=5353))

        def to_a3():
            out = lab.run(["conntrack", "-L", "-p", "udp", "-d", "10.96.0.54"], ns="n1", check=False).stdout
            return [l for l in out.splitlines() if "src=%s " % ip["a3"] in l]
        proc = subprocess.Popen(
            ["ip", "netns", "exec", lab.ns("p-cl"), sys.executable,
             os.path.join(os.path.dirname(__file__), "client.py"), "10.96.0.54", "53", "0", "--udp",
             "--same-socket", "--until-seconds", "8", "--timeout", "0.2", "--interval", "0.05"],
            stdout=subprocess.PIPE, text=True)
        try:
            wait_for("the flow's entry DNAT-ed to a3", to_a3, timeout=10)
            lab.kubectl("delete", "service", "dns2")
            lab.kubectl("delete", "endpointslice", "dns2-1")
            lab.wait_rules("dns2's rules gone", lambda r: "default/dns2" not in r)
            # While the client still sends, the entry to a3 must not come back.
            wait_for("the flow's entry to a3 deleted", lambda: not to_a3(), timeout=10)
            self.assertEqual(to_a3(), [])
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()

    def test_08d_conntrack_reconciler_deletions_are_counted(self):
        # Tests 08 to 08c left UDP conntrack entries pointing at endpoints
        # that went away, which the reconciler deleted; nothing before
        # test 08 made UDP flows.
        m = self.scrape()
        v4 = {"ip_family": "IPv4"}
        self.assertGreaterEqual(promtext.value(m, "kubeproxy_conntrack_reconciler_deleted_entries_total", **v4), 1)
        self.assertGreaterEqual(promtext.value(m, "kubeproxy_conntrack_reconciler_sync_duration_seconds",
                                               "kubeproxy_conntrack_reconciler_sync_duration_seconds_count", **v4), 2)
        self.assertUpstreamShape(m)

    def test_09_watch_drops_and_errors_lose_no_update(self):
        lab, ip = self.lab, self.ip
        lab.fault("drop-watches")
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["a2"], "node-1"), (ip["a3"], "node-1")]))
        self.wait_web("web back to 3 endpoints after a dropped watch", "a1", "a2", "a3")
        # The next four watch requests fail with 500 (kubectl's writes are
        # not matched); kproxy must back off and come back.
        lab.fault("error", {"count": 4, "code": 500, "match": "watch=1"})
        lab.fault("drop-watches")
        wait_for("kproxy to use up the injected errors", lambda: lab.state()["faults"]["errorCount"] == 0, timeout=30)
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["a2"], "node-1")]))
        self.wait_web("web at 2 endpoints after 500s", "a1", "a2", timeout=30)
        self.assertKproxyRunning()

    def test_10_silent_watch_is_restarted(self):
        lab, ip = self.lab, self.ip
        lab.fault("stall", {"seconds": 30})
        # kproxy runs with --watch-idle-timeout 4s: it must notice and re-watch.
        wait_for("kproxy to restart a silent watch", lambda: "watch silent" in lab.kproxy_output(), timeout=20)
        lab.fault("clear")
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["a2"], "node-1"), (ip["a3"], "node-1")]))
        self.wait_web("web at 3 endpoints after a stall", "a1", "a2", "a3", timeout=30)

    def test_11_api_server_restart_with_old_versions(self):
        lab, ip = self.lab, self.ip
        # A service that is deleted while kproxy's watches are down: only
        # the relist (whose answer lacks it) can tell kproxy it is gone.
        lab.apply_objects("create", [service("gone", "10.96.0.60"), slice_("gone-1", "gone", [(ip["a4"], "node-1")])])
        lab.wait_targets("the service to delete behind kproxy's back", "default/gone", "p", self.eps("a4"))
        state = os.path.join(lab.tmp, "state.json")
        objs = json.loads(lab.kubectl("get", "services,endpointslices,nodes,servicecidrs", "-A", "-o", "json").stdout)
        objs["items"] = [o for o in objs["items"] if o["metadata"]["name"] not in ("gone", "gone-1")]
        with open(state, "w") as f:
            json.dump(objs, f)
        lab.stop_apiserver()
        # API server down: rules and traffic stay as they were.
        r = self.client("10.96.0.10", 80, 150)
        self.assertEqual(r["errors"], {})
        self.assertEqual(sorted(r["replies"]), ["a1", "a2", "a3"])
        lab.start_apiserver(initial_rv=1000000, state=[state])
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["a3"], "node-1")]))
        self.wait_web("web without a2 after the API server restarted", "a1", "a3", timeout=60)
        self.assertIn("410", lab.kproxy_output())
        # Both relists must have told: without its slice alone, the service
        # would stay as one without endpoints (nat map element, or filter
        # REJECT in iptables mode), which a later test would then see go.
        def gone():
            text = lab.rules() + (lab.run(["iptables-save", "-t", "filter"], ns="n1").stdout
                                  if self.MODE == "iptables" else "")
            return "default/gone" not in text
        wait_for("the service deleted while the API server was away to go, with its slice", gone, timeout=60)

    def test_12_malformed_object_is_skipped(self):
        lab, ip = self.lab, self.ip
        bad = service("bad", "10.96.0.99")
        bad["spec"]["ports"][0]["port"] = 70000
        lab.apply_objects("create", [bad])
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["a2"], "node-1"), (ip["a3"], "node-1")]))
        self.wait_web("web change applied next to a bad service", "a1", "a2", "a3")
        # The Services watch may still be backing off after test 11's restart.
        wait_for("kproxy to report the bad Service",
                 lambda: re.search(r"Invalid Service default/bad: spec.ports\[0\].port", lab.kproxy_output()),
                 timeout=45)
        r = self.client("10.96.0.10", 80, 90)
        self.assertEqual(r["errors"], {})

    def test_13_stopped_proxy_keeps_rules_restart_applies_changes(self):
        lab, ip = self.lab, self.ip
        self.assertEqual(lab.stop_kproxy(signal.SIGTERM), 0)
        before = lab.rules()
        # A pod replaced while kproxy is down: a3 goes, a4 comes.
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["a2"], "node-1"), (ip["a4"], "node-1")]))
        r = self.client("10.96.0.10", 80, 300)
        self.assertEqual(r["errors"], {})
        self.assertNotIn("a4", r["replies"])
        self.assertEqual(steady(lab.rules()), steady(before))
        t0 = time.monotonic()
        lab.start_kproxy()
        self.wait_web("a4 in web's rules after the restart", "a1", "a2", "a4", timeout=20)
        took = time.monotonic() - t0
        r = self.client("10.96.0.10", 80, 300)
        self.assertIn("a4", r["replies"])
        self.assertNotIn("a3", r["replies"])
        sys.stderr.write("\n  restart to new endpoint in the kernel: %.2fs\n" % took)

    def test_13b_json_logs_with_upstreams_keys(self):
        # --logging-format=json: every line one JSON object with
        # component-base's keys; the sync lines carry upstream's messages
        # and keys, so queries written for kube-proxy's logs match.
        lab, ip = self.lab, self.ip
        lab.stop_kproxy(signal.SIGTERM)
        mark = len(lab.kproxy_output())
        lab.start_kproxy("--logging-format", "json")
        lab.wait_healthy("healthz with JSON logs")
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["a2"], "node-1")]))
        self.wait_web("a4 gone from web", "a1", "a2")
        mode = self.MODE
        lines = []
        for l in lab.kproxy_output()[mark:].splitlines():
            if l.startswith("=== start"):
                continue
            try:
                lines.append(json.loads(l))
            except ValueError:
                self.fail("not a JSON line: %r" % l)

        def find(msg, **keys):
            return [j for j in lines if j.get("msg") == msg and all(j.get(k) == v for k, v in keys.items())]
        for j in lines:
            self.assertIsInstance(j.get("ts"), float, j)
            self.assertRegex(j.get("caller", ""), r"^\w+/[\w-]+\.c:\d+$", j)
            self.assertTrue("v" in j or "err" in j or j.get("msg"), j)
        # The partial sync logged its start before the kernel had the change.
        want = "Syncing %s rules" % mode
        self.assertTrue(find(want, ipFamily="IPv4", fullSync=True), "no full-sync line %r" % want)
        self.assertTrue(find(want, ipFamily="IPv4", fullSync=False), "no partial-sync line %r" % want)
        done = find("SyncProxyRules complete", ipFamily="IPv4")
        self.assertTrue(done and all(re.fullmatch(r"[\d.]+(µs|ms|s)", j["elapsed"]) for j in done), done)
        reload_ = find("Reloading service %s data" % mode, ipFamily="IPv4")
        self.assertTrue(reload_ and all(isinstance(j["numServices"], int) for j in reload_), reload_)
        lab.stop_kproxy(signal.SIGTERM)
        lab.start_kproxy()
        lab.wait_healthy("healthz back in text")
        self.replace_slice(slice_("web-1", "web", [(ip[p], "node-1") for p in ("a1", "a2", "a4")]))
        self.wait_web("web as test 13 left it", "a1", "a2", "a4")

    def _restart_under_traffic(self, sig):
        r = self.lab.restart_under_traffic(sig, "10.96.0.10", 80)
        self.assertEqual(r["errors"], {}, r)
        self.assertGreater(r["attempts"], 100)

    def test_14_restart_under_traffic_fails_no_connection(self):
        self._restart_under_traffic(signal.SIGTERM)

    def test_15_sigkill_restart_under_traffic_fails_no_connection(self):
        self._restart_under_traffic(signal.SIGKILL)

    def test_15b_live_udp_flow_survives_a_restart(self):
        lab = self.lab

        def dns_flow_ids():
            out = lab.run(["conntrack", "-L", "-p", "udp", "-d", "10.96.0.53", "--sport", "40854", "-o", "id"],
                          ns="n1").stdout
            return sorted(re.findall(r"id=(\d+)", out))
        proc = subprocess.Popen(
            ["ip", "netns", "exec", lab.ns("p-cl"), sys.executable,
             os.path.join(os.path.dirname(__file__), "client.py"), "10.96.0.53", "53", "0", "--udp",
             "--same-socket", "--until-seconds", "10", "--timeout", "0.5", "--bind-port", "40854"],
            stdout=subprocess.PIPE, text=True)
        before = wait_for("the UDP flow's conntrack entry", dns_flow_ids, timeout=20)
        lab.stop_kproxy(signal.SIGTERM)
        lab.start_kproxy()
        lab.wait_healthy("healthz after restart")
        after = dns_flow_ids()
        out, _ = proc.communicate(timeout=30)
        r = json.loads(out)
        # Upstream flushes every UDP entry on restart (#122740); kproxy keeps
        # the entries of live flows to serving endpoints.
        self.assertTrue(set(before) <= set(after), (before, after))
        self.assertEqual(r["errors"], {}, r)

    def test_15c_switch_to_the_other_mode_and_back(self):
        lab = self.lab
        for mode, other in ((self.OTHER, self.MODE), (self.MODE, self.OTHER)):
            # The other mode's rules serve until the new mode's first sync:
            # no new connection fails across the switch.
            r = lab.restart_under_traffic(signal.SIGTERM, "10.96.0.10", 80, mode=mode)
            self.assertEqual(r["errors"], {}, r)
            lab.wait_targets("web's rules in %s mode" % mode, "default/web", "p", self.eps("a1", "a2", "a4"),
                             timeout=20, mode=mode)
            lab.wait_healthy("healthz in %s mode" % mode)
            self.assertEqual(lab.leftovers(other), [], "%s mode left rules of %s mode" % (mode, other))
            r = self.client("10.96.0.10", 80, 60)
            self.assertEqual(r["errors"], {})
            self.assertEqual(sorted(r["replies"]), ["a1", "a2", "a4"])

    def test_16_cleanup_removes_everything(self):
        lab = self.lab
        lab.stop_kproxy(signal.SIGTERM)
        # Also the other mode's rules, as render writes them.
        state = lab.kubectl("get", "services,endpointslices,nodes,servicecidrs", "-A", "-o", "json").stdout
        script = lab.run([lab.kproxy_bin, "render", "--proxy-mode", self.OTHER, "--hostname-override", "node-1",
                          "--cluster-cidr", "10.244.0.0/16", "-"], ns="n1", input=state).stdout
        lab.run(["iptables-restore", "--noflush"] if self.OTHER == "iptables" else ["nft", "-f", "-"], ns="n1",
                input=script)
        for mode in (self.MODE, self.OTHER):
            self.assertNotEqual(lab.leftovers(mode), [], "no %s rules to clean up" % mode)
        known = os.path.join(lab.state_dir, "iptables-known-ipv4")
        if self.MODE == "iptables":
            self.assertTrue(os.path.exists(known))
        for _ in range(2):      # idempotent
            p = lab.run([lab.kproxy_bin, "--cleanup", "--state-dir", lab.state_dir], ns="n1", check=False)
            self.assertEqual(p.returncode, 0, p.stderr)
        for mode in (self.MODE, self.OTHER):
            self.assertEqual(lab.leftovers(mode), [], mode)
        self.assertFalse(os.path.exists(known), "--cleanup leaves what --state-dir kept")


class E2EIptables(Suite, unittest.TestCase):
    MODE, OTHER = "iptables", "nftables"

    def assert_first_sync_rules(self):
        lab = self.lab
        nat = lab.nat()
        self.assertIn("KUBE-NODEPORTS", nat)
        filt = lab.run(["iptables-save", "-t", "filter"], ns="n1").stdout
        self.assertIn('"default/empty:p has no endpoints"', filt)
        # The jump rules from the built-in chains and the canaries are there.
        self.assertRegex(nat, r'-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES')
        mangle = lab.run(["iptables-save", "-t", "mangle"], ns="n1").stdout
        self.assertIn(":KUBE-PROXY-CANARY", mangle)

    def test_12b_failed_restore_keeps_rules_and_retries(self):
        lab, ip = self.lab, self.ip
        nat = lab.nat()
        sep = re.search(r'^-A (KUBE-SEP-\S+) .*"default/web:p" .*--to-destination %s:8080' % re.escape(ip["a3"]),
                        nat, re.M).group(1)
        # Someone else's rule points at a3's chain: deleting that chain, and
        # so the whole transaction, fails.
        lab.run(["iptables", "-t", "nat", "-N", "FOREIGN"], ns="n1")
        lab.run(["iptables", "-t", "nat", "-A", "FOREIGN", "-j", sep], ns="n1")
        self.replace_slice(slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["a2"], "node-1")]))
        wait_for("a failed sync", lambda: "Sync failed" in lab.kproxy_output(), timeout=20)
        self.assertGreaterEqual(
            promtext.value(self.scrape(), "kubeproxy_sync_proxy_rules_iptables_restore_failures_total",
                           ip_family="IPv4"), 1)
        # The previous rules are all still there, and serve.
        self.assertEqual(lab.targets("default/web", "p"), self.eps("a1", "a2", "a3"))
        r = self.client("10.96.0.10", 80, 60)
        self.assertEqual(r["errors"], {})
        # Once the obstacle is gone, the retry (after --iptables-sync-period) applies the change.
        lab.run(["iptables", "-t", "nat", "-F", "FOREIGN"], ns="n1")
        lab.run(["iptables", "-t", "nat", "-X", "FOREIGN"], ns="n1")
        self.wait_web("the retried sync", "a1", "a2", timeout=20)
        self.assertKproxyRunning()

    def test_12c_flushed_tables_are_restored(self):
        lab = self.lab
        # What a firewall reload does: every table flushed and its chains gone.
        for table in ("mangle", "nat", "filter"):
            lab.run(["iptables", "-t", table, "-F"], ns="n1")
            lab.run(["iptables", "-t", table, "-X"], ns="n1")
        self.assertEqual(lab.targets("default/web", "p"), [])
        # The canary is checked every --iptables-sync-period (4s here).
        jump = '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'
        lab.wait_rules("a full resync after the flush",
                       lambda nat: lab.targets("default/web", "p", nat) == self.eps("a1", "a2") and jump in nat,
                       timeout=20)
        self.assertIn("canary is gone", lab.kproxy_output())
        r = self.client("10.96.0.10", 80, 60)
        self.assertEqual(r["errors"], {})

    def test_12c1_unreferenced_owned_chain_is_deleted(self):
        # An owned chain nothing jumps to (a failed sync's, or someone
        # else's) is not on the jump graph kproxy reads; the table's chain
        # count gives it away, and the full sync lists the chains and
        # deletes it, as upstream's would.
        lab = self.lab
        lab.run(["iptables", "-t", "nat", "-N", "KUBE-SEP-UNREFERENCED0001"], ns="n1")
        lab.run(["iptables", "-t", "nat", "-A", "KUBE-SEP-UNREFERENCED0001", "-j", "RETURN"], ns="n1")
        mark = len(lab.kproxy_output())
        lab.run(["iptables", "-t", "mangle", "-X", "KUBE-PROXY-CANARY"], ns="n1")
        lab.wait_rules("the stray chain deleted by the full resync",
                       lambda nat: "KUBE-SEP-UNREFERENCED0001" not in nat, timeout=20)
        out = lab.kproxy_output()[mark:]
        self.assertIn("canary is gone", out)
        self.assertRegex(out, r"IPv4 nat holds \d+ chains, \d+ reached by jumps: listing them")
        self.assertEqual(lab.targets("default/web", "p"), self.eps("a1", "a2"))

    def test_12c2_restart_writes_only_what_changed(self):
        # With --state-dir, a restarted kproxy knows which chains the kernel
        # still holds as the last process wrote them, and writes only the
        # others: here web's service chain, which someone changed meanwhile.
        lab = self.lab
        self.assertTrue(os.path.exists(os.path.join(lab.state_dir, "iptables-known-ipv4")))
        before = steady(lab.nat())
        svc = re.search(r'^-A KUBE-SERVICES .*"default/web:p cluster IP".* -j (KUBE-SVC-\S+)$', "\n".join(before),
                        re.M).group(1)
        lab.stop_kproxy(signal.SIGTERM)
        lab.run(["iptables", "-t", "nat", "-I", svc, "1", "-s", "192.0.2.1/32", "-j", "RETURN"], ns="n1")
        mark = len(lab.kproxy_output())
        lab.start_kproxy()
        wait_for("the first sync after the restart",
                 lambda: "First sync done in" in lab.kproxy_output()[mark:], timeout=20)
        out = lab.kproxy_output()[mark:]
        self.assertRegex(out, r"Read \d+ IPv4 chains known to be in the kernel from ")
        line = [l for l in out.splitlines() if '"Reloading service iptables data" ipFamily="IPv4"' in l][0]
        m = re.search(r" chainsLeftOut=(\d+)", line)
        self.assertIsNotNone(m, line)
        # This machine's iptables is iptables-nft: read over netlink.
        self.assertIn(' readWith="netlink"', line)
        declared = len([l for l in before if l.startswith(":KUBE-")])
        # Every chain of kproxy's in nat but web's service chain (and the
        # filter table's few, not counted here) left out.
        self.assertGreaterEqual(int(m.group(1)), declared - 1, line)
        sys.stderr.write("\n  %d chains in nat, %s left out after the restart\n" % (declared, m.group(1)))
        self.assertEqual(steady(lab.nat()), before)
        r = self.client("10.96.0.10", 80, 60)
        self.assertEqual(r["errors"], {})

    def test_12d_refused_change_by_rule_syncs_everything(self):
        lab, ip = self.lab, self.ip
        # Enough services for nat KUBE-SERVICES to be changed by rule
        # (-D/-I) rather than written whole.
        bulk = []
        for i in range(20):
            bulk += [service("bulk%d" % i, "10.96.1.%d" % (i + 1)), slice_("bulk%d-1" % i, "bulk%d" % i,
                                                                          [(ip["a1"], "node-1")])]
        lab.apply_objects("create", bulk)
        lab.wait_rules("the bulk services", lambda nat: '"default/bulk19:p cluster IP"' in nat)

        def services_rule(nat, name):
            m = re.search(r'^-A KUBE-SERVICES .*"default/%s:p cluster IP".*$' % name, nat, re.M)
            return m and m.group(0)
        # By hand, two services' rules go: kproxy's next partial sync does
        # not know it, and deleting bulk0's rule by rule fails.
        nat = lab.nat()
        for name in ("bulk0", "bulk1"):
            lab.run(["iptables", "-t", "nat", "-D"] + shlex.split(services_rule(nat, name))[1:], ns="n1")
        self.assertIsNone(services_rule(lab.nat(), "bulk1"))
        lab.kubectl("delete", "service", "bulk0")
        lab.kubectl("delete", "endpointslice", "bulk0-1")
        # Refused, then everything written at once: bulk1's rule is back.
        lab.wait_rules("bulk1's rule restored by the full sync", lambda nat: services_rule(nat, "bulk1"), timeout=15)
        nat = lab.nat()
        self.assertIsNone(services_rule(nat, "bulk0"))
        self.assertIn("Partial sync refused by the kernel, syncing all rules", lab.kproxy_output())
        self.assertNotIn("Sync failed", lab.kproxy_output().split("Partial sync refused")[-1])
        r = self.client("10.96.1.2", 80, 30)
        self.assertEqual(r["errors"], {})
        # An ordinary change after that goes by rule again and works.
        lab.kubectl("delete", "service", *["bulk%d" % i for i in range(1, 20)])
        lab.kubectl("delete", "endpointslice", *["bulk%d-1" % i for i in range(1, 20)])
        lab.wait_rules("the bulk services gone", lambda nat: "default/bulk" not in nat)
        self.assertEqual(lab.targets("default/web", "p"), self.eps("a1", "a2"))
        self.assertKproxyRunning()


class E2ENftables(Suite, unittest.TestCase):
    MODE, OTHER = "nftables", "iptables"

    def assert_first_sync_rules(self):
        r = self.lab.nft()
        chains = nft_chains(r)
        for base, hook in (("nat-prerouting", "nat hook prerouting"), ("nat-output", "nat hook output"),
                           ("nat-postrouting", "nat hook postrouting"), ("filter-input", "filter hook input"),
                           ("filter-forward", "filter hook forward"), ("filter-output", "filter hook output")):
            self.assertIn(base, chains)
            self.assertTrue(chains[base][0].startswith("type %s " % hook), chains[base])
        self.assertIn("jump services", chains["nat-prerouting"])
        self.assertTrue(any(re.fullmatch(r'10\.96\.0\.30 \. tcp \. 80( comment ".*")? : goto reject-chain', e)
                            for e in nft_elements(r, "no-endpoint-services")), nft_elements(r, "no-endpoint-services"))
        # nodePortAddresses defaults to "primary" in nftables mode: the node's InternalIP.
        self.assertEqual(nft_elements(r, "nodeport-ips"), {NODE_IPS["node-1"]})

    # Another process changes kproxy's table: kproxy notices and repairs it
    # (within --iptables-sync-period, 4s here), and web serves again.

    def assert_repaired(self, what, *nft_commands):
        lab = self.lab
        before = table_state(lab.nft())
        web = sorted(p for p, a in self.ip.items() if a + ":8080" in lab.targets("default/web", "p"))
        self.assertTrue(web, "web has no endpoints in the kernel before the fault")
        self.addCleanup(self.reset_if_broken, before)
        for cmd in nft_commands:
            lab.run(["nft", cmd], ns="n1")
        try:
            lab.wait_rules(what + " repaired", lambda r: table_state(r) == before, timeout=12)
            failed = None
        except LabError as e:
            failed = "%s; differences: %s" % (e, describe_diff(before, table_state(lab.nft())))
        if failed:
            self.fail(failed)
        r = self.client("10.96.0.10", 80, 60)
        self.assertEqual(r["errors"], {})
        self.assertEqual(sorted(r["replies"]), web)

    def reset_if_broken(self, want):
        """After a failed repair, a fresh start so that the next tests find a right table."""
        lab = self.lab
        if table_state(lab.nft()) == want:
            return
        lab.stop_kproxy(signal.SIGTERM)
        lab.run(["nft", "delete table ip kube-proxy"], ns="n1", check=False)
        lab.start_kproxy()
        lab.wait_rules("a fresh table after a failed repair", lambda r: table_state(r) == want, timeout=20)

    def web_chain(self):
        return next((c for c in nft_chains(self.lab.nft()) if re.fullmatch(r"service-\w{8}-default/web/tcp/p", c)),
                    None)

    def test_12b_deleted_table_is_restored(self):
        self.assert_repaired("the deleted table", "delete table ip kube-proxy")

    def test_12c_flushed_service_chain_is_repaired(self):
        self.assert_repaired("web's flushed service chain", "flush chain ip kube-proxy " + self.web_chain())

    def test_12d_foreign_rule_is_removed(self):
        self.assert_repaired("a foreign rule in services",
                             "insert rule ip kube-proxy services ip daddr 10.96.0.10 tcp dport 80 drop")

    def test_12e_deleted_map_element_is_restored(self):
        self.assert_repaired("web's deleted service-ips element",
                             "delete element ip kube-proxy service-ips { 10.96.0.10 . tcp . 80 }")

    def test_12g_refused_repair_keeps_rules_and_rebuilds(self):
        lab = self.lab
        before = table_state(lab.nft())
        self.addCleanup(self.reset_if_broken, before)
        # A labelled counter: no sample before the first failure.
        failures = promtext.value(self.scrape(), "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
                                  ip_family="IPv4") or 0
        # A foreign verdict map points at a foreign chain: the in-place
        # repair deletes the chain before the map, so the kernel refuses
        # the whole transaction; the next attempt rebuilds the table.
        for cmd in ("add chain ip kube-proxy foreign", "add map ip kube-proxy foreign-map { type ipv4_addr : verdict ; }",
                    "add element ip kube-proxy foreign-map { 192.0.2.1 : goto foreign }"):
            lab.run(["nft", cmd], ns="n1")
        wait_for("a refused transaction",
                 lambda: (promtext.value(self.scrape(), "kubeproxy_sync_proxy_rules_nftables_sync_failures_total",
                                         ip_family="IPv4") or 0) > failures, timeout=20)
        self.assertRegex(lab.kproxy_output(), r"transaction of \d+ messages failed: delete chain foreign: "
                                              r"Device or resource busy")
        # Refused means nothing changed: web still serves, foreign objects included.
        r = self.client("10.96.0.10", 80, 30)
        self.assertEqual(r["errors"], {})
        lab.wait_rules("the table rebuilt without the foreign objects", lambda t: table_state(t) == before,
                       timeout=20)
        self.assertIn(' kind="rebuild"', lab.kproxy_output())
        r = self.client("10.96.0.10", 80, 60)
        self.assertEqual(r["errors"], {})

    def test_11b_service_cidrs_drop_unallocated_cluster_ips(self):
        # The stand-in API server has the ServiceCIDR a 1.33+ server makes
        # from its range (10.96.0.0/12): traffic to an unallocated address
        # in it is dropped, to a known cluster IP on another port rejected,
        # as upstream's cluster-ips-check chain does. Node 1 forwards
        # 10.97/16 and 10.200/16 to node 2, which has no route for them:
        # without the drop, the client hears "network unreachable" from node
        # 2 at once instead of timing out. (The chain sits on the forward
        # path, as upstream's: on a node without a route for an address,
        # routing answers first.)
        lab = self.lab
        for net in ("10.97.0.0/16", "10.200.0.0/16"):
            lab.run(["ip", "route", "add", net, "via", NODE_IPS["node-2"]], ns="n1")
            self.addCleanup(lab.run, ["ip", "route", "del", net], ns="n1", check=False)

        def drop_rule(r):
            rules = [l for l in nft_chains(r).get("cluster-ips-check", []) if l.endswith(
                'drop comment "Drop traffic to unallocated ClusterIPs"')]
            return rules[0] if rules else None
        rule = lab.wait_rules("the drop rule for unallocated cluster IPs", drop_rule)
        self.assertRegex(rule, r"^ip daddr \{? ?10\.96\.0\.0/12 \}? ?drop")
        r = self.client("10.97.0.5", 80, 1, "--timeout", "1")
        self.assertEqual(r["errors"], {"timeout": 1}, r)
        r = self.client("10.96.0.10", 81, 1, "--timeout", "3")
        self.assertEqual(r["errors"], {"ECONNREFUSED": 1}, r)
        r = self.client("10.200.0.5", 80, 1, "--timeout", "1")
        self.assertNotIn("timeout", r["errors"], r)
        extra = {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "extra"},
                 "spec": {"cidrs": ["10.200.0.0/24"]}}
        lab.apply_objects("create", [extra])
        lab.wait_rules("the extra ServiceCIDR in the drop rule", lambda r: "10.200.0.0/24" in (drop_rule(r) or ""))
        self.assertIn("10.96.0.0/12", drop_rule(lab.nft()))
        r = self.client("10.200.0.5", 80, 1, "--timeout", "1")
        self.assertEqual(r["errors"], {"timeout": 1}, r)
        lab.kubectl("delete", "servicecidr", "extra")
        lab.wait_rules("the extra ServiceCIDR gone from the drop rule", lambda r: drop_rule(r) == rule)
        r = self.client("10.96.0.10", 80, 30)
        self.assertEqual(r["errors"], {})

    def test_11c_api_server_without_service_cidrs(self):
        # An API server older than 1.33 answers 404 for ServiceCIDRs: kproxy
        # says so once, syncs without the drop rule, and picks the resource
        # up when the server is upgraded.
        lab = self.lab
        state = os.path.join(lab.tmp, "state-11c.json")
        with open(state, "w") as f:
            f.write(lab.kubectl("get", "services,endpointslices,nodes,servicecidrs", "-A", "-o", "json").stdout)
        mark = len(lab.kproxy_output())
        lab.stop_kproxy(signal.SIGTERM)
        lab.stop_apiserver()
        lab.start_apiserver(["--disable-resource", "servicecidrs"], initial_rv=2000000, state=[state])
        lab.start_kproxy()
        lab.wait_healthy("healthz against an API server without ServiceCIDRs")
        lab.wait_rules("no drop rule without ServiceCIDRs",
                       lambda r: "cluster-ips-check" in r and "unallocated" not in r)
        self.assertEqual(lab.kproxy_output()[mark:].count("servicecidrs: not served by this API server (404)"), 1)
        r = self.client("10.96.0.10", 80, 30)
        self.assertEqual(r["errors"], {})
        # The upgraded server: the next list (within 30 s) finds them.
        lab.stop_apiserver()
        lab.start_apiserver(initial_rv=3000000, state=[state])
        lab.wait_rules("the drop rule once ServiceCIDRs are served", lambda r: "unallocated" in r, timeout=60)
        self.assertIn("servicecidrs: served again", lab.kproxy_output()[mark:])
        self.assertKproxyRunning()

    def test_12h_node_change_resyncs_without_rewriting(self):
        # A changed Node asks for a full sync. Nobody else touched the
        # table, so kproxy checks it against what its last sync left and
        # sends nothing, instead of rewriting it (minutes at 50k services).
        lab = self.lab
        before = table_state(lab.nft())
        mark = len(lab.kproxy_output())
        lab.kubectl("label", "node", "node-1", "e2e.kproxy.io/resync=%d" % time.monotonic_ns(), "--overwrite")
        wait_for("a full sync of both families after the node change",
                 lambda: lab.kproxy_output()[mark:].count(' kind="resync"') >= 2,
                 timeout=15)
        lines = [l for l in lab.kproxy_output()[mark:].splitlines() if "Reloading service nftables data" in l]
        self.assertEqual(len(lines), 2, lines)
        for fam, line in zip((4, 6), lines):
            self.assertRegex(line, r'ipFamily="IPv%d" numServices=\d+ kind="resync" chainsWritten=0 chainsKept=0 '
                                   r'chainsDeleted=0 elementsAdded=0 elementsDeleted=0 messages=0 transactions=0 '
                                   % fam)

    def test_12i_restart_writes_only_what_changed(self):
        # kproxy restarted over its own table compares what each chain
        # holds (read back from the kernel) with what it would write, and
        # leaves the chains that already hold it alone; a chain someone
        # else changed meanwhile is written again.
        lab = self.lab
        before = table_state(lab.nft())
        lab.stop_kproxy(signal.SIGTERM)
        lab.run(["nft", "insert rule ip kube-proxy %s ip daddr 192.0.2.1 drop" % self.web_chain()], ns="n1")
        mark = len(lab.kproxy_output())
        lab.start_kproxy()
        wait_for("the first sync after the restart",
                 lambda: "First sync done in" in lab.kproxy_output()[mark:], timeout=20)
        line = [l for l in lab.kproxy_output()[mark:].splitlines()
                if '"Reloading service nftables data" ipFamily="IPv4"' in l][0]
        m = re.search(r" chainsWritten=(\d+) chainsKept=(\d+)", line)
        self.assertIsNotNone(m, line)
        self.assertEqual(int(m.group(1)), 1, line)      # web's service chain
        self.assertGreater(int(m.group(2)), 10, line)
        self.assertEqual(table_state(lab.nft()), before)
        r = self.client("10.96.0.10", 80, 60)
        self.assertEqual(r["errors"], {})
        self.assertEqual(table_state(lab.nft()), before)
        r = self.client("10.96.0.10", 80, 60)
        self.assertEqual(r["errors"], {})

    def test_15d_shards(self):
        """--nftables-shards: the services' nat side in more tables, each
        service's in one of them; traffic and changes as with one table;
        a smaller count (or none) drops the tables it no longer uses."""
        lab, ip = self.lab, self.ip
        pods = ("a1", "a2", "a3", "a4")
        objs = []
        for i in range(8):
            objs += [service("sh%d" % i, "10.96.0.%d" % (60 + i)),
                     slice_("sh%d-1" % i, "sh%d" % i, [(ip[pods[i % 4]], "node-1")])]
        lab.apply_objects("create", objs)

        def tables():
            out = lab.run(["nft", "list", "tables", "ip"], ns="n1").stdout
            return sorted(re.findall(r"^table ip (kube-proxy\S*)$", out, re.M))

        def serves(i, pod):
            r = self.client("10.96.0.%d" % (60 + i), 80, 20)
            return r["errors"] == {} and sorted(r["replies"]) == [pod]

        def all_serve(what, want):
            for i in range(8):
                wait_for(what + ": sh%d to %s" % (i, want(i)), lambda: serves(i, want(i)), timeout=20)

        first = lambda i: pods[i % 4]
        lab.stop_kproxy(signal.SIGTERM)
        lab.start_kproxy("--nftables-shards", "4")
        all_serve("4 shards", first)
        self.assertEqual(tables(), ["kube-proxy"] + ["kube-proxy-%d" % i for i in range(1, 5)])
        # Each service's chain is in exactly one shard; they use several.
        where = {}
        for t in range(1, 5):
            listing = lab.run(["nft", "list", "table", "ip", "kube-proxy-%d" % t], ns="n1").stdout
            for c in nft_chains(listing):
                m = re.fullmatch(r"service-\w{8}-default/(sh\d)/tcp/p", c)
                if m:
                    self.assertNotIn(m.group(1), where)
                    where[m.group(1)] = t
        self.assertEqual(sorted(where), ["sh%d" % i for i in range(8)])
        self.assertGreater(len(set(where.values())), 1, where)
        main = lab.nft()
        self.assertFalse([c for c in nft_chains(main) if re.match(r"(service|endpoint)-\w{8}-", c)])
        self.assertIn("10.96.0.60", " ".join(nft_elements(main, "cluster-ips")))
        # A change: sh0's pod replaced.
        self.replace_slice(slice_("sh0-1", "sh0", [(ip["a3"], "node-1")]))
        moved = lambda i: "a3" if i == 0 else first(i)
        wait_for("sh0 to a3", lambda: serves(0, "a3"), timeout=20)
        # Fewer shards: the tables above 2 go, every service keeps working.
        lab.stop_kproxy(signal.SIGTERM)
        lab.start_kproxy("--nftables-shards", "2")
        wait_for("two shards", lambda: tables() == ["kube-proxy", "kube-proxy-1", "kube-proxy-2"], timeout=20)
        all_serve("2 shards", moved)
        # --cleanup removes the shards too; then upstream's single table.
        lab.stop_kproxy(signal.SIGTERM)
        p = lab.run([lab.kproxy_bin, "--cleanup"], ns="n1", check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(tables(), [])
        lab.start_kproxy()
        wait_for("one table", lambda: tables() == ["kube-proxy"], timeout=20)
        all_serve("no shards", moved)
        self.assertTrue([c for c in nft_chains(lab.nft()) if re.match(r"service-\w{8}-default/sh0/", c)])
        lab.kubectl("delete", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))

    def test_12f_foreign_chain_is_removed(self):
        self.assert_repaired("a foreign chain", "add chain ip kube-proxy foreign",
                             "add rule ip kube-proxy foreign ip daddr 10.96.0.10 drop")

    def test_12j_rehooked_base_chain_is_repaired(self):
        # The same name at another priority: the kernel will not move a
        # base chain's hook in place.
        self.assert_repaired("nat-output hooked at another priority", "flush chain ip kube-proxy nat-output",
                             "delete chain ip kube-proxy nat-output",
                             "add chain ip kube-proxy nat-output { type nat hook output priority 10 ; }")
        self.assertIn("chain nat-output has another hook, priority or policy than kproxy's, making it again",
                      self.lab.kproxy_output())


if __name__ == "__main__":
    unittest.main(verbosity=2)

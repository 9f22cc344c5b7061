# SPDX-License-Identifier: Apache-2.0
"""Deployment tests (issue 7): the manifests in deploy/, the Dockerfile,
`make install`/`uninstall`, and kproxy run the way the DaemonSet runs it.

- Manifests: every file in deploy/ is loaded by the real kubectl
  (`kubectl create --dry-run=client -o json`, with a discovery-only stand-in
  server so kubectl can map kinds to resources; an unknown kind or
  apiVersion fails), then the DaemonSet, RBAC and ConfigMap are checked
  field by field against what kubeadm writes for kube-proxy.
- Daemon (root): kproxy started with the ConfigMap's config.conf and
  kubeconfig.conf (only paths and the server address changed to the lab's)
  and `--hostname-override`, as the DaemonSet's command line does, inside a
  lab of network namespaces (tests/e2e/netlab.py), under the systemd unit's
  capability set; it syncs, serves a cluster IP, survives a SIGKILL restart
  (the pod deleted and recreated) under traffic with no failed connection,
  then runs in nftables mode from the same file with only `mode` changed.
- Dockerfile: its stages, the kube-proxy name, and that the runtime stage's
  packages cover every shared library `ldd` lists for the built binary.
- Install: `make install`/`uninstall` into a temporary DESTDIR only.

Run: KPROXY_BUILD=build python3 tests/deploy/test_deploy.py [-v] [Class]
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from netlab import BpfScratch, Lab, node, service, slice_  # noqa: E402
sys.path.insert(0, os.path.join(ROOT, "tools"))
from dockerfile import apt_installed, stages as dockerfile_stages  # noqa: E402

BUILD = os.path.abspath(os.path.join(ROOT, os.environ.get("KPROXY_BUILD", "build")))
DEPLOY = os.path.join(ROOT, "deploy")
MANIFESTS = sorted(os.path.join(DEPLOY, f) for f in os.listdir(DEPLOY) if f.endswith((".yaml", ".yml")))
# A mode's variant replaces the base's DaemonSet (and ConfigMap) of the same
# names: applied after deploy/kube-proxy.yaml, or instead of a kubeadm
# cluster's. The base is every other manifest.
VARIANTS = {"userspace": os.path.join(DEPLOY, "kube-proxy-userspace.yaml"),
            "socket-lb": os.path.join(DEPLOY, "kube-proxy-socket-lb.yaml")}
BASE = [m for m in MANIFESTS if m not in VARIANTS.values()]
CONFIG_PATH = "/var/lib/kube-proxy"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def read(path):
    with open(path) as f:
        return f.read()


# --- kubectl without a cluster ---

# What a real API server's discovery says about the kinds deploy/ may use;
# nothing else: a kind or version outside this table makes kubectl fail.
DISCOVERY = {
    ("", "v1"): [("serviceaccounts", "ServiceAccount", True), ("configmaps", "ConfigMap", True),
                 ("namespaces", "Namespace", False)],
    ("apps", "v1"): [("daemonsets", "DaemonSet", True)],
    ("rbac.authorization.k8s.io", "v1"): [("clusterroles", "ClusterRole", False),
                                          ("clusterrolebindings", "ClusterRoleBinding", False),
                                          ("roles", "Role", True), ("rolebindings", "RoleBinding", True)],
}


class DiscoveryHandler(BaseHTTPRequestHandler):
    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        body = None
        if path == "/version":
            body = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-discovery"}
        elif path == "/api":
            body = {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        elif path == "/apis":
            groups = []
            for g, v in DISCOVERY:
                if g:
                    gv = {"groupVersion": "%s/%s" % (g, v), "version": v}
                    groups.append({"name": g, "versions": [gv], "preferredVersion": gv})
            body = {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}
        else:
            for (g, v), resources in DISCOVERY.items():
                if path == ("/apis/%s/%s" % (g, v) if g else "/api/" + v):
                    body = {"kind": "APIResourceList", "apiVersion": "v1",
                            "groupVersion": "%s/%s" % (g, v) if g else v,
                            "resources": [{"name": n, "singularName": k.lower(), "namespaced": ns, "kind": k,
                                           "verbs": ["create", "get", "list", "watch"]}
                                          for n, k, ns in resources]}
        data = json.dumps(body).encode() if body else b"{}"
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def kubectl_load(paths):
    """The objects of manifest files as the real kubectl reads them
    (`create --dry-run=client -o json`), against a discovery-only server on
    the loopback of the current namespace."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), DiscoveryHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    tmp = tempfile.mkdtemp(prefix="kproxy-deploy-kubectl-")
    try:
        kc = os.path.join(tmp, "kubeconfig")
        with open(kc, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "d",
                       "clusters": [{"name": "d", "cluster": {"server": "http://127.0.0.1:%d" % srv.server_port}}],
                       "contexts": [{"name": "d", "context": {"cluster": "d", "user": "d"}}],
                       "users": [{"name": "d", "user": {}}]}, f)
        args = ["kubectl", "--kubeconfig", kc, "--cache-dir", os.path.join(tmp, "cache"), "create",
                "--dry-run=client", "--validate=false", "-o", "json"]
        for p in paths:
            args += ["-f", p]
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        if p.returncode != 0:
            raise AssertionError("kubectl refused the manifests: " + p.stderr)
        # One JSON document per object, one after the other.
        objs, dec, text, i = [], json.JSONDecoder(), p.stdout, 0
        while text[i:].strip():
            while text[i].isspace():
                i += 1
            o, i = dec.raw_decode(text, i)
            objs += o["items"] if o.get("kind") == "List" else [o]
        return objs
    finally:
        srv.shutdown()
        srv.server_close()
        shutil.rmtree(tmp, ignore_errors=True)


_objects = None


def objects():
    global _objects
    if _objects is None:
        _objects = kubectl_load(BASE)
    return _objects


def find(kind, name):
    found = [o for o in objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    if len(found) != 1:
        raise AssertionError("want one %s %s in deploy/, found %d" % (kind, name, len(found)))
    return found[0]


def configmap():
    return find("ConfigMap", "kube-proxy")


def write_config_to(*args):
    """kproxy's effective configuration for these flags, as YAML."""
    with tempfile.NamedTemporaryFile("r", suffix=".yaml") as out:
        p = subprocess.run([os.path.join(BUILD, "kproxy")] + list(args) + ["--write-config-to", out.name],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
        if p.returncode != 0:
            raise AssertionError("kproxy %s: exit %d: %s" % (" ".join(args), p.returncode, p.stdout))
        return yaml.safe_load(out.read())


class Manifests(unittest.TestCase):
    def test_every_manifest_loads_with_kubectl(self):
        self.assertTrue(MANIFESTS)
        kinds = sorted((o["kind"], o["metadata"]["name"]) for o in objects())
        self.assertEqual(kinds, [("ClusterRole", "system:node-proxier"),
                                 ("ClusterRoleBinding", "kubeadm:node-proxier"),
                                 ("ConfigMap", "kube-proxy"), ("DaemonSet", "kube-proxy"),
                                 ("ServiceAccount", "kube-proxy")])
        for o in objects():
            if o["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
                self.assertEqual(o["metadata"].get("namespace"), "kube-system", o["kind"])

    def test_each_variant_replaces_the_daemonset_and_keeps_the_rest(self):
        """A variant holds the objects of the base it changes, under the
        same names, and differs from them only where its mode needs it."""
        self.assertEqual(sorted(MANIFESTS), sorted(BASE + list(VARIANTS.values())))
        base_ds = find("DaemonSet", "kube-proxy")
        base_pod = base_ds["spec"]["template"]["spec"]
        (base_c,) = base_pod["containers"]
        for mode, path in VARIANTS.items():
            objs = kubectl_load([path])
            kinds = sorted((o["kind"], o["metadata"]["name"], o["metadata"]["namespace"]) for o in objs)
            want = [("DaemonSet", "kube-proxy", "kube-system")]
            if mode == "userspace":
                want.insert(0, ("ConfigMap", "kube-proxy", "kube-system"))
            self.assertEqual(kinds, want, path)
            (ds,) = [o for o in objs if o["kind"] == "DaemonSet"]
            pod = ds["spec"]["template"]["spec"]
            (c,) = pod["containers"]
            for key in ("serviceAccountName", "priorityClassName", "hostNetwork", "nodeSelector", "tolerations"):
                self.assertEqual(pod[key], base_pod[key], "%s: %s" % (path, key))
            for key in ("image", "env", "livenessProbe", "readinessProbe"):
                self.assertEqual(c[key], base_c[key], "%s: %s" % (path, key))
            self.assertEqual(ds["spec"]["selector"], base_ds["spec"]["selector"])
            self.assertEqual(c["command"][:4], base_c["command"], path)
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            volumes = {v["name"]: v for v in pod["volumes"]}
            if mode == "userspace":
                # Surge: the new pod takes the old one's sockets (docs/userspace.md).
                self.assertEqual(ds["spec"]["updateStrategy"],
                                 {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
                self.assertEqual(c["command"], base_c["command"])
                self.assertEqual(sorted(mounts), ["/run/kproxy", CONFIG_PATH], "no iptables lock, no modules")
                (cm,) = [o for o in objs if o["kind"] == "ConfigMap"]
                base_data = configmap()["data"]
                self.assertEqual(cm["data"]["kubeconfig.conf"], base_data["kubeconfig.conf"])
                self.assertEqual(cm["data"]["config.conf"].replace("mode: userspace\n", "mode: iptables\n"),
                                 base_data["config.conf"])
                self.assertEqual(yaml.safe_load(cm["data"]["config.conf"])["mode"], "userspace")
            else:
                self.assertEqual(ds["spec"]["updateStrategy"], base_ds["spec"]["updateStrategy"])
                self.assertIs(pod["hostPID"], True)
                self.assertEqual(c["command"][4:], ["--socket-lb", "--socket-lb-cgroup=/sys/fs/cgroup/kubepods.slice",
                                                    "--socket-lb-pin-dir=/sys/fs/bpf/kproxy"])
                base_mounts = {m["mountPath"]: m for m in base_c["volumeMounts"]}
                self.assertEqual(sorted(mounts), sorted(list(base_mounts) + ["/sys/fs/bpf", "/sys/fs/cgroup"]))
                self.assertEqual(volumes[mounts["/sys/fs/bpf"]["name"]]["hostPath"]["path"], "/sys/fs/bpf")
                self.assertEqual(volumes[mounts["/sys/fs/cgroup"]["name"]]["hostPath"]["path"], "/sys/fs/cgroup")
                self.assertIs(mounts["/sys/fs/cgroup"]["readOnly"], True)
            self.assertIs(c["securityContext"]["privileged"], True)
            self.assertEqual(volumes[mounts[CONFIG_PATH]["name"]]["configMap"]["name"], "kube-proxy")
            self.assertEqual(volumes[mounts["/run/kproxy"]["name"]]["hostPath"],
                             {"path": "/run/kproxy", "type": "DirectoryOrCreate"})

    def test_kubectl_refuses_an_unknown_kind(self):
        # The loader is a real check: a kind the API does not serve fails.
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("apiVersion: apps/v1\nkind: DaemonSett\nmetadata: {name: x}\n")
            f.flush()
            with self.assertRaisesRegex(AssertionError, "DaemonSett"):
                kubectl_load([f.name])

    def test_daemonset_runs_kproxy_as_kubeadm_runs_kube_proxy(self):
        ds = find("DaemonSet", "kube-proxy")
        spec = ds["spec"]
        self.assertEqual(spec["updateStrategy"], {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}})
        self.assertEqual(spec["selector"]["matchLabels"], {"k8s-app": "kube-proxy"})
        pod = spec["template"]["spec"]
        self.assertEqual(spec["template"]["metadata"]["labels"]["k8s-app"], "kube-proxy")
        self.assertIs(pod["hostNetwork"], True)
        self.assertEqual(pod["priorityClassName"], "system-node-critical")
        self.assertEqual(pod["serviceAccountName"], "kube-proxy")
        self.assertIn({"operator": "Exists"}, pod["tolerations"])
        self.assertEqual(pod["nodeSelector"], {"kubernetes.io/os": "linux"})
        (c,) = pod["containers"]
        self.assertEqual(c["command"], ["/usr/local/bin/kube-proxy", "--config=/var/lib/kube-proxy/config.conf",
                                        "--hostname-override=$(NODE_NAME)", "--state-dir=/run/kproxy"])
        self.assertNotIn("args", c)
        self.assertEqual(c["env"], [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}])
        self.assertIs(c["securityContext"]["privileged"], True)
        self.assertEqual(c["image"].rsplit(":", 1)[1], read(os.path.join(ROOT, "VERSION")).strip())
        for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/healthz")):
            self.assertEqual(c[probe]["httpGet"]["path"], path)
            self.assertEqual(c[probe]["httpGet"]["port"], 10256)
            # On the pod IP, that is the node's (host network), where 0.0.0.0:10256 answers.
            self.assertNotIn("host", c[probe]["httpGet"])

        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        self.assertEqual(sorted(mounts), ["/lib/modules", "/run/kproxy", "/run/xtables.lock", CONFIG_PATH])
        self.assertEqual(volumes[mounts["/run/kproxy"]["name"]]["hostPath"],
                         {"path": "/run/kproxy", "type": "DirectoryOrCreate"})
        lock = volumes[mounts["/run/xtables.lock"]["name"]]
        self.assertEqual(lock["hostPath"], {"path": "/run/xtables.lock", "type": "FileOrCreate"})
        self.assertFalse(mounts["/run/xtables.lock"].get("readOnly", False))
        self.assertEqual(volumes[mounts["/lib/modules"]["name"]]["hostPath"]["path"], "/lib/modules")
        self.assertIs(mounts["/lib/modules"]["readOnly"], True)
        self.assertEqual(volumes[mounts[CONFIG_PATH]["name"]]["configMap"]["name"], "kube-proxy")

        # The command's --config names a key the ConfigMap has, whose
        # clientConnection.kubeconfig names the other key.
        data = configmap()["data"]
        self.assertEqual(sorted(data), ["config.conf", "kubeconfig.conf"])
        cfg = yaml.safe_load(data["config.conf"])
        self.assertEqual(cfg["clientConnection"]["kubeconfig"], CONFIG_PATH + "/kubeconfig.conf")

    def test_rbac_matches_system_node_proxier(self):
        crb = find("ClusterRoleBinding", "kubeadm:node-proxier")
        self.assertEqual(crb["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                          "name": "system:node-proxier"})
        self.assertEqual(crb["subjects"], [{"kind": "ServiceAccount", "name": "kube-proxy",
                                            "namespace": "kube-system"}])
        find("ServiceAccount", "kube-proxy")
        # Upstream's bootstrap policy for system:node-proxier, one
        # (group, resource, verb) triple per permission.
        want = set()
        for groups, resources, verbs in (([""], ["endpoints", "services"], ["list", "watch"]),
                                         ([""], ["nodes"], ["get", "list", "watch"]),
                                         (["", "events.k8s.io"], ["events"], ["create", "patch", "update"]),
                                         (["discovery.k8s.io"], ["endpointslices"], ["list", "watch"]),
                                         (["networking.k8s.io"], ["servicecidrs"], ["list", "watch"])):
            want |= {(g, r, v) for g in groups for r in resources for v in verbs}
        got = set()
        for rule in find("ClusterRole", "system:node-proxier")["rules"]:
            self.assertFalse(set(rule) - {"apiGroups", "resources", "verbs"}, rule)
            got |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
        self.assertEqual(got, want)

    def test_configmap_config_is_upstreams_defaults(self):
        """config.conf, read by kproxy, is upstream's defaults plus the
        kubeconfig path; and kubeadm's own config.conf (zeros and nulls left
        to defaulting) reads to exactly the same settings."""
        with tempfile.TemporaryDirectory() as d:
            conf = os.path.join(d, "config.conf")
            with open(conf, "w") as f:
                f.write(configmap()["data"]["config.conf"])
            ours = write_config_to("--config", conf)
        defaults = write_config_to()
        defaults["clientConnection"]["kubeconfig"] = CONFIG_PATH + "/kubeconfig.conf"
        self.assertEqual(ours, defaults)
        self.assertEqual(write_config_to("--config", os.path.join(HERE, "kubeadm-config.conf")), ours)

    def test_configmap_kubeconfig_uses_the_service_account(self):
        kc = yaml.safe_load(configmap()["data"]["kubeconfig.conf"])
        (ctx,) = kc["contexts"]
        self.assertEqual(kc["current-context"], ctx["name"])
        (cluster,) = kc["clusters"]
        (user,) = kc["users"]
        self.assertEqual(ctx["context"]["cluster"], cluster["name"])
        self.assertEqual(ctx["context"]["user"], user["name"])
        self.assertEqual(cluster["cluster"]["certificate-authority"], SA_DIR + "/ca.crt")
        self.assertRegex(cluster["cluster"]["server"], r"^https://")
        self.assertEqual(user["user"], {"tokenFile": SA_DIR + "/token"})


# --- the daemon as the DaemonSet runs it ---

def unit_capabilities():
    """The capability names of the systemd unit's bounding set, which must
    equal its ambient set."""
    caps = {}
    for line in read(os.path.join(DEPLOY, "kproxy.service")).splitlines():
        m = re.match(r"^(CapabilityBoundingSet|AmbientCapabilities)=(.*)$", line)
        if m:
            caps[m.group(1)] = sorted(m.group(2).split())
    assert caps["CapabilityBoundingSet"] == caps["AmbientCapabilities"], caps
    return caps["AmbientCapabilities"]


class DeployLab(Lab):
    """A lab whose kproxy runs from files made of the ConfigMap's keys,
    with the DaemonSet's flags, so that Lab.restart_under_traffic restarts
    it with the same command line, as a recreated pod would."""
    config = None
    argv_prefix = ()
    kproxy_args = ()        # the unit's KPROXY_ARGS

    def start_kproxy(self, *extra, mode=None):
        assert not extra and mode is None, "the mode comes from config.conf"
        self.kproxy_log = os.path.join(self.tmp, "kproxy.log")
        args = list(self.argv_prefix) + [self.kproxy_bin, "--config=" + self.config,
                                         "--hostname-override=node-1", "--state-dir=" + self.state_dir,
                                         "-v=2"] + list(self.kproxy_args)
        with open(self.kproxy_log, "a") as f:
            f.write("=== start %s\n" % " ".join(args))
        self.kproxy = self.spawn("kproxy", args, ns="n1", log=self.kproxy_log)


class Daemon(unittest.TestCase):
    lab = None

    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root for network namespaces")
        cls.lab = lab = DeployLab(BUILD, "iptables")
        try:
            lab.build_topology()
            cls.ip = {name: lab.add_pod(name, "node-1", i) for i, name in enumerate(("a1", "a2"), start=10)}
            lab.add_pod("cl", "node-1", 100, serve=False)
            lab.start_apiserver()
            lab.apply_objects("create", [
                node("node-1"), node("node-2"),
                service("web", "10.96.0.10"),
                slice_("web-1", "web", [(cls.ip["a1"], "node-1"), (cls.ip["a2"], "node-1")]),
            ])
            cls.write_configmap_files()
        except Exception:
            lab.close()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.lab:
            if os.environ.get("E2E_SHOW_LOG"):
                sys.stderr.write(cls.lab.kproxy_output())
            cls.lab.close()

    @classmethod
    def write_configmap_files(cls, mode=None):
        """The ConfigMap's two keys, as a pod would see them mounted, with
        the pod's paths and the API server's address made the lab's. Every
        other byte of config.conf is the ConfigMap's (but `mode`, if given)."""
        lab = cls.lab
        data = configmap()["data"]
        d = os.path.join(lab.tmp, "kube-proxy")
        os.makedirs(d, exist_ok=True)
        tls = os.path.dirname(lab.kubeconfig)
        kubeconfig = data["kubeconfig.conf"]
        for old, new in ((SA_DIR + "/ca.crt", os.path.join(tls, "ca.crt")),
                         (SA_DIR + "/token", os.path.join(tls, "token"))):
            assert kubeconfig.count(old) == 1, old
            kubeconfig = kubeconfig.replace(old, new)
        kubeconfig, n = re.subn(r"(?m)^(\s*server: )\S+$", r"\g<1>https://127.0.0.1:%d" % lab.api_port, kubeconfig)
        assert n == 1
        conf = data["config.conf"]
        old = "kubeconfig: %s/kubeconfig.conf" % CONFIG_PATH
        assert conf.count(old) == 1
        conf = conf.replace(old, "kubeconfig: %s/kubeconfig.conf" % d)
        if mode:
            conf, n = re.subn(r"(?m)^mode: \S+$", "mode: " + mode, conf)
            assert n == 1
        for name, text in (("config.conf", conf), ("kubeconfig.conf", kubeconfig)):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        lab.config = os.path.join(d, "config.conf")
        lab.mode = mode or yaml.safe_load(conf)["mode"]

    def web_eps(self):
        return sorted("%s:8080" % ip for ip in self.ip.values())

    def check_serving(self, count=60):
        lab = self.lab
        lab.wait_targets("web's rules in %s mode" % lab.mode, "default/web", "p", self.web_eps(), timeout=20)
        lab.wait_healthy("/healthz in %s mode" % lab.mode)
        self.assertEqual(lab.healthz("livez"), "200")
        r = lab.client("p-cl", "10.96.0.10", 80, count)
        self.assertEqual(r["errors"], {}, r)
        self.assertEqual(sorted(r["replies"]), ["a1", "a2"], r)
        mode = lab.run(["curl", "-sf", "http://127.0.0.1:10249/proxyMode"], ns="n1").stdout.strip()
        self.assertEqual(mode, lab.mode)

    @staticmethod
    def as_unit(caps):
        """Root's uid with only these capabilities, as systemd runs the unit
        (bounding and ambient sets)."""
        c = ",".join("+" + c.lower()[len("cap_"):] for c in caps)
        return ["setpriv", "--inh-caps=-all," + c, "--ambient-caps=-all," + c, "--bounding-set=-all," + c, "--"]

    def test_1_configmap_config_syncs_with_the_units_capabilities(self):
        lab = self.lab
        lab.argv_prefix = self.as_unit(unit_capabilities())
        lab.start_kproxy()
        self.check_serving()
        eff = lab.run(["grep", "^CapEff:", "/proc/%d/status" % self.kproxy_pid()]).stdout.split()[1]
        # NET_BIND_SERVICE=10, NET_ADMIN=12, NET_RAW=13, PERFMON=38, BPF=39
        self.assertEqual(int(eff, 16), sum(1 << n for n in (10, 12, 13, 38, 39)), "CapEff: the unit's set")
        self.assertIn("KUBE-SERVICES", lab.nat())

    def kproxy_pid(self):
        """kproxy's pid: the lab spawns it through ip netns exec and setpriv,
        which exec, so it is the spawned process's."""
        pid = self.lab.kproxy.pid
        self.assertEqual(os.path.basename(os.readlink("/proc/%d/exe" % pid)), "kproxy")
        return pid

    def test_2_pod_recreated_under_traffic_loses_no_connection(self):
        """The DaemonSet's pod deleted and recreated: kproxy SIGKILLed and
        started again with the same command line while a client loops new
        connections to the cluster IP."""
        r = self.lab.restart_under_traffic(signal.SIGKILL, "10.96.0.10", 80)
        self.assertEqual(r["errors"], {}, r)
        self.assertGreater(r["attempts"], 100, r)
        self.assertEqual(self.lab.targets("default/web", "p"), self.web_eps())

    def test_3_nftables_mode_from_the_same_file(self):
        lab = self.lab
        lab.stop_kproxy(signal.SIGTERM)
        self.write_configmap_files(mode="nftables")
        lab.start_kproxy()      # still as the unit
        self.check_serving()
        self.assertEqual(lab.leftovers("iptables"), [], "iptables mode's rules after the switch")

    def test_3b_socket_lb_with_the_units_capabilities(self):
        """KPROXY_ARGS=--socket-lb: the programs load and attach with the
        unit's set (CAP_BPF, CAP_PERFMON, CAP_NET_ADMIN)."""
        lab = self.lab
        lab.stop_kproxy(signal.SIGTERM)
        scratch = BpfScratch(lab.tmp, "kp-unit")
        try:
            lab.kproxy_args = ("--socket-lb", "--socket-lb-cgroup", scratch.cgroup, "--socket-lb-pin-dir",
                               os.path.join(scratch.bpffs, "kproxy"))
            lab.start_kproxy()
            self.check_serving()
            self.assertTrue(os.listdir(os.path.join(scratch.bpffs, "kproxy")), "nothing pinned")
            self.assertIn("kproxy_socket_lb_enabled 1", lab.run(["curl", "-sf", "http://127.0.0.1:10249/metrics"],
                                                                   ns="n1").stdout)
            lab.stop_kproxy(signal.SIGTERM)
            p = lab.run([lab.kproxy_bin, "--config=" + lab.config, "--cleanup"] + list(lab.kproxy_args), ns="n1",
                        check=False)
            self.assertEqual(p.returncode, 0, p.stderr)
        finally:
            lab.kproxy_args = ()
            if lab.kproxy:
                lab.stop_kproxy(signal.SIGKILL)
            scratch.close()

    def test_3c_userspace_mode_with_the_units_capabilities(self):
        """mode: userspace under the unit: kube-proxy0, ports below 1024."""
        lab = self.lab
        self.write_configmap_files(mode="userspace")
        lab.start_kproxy()
        self.check_serving()
        self.assertIn("kube-proxy0", lab.run(["ip", "-o", "link"], ns="n1").stdout)
        lab.stop_kproxy(signal.SIGTERM)

    def test_3d_a_mode_the_unit_does_not_grant_is_refused(self):
        """The unit's set less CAP_NET_BIND_SERVICE: userspace mode refuses
        to start, naming it, and changes nothing on the node."""
        lab = self.lab
        lab.run(["ip", "link", "del", "kube-proxy0"], ns="n1", check=False)
        less = [c for c in unit_capabilities() if c != "CAP_NET_BIND_SERVICE"]
        p = lab.run(self.as_unit(less) + [lab.kproxy_bin, "--config=" + lab.config, "--hostname-override=node-1"],
                    ns="n1", check=False)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("userspace mode needs CAP_NET_BIND_SERVICE", p.stderr)
        self.assertNotIn("kube-proxy0", lab.run(["ip", "-o", "link"], ns="n1").stdout)
        # Back to nftables mode, for the cleanup after.
        self.write_configmap_files(mode="nftables")
        lab.start_kproxy()
        self.check_serving()

    def test_4_cleanup_with_the_configmap_config(self):
        lab = self.lab
        lab.stop_kproxy(signal.SIGTERM)
        self.assertTrue(lab.leftovers("nftables"), "rules stay in the kernel after SIGTERM")
        p = lab.run([lab.kproxy_bin, "--config=" + lab.config, "--cleanup"], ns="n1", check=False)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(lab.leftovers("nftables") + lab.leftovers("iptables"), [])


# --- Dockerfile ---

def deb_of(path):
    """The Debian package that ships a file (under any of its names: merged
    /usr means ldd's /lib path may be dpkg's /usr/lib one)."""
    for p in (path, os.path.realpath(path), "/usr" + path if path.startswith("/lib") else None):
        out = p and subprocess.run(["dpkg", "-S", p], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                   text=True).stdout
        if out:
            return out.split(":", 1)[0]
    return None


def deb_closure(pkgs):
    """pkgs and everything they depend on (Depends, Pre-Depends), as this
    machine's Debian 12 dpkg database knows them."""
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        out = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", p], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout
        for alt in out.split(","):
            names = [a.strip().split()[0].split(":")[0] for a in alt.split("|") if a.strip()]
            installed = [n for n in names if subprocess.run(["dpkg-query", "-W", n], stdout=subprocess.DEVNULL,
                                                            stderr=subprocess.DEVNULL).returncode == 0]
            todo += installed[:1]
    return seen


class Dockerfile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stages = dockerfile_stages(read(os.path.join(ROOT, "Dockerfile")))
        cls.build, cls.runtime = cls.stages if len(cls.stages) == 2 else (None, None)

    def test_two_stages_on_debian_12(self):
        self.assertEqual(len(self.stages), 2, [s["from"] for s in self.stages])
        self.assertIn(self.build["from"], ("debian:12", "debian:bookworm"))
        self.assertIn(self.runtime["from"], ("debian:12-slim", "debian:bookworm-slim"))
        copies = [l for l in self.runtime["lines"] if l.upper().startswith("COPY ")]
        self.assertTrue(copies)
        for l in copies:
            self.assertIn("--from=%s" % self.build["name"], l, "the runtime stage copies only the build's output")

    def test_build_stage_has_the_makefiles_build_deps(self):
        m = re.search(r"^DEB_BUILD := ((?:.*\\\n)*.*)", read(os.path.join(ROOT, "Makefile")), re.M)
        deb_build = set(m.group(1).replace("\\\n", " ").split())
        fuzz_only = {"libclang-rt-14-dev"}     # clang itself builds --socket-lb's programs
        self.assertEqual(set(apt_installed(self.build)), deb_build - fuzz_only)
        self.assertTrue(any(re.match(r"^RUN make\b", l) for l in self.build["lines"]))

    def test_runtime_installs_kproxy_also_as_kube_proxy(self):
        text = "\n".join(self.runtime["lines"])
        self.assertRegex(text, r"COPY --from=\S+ \S+/kproxy /usr/local/bin/kproxy")
        self.assertRegex(text, r"ln -s (/usr/local/bin/)?kproxy /usr/local/bin/kube-proxy")

    def test_runtime_packages_cover_the_binarys_libraries(self):
        pkgs = apt_installed(self.runtime)
        for tool in ("iptables", "nftables", "conntrack"):
            self.assertIn(tool, pkgs)
        binary = os.path.join(BUILD, "kproxy")
        ldd = subprocess.run(["ldd", binary], stdout=subprocess.PIPE, text=True, check=True).stdout
        libs = re.findall(r"=> (/\S+)", ldd)
        self.assertGreater(len(libs), 5, ldd)
        # What kproxy links against directly must be named; what those
        # libraries load in turn must come with the named packages.
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(\S+)\]",
                            subprocess.run(["readelf", "-d", binary], stdout=subprocess.PIPE, text=True).stdout)
        closure = deb_closure(pkgs)
        # An ASan/UBSan build (make check's second run) also loads the
        # sanitizers' runtimes, which the image's build does not use.
        sanitizers = deb_closure({deb_of(lib) for lib in libs if re.match(r"lib[a-z]*san\.so", os.path.basename(lib))})
        for lib in libs:
            pkg = deb_of(lib)
            self.assertIsNotNone(pkg, "no Debian package has " + lib)
            if pkg in sanitizers and pkg not in closure:
                continue
            self.assertIn(pkg, closure, "%s (%s) would be missing from the image" % (lib, pkg))
            if os.path.basename(lib) in needed and pkg != "libc6":
                self.assertIn(pkg, pkgs, "kproxy links %s (%s): name it" % (lib, pkg))

    def test_runtime_stage_has_no_build_tools(self):
        text = " ".join(self.runtime["lines"])
        for tool in ("build-essential", "gcc", "clang", "make", "pkg-config", "binutils", "libc6-dev"):
            self.assertNotRegex(text, r"(?<![\w.-])%s(?![\w.-])" % re.escape(tool))
        for p in apt_installed(self.runtime):
            self.assertFalse(p.endswith("-dev"), p)
        self.assertIn("--no-install-recommends", text)
        self.assertIn("rm -rf /var/lib/apt/lists/*", text)

    def test_dockerignore_keeps_the_context_to_the_sources(self):
        lines = [l.strip() for l in read(os.path.join(ROOT, ".dockerignore")).splitlines()
                 if l.strip() and not l.startswith("#")]
        self.assertEqual(lines[0], "*")
        copied = set()
        for line in self.build["lines"]:
            if line.upper().startswith("COPY ") and "--from" not in line:
                copied |= set(line.split()[1:-1])
        self.assertEqual({l.lstrip("!") for l in lines[1:]}, copied)


# --- make install / uninstall ---

class Install(unittest.TestCase):
    def make(self, target, destdir, *extra):
        # -o: install the binary under test as it is, never rebuilt (with
        # other flags, into an ASan build's directory).
        p = subprocess.run(["make", "-C", ROOT, "-s", "-o", os.path.join(BUILD, "kproxy"), target, "BUILD=" + BUILD,
                            "DESTDIR=" + destdir] + list(extra),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout)
        return p.stdout

    def files(self, root):
        return sorted(os.path.relpath(os.path.join(d, f), root)
                      for d, _, fs in os.walk(root) for f in fs)

    def test_install_and_uninstall(self):
        with tempfile.TemporaryDirectory(prefix="kproxy-destdir-") as dest:
            self.make("install", dest)
            self.assertEqual(self.files(dest), ["usr/local/bin/kproxy", "usr/local/bin/kube-proxy",
                                                "usr/local/lib/systemd/system/kproxy.service",
                                                "usr/local/share/kproxy/config.conf.example",
                                                "usr/local/share/man/man8/kproxy.8"])
            binary = os.path.join(dest, "usr/local/bin/kproxy")
            self.assertTrue(os.access(binary, os.X_OK))
            self.assertEqual(os.readlink(os.path.join(dest, "usr/local/bin/kube-proxy")), "kproxy")
            out = subprocess.run([os.path.join(dest, "usr/local/bin/kube-proxy"), "--version=raw"],
                                 stdout=subprocess.PIPE, text=True).stdout
            self.assertIn(read(os.path.join(ROOT, "VERSION")).strip(), out)

            self.check_unit(dest)
            self.check_manpage(dest, binary)
            example = os.path.join(dest, "usr/local/share/kproxy/config.conf.example")
            self.assertEqual(write_config_to("--config", example)["clientConnection"]["kubeconfig"],
                             "/etc/kproxy/kubeconfig.conf")
            self.assertEqual(read(example).replace("/etc/kproxy/", CONFIG_PATH + "/").rstrip("\n"),
                             configmap()["data"]["config.conf"].rstrip("\n"))

            self.make("uninstall", dest)
            self.assertEqual(self.files(dest), [])
            self.assertFalse(os.path.lexists(os.path.join(dest, "usr/local/bin/kube-proxy")))

    def test_a_real_kube_proxy_is_left_alone(self):
        with tempfile.TemporaryDirectory(prefix="kproxy-destdir-") as dest:
            bindir = os.path.join(dest, "opt/bin")
            os.makedirs(bindir)
            theirs = os.path.join(bindir, "kube-proxy")
            with open(theirs, "w") as f:
                f.write("#!/bin/sh\necho upstream\n")
            out = self.make("install", dest, "PREFIX=/opt")
            self.assertIn("left alone", out)
            self.assertEqual(read(theirs), "#!/bin/sh\necho upstream\n")
            unit = read(os.path.join(dest, "opt/lib/systemd/system/kproxy.service"))
            self.assertIn("ExecStart=/opt/bin/kproxy ", unit)
            self.make("uninstall", dest, "PREFIX=/opt")
            self.assertEqual(self.files(dest), ["opt/bin/kube-proxy"])

    def check_unit(self, dest):
        unit = read(os.path.join(dest, "usr/local/lib/systemd/system/kproxy.service"))
        self.assertNotIn("@", unit)
        self.assertRegex(unit, r"(?m)^ExecStart=/usr/local/bin/kproxy --config=")
        self.assertNotRegex(unit, r"(?m)^ExecStop", "stopping must leave the rules")
        self.assertEqual(unit_capabilities(), ["CAP_BPF", "CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW",
                                               "CAP_PERFMON"])
        self.assertRegex(unit, r"(?m)^Restart=always$")
        if not shutil.which("systemd-analyze"):
            return
        # verify checks that ExecStart's binary exists and that man finds
        # the Documentation= page: point both into DESTDIR.
        with tempfile.TemporaryDirectory() as d:
            copy = os.path.join(d, "kproxy.service")
            with open(copy, "w") as f:
                f.write(unit.replace("ExecStart=/usr/local/bin/", "ExecStart=%s/usr/local/bin/" % dest))
            env = dict(os.environ, MANPATH=os.path.join(dest, "usr/local/share/man"))
            p = subprocess.run(["systemd-analyze", "verify", copy], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
            self.assertEqual((p.returncode, p.stdout), (0, ""))

    def check_manpage(self, dest, binary):
        page = os.path.join(dest, "usr/local/share/man/man8/kproxy.8")
        help_text = subprocess.run([binary, "--help"], stdout=subprocess.PIPE, text=True).stdout
        if not shutil.which("man"):
            self.assertIn(".TH KPROXY 8", read(page))
            return
        p = subprocess.run(["man", "-l", page], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=dict(os.environ, MANWIDTH="300", MAN_KEEP_FORMATTING="0", LANG="C.UTF-8"))
        self.assertEqual(p.stderr, "")
        rendered = " ".join(p.stdout.split())
        # Every flag line of --help, as typed (hyphens stay ASCII).
        flags = re.findall(r"^\s+(?:-\w, )?(--[\w-]+)", help_text, re.M)
        self.assertGreater(len(flags), 50)
        for flag in flags:
            self.assertIn(flag, rendered)
        self.assertIn(" ".join(help_text.splitlines()[-1].split()), rendered)


if __name__ == "__main__":
    unittest.main(verbosity=2)

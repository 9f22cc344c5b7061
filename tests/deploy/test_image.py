# SPDX-License-Identifier: Apache-2.0
"""kproxy's image, built by `make image` (tools/image.py), and run the way
the kubelet runs deploy/'s DaemonSets (issue 32).

- Contents: the image holds exactly the Dockerfile's runtime package set
  (debian:12-slim's minbase and what the runtime stage's apt-get installs,
  with what those depend on and nothing they merely recommend), the
  stripped binary of this build at /usr/local/bin/kproxy and its
  kube-proxy link, the Dockerfile's entry point, labels and the version
  tag; its archive writer is deterministic; podman loads it.
- As the kubelet runs it (root): each DaemonSet's pod spec is read from
  deploy/ through the real kubectl; the image's layers are unpacked into a
  root file system; the container runs in new mount and PID namespaces
  inside a node network namespace of the e2e lab (tests/e2e/netlab.py),
  with the volumes the spec names (the ConfigMap's files, the service
  account's token and CA, /run/xtables.lock, /lib/modules read-only, the
  state directory), its env (NODE_NAME from spec.nodeName, $(VAR) expanded
  in the command), only the capabilities its securityContext grants,
  chrooted, the container's command exec'd as PID 1
  (tests/deploy/kubelet.py). Against the stand-in API server it syncs,
  answers /healthz and /metrics, writes to the iptables backend the node's
  kubelet uses (a hint planted in legacy, then in nf_tables) with the
  image's own tools, survives a SIGKILL and a new container under traffic
  with no failed connection, and `--cleanup` from the image removes its
  rules.
- A container runtime, where one works: podman runs the same pod spec
  (hostNetwork into the lab's node namespace, the same volumes). Where it
  cannot (this project's machines: the test says why, from podman's own
  error), that test is skipped with the reason.

Run: KPROXY_BUILD=build python3 tests/deploy/test_image.py [-v]
The image: $KPROXY_IMAGE, else BUILD/kproxy-image.tar (make image).
"""
import calendar
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)
import dockerfile  # noqa: E402
import image  # noqa: E402
from netlab import BpfScratch, Lab, node, service, slice_, wait_for  # noqa: E402
from test_deploy import kubectl_load  # noqa: E402

BUILD = os.path.abspath(os.path.join(ROOT, os.environ.get("KPROXY_BUILD", "build")))
IMAGE = os.environ.get("KPROXY_IMAGE") or os.path.join(BUILD, "kproxy-image.tar")
KUBELET = os.path.join(HERE, "kubelet.py")
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()
HASHSIZE = "/sys/module/nf_conntrack/parameters/hashsize"


def image_missing():
    return None if os.path.exists(IMAGE) else "no image at %s (make image)" % IMAGE


def read_archive(path):
    """{name: bytes} of the image archive's members."""
    with tarfile.open(path) as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}


def blob(files, digest):
    return files["blobs/sha256/" + digest.split(":", 1)[1]]


def image_parts(files):
    """The image's (manifest, config) as the OCI index names them."""
    index = json.loads(files["index.json"])
    (desc,) = index["manifests"]
    manifest = json.loads(blob(files, desc["digest"]))
    return desc, manifest, json.loads(blob(files, manifest["config"]["digest"]))


def unpack(path, dest):
    """The image's layers, in order, into dest, as a runtime applies them:
    a whiteout (.wh.NAME) removes NAME from the layers below, an opaque
    whiteout (.wh..wh..opq) empties its directory."""
    files = read_archive(path)
    _, manifest, config = image_parts(files)
    for layer, diff_id in zip(manifest["layers"], config["rootfs"]["diff_ids"]):
        raw = gzip.decompress(blob(files, layer["digest"]))
        assert "sha256:" + hashlib.sha256(raw).hexdigest() == diff_id, "a layer does not match its diff_id"
        layer_tar = os.path.join(dest, "..", "layer.tar")
        with open(layer_tar, "wb") as f:
            f.write(raw)
        with tarfile.open(layer_tar) as t:
            for m in t.getmembers():
                base, name = os.path.split(m.name)
                if name == ".wh..wh..opq":
                    shutil.rmtree(os.path.join(dest, base), ignore_errors=True)
                elif name.startswith(".wh."):
                    victim = os.path.join(dest, base, name[4:])
                    if os.path.isdir(victim) and not os.path.islink(victim):
                        shutil.rmtree(victim)
                    elif os.path.lexists(victim):
                        os.unlink(victim)
        subprocess.run(["tar", "--numeric-owner", "--exclude=*/.wh.*", "--exclude=.wh.*", "-xpf", layer_tar,
                        "-C", dest], check=True)
        os.unlink(layer_tar)
    return config


def dpkg_status(rootfs):
    """{package: {field: value}} of the image's installed packages."""
    with open(os.path.join(rootfs, "var/lib/dpkg/status")) as f:
        paras = f.read().split("\n\n")
    out = {}
    for p in paras:
        fields = dict(re.findall(r"^([\w-]+): (.*)$", p, re.M))
        if fields.get("Package") and "installed" in fields.get("Status", "").split():
            out[fields["Package"]] = fields
    return out


def depends(fields):
    """The installed alternatives' names a package's Depends and Pre-Depends
    name (every alternative: the closure is computed over what is there)."""
    names = []
    for key in ("Depends", "Pre-Depends"):
        for alt in fields.get(key, "").split(","):
            for a in alt.split("|"):
                if a.strip():
                    names.append(a.strip().split()[0].split(":")[0])
    return names


class Contents(unittest.TestCase):
    """What `make image` wrote, unpacked."""

    @classmethod
    def setUpClass(cls):
        why = image_missing()
        if why:
            raise unittest.SkipTest(why)
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root to unpack an image's file system (device nodes, owners)")
        cls.tmp = tempfile.mkdtemp(prefix="kproxy-image-test-")
        cls.rootfs = os.path.join(cls.tmp, "rootfs")
        os.mkdir(cls.rootfs)
        cls.files = read_archive(IMAGE)
        cls.config = unpack(IMAGE, cls.rootfs)
        cls.runtime = dockerfile.runtime(os.path.join(ROOT, "Dockerfile"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_the_dockerfiles_package_set(self):
        """debian:12-slim is minbase: Essential and required packages and
        apt. The runtime stage adds its packages with --no-install-recommends:
        they and what they depend on. Nothing else is in either image."""
        status = dpkg_status(self.rootfs)
        wanted = self.runtime_packages()
        for p in wanted:
            self.assertIn(p, status, "the Dockerfile installs %s; the image lacks it" % p)
        base = {p for p, f in status.items() if f.get("Essential") == "yes" or f.get("Priority") == "required"}
        base.add("apt")
        closure, todo = set(), list(base | set(wanted))
        while todo:
            p = todo.pop()
            if p in closure or p not in status:
                continue
            closure.add(p)
            todo += depends(status[p])
        self.assertEqual(sorted(set(status) - closure), [], "in the image but in neither image's set")
        # Recommends are not followed (the Dockerfile's --no-install-recommends).
        self.assertNotIn("usrmerge", status, "merged /usr by symlinks, as debian:12 images, not the package")

    def runtime_packages(self):
        return dockerfile.apt_installed(self.runtime)

    def test_binary_link_and_entrypoint(self):
        binary = os.path.join(self.rootfs, "usr/local/bin/kproxy")
        with tempfile.TemporaryDirectory() as d:
            stripped = os.path.join(d, "kproxy")
            subprocess.run(["install", "-s", os.path.join(BUILD, "kproxy"), stripped], check=True)
            with open(stripped, "rb") as a, open(binary, "rb") as b:
                self.assertTrue(a.read() == b.read(), "the image's binary is this build's, stripped")
        self.assertTrue(os.access(binary, os.X_OK))
        self.assertEqual(os.readlink(os.path.join(self.rootfs, "usr/local/bin/kube-proxy")), "kproxy")
        for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("sbin", "usr/sbin")):
            self.assertEqual(os.readlink(os.path.join(self.rootfs, link)), target)
        c = self.config["config"]
        self.assertEqual(c["Entrypoint"], dockerfile.entrypoint(self.runtime))
        self.assertEqual(c["Labels"]["org.opencontainers.image.version"], VERSION)
        self.assertEqual(self.config["os"], "linux")
        desc, _, _ = image_parts(self.files)
        self.assertEqual(desc["annotations"]["org.opencontainers.image.ref.name"], VERSION)
        self.assertEqual(desc["annotations"]["io.containerd.image.name"], "docker.io/library/kproxy:" + VERSION)
        (docker,) = json.loads(self.files["manifest.json"])
        self.assertEqual(docker["RepoTags"], ["kproxy:" + VERSION])
        self.assertEqual(json.loads(self.files["oci-layout"]), {"imageLayoutVersion": "1.0.0"})
        # The build machine's resolver and name stay out.
        for f in ("etc/resolv.conf", "etc/hostname"):
            self.assertEqual(os.path.getsize(os.path.join(self.rootfs, f)), 0, f)

    def test_the_binary_runs_on_the_images_libraries(self):
        p = subprocess.run(["chroot", self.rootfs, "/usr/local/bin/kube-proxy", "--version=raw"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn("kproxy version " + VERSION, p.stdout)
        for tool in ("iptables-legacy-restore", "iptables-nft-restore", "ip6tables-nft-save", "nft", "conntrack"):
            p = subprocess.run(["chroot", self.rootfs, tool, "--version"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            self.assertEqual(p.returncode, 0, "%s: %s" % (tool, p.stdout))

    def test_the_archive_is_written_reproducibly(self):
        """The archive is a function of the root file system: written again
        from its layer, it is the same bytes (mmdebstrap makes the layer
        reproducibly from the same packages with SOURCE_DATE_EPOCH)."""
        _, manifest, _ = image_parts(self.files)
        epoch = calendar.timegm(time.strptime(self.config["created"], "%Y-%m-%dT%H:%M:%SZ"))
        layer = os.path.join(self.tmp, "layer.tar")
        with open(layer, "wb") as f:
            f.write(gzip.decompress(blob(self.files, manifest["layers"][0]["digest"])))
        again = os.path.join(self.tmp, "again.tar")
        image.archive(layer, VERSION, self.config["config"]["Entrypoint"], epoch, again)
        with open(IMAGE, "rb") as a, open(again, "rb") as b:
            self.assertTrue(a.read() == b.read(), "writing the archive again changed it")

    @unittest.skipUnless(shutil.which("podman"), "podman is not installed")
    def test_podman_loads_it(self):
        with tempfile.TemporaryDirectory(prefix="kproxy-podman-") as d:
            p = podman(d, "load", "-i", IMAGE)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertIn("kproxy:" + VERSION, p.stdout)
            p = podman(d, "image", "inspect", "kproxy:" + VERSION, "--format", "{{json .Config.Entrypoint}}")
            self.assertEqual(json.loads(p.stdout), dockerfile.entrypoint(self.runtime))


def cgroup_dirs():
    """Every cgroup directory of the machine's hierarchies."""
    return {d for d, _, _ in os.walk("/sys/fs/cgroup")}


def podman(storage, *args, timeout=120):
    """podman with a storage of the test's own (vfs: no overlay needed)."""
    return subprocess.run(["podman", "--root", os.path.join(storage, "root"), "--runroot",
                           os.path.join(storage, "run"), "--storage-driver", "vfs"] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)


# --- the kubelet's part ---

def expand(text, env):
    """Kubernetes' $(VAR) expansion in command and args: a defined name is
    replaced, $$ escapes, anything else stays."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


class Pod:
    """One DaemonSet pod on the lab's node-1, its container run by
    kubelet.py. Volumes: the ConfigMap's keys as files (the one edit the
    manifest asks of a user: the API server's address), the service
    account's ca.crt, token and namespace where the kubelet projects them,
    hostPath volumes from the node's file system. The node is a network
    namespace on this machine, so /run/xtables.lock and /lib/modules are
    the machine's own (the lock that every iptables user here takes; the
    modules read-only); every other hostPath is a scratch directory of the
    lab's "node", so runs and parallel tests share nothing. The conntrack
    hash size, machine-wide, is masked with a scratch file."""

    MACHINE_PATHS = ("/run/xtables.lock", "/lib/modules")

    def __init__(self, lab, rootfs, ds, configmap, node_name="node-1", host_paths=None):
        self.lab, self.rootfs, self.node_name = lab, rootfs, node_name
        # The node's own file systems that a test made of its own (a bpf
        # filesystem it mounted, a cgroup it created), by host path.
        self.host_paths = dict(host_paths or {})
        self.pod = ds["spec"]["template"]["spec"]
        (self.container,) = self.pod["containers"]
        self.configmap = configmap
        self.node_root = os.path.join(lab.tmp, "node-root")
        os.makedirs(self.node_root, exist_ok=True)
        self.hashsize = os.path.join(lab.tmp, "hashsize")
        with open(HASHSIZE) as f, open(self.hashsize, "w") as g:
            g.write(f.read())

    def host_path(self, path):
        if path in self.host_paths:
            return self.host_paths[path]
        # A machine path that is not there (a VM without /lib/modules) is
        # the node's scratch one: a runtime would create the directory.
        if path in self.MACHINE_PATHS and os.path.exists(path):
            return path
        return os.path.join(self.node_root, path.lstrip("/"))

    def volume_source(self, vol):
        if "configMap" in vol:
            d = os.path.join(self.lab.tmp, "configmap-" + vol["name"])
            os.makedirs(d, exist_ok=True)
            for key, text in self.configmap["data"].items():
                if key == "kubeconfig.conf":
                    text, n = re.subn(r"(?m)^(\s*server: )\S+$", r"\g<1>https://127.0.0.1:%d" % self.lab.api_port,
                                      text)
                    assert n == 1, "kubeconfig.conf has one server"
                with open(os.path.join(d, key), "w") as f:
                    f.write(text)
            return d
        hp = vol["hostPath"]
        src = self.host_path(hp["path"])
        kind = hp.get("type", "")
        if kind in ("DirectoryOrCreate", "") and not os.path.exists(src):
            # "": no check, and containerd and docker create a missing
            # source as a directory.
            os.makedirs(src, exist_ok=True)
        elif kind == "FileOrCreate" and not os.path.exists(src):
            os.makedirs(os.path.dirname(src), exist_ok=True)
            open(src, "a").close()
        if not os.path.exists(src):
            raise AssertionError("hostPath %s (%s) does not exist on the node" % (hp["path"], src))
        return src

    def service_account(self):
        d = os.path.join(self.lab.tmp, "serviceaccount")
        os.makedirs(d, exist_ok=True)
        tls = os.path.dirname(self.lab.kubeconfig)
        for name in ("ca.crt", "token"):
            shutil.copy(os.path.join(tls, name), os.path.join(d, name))
        with open(os.path.join(d, "namespace"), "w") as f:
            f.write("kube-system")
        return d

    def spec(self, extra_args=()):
        c = self.container
        env = {"PATH": image.PATH, "HOSTNAME": self.node_name,
               "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
        for e in c.get("env", []):
            if "value" in e:
                env[e["name"]] = expand(e["value"], env)
            else:
                ref = e["valueFrom"]["fieldRef"]["fieldPath"]
                env[e["name"]] = {"spec.nodeName": self.node_name, "metadata.namespace": "kube-system"}[ref]
        argv = c.get("command") or image_entrypoint()
        argv = [expand(a, env) for a in argv + c.get("args", []) + list(extra_args)]
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        mounts = [{"source": self.volume_source(volumes[m["name"]]), "target": m["mountPath"],
                   "readonly": m.get("readOnly", False)} for m in c["volumeMounts"]]
        if self.pod.get("automountServiceAccountToken", True):
            mounts.append({"source": self.service_account(), "target": SA_DIR, "readonly": True})
        sc = c.get("securityContext", {})
        privileged = bool(sc.get("privileged"))
        caps = None
        if not privileged:
            # runc's default set for a container, then the spec's changes.
            add, drop = sc.get("capabilities", {}).get("add", []), sc.get("capabilities", {}).get("drop", [])
            caps = [] if "ALL" in drop else ["CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID",
                                             "SETUID", "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL",
                                             "AUDIT_WRITE"]
            caps = sorted(set(c for c in caps if c not in drop) | set(add))
        return {"rootfs": self.rootfs, "argv": argv, "env": env, "mounts": mounts, "capabilities": caps,
                "privileged": privileged, "masks": {HASHSIZE: self.hashsize}}

    def command(self, extra_args=()):
        path = os.path.join(self.lab.tmp, "pod-spec.json")
        with open(path, "w") as f:
            json.dump(self.spec(extra_args), f, indent=1)
        # hostPID: the node's PID namespace, no new one.
        pid = [] if self.pod.get("hostPID") else ["--pid", "--fork"]
        return ["unshare", "--mount"] + pid + ["--propagation", "private", sys.executable, KUBELET, path]


def image_entrypoint():
    return dockerfile.entrypoint(dockerfile.runtime(os.path.join(ROOT, "Dockerfile")))


class PodLab(Lab):
    """A lab whose kproxy is the DaemonSet's container, so that
    Lab.restart_under_traffic kills it and starts a new one, as a pod
    deleted and recreated."""
    pod = None

    def start_kproxy(self, *extra, mode=None):
        assert not extra and mode is None, "the pod spec says it all"
        self.kproxy_log = os.path.join(self.tmp, "kproxy.log")
        cmd = self.pod.command()
        with open(self.kproxy_log, "a") as f:
            f.write("=== container %s\n" % " ".join(self.pod.spec()["argv"]))
        self.kproxy = self.spawn("kproxy", cmd, ns="n1", log=self.kproxy_log)

    def stop_kproxy(self, sig=signal.SIGTERM):
        code = super().stop_kproxy(sig)
        # unshare has gone; its PID namespace ends when kproxy (its init) does.
        wait_for("the container's processes to end", lambda: not self.container_pids(), timeout=20)
        return code

    def container_pids(self):
        pids = []
        for p in os.listdir("/proc"):
            try:
                if p.isdigit() and os.readlink("/proc/%s/root" % p) == self.pod.rootfs:
                    pids.append(int(p))
            except OSError:
                pass
        return pids

    def run_pod(self, *extra_args, timeout=60):
        """The container with extra args appended, to completion (as
        `kubectl debug node/... --image=kproxy -- kproxy --cleanup`)."""
        return self.run(self.pod.command(extra_args), ns="n1", check=False, timeout=timeout)


def daemonset(path):
    objs = kubectl_load([os.path.join(ROOT, "deploy", path)])
    (ds,) = [o for o in objs if o["kind"] == "DaemonSet"]
    cms = [o for o in objs if o["kind"] == "ConfigMap"]
    return ds, cms[0] if cms else None


class KubeletCase(unittest.TestCase):
    """A DaemonSet of deploy/ (MANIFEST; its ConfigMap, or the base's) run
    from the image, as the kubelet runs it, on the lab's node-1."""
    MANIFEST = None
    lab = None

    @classmethod
    def setUpClass(cls):
        why = image_missing()
        if why:
            raise unittest.SkipTest(why)
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root for network, mount and PID namespaces")
        cls.lab = lab = PodLab(BUILD, "iptables")
        try:
            rootfs = os.path.join(lab.tmp, "rootfs")
            os.mkdir(rootfs)
            unpack(IMAGE, rootfs)
            lab.build_topology()
            cls.ip = {name: lab.add_pod(name, "node-1", i) for i, name in enumerate(("a1", "a2"), start=10)}
            lab.add_pod("cl", "node-1", 100, serve=False)
            lab.start_apiserver()
            lab.apply_objects("create", [
                node("node-1"), node("node-2"),
                service("web", "10.96.0.10"),
                slice_("web-1", "web", [(cls.ip["a1"], "node-1"), (cls.ip["a2"], "node-1")]),
            ])
            ds, cm = daemonset(cls.MANIFEST)
            if cm is None:
                _, cm = daemonset("kube-proxy.yaml")
            lab.pod = Pod(lab, rootfs, ds, cm, host_paths=cls.node_file_systems(lab))
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def node_file_systems(cls, lab):
        return {}

    @classmethod
    def tearDownClass(cls):
        if cls.lab:
            if os.environ.get("E2E_SHOW_LOG"):
                sys.stderr.write(cls.lab.kproxy_output())
            for key in [k for k in cls.lab.procs if k.startswith("kproxy")]:
                cls.lab.kill(key)
            if cls.lab.pod:
                wait_for("the containers' processes to end", lambda: not cls.lab.container_pids(), timeout=20)
            cls.release_node_file_systems()
            cls.lab.close()

    @classmethod
    def release_node_file_systems(cls):
        pass

    def save(self, backend, table="nat"):
        return self.lab.run(["iptables-%s-save" % backend, "-t", table], ns="n1", check=False).stdout

    def check_serving(self, mode, count=60):
        lab = self.lab
        lab.wait_healthy("the container's /healthz", timeout=30)
        r = lab.client("p-cl", "10.96.0.10", 80, count)
        self.assertEqual(r["errors"], {}, r)
        self.assertEqual(sorted(r["replies"]), ["a1", "a2"], r)
        metrics = lab.run(["curl", "-sf", "http://127.0.0.1:10249/metrics"], ns="n1").stdout
        self.assertTrue(re.search(r'(?m)^kubeproxy_sync_proxy_rules_duration_seconds_count\{ip_family="IPv4"\} [1-9]',
                                  metrics), "/metrics counts no sync")
        self.assertEqual(lab.run(["curl", "-sf", "http://127.0.0.1:10249/proxyMode"], ns="n1").stdout, mode)


class Kubelet(KubeletCase):
    """deploy/kube-proxy.yaml's DaemonSet (iptables mode)."""
    MANIFEST = "kube-proxy.yaml"

    def test_1_legacy_node(self):
        """kubelet's hint in legacy: the container writes legacy rules with
        the image's iptables-legacy-restore, and none to nf_tables."""
        lab = self.lab
        lab.run(["iptables-legacy", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT"], ns="n1")
        lab.start_kproxy()
        self.check_serving("iptables")
        self.assertIn(":KUBE-SERVICES", self.save("legacy"))
        self.assertNotIn("KUBE-SERVICES", self.save("nft"))
        out = lab.kproxy_output()
        self.assertRegex(out, r"iptables backend legacy, run as iptables-legacy: .*KUBE-IPTABLES-HINT")
        self.assertEqual(lab.container_pids() and os.readlink("/proc/%d/exe" % lab.container_pids()[0]),
                         os.path.join(lab.pod.rootfs, "usr/local/bin/kproxy"))

    def test_2_container_is_pid_1_with_the_specs_capabilities(self):
        lab = self.lab
        (pid,) = lab.container_pids()
        with open("/proc/%d/status" % pid) as f:
            status = f.read()
        self.assertEqual(re.search(r"^NSpid:\s+\d+\s+(\d+)$", status, re.M).group(1), "1", "PID 1 in its namespace")
        caps = int(re.search(r"^CapEff:\s+(\S+)$", status, re.M).group(1), 16)
        if lab.pod.container.get("securityContext", {}).get("privileged"):
            with open("/proc/self/status") as f:
                self.assertEqual(caps, int(f.read().split("CapEff:")[1].split()[0], 16))
        with open("/proc/%d/environ" % pid) as f:
            environ = f.read().split("\0")
        self.assertIn("NODE_NAME=node-1", environ)
        with open("/proc/%d/cmdline" % pid) as f:
            cmdline = f.read().split("\0")
        self.assertIn("--hostname-override=node-1", cmdline)
        self.assertEqual(cmdline[0], lab.pod.container["command"][0])

    def test_3_pod_recreated_under_traffic_loses_no_connection(self):
        r = self.lab.restart_under_traffic(signal.SIGKILL, "10.96.0.10", 80)
        self.assertEqual(r["errors"], {}, r)
        self.assertGreater(r["attempts"], 100, r)
        self.assertIn(":KUBE-SERVICES", self.save("legacy"))

    def test_4_cleanup_from_the_image(self):
        lab = self.lab
        lab.stop_kproxy(signal.SIGTERM)
        self.assertIn(":KUBE-SERVICES", self.save("legacy"), "a stop leaves the rules")
        p = lab.run_pod("--cleanup")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        for table in ("nat", "filter"):
            self.assertNotIn("KUBE-SERVICES", self.save("legacy", table))
        self.assertIn("KUBE-IPTABLES-HINT", self.save("legacy", "mangle"), "kubelet's chain is kubelet's")

    def test_5_nf_tables_node(self):
        """The same pod on a node whose kubelet uses nf_tables."""
        lab = self.lab
        lab.run(["iptables-legacy", "-t", "mangle", "-X", "KUBE-IPTABLES-HINT"], ns="n1")
        lab.run(["iptables-nft", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT"], ns="n1")
        lab.start_kproxy()
        self.check_serving("iptables")
        self.assertIn(":KUBE-SERVICES", self.save("nft"))
        self.assertNotIn("KUBE-SERVICES", self.save("legacy"))
        lab.stop_kproxy(signal.SIGTERM)
        self.assertEqual(lab.run_pod("--cleanup").returncode, 0)


class KubeletUserspace(KubeletCase):
    """deploy/kube-proxy-userspace.yaml: its ConfigMap (mode: userspace)
    and DaemonSet, including the surge update it asks for."""
    MANIFEST = "kube-proxy-userspace.yaml"

    def test_1_serves_without_a_packet_filter(self):
        lab = self.lab
        lab.start_kproxy()
        self.check_serving("userspace")
        self.assertEqual(lab.run(["nft", "list", "ruleset"], ns="n1").stdout.strip(), "")
        self.assertIn(" 10.96.0.10/32 ", lab.run(["ip", "-o", "addr", "show", "dev", "kube-proxy0"], ns="n1").stdout)

    def test_2_surge_update_fails_no_connection(self):
        """maxSurge: 1: the new pod starts beside the old one, takes its
        sockets, turns ready; then the kubelet deletes the old pod."""
        lab = self.lab
        result = {}

        def loop():
            result["r"] = lab.client("p-cl", "10.96.0.10", 80, 0, "--until-seconds", "6", "--interval", "0.002")
        t = threading.Thread(target=loop)
        t.start()
        time.sleep(1)   # traffic before, during and after
        mark = len(lab.kproxy_output())
        lab.procs["kproxy-old"] = lab.procs.pop("kproxy")
        lab.start_kproxy()
        wait_for("the new pod to take the sockets", lambda: re.search(
            r"Took \d+ service sockets from the process this one replaces", lab.kproxy_output()[mark:]), timeout=30)
        lab.wait_healthy("the new pod's readiness")
        self.assertEqual(lab.kill("kproxy-old", signal.SIGTERM).returncode, 0)
        t.join(timeout=60)
        self.assertEqual(result["r"]["errors"], {}, result["r"])
        self.assertGreater(result["r"]["attempts"], 100, result["r"])
        self.assertEqual(len(lab.container_pids()), 1)

    def test_3_cleanup_from_the_image(self):
        lab = self.lab
        lab.stop_kproxy(signal.SIGTERM)
        self.assertIn("kube-proxy0", lab.run(["ip", "-o", "link"], ns="n1").stdout)
        p = lab.run_pod("--cleanup")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("kube-proxy0", lab.run(["ip", "-o", "link"], ns="n1").stdout)


class KubeletSocketLB(KubeletCase):
    """deploy/kube-proxy-socket-lb.yaml over the base ConfigMap: the node's
    /sys/fs/bpf is a bpf filesystem this test mounts, its /sys/fs/cgroup a
    cgroup this test creates (in a cgroup2 mount of its own), with the
    kubelet's kubepods.slice in it; the lab's client runs there."""
    MANIFEST = "kube-proxy-socket-lb.yaml"

    @classmethod
    def node_file_systems(cls, lab):
        cls.scratch = BpfScratch(lab.tmp, "kp-img")
        cls.bpffs = cls.scratch.bpffs
        cls.pods_cg = cls.scratch.mkcgroup(os.path.join(cls.scratch.cgroup, "kubepods.slice"))
        return {"/sys/fs/bpf": cls.bpffs, "/sys/fs/cgroup": cls.scratch.cgroup}

    @classmethod
    def release_node_file_systems(cls):
        if getattr(cls, "scratch", None):
            cls.scratch.close()

    def pod_client(self, port):
        """A client in the pods' cgroup, from a port of its own."""
        cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.pods_cg, "ip", "netns", "exec",
               self.lab.ns("p-cl"), sys.executable, os.path.join(ROOT, "tests", "e2e", "client.py"), "10.96.0.10",
               "80", "1", "--bind-port", str(port)]
        return json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout)

    def test_1_pods_connect_straight_to_endpoints(self):
        lab = self.lab
        lab.start_kproxy()
        self.check_serving("iptables")
        self.assertRegex(lab.kproxy_output(), r"(?i)socket load balancing")
        pins = os.listdir(os.path.join(self.bpffs, "kproxy"))
        self.assertTrue(pins, "nothing pinned in the node's bpf filesystem")
        # A pod's connection was translated at connect(): conntrack on the
        # node holds it to the endpoint, none to the cluster IP.
        r = self.pod_client(41001)
        self.assertEqual(r["errors"], {}, r)
        entries = lab.run(["conntrack", "-L", "-p", "tcp", "--sport", "41001"], ns="n1", check=False).stdout
        self.assertNotIn("dst=10.96.0.10 ", entries)
        self.assertRegex(entries, r"dst=10\.244\.1\.1[01] ")

    def test_2_cleanup_from_the_image(self):
        lab = self.lab
        lab.stop_kproxy(signal.SIGTERM)
        self.assertTrue(os.listdir(os.path.join(self.bpffs, "kproxy")), "a stop leaves the pins")
        p = lab.run_pod("--cleanup")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.bpffs, "kproxy")) and
                         os.listdir(os.path.join(self.bpffs, "kproxy")), "pins left after --cleanup")
        self.assertNotIn("KUBE-SERVICES", self.save("nft"))


class Runtime(unittest.TestCase):
    """The image through a real container runtime, where one runs."""

    @classmethod
    def setUpClass(cls):
        why = image_missing()
        if why:
            raise unittest.SkipTest(why)
        if not shutil.which("podman"):
            raise unittest.SkipTest("podman is not installed")
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root")
        cls.storage = tempfile.mkdtemp(prefix="kproxy-podman-")
        # What podman adds (libpod_parent/conmon, even when the run
        # fails) goes again after.
        cls.cgroups_before = cgroup_dirs()
        p = podman(cls.storage, "load", "-i", IMAGE)
        if p.returncode != 0:
            raise AssertionError("podman load: " + p.stdout)
        # Can this machine run a container at all? The image's own binary,
        # without a network.
        p = podman(cls.storage, "run", "--rm", "--network", "none", "kproxy:" + VERSION, "--version")
        if p.returncode != 0:
            reason = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "exit %d" % p.returncode
            cls.tearDownClass()
            raise unittest.SkipTest("podman cannot run a container on this machine (%s); the image ran through "
                                    "tests/deploy/kubelet.py instead" % reason)

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "storage", None):
            podman(cls.storage, "system", "reset", "--force")
            shutil.rmtree(cls.storage, ignore_errors=True)
            cls.storage = None
        for d in sorted(cgroup_dirs() - getattr(cls, "cgroups_before", cgroup_dirs()), reverse=True):
            try:
                os.rmdir(d)
            except OSError:
                pass

    def test_runs_the_daemonset_in_a_node_namespace(self):
        lab = PodLab(BUILD, "iptables")
        try:
            lab.build_topology()
            ip = lab.add_pod("a1", "node-1", 10)
            lab.add_pod("cl", "node-1", 100, serve=False)
            lab.start_apiserver()
            lab.apply_objects("create", [node("node-1"), service("web", "10.96.0.10"),
                                         slice_("web-1", "web", [(ip, "node-1")])])
            ds, cm = daemonset("kube-proxy.yaml")
            pod = Pod(lab, None, ds, cm)
            spec = pod.spec()
            args = ["run", "-d", "--name", "kproxy-" + lab.prefix, "--network", "ns:/run/netns/" + lab.ns("n1"),
                    "--entrypoint", json.dumps(spec["argv"][:1])]
            args += ["--privileged"] if spec["privileged"] else ["--cap-drop", "ALL"] + \
                sum([["--cap-add", c] for c in spec["capabilities"]], [])
            for k, v in spec["env"].items():
                args += ["--env", "%s=%s" % (k, v)]
            for m in spec["mounts"]:
                args += ["--volume", "%s:%s%s" % (m["source"], m["target"], ":ro" if m["readonly"] else "")]
            for target, scratch in spec["masks"].items():     # the machine's own settings stay its own
                if os.path.exists(target):
                    args += ["--volume", "%s:%s" % (scratch, target)]
            p = podman(self.storage, *(args + ["kproxy:" + VERSION] + spec["argv"][1:]))
            self.assertEqual(p.returncode, 0, p.stdout)
            lab.wait_targets("web's rules from the podman container", "default/web", "p", ["%s:8080" % ip],
                             timeout=30)
            r = lab.client("p-cl", "10.96.0.10", 80, 20)
            self.assertEqual((r["errors"], sorted(r["replies"])), ({}, ["a1"]), r)
        finally:
            podman(self.storage, "rm", "-f", "kproxy-" + lab.prefix)
            lab.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)

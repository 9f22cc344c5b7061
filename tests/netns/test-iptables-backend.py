#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kproxy picks the iptables backend the node's other agents use, as
upstream's image does with iptables-wrapper (apply/iptables-backend.h).

1. The probe (`kproxy render -v=2`, whose --random-fully comes from the
   chosen tools) in a fresh namespace per case, with Kubernetes chains
   planted in iptables-legacy, in iptables-nft, in both or in neither,
   and with --iptables-backend: the choice and its reason, and that
   looking created no table in either backend; with only iptables-nft
   installed, what the reason and the daemon say.
2. `kproxy --cleanup` removes kube-proxy's chains from both backends
   (only the named one with --iptables-backend) and leaves kubelet's.
3. The daemon against the stand-in API server (tests/e2e/netlab.py) on a
   node whose kubelet uses legacy and where an earlier run left iptables
   mode's chains in nf_tables: it picks legacy, its rules land in the
   legacy tables only, the nf_tables leftovers go after its first sync,
   connections to a service flow through the legacy rules (their
   counters), an endpoint change lands there too, and --cleanup leaves
   kubelet's chains.
4. `kproxy trace` on that node: x_tables reports a marked packet's rules
   through nfnetlink_log, which the trace binds for its run: a pod's
   connection through KUBE-SERVICES, KUBE-SVC and KUBE-SEP (the DNAT to the
   endpoint) by iptables-legacy-save's lines, a foreign legacy DROP named,
   the namespace's packet logger put back after exit, and after SIGKILL by
   --cleanup.

Usage: tests/netns/test-iptables-backend.py BUILD_DIR   (root; iproute2,
iptables with both backends, nftables, python3, kubectl)

Network safety: namespaces kp-ibk-<pid>-* and the lab's kpe<pid>-*, all
deleted on exit, also on failure.
"""
import atexit
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))
from netlab import Lab, LabError, node, service, slice_, wait_for  # noqa: E402

if len(sys.argv) != 2:
    sys.exit("usage: %s BUILD_DIR" % sys.argv[0])
BUILD = os.path.abspath(sys.argv[1])
KPROXY = os.path.join(BUILD, "kproxy")
PREFIX = "kp-ibk-%d" % os.getpid()
created = []
passed = failed = 0


def cleanup():
    for ns in created:
        subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


atexit.register(cleanup)


def result(name, ok, why=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   %s" % name)
    else:
        failed += 1
        print("FAIL %s: %s" % (name, why))


def run(ns, *args, check=True, input=None):
    p = subprocess.run(["ip", "netns", "exec", ns] + list(args), input=input, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    if check and p.returncode != 0:
        raise LabError("%s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    return p


def sh(ns, script):
    return run(ns, "sh", "-ec", script)


def fresh_ns(name):
    ns = "%s-%s" % (PREFIX, name)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    created.append(ns)
    return ns


def drop_ns(ns):
    subprocess.run(["ip", "netns", "del", ns], check=True)
    created.remove(ns)


def tables(ns):
    """Every table of both backends: the legacy ones the kernel lists and
    nf_tables' (iptables-nft's "ip nat" and the like)."""
    legacy = run(ns, "cat", "/proc/net/ip_tables_names", "/proc/net/ip6_tables_names", check=False).stdout
    nft = run(ns, "nft", "list", "tables").stdout
    return sorted("legacy " + t for t in legacy.split()) + sorted(nft.splitlines())


def chains(ns, save, table):
    """The chains an iptables-*-save of one table declares ([] if the
    legacy table does not exist: asking would create it)."""
    if "legacy" in save:
        names = "/proc/net/ip6_tables_names" if save.startswith("ip6") else "/proc/net/ip_tables_names"
        if table not in run(ns, "cat", names, check=False).stdout.split():
            return []
    out = run(ns, save, "-t", table).stdout
    return re.findall(r"^:(\S+)", out, re.M)


STATE = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
json.dump({"apiVersion": "v1", "kind": "List", "items": [node("node-1")]}, STATE)
STATE.close()
atexit.register(os.unlink, STATE.name)
CHOICE = re.compile(r"iptables backend (\w+), run as (\S+): (.*)$", re.M)


def probe(ns, *flags):
    """kproxy render's host probe: (backend, tool, reason) from its -v=2 line."""
    p = run(ns, KPROXY, "render", "-v=2", "--hostname-override", "node-1", *flags, STATE.name)
    m = CHOICE.search(p.stderr)
    if not m:
        raise LabError("no backend line in render's log:\n" + p.stderr)
    return m.groups()


# --- 1. the probe ---

HINT4 = "iptables-%s -t mangle -N KUBE-IPTABLES-HINT"
CASES = [
    # (name, planted, flags, backend, words of the reason)
    ("no Kubernetes chains: nf_tables", [], [], "nft", "neither backend holds"),
    ("a legacy table of someone else's only: nf_tables", ["iptables-legacy -t nat -N DOCKER",
                                                          "iptables-legacy -t filter -N DOCKER-USER"], [], "nft",
     "neither backend holds"),
    ("kubelet's hint in legacy: legacy", [HINT4 % "legacy"], [], "legacy",
     "kubelet's KUBE-IPTABLES-HINT chain is in iptables-legacy's IPv4 mangle table"),
    ("kubelet's canary in legacy, IPv6 only: legacy", ["ip6tables-legacy -t mangle -N KUBE-KUBELET-CANARY"], [],
     "legacy", "KUBE-KUBELET-CANARY chain is in iptables-legacy's IPv6 mangle"),
    ("kubelet's hint in nf_tables: nf_tables", [HINT4 % "nft"], [], "nft",
     "KUBE-IPTABLES-HINT chain is in iptables-nft's IPv4 mangle"),
    ("kubelet's chains in both: nf_tables, looked at first as by iptables-wrapper",
     [HINT4 % "legacy", "iptables-nft -t mangle -N KUBE-KUBELET-CANARY"], [], "nft",
     "KUBE-KUBELET-CANARY chain is in iptables-nft's"),
    ("kubelet's hint in nf_tables over kube-proxy's chains in legacy: nf_tables",
     [HINT4 % "nft", "iptables-legacy -t nat -N KUBE-SERVICES"], [], "nft", "KUBE-IPTABLES-HINT"),
    ("kube-proxy's chains in legacy, no kubelet: legacy",
     ["iptables-legacy -t nat -N KUBE-SERVICES", "iptables-legacy -t nat -N KUBE-MARK-MASQ"], [], "legacy",
     "the KUBE-SERVICES chain is in iptables-legacy's IPv4 nat table (and no kubelet hint"),
    ("an old kubelet's KUBE-MARK-DROP in legacy: legacy", ["iptables-legacy -t nat -N KUBE-MARK-DROP"], [], "legacy",
     "KUBE-MARK-DROP"),
    ("kube-proxy's chains in nf_tables, no kubelet: nf_tables", ["iptables-nft -t filter -N KUBE-FORWARD"], [], "nft",
     "the KUBE-FORWARD chain is in iptables-nft's IPv4 filter table"),
    ("--iptables-backend=legacy over kubelet's nf_tables hint", [HINT4 % "nft"], ["--iptables-backend=legacy"],
     "legacy", "--iptables-backend=legacy"),
    ("--iptables-backend=nft over kubelet's legacy hint", [HINT4 % "legacy"], ["--iptables-backend", "nft"], "nft",
     "--iptables-backend=nft"),
    ("--iptables-backend=auto is the default", [HINT4 % "legacy"], ["--iptables-backend=auto"], "legacy",
     "kubelet's KUBE-IPTABLES-HINT"),
]

for name, planted, flags, want, words in CASES:
    ns = fresh_ns("probe")
    try:
        for cmd in planted:
            run(ns, *cmd.split())
        before = tables(ns)
        backend, tool, why = probe(ns, *flags)
        after = tables(ns)
        if backend != want or words not in why:
            result(name, False, "chose %s (%s), want %s with %r" % (backend, why, want, words))
        elif tool != "iptables-" + want:
            result(name, False, "would run %s" % tool)
        elif before != after:
            result(name, False, "looking created tables: %s, then %s" % (before, after))
        else:
            result(name, True)
    except LabError as e:
        result(name, False, str(e))
    finally:
        drop_ns(ns)

# Only iptables-nft installed (PATH holds nothing else): a legacy kubelet
# cannot be seen, which the reason says; asked for legacy, iptables mode
# refuses to start, naming what is missing.
NFT_ONLY = tempfile.mkdtemp(prefix="kproxy-nft-only-")
atexit.register(lambda: subprocess.run(["rm", "-rf", NFT_ONLY]))
multi = subprocess.run(["sh", "-c", "command -v xtables-nft-multi"], stdout=subprocess.PIPE, text=True).stdout.strip()
for t in ("iptables-nft", "iptables-nft-save", "iptables-nft-restore", "ip6tables-nft", "ip6tables-nft-save",
          "ip6tables-nft-restore"):
    os.symlink(multi, os.path.join(NFT_ONLY, t))
ns = fresh_ns("nftonly")
try:
    run(ns, *(HINT4 % "legacy").split())
    p = run(ns, "env", "PATH=" + NFT_ONLY, KPROXY, "render", "-v=2", "--hostname-override", "node-1", STATE.name)
    m = CHOICE.search(p.stderr)
    result("no legacy tools: nf_tables, saying legacy tables could not be read",
           m is not None and m.group(1) == "nft" and
           "legacy tables exist, but iptables-legacy is not installed to read them" in m.group(3),
           p.stderr)
    p = run(ns, "env", "PATH=" + NFT_ONLY, KPROXY, "--iptables-backend=legacy", "--hostname-override", "node-1",
            "--master", "http://127.0.0.1:1", check=False)
    result("asked for legacy without its tools, iptables mode refuses to start",
           p.returncode == 1 and "Cannot run in iptables mode: --iptables-backend=legacy; but iptables-legacy "
           "is not installed" in p.stderr, "exit %d: %s" % (p.returncode, p.stderr))
except LabError as e:
    result("only iptables-nft installed", False, str(e))
finally:
    drop_ns(ns)

# A bad value is an error naming the flag, before anything runs.
ns = fresh_ns("bad")
p = run(ns, KPROXY, "render", "--iptables-backend=iptables", STATE.name, check=False)
result("--iptables-backend=iptables is refused, naming the flag",
       p.returncode == 2 and "--iptables-backend" in p.stderr and not p.stdout, p.stderr)
p = run(ns, KPROXY, "--iptables-backend", "nf_tables", "--cleanup", check=False)
result("the daemon refuses it too (exit 1, as kube-proxy's errors)",
       p.returncode == 1 and "--iptables-backend" in p.stderr, p.stderr)
drop_ns(ns)

# --- 2. --cleanup of both backends ---

KUBE_PROXY = """
{t} -t nat -N KUBE-SERVICES
{t} -t nat -N KUBE-SVC-ABCDEFGHIJKLMNOP
{t} -t nat -A KUBE-SERVICES -d 10.96.0.10/32 -p tcp --dport 80 -j KUBE-SVC-ABCDEFGHIJKLMNOP
{t} -t nat -I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
{t} -t mangle -N KUBE-PROXY-CANARY
{t} -t filter -N KUBE-FORWARD
{t} -t filter -I FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
"""
KUBELET = """
{t} -t mangle -N KUBE-IPTABLES-HINT
{t} -t mangle -N KUBE-KUBELET-CANARY
{t} -t filter -N KUBE-FIREWALL
"""
KUBELETS = {"KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY", "KUBE-FIREWALL"}


def kube_chains(ns, backend):
    out = set()
    for table in ("mangle", "nat", "filter"):
        out |= {c for c in chains(ns, "iptables-%s-save" % backend, table) if c.startswith("KUBE-")}
    return out


for flags, cleaned in (([], ("legacy", "nft")), (["--iptables-backend=legacy"], ("legacy",))):
    name = "--cleanup %s: kube-proxy's chains go from %s, kubelet's stay" % (" ".join(flags) or "(auto)",
                                                                            " and ".join(cleaned))
    ns = fresh_ns("cleanup")
    try:
        sh(ns, KUBELET.format(t="iptables-legacy") + KUBE_PROXY.format(t="iptables-legacy") +
           KUBE_PROXY.format(t="iptables-nft"))
        p = run(ns, KPROXY, "--cleanup", *flags, check=False)
        got = {b: kube_chains(ns, b) for b in ("legacy", "nft")}
        want = {"legacy": KUBELETS, "nft": set() if "nft" in cleaned else {
            "KUBE-SERVICES", "KUBE-SVC-ABCDEFGHIJKLMNOP", "KUBE-PROXY-CANARY", "KUBE-FORWARD"}}
        v6 = run(ns, "cat", "/proc/net/ip6_tables_names", check=False).stdout.split()
        if p.returncode != 0:
            result(name, False, "exit %d: %s" % (p.returncode, p.stderr))
        elif got != want:
            result(name, False, "left %s, want %s" % (got, want))
        elif v6:
            result(name, False, "--cleanup created legacy IPv6 tables %s" % v6)
        elif "from iptables-legacy" not in p.stderr:
            result(name, False, "no log line of the legacy removal:\n" + p.stderr)
        else:
            result(name, True)
    except LabError as e:
        result(name, False, str(e))
    finally:
        drop_ns(ns)

# --- 3. the daemon on a legacy node ---

WEB = "10.96.0.10"


def logger(ns):
    return run(ns, "cat", "/proc/sys/net/netfilter/nf_log/2").stdout.strip()


def trace(ns, traffic, *args):
    """kproxy trace in ns (one packet, JSON), traffic() once it is armed:
    (its events, what the logger was while it ran)."""
    p = subprocess.Popen(["ip", "netns", "exec", ns, KPROXY, "trace", "--packets", "1", "--timeout", "20s",
                          "--output", "json", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        if "armed" not in line:
            raise LabError("kproxy trace did not arm: " + line + p.communicate(timeout=30)[1])
        during = logger(ns)
        traffic()
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode != 0:
        raise LabError("kproxy trace failed (%d): %s" % (p.returncode, err))
    return [json.loads(l) for l in out.splitlines()], during


def nat_targets(save_text):
    return sorted(re.findall(r"^-A KUBE-SEP-\S+ .*-j DNAT --to-destination (\S+)", save_text, re.M))


lab = Lab(BUILD, "iptables")
try:
    lab.build_topology()
    ip = {name: lab.add_pod(name, node_, idx) for name, node_, idx in
          (("a1", "node-1", 10), ("b1", "node-2", 10))}
    ip["cl"] = lab.add_pod("cl", "node-1", 100, serve=False)
    lab.start_apiserver()
    lab.apply_objects("create", [node("node-1"), node("node-2"), service("web", WEB),
                                 slice_("web-1", "web", [(ip["a1"], "node-1"), (ip["b1"], "node-2")])])
    n1 = lab.ns("n1")
    # kubelet on legacy; and what a run that wrote nf_tables beside it left:
    # a service DNAT to a pod that no longer exists.
    sh(n1, KUBELET.format(t="iptables-legacy") + KUBELET.format(t="ip6tables-legacy") + """
iptables-nft -t nat -N KUBE-SERVICES
iptables-nft -t nat -A KUBE-SERVICES -d %s/32 -p tcp --dport 80 -j DNAT --to-destination 10.244.1.99:8080
iptables-nft -t nat -I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
iptables-nft -t nat -I OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
""" % WEB)

    lab.start_kproxy()
    lab.wait_healthy()
    log = lab.kproxy_output()
    m = CHOICE.search(log)
    result("the daemon logs legacy and kubelet's hint as the reason",
           m is not None and m.group(1) == "legacy" and "KUBE-IPTABLES-HINT" in m.group(3),
           m.group(0) if m else "no backend line:\n" + log[-2000:])

    legacy_nat = run(n1, "iptables-legacy-save", "-t", "nat").stdout
    result("its rules are in the legacy nat table",
           nat_targets(legacy_nat) == sorted("%s:8080" % ip[p] for p in ("a1", "b1"))
           and re.search(r"^-A PREROUTING .*-j KUBE-SERVICES$", legacy_nat, re.M) is not None,
           legacy_nat)
    v6 = run(n1, "ip6tables-legacy-save", "-t", "nat").stdout
    result("and in the legacy IPv6 nat table", ":KUBE-SERVICES " in v6, v6)
    # The leftovers go once the first sync is in (the log says when).
    wait_for("the nf_tables leftovers to go",
             lambda: not kube_chains(n1, "nft") and "Removed" in lab.kproxy_output(), timeout=20)
    nft_rules = run(n1, "iptables-nft-save").stdout
    result("nothing of kube-proxy's is left in nf_tables", "KUBE-" not in nft_rules, nft_rules)

    r = lab.client("p-cl", WEB, 80, 40)
    result("connections to the service reach its pods",
           not r["errors"] and set(r["replies"]) <= {"a1", "b1"} and sum(r["replies"].values()) == 40, r)
    counted = run(n1, "iptables-legacy-save", "-c", "-t", "nat").stdout
    hits = sum(int(n) for n in re.findall(r"^\[(\d+):\d+\] -A KUBE-SEP-\S+ .*-j DNAT", counted, re.M))
    result("through the legacy rules (their DNAT counters: %d)" % hits, hits >= 40, counted)

    lab.apply_objects("replace", [slice_("web-1", "web", [(ip["a1"], "node-1")])])
    wait_for("the endpoint change in the legacy table",
             lambda: nat_targets(run(n1, "iptables-legacy-save", "-t", "nat").stdout) == ["%s:8080" % ip["a1"]])
    r = lab.client("p-cl", WEB, 80, 20)
    result("an endpoint change lands in the legacy table and is served",
           r["replies"] == {"a1": 20} and not r["errors"], r)
    result("still nothing in nf_tables", not kube_chains(n1, "nft"), kube_chains(n1, "nft"))

    # --- 4. kproxy trace on the legacy node ---
    before = logger(n1)
    events, during = trace(n1, lambda: lab.client("p-cl", WEB, 80, 1), "--destination", WEB + ":80")
    xt = [e for e in events if e["engine"] == "x_tables"]
    walk = [(e["table"], e["chain"]) for e in xt if e["type"] == "rule"]
    dnat = [e for e in xt if e["rule"] and "-j DNAT --to-destination %s:8080" % ip["a1"] in e["rule"]]
    result("trace: the pod's connection through KUBE-SERVICES, KUBE-SVC and KUBE-SEP's DNAT, by the legacy "
           "rules' lines",
           ("nat", "KUBE-SERVICES") in walk and any(c.startswith("KUBE-SVC-") for _, c in walk) and
           len(dnat) == 1 and dnat[0]["chain"].startswith("KUBE-SEP-") and dnat[0]["ruleNumber"] >= 1 and
           any(e["rule"] and "default/web" in e["rule"] for e in xt), json.dumps(events, indent=1))
    result("trace: nfnetlink_log while it ran, the namespace's logger (%s) back after" % before,
           during == "nfnetlink_log" and logger(n1) == before != "nfnetlink_log", (before, during, logger(n1)))

    sh(n1, "iptables-legacy -I FORWARD -s %s -p tcp --dport 8080 -m comment --comment 'planted drop' -j DROP"
       % ip["cl"])
    try:
        events, _ = trace(n1, lambda: lab.client("p-cl", WEB, 80, 1, "--timeout", "2"), "--destination", WEB + ":80")
    finally:
        sh(n1, "iptables-legacy -D FORWARD 1")
    drop = [e for e in events if e["rule"] and "planted drop" in e["rule"]]
    result("trace: a foreign legacy DROP is named", len(drop) == 1 and drop[0]["table"] == "filter" and
           drop[0]["chain"] == "FORWARD" and drop[0]["ruleNumber"] == 1 and drop[0]["rule"].endswith("-j DROP"),
           json.dumps(events, indent=1))

    p = subprocess.Popen(["ip", "netns", "exec", n1, KPROXY, "trace", "--destination", WEB + ":80"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    armed = p.stderr.readline()
    p.kill()
    p.wait()
    p.stderr.close()
    killed = logger(n1)

    lab.stop_kproxy()
    p = run(n1, KPROXY, "--cleanup", check=False)
    left = kube_chains(n1, "legacy")
    result("--cleanup leaves only kubelet's legacy chains", p.returncode == 0 and left == KUBELETS,
           "exit %d, left %s: %s" % (p.returncode, left, p.stderr))
    result("a killed trace leaves nfnetlink_log bound; --cleanup puts the logger back",
           "armed" in armed and killed == "nfnetlink_log" and logger(n1) == before and
           "Put back the IPv4 packet logger" in p.stderr, (armed, killed, logger(n1), p.stderr))
except LabError as e:
    result("daemon on a legacy node", False, "%s\n%s" % (e, lab.kproxy_output()[-3000:]))
finally:
    lab.close()

print("netns-iptables-backend: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Churn soak of the kproxy daemon: `make soak` (as root; not in CI).

usage: bench/soak.py [options] BUILD_DIR

For each mode of --modes (default both), in scratch network namespaces made
and deleted by bench/programming.py's harness (kpb<pid>-node, -ref):

 1. the stand-in API server (tests/apiserver/kapi.py) with --services
    services of --endpoints endpoints (bench/gen_cluster.py), and kproxy
    with its default --iptables-min-sync-period (1 s), as a node runs it;
 2. after the first sync, --minutes of churn at up to --rate operations a
    second, each a real API write: an endpoint replaced (most), an endpoint
    added or removed, a service's port changed, a service and its slice
    created or deleted;
 3. every --sample seconds kproxy's RSS, anonymous memory, open fds and CPU;
 4. at the end the final state is listed from the API server, rendered with
    `kproxy render` and loaded into an empty namespace with the mode's tool;
    the node's rules must become the same (kproxy's extra jump rules and
    canaries aside), and how long that takes after the last write is the
    convergence time. Not the same within --converge-timeout: a lost update.

Flat means: after the first --warmup seconds, RSS and fds end where they
were (within --rss-slack MiB and the fds of one sync in flight).
Results: stdout (a markdown table), and --json FILE.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import programming as P  # noqa: E402  (the harness: namespaces, kapi, kproxy)


# --- the kernel, normalised ------------------------------------------------

def nft_blocks(text):
    """`nft list table` as {"set NAME"|"map NAME"|"chain NAME": content}:
    a chain's rules in order, a set's or map's elements sorted (the kernel
    lists them in its own order), affinity expiry countdowns left out."""
    out = {}
    for kind, name, body in re.findall(r"^\t(set|map|chain) (\S+) \{\n(.*?)^\t\}$", text, re.M | re.S):
        body = re.sub(r" expires \S+?(?=[\s,}]|$)", "", body)
        m = re.search(r"elements = \{(.*?)\}", body, re.S)
        if kind == "chain":
            out["chain " + name] = [l.strip() for l in body.splitlines() if l.strip()]
        else:
            head = [l.strip() for l in body[:m.start()].splitlines() if l.strip()] if m else body.split()
            elems = sorted(e.strip() for e in m.group(1).split(",") if e.strip()) if m else []
            out["%s %s" % (kind, name)] = (head, elems)
    return out


IPT_IGNORED = ("KUBE-PROXY-CANARY", "KUBE-KUBELET-CANARY")


def ipt_chains(text):
    """iptables-save of one table as {chain: [rules]} for kproxy's chains
    (KUBE-*, not the canaries): the built-in chains hold the jump rules the
    daemon inserts, which a restore of the render does not."""
    out = {}
    for line in text.splitlines():
        if line.startswith(":"):
            name = line[1:].split()[0]
            if name.startswith("KUBE-") and name not in IPT_IGNORED:
                out.setdefault(name, [])
        elif line.startswith("-A "):
            name, _, rule = line[3:].partition(" ")
            if name in out:
                out[name].append(rule)
    return out


def dump(run, mode, ns):
    if mode == "nftables":
        p = run.sh(["nft", "list", "table", "ip", "kube-proxy"], ns=ns, check=False)
        return nft_blocks(p.stdout)
    return {t: ipt_chains(run.sh(["iptables-save", "-t", t], ns=ns).stdout) for t in ("nat", "filter")}


def differences(want, got, limit=5):
    out = []
    if isinstance(want, dict):
        for k in sorted(set(want) | set(got)):
            if k not in got:
                out.append("missing %s" % k)
            elif k not in want:
                out.append("extra %s" % k)
            elif want[k] != got[k]:
                sub = differences(want[k], got[k], limit) if isinstance(want[k], dict) else []
                out += ["%s: %s" % (k, s) for s in sub] or ["%s differs" % k]
            if len(out) >= limit:
                break
    return out[:limit]


# --- the churn ---------------------------------------------------------------

class Churn:
    """The cluster's services and slices as the harness last wrote them, and
    one random write at a time."""

    def __init__(self, api, state, seed):
        self.api = api
        self.rng = random.Random(seed)
        with open(state) as f:
            doc = json.load(f)
        self.services = {}
        self.slices = {}
        for o in doc["items"]:
            md = o["metadata"]
            if o["kind"] == "Service":
                self.services[(md["namespace"], md["name"])] = o
            elif o["kind"] == "EndpointSlice":
                self.slices[(md["namespace"], md["labels"]["kubernetes.io/service-name"])] = o
        self.keys = sorted(self.services)
        self.next_ip = P.NEW_EP_BASE
        self.next_svc = 0
        self.counts = {}

    def ip(self):
        self.next_ip += 1
        return P.ip_str(self.next_ip)

    def put(self, obj, plural, group):
        md = obj["metadata"]
        obj = {k: v for k, v in obj.items() if k != "status"} if plural == "services" else obj
        path = "%s/namespaces/%s/%s/%s" % (group, md["namespace"], plural, md["name"])
        obj.setdefault("metadata", {}).pop("resourceVersion", None)
        self.api.request("PUT", path, obj)

    def one(self):
        r = self.rng.random()
        op = ("endpoint" if r < 0.6 else "scale" if r < 0.7 else "port" if r < 0.8 else
              "create" if r < 0.9 else "delete")
        if op in ("delete", "endpoint", "scale", "port") and not self.keys:
            op = "create"
        getattr(self, "op_" + op)()
        self.counts[op] = self.counts.get(op, 0) + 1

    def pick(self):
        return self.keys[self.rng.randrange(len(self.keys))]

    def op_endpoint(self):
        sl = self.slices[self.pick()]
        eps = sl["endpoints"]
        if eps:
            eps[self.rng.randrange(len(eps))]["addresses"] = [self.ip()]
        self.put(sl, "endpointslices", "/apis/discovery.k8s.io/v1")

    def op_scale(self):
        sl = self.slices[self.pick()]
        eps = sl["endpoints"]
        if eps and (len(eps) > 12 or self.rng.random() < 0.5):
            eps.pop(self.rng.randrange(len(eps)))
        else:
            eps.append({"addresses": [self.ip()], "conditions": {"ready": True, "serving": True,
                                                                 "terminating": False}, "nodeName": "node-1"})
        self.put(sl, "endpointslices", "/apis/discovery.k8s.io/v1")

    def op_port(self):
        svc = self.services[self.pick()]
        port = svc["spec"]["ports"][0]
        port["port"] = 80 if port["port"] != 80 else 81
        self.put(svc, "services", "/api/v1")

    def op_create(self):
        self.next_svc += 1
        ns, name = "ns0", "churn%d" % self.next_svc
        ip = "10.97.%d.%d" % (self.next_svc // 250 % 250, 1 + self.next_svc % 250)
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
               "spec": {"clusterIP": ip, "clusterIPs": [ip],
                        "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]}}
        sl = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
              "metadata": {"name": name + "-abcde", "namespace": ns,
                           "labels": {"kubernetes.io/service-name": name}},
              "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
              "endpoints": [{"addresses": [self.ip()], "conditions": {"ready": True, "serving": True,
                                                                     "terminating": False}, "nodeName": "node-1"}
                            for _ in range(1 + self.rng.randrange(5))]}
        self.api.request("POST", "/api/v1/namespaces/%s/services" % ns, svc)
        self.api.request("POST", "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices" % ns, sl)
        self.services[(ns, name)] = svc
        self.slices[(ns, name)] = sl
        self.keys.append((ns, name))

    def op_delete(self):
        i = self.rng.randrange(len(self.keys))
        ns, name = self.keys[i]
        self.keys[i] = self.keys[-1]
        self.keys.pop()
        sl = self.slices.pop((ns, name))
        del self.services[(ns, name)]
        self.api.request("DELETE", "/apis/discovery.k8s.io/v1/namespaces/%s/endpointslices/%s" %
                         (ns, sl["metadata"]["name"]))
        self.api.request("DELETE", "/api/v1/namespaces/%s/services/%s" % (ns, name))


def fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def sample(kp, t0):
    m = kp.mem()
    return {"t": time.monotonic() - t0, "rss": m.get("VmRSS", 0), "anon": m.get("RssAnon", 0),
            "hwm": m.get("VmHWM", 0), "fds": fds(kp.proc.pid), "cpu": sum(kp.cpu())}


def final_state(api, path):
    """Everything the API server holds now, as one List for `kproxy render`."""
    items = []
    for url, kind in (("/api/v1/services", "Service"), ("/apis/discovery.k8s.io/v1/endpointslices", "EndpointSlice"),
                      ("/api/v1/nodes", "Node"), ("/apis/networking.k8s.io/v1/servicecidrs", "ServiceCIDR")):
        for o in json.loads(api.request("GET", url))["items"]:
            o.setdefault("kind", kind)
            items.append(o)
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, f)


def reference(run, mode, state):
    """The final state rendered and loaded into an empty namespace."""
    # The host facts as the daemon found them in the node namespace.
    p = subprocess.run([run.kproxy_bin, "render", "--proxy-mode", mode, "--hostname-override", P.NODE,
                        "--cluster-cidr", P.CLUSTER_CIDR, "--host-addresses", "127.0.0.1/8," + P.NODE_IP + "/24",
                        "--host-nfacct=true", "--host-random-fully=true", "--host-tcp-be-liberal=false", state],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    run.add_ns("ref")
    if mode == "iptables":
        # The counters the daemon made (its node set-up), which the rules use.
        for name in ("ct_state_invalid_dropped_pkts", "localhost_nps_accepted_pkts"):
            run.sh(["nfacct", "add", name], ns="ref")
    tool = ["nft", "-f", "-"] if mode == "nftables" else ["iptables-restore"]
    run.sh(tool, ns="ref", input=p.stdout.decode())
    want = dump(run, mode, "ref")
    run.del_ns("ref")
    if not (want if mode == "nftables" else want["nat"]):
        raise P.BenchError("the reference namespace holds no rules: nothing to compare with")
    return want


def soak(run, mode, args):
    P.log("== %s mode: %d services x %d endpoints, %g min of churn" % (mode, args.services, args.endpoints,
                                                                        args.minutes))
    cluster = P.Cluster(run, args.services, args.endpoints)
    P.build_node(run)
    res = {"mode": mode, "services": args.services, "endpoints": args.endpoints}
    try:
        api = P.Api(run, cluster.state)
        kp = P.Kproxy(run, api, mode, "1s")
        _, m = kp.wait_log(r"First sync done in (\d+) ms", 900)
        res["first_sync_ms"] = int(m.group(1))
        churn = Churn(api, cluster.state, args.seed)
        t0 = time.monotonic()
        end = t0 + 60 * args.minutes
        samples, next_sample, ops = [sample(kp, t0)], t0 + args.sample, 0
        while time.monotonic() < end:
            if not kp.alive():
                raise P.BenchError("kproxy exited during the churn:\n" + P.tail(kp.logfile))
            t = time.monotonic()
            churn.one()
            ops += 1
            if time.monotonic() >= next_sample:
                samples.append(sample(kp, t0))
                s = samples[-1]
                P.log("  %4.0f s: %d writes, RSS %.1f MiB (anon %.1f), %d fds, CPU %.1f s" % (
                    s["t"], ops, s["rss"], s["anon"], s["fds"], s["cpu"]))
                next_sample += args.sample
            rest = 1.0 / args.rate - (time.monotonic() - t)
            if rest > 0:
                time.sleep(rest)
        t_last = time.monotonic()
        res.update(ops=ops, op_counts=churn.counts, churn_s=t_last - t0)
        state = os.path.join(run.tmp, "final-%s.json" % mode)
        final_state(api, state)
        want = reference(run, mode, state)
        # The final state's listing and the reference's render and load take
        # the harness a while (tens of seconds at 10k): kproxy's convergence
        # is counted from when the reference is ready; equal at the first
        # check means it had converged by then.
        t_ref = time.monotonic()
        res["reference_s"] = t_ref - t_last
        checks = 0
        while True:
            got = dump(run, mode, "node")
            checks += 1
            if got == want:
                res["converged_s"] = time.monotonic() - t_last
                res["first_check_equal"] = checks == 1
                break
            if time.monotonic() - t_ref > args.converge_timeout:
                res["converged_s"] = None
                res["differences"] = differences(want, got)
                P.log("  NOT THE SAME after %d s: %s" % (args.converge_timeout, "; ".join(res["differences"])))
                break
            time.sleep(0.5)
        samples.append(sample(kp, t0))
        res["samples"] = samples
        kp.stop()
    finally:
        run.kill("kproxy")
        run.kill("kapi")
        run.del_ns("node")
    return res


def summary(res, args):
    s = res["samples"]
    warm = [x for x in s if x["t"] >= args.warmup] or s[-1:]
    first, last = warm[0], s[-1]
    cpu_pct = 100 * (last["cpu"] - s[0]["cpu"]) / max(1e-9, last["t"] - s[0]["t"])
    return {
        "writes_per_s": res["ops"] / res["churn_s"],
        "rss_after_warmup": first["rss"], "rss_end": last["rss"], "rss_max": max(x["rss"] for x in warm),
        "anon_after_warmup": first["anon"], "anon_end": last["anon"],
        "fds_after_warmup": first["fds"], "fds_end": last["fds"], "fds_max": max(x["fds"] for x in warm),
        "peak_rss": last["hwm"], "cpu_pct": cpu_pct,
        "flat": last["rss"] - first["rss"] <= args.rss_slack and last["fds"] <= first["fds"] + 2,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("--modes", default="nftables iptables")
    ap.add_argument("--services", type=int, default=10000)
    ap.add_argument("--endpoints", type=int, default=10)
    ap.add_argument("--minutes", type=float, default=float(os.environ.get("SOAK_MINUTES") or 10))
    ap.add_argument("--rate", type=float, default=50, help="writes per second at most (default 50)")
    ap.add_argument("--sample", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=60, help="seconds of churn before RSS and fds must be flat")
    ap.add_argument("--rss-slack", type=float, default=4, help="MiB RSS may grow after warm-up (default 4)")
    ap.add_argument("--converge-timeout", type=float, default=120)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--content-type", help="kproxy's --kube-api-content-type (default: kproxy's, protobuf)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("soak.py needs root (network namespaces)")
    # What programming.py's harness reads of its own options.
    hargs = argparse.Namespace(no_affinity=False, nft_shards=0, state_dir=True)
    P.SHARDS, P.STATE_DIR, P.CONTENT_TYPE = 0, True, args.content_type
    results, failed = [], False
    for mode in args.modes.replace(",", " ").split():
        run = P.Run(args.build, hargs)
        try:
            r = soak(run, mode, args)
            r["summary"] = summary(r, args)
            results.append(r)
            failed |= r.get("converged_s") is None or not r["summary"]["flat"]
        except P.BenchError as e:
            P.log("FAILED: %s mode: %s" % (mode, e))
            failed = True
        finally:
            run.close()
            for p in run.verify_clean():
                P.log("NOT CLEAN: " + p)
                failed = True
    P.log("\n| mode | services | churn | writes (per s) | converged after the last write | RSS after warm-up → end "
          "(max) | anon | fds after warm-up → end (max) | kproxy CPU | peak RSS | flat |")
    P.log("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        s = r["summary"]
        P.log("| %s | %d × %d | %.0f s | %d (%.1f) | %s | %.1f → %.1f (%.1f) MiB | %.1f → %.1f MiB | %d → %d (%d) | "
              "%.0f%% | %.0f MiB | %s |" % (
                  r["mode"], r["services"], r["endpoints"], r["churn_s"], r["ops"], s["writes_per_s"],
                  ("equal at the first check, %.0f s after (the reference took %.0f s)" if r["first_check_equal"]
                   else "%.1f s after (the reference took %.0f s)") % (r["converged_s"], r["reference_s"])
                  if r["converged_s"] is not None else "**never**",
                  s["rss_after_warmup"], s["rss_end"], s["rss_max"], s["anon_after_warmup"], s["anon_end"],
                  s["fds_after_warmup"], s["fds_end"], s["fds_max"], s["cpu_pct"], s["peak_rss"],
                  "yes" if s["flat"] else "**no**"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

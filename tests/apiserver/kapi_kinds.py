# SPDX-License-Identifier: Apache-2.0
"""What the stand-in API server serves: the resource table, per-kind
defaulting and validation, discovery documents and Table rendering.

Principle of kinds: everything that differs between Services,
EndpointSlices, Nodes and Namespaces lives here, in tables and small
functions keyed by resource, so the store and the HTTP layer stay generic.
Defaulting follows the real server where kube-proxy can see the difference
(a created Service gets a ClusterIP, ports get TCP and a targetPort), and
stops there.
"""
import calendar
import ipaddress
import re
import time

VERSION = {
    "major": "1", "minor": "32", "gitVersion": "v1.32.0-kapi", "gitCommit": "0" * 40,
    "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.23",
    "compiler": "gc", "platform": "linux/amd64",
}

VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


class Kind:
    def __init__(self, name, group, version, kind, namespaced, singular, short=(), categories=()):
        self.name = name
        self.group = group
        self.version = version
        self.kind = kind
        self.namespaced = namespaced
        self.singular = singular
        self.short = list(short)
        self.categories = list(categories)

    @property
    def api_version(self):
        return "%s/%s" % (self.group, self.version) if self.group else self.version

    @property
    def list_kind(self):
        return self.kind + "List"


KINDS = [
    Kind("services", "", "v1", "Service", True, "service", ["svc"], ["all"]),
    Kind("endpointslices", "discovery.k8s.io", "v1", "EndpointSlice", True, "endpointslice"),
    Kind("nodes", "", "v1", "Node", False, "node", ["no"]),
    Kind("namespaces", "", "v1", "Namespace", False, "namespace", ["ns"]),
    Kind("servicecidrs", "networking.k8s.io", "v1", "ServiceCIDR", False, "servicecidr"),
]
BY_RESOURCE = BY_KIND = GROUP_VERSIONS = None


def _index():
    global BY_RESOURCE, BY_KIND, GROUP_VERSIONS
    BY_RESOURCE = {k.name: k for k in KINDS}
    BY_KIND = {(k.api_version, k.kind): k for k in KINDS}
    GROUP_VERSIONS = sorted({(k.group, k.version) for k in KINDS})


_index()


def disable(resource):
    """Serves no such resource, as an API server too old to have it: its
    paths are 404 and discovery leaves it out. Call before the Store exists."""
    KINDS[:] = [k for k in KINDS if k.name != resource]
    _index()


def lookup(group, version, resource):
    k = BY_RESOURCE.get(resource)
    if k is None or k.group != group or k.version != version:
        return None
    return k


def kind_of(obj):
    """The Kind for an object by its apiVersion and kind, or None."""
    return BY_KIND.get((obj.get("apiVersion"), obj.get("kind")))


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# --- validation ------------------------------------------------------------

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                                r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def name_error(kind, name):
    """Returns a message if name is not valid for kind, else None."""
    if kind.name == "services":
        if len(name) > 63 or not _DNS1035_LABEL.match(name):
            return "a DNS-1035 label must consist of lower case alphanumeric characters or '-', " \
                   "start with an alphabetic character, and end with an alphanumeric character"
    elif kind.name == "namespaces":
        if len(name) > 63 or not _DNS1123_LABEL.match(name):
            return "a lowercase RFC 1123 label must consist of lower case alphanumeric " \
                   "characters or '-', and must start and end with an alphanumeric character"
    elif len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric " \
               "characters, '-' or '.', and must start and end with an alphanumeric character"
    return None


def _cidr_error(value):
    if not isinstance(value, str):
        return "must be a string"
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError:
        return "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
    if str(net) != value:
        return "must be in canonical form (%s)" % net
    return None


def spec_error(kind, obj, old):
    """Returns (field, message) for the few checks kproxy could trip over, else None."""
    if kind.name == "servicecidrs":
        cidrs = obj.get("spec", {}).get("cidrs")
        if not isinstance(cidrs, list) or not 1 <= len(cidrs) <= 2:
            return "spec.cidrs", "Invalid value: %r: at least one and at most two CIDRs" % (cidrs,)
        for i, c in enumerate(cidrs):
            why = _cidr_error(c)
            if why:
                return "spec.cidrs[%d]" % i, "Invalid value: %r: %s" % (c, why)
        if len(cidrs) == 2 and (":" in cidrs[0]) == (":" in cidrs[1]):
            return "spec.cidrs", "Invalid value: %r: may specify no more than one IP for each IP family" % (cidrs,)
        if old is not None and old.get("spec", {}).get("cidrs") != cidrs:
            return "spec.cidrs", "Invalid value: %r: field is immutable" % (cidrs,)
    if kind.name == "endpointslices":
        if obj.get("addressType") not in ("IPv4", "IPv6", "FQDN"):
            return "addressType", "Unsupported value: %r" % obj.get("addressType")
        if old is not None and old.get("addressType") != obj.get("addressType"):
            return "addressType", "field is immutable"
    if kind.name == "services" and old is not None:
        new_spec, old_spec = obj.get("spec", {}), old.get("spec", {})
        if "ExternalName" not in (new_spec.get("type"), old_spec.get("type")):
            if new_spec.get("clusterIP") != old_spec.get("clusterIP"):
                return "spec.clusterIPs[0]", "Invalid value: %r: may not change once set" % \
                    new_spec.get("clusterIP")
    return None


# --- defaulting ------------------------------------------------------------

class Allocator:
    """ClusterIPs from a CIDR and node ports from 30000-32767, first free."""

    def __init__(self, cidr):
        self.net = ipaddress.ip_network(cidr)

    def cluster_ip(self, services):
        used = set()
        for s in services:
            used.update(s.get("spec", {}).get("clusterIPs") or [])
            used.add(s.get("spec", {}).get("clusterIP"))
        for i in range(10, min(self.net.num_addresses - 1, 1 << 20)):
            ip = str(self.net.network_address + i)
            if ip not in used:
                return ip
        return None

    @staticmethod
    def node_port(services, taken):
        used = set(taken)
        for s in services:
            for p in s.get("spec", {}).get("ports") or []:
                used.add(p.get("nodePort"))
        for n in range(30000, 32768):
            if n not in used:
                return n
        return None


def _default_service(obj, old, others, alloc):
    spec = obj.setdefault("spec", {})
    ospec = (old or {}).get("spec", {})
    typ = spec.setdefault("type", "ClusterIP")
    # Like upstream's patchAllocatedValues: a replace that leaves out what
    # the server allocated keeps it.
    if old is not None and typ != "ExternalName":
        for f in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if not spec.get(f) and ospec.get(f):
                spec[f] = ospec[f]
    if typ != "ExternalName":
        if not spec.get("clusterIP"):
            ips = spec.get("clusterIPs") or []
            spec["clusterIP"] = ips[0] if ips else alloc.cluster_ip(others) or "None"
        if not spec.get("clusterIPs"):
            spec["clusterIPs"] = [spec["clusterIP"]]
        ip = spec["clusterIP"]
        spec.setdefault("ipFamilies", ["IPv6" if ":" in ip else "IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    spec.setdefault("sessionAffinity", "None")
    old_ports = {(p.get("port"), p.get("protocol", "TCP")): p for p in ospec.get("ports") or []}
    taken = []
    # A LoadBalancer with allocateLoadBalancerNodePorts: false gets no node
    # port it was not given.
    wants_node_ports = typ == "NodePort" or (
        typ == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False)
    for p in spec.get("ports") or []:
        if not isinstance(p, dict):
            continue
        p.setdefault("protocol", "TCP")
        if "port" in p:
            p.setdefault("targetPort", p["port"])
        if wants_node_ports and not p.get("nodePort"):
            prev = old_ports.get((p.get("port"), p["protocol"]), {}).get("nodePort")
            p["nodePort"] = prev or alloc.node_port(others, taken)
        taken.append(p.get("nodePort"))
    if typ in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if typ == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    obj.setdefault("status", {"loadBalancer": {}})


def _default_slice(obj):
    for p in obj.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")


def _default_namespace(obj):
    name = obj["metadata"]["name"]
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    obj.setdefault("spec", {"finalizers": ["kubernetes"]})
    obj.setdefault("status", {"phase": "Active"})


def apply_defaults(kind, obj, old, others, alloc):
    """Fills in what the real server would; others are the existing objects
    of this kind (for allocation).  Changes obj in place."""
    if kind.name == "services":
        _default_service(obj, old, others, alloc)
    elif kind.name == "endpointslices":
        _default_slice(obj)
    elif kind.name == "namespaces":
        _default_namespace(obj)


# --- discovery -------------------------------------------------------------

def api_versions(server_address):
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                            "serverAddress": server_address}]}


def _group(group):
    versions = [{"groupVersion": "%s/%s" % (g, v), "version": v}
                for g, v in GROUP_VERSIONS if g == group]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


def api_group_list():
    groups = sorted({g for g, _ in GROUP_VERSIONS if g})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group(g) for g in groups]}


def api_group(group):
    if group not in {g for g, _ in GROUP_VERSIONS if g}:
        return None
    doc = _group(group)
    doc.update(kind="APIGroup", apiVersion="v1")
    return doc


def api_resource_list(group, version):
    if (group, version) not in GROUP_VERSIONS:
        return None
    res = []
    for k in KINDS:
        if k.group == group and k.version == version:
            r = {"name": k.name, "singularName": k.singular, "namespaced": k.namespaced,
                 "kind": k.kind, "verbs": VERBS}
            if k.short:
                r["shortNames"] = k.short
            if k.categories:
                r["categories"] = k.categories
            res.append(r)
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": "%s/%s" % (group, version) if group else version,
            "resources": res}


# --- Tables (kubectl get without -o) ----------------------------------------

def _age(ts):
    try:
        t = calendar.timegm(time.strptime(ts, "%Y-%m-%dT%H:%M:%SZ"))
    except (TypeError, ValueError):
        return "<unknown>"
    s = max(0, int(time.time() - t))
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = m // 60
    if h < 48:
        return "%dh" % h
    d = h // 24
    return "%dd" % d if d < 730 else "%dy" % (d // 365)


def _svc_cells(o):
    spec = o.get("spec", {})
    ports = ",".join("%s%s/%s" % (p.get("port"), ":%s" % p["nodePort"] if p.get("nodePort") else "",
                                  p.get("protocol", "TCP")) for p in spec.get("ports") or [])
    ext = spec.get("externalIPs") or []
    ext += [i.get("ip") or i.get("hostname") for i in
            o.get("status", {}).get("loadBalancer", {}).get("ingress") or []]
    if spec.get("type") == "ExternalName":
        ext = [spec.get("externalName", "")]
    sel = ",".join("%s=%s" % kv for kv in sorted((spec.get("selector") or {}).items()))
    return [spec.get("type", ""), spec.get("clusterIP", ""),
            ",".join(e for e in ext if e) or ("<pending>" if spec.get("type") == "LoadBalancer"
                                              else "<none>"),
            ports or "<none>", _age(o["metadata"].get("creationTimestamp")), sel or "<none>"]


def _slice_cells(o):
    ports = ",".join(str(p.get("port", "")) for p in o.get("ports") or [])
    addrs = [a for e in o.get("endpoints") or [] for a in e.get("addresses") or []]
    eps = ",".join(addrs[:3]) + (" + %d more..." % (len(addrs) - 3) if len(addrs) > 3 else "")
    return [o.get("addressType", ""), ports or "<unset>", eps or "<unset>",
            _age(o["metadata"].get("creationTimestamp"))]


def _node_cells(o):
    ready = [c for c in o.get("status", {}).get("conditions") or [] if c.get("type") == "Ready"]
    status = "Unknown"
    if ready:
        status = "Ready" if ready[0].get("status") == "True" else "NotReady"
    roles = [k.split("/", 1)[1] for k in (o["metadata"].get("labels") or {})
             if k.startswith("node-role.kubernetes.io/")]
    return [status, ",".join(sorted(roles)) or "<none>",
            _age(o["metadata"].get("creationTimestamp")),
            o.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "")]


def _cidr_cells(o):
    return [",".join(o.get("spec", {}).get("cidrs") or []), _age(o["metadata"].get("creationTimestamp"))]


def _ns_cells(o):
    return [o.get("status", {}).get("phase", "Active"),
            _age(o["metadata"].get("creationTimestamp"))]


def _col(name, typ="string", priority=0, fmt=""):
    return {"name": name, "type": typ, "format": fmt, "description": name, "priority": priority}


TABLES = {
    "services": ([_col("Name", fmt="name"), _col("Type"), _col("Cluster-IP"), _col("External-IP"),
                  _col("Port(s)"), _col("Age"), _col("Selector", priority=1)], _svc_cells),
    "endpointslices": ([_col("Name", fmt="name"), _col("AddressType"), _col("Ports"),
                        _col("Endpoints"), _col("Age")], _slice_cells),
    "nodes": ([_col("Name", fmt="name"), _col("Status"), _col("Roles"), _col("Age"),
               _col("Version")], _node_cells),
    "namespaces": ([_col("Name", fmt="name"), _col("Status"), _col("Age")], _ns_cells),
    "servicecidrs": ([_col("Name", fmt="name"), _col("CIDRs"), _col("Age")], _cidr_cells),
}


def default_service_cidr(cidr):
    """The ServiceCIDR "kubernetes" that a real API server (1.33 and later)
    makes from its --service-cluster-ip-range."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
            "metadata": {"name": "kubernetes"}, "spec": {"cidrs": [str(ipaddress.ip_network(cidr))]},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "",
                                       "message": "Kubernetes Service CIDR is ready",
                                       "lastTransitionTime": now_rfc3339()}]}}


def table(kind, objs, list_meta, include_object="Metadata", table_version="v1"):
    cols, cells = TABLES[kind.name]
    rows = []
    for o in objs:
        row = {"cells": [o["metadata"].get("name", "")] + cells(o)}
        if include_object == "Object":
            row["object"] = o
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": o.get("metadata", {})}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/" + table_version,
            "metadata": list_meta, "columnDefinitions": cols, "rows": rows}

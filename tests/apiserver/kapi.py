#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kapi: a stand-in kube-apiserver for kproxy's tests.

Serves Services, EndpointSlices, Nodes and Namespaces over HTTPS with
bearer-token auth, list pagination, selectors, watches with bookmarks and
410s, and the writes kubectl makes, plus a plain-HTTP control listener for
fault injection.  See README.md next to this file.

    python3 tests/apiserver/kapi.py --listen 127.0.0.1:0 --tls-dir DIR \\
        --token TOKEN --state FILE --port-file F --control-listen 127.0.0.1:0

Principle of this file: argv, wiring and startup order only.  Everything a
client can observe is decided in the kapi_* modules beside it.  The port
file is written last, atomically, so a test that waits for it finds the
certificates, kubeconfig and both listeners ready.
"""
import sys

sys.dont_write_bytecode = True   # keep tests/apiserver/ free of __pycache__

import argparse  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402

import kapi_kinds as kinds  # noqa: E402
import kapi_tls  # noqa: E402
from kapi_api import ApiHandler, Server  # noqa: E402
from kapi_control import ControlHandler, Faults, RequestLog, Watches  # noqa: E402
from kapi_store import Store  # noqa: E402

try:
    import yaml

    _BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _Loader(_BASE):
        """SafeLoader without the timestamp resolver: creationTimestamp stays
        a string, as sigs.k8s.io/yaml leaves it."""

    _Loader.yaml_implicit_resolvers = {
        k: [r for r in v if r[0] != "tag:yaml.org,2002:timestamp"]
        for k, v in _BASE.yaml_implicit_resolvers.items()}
except ImportError:   # then --state takes JSON only
    yaml = None

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class App:
    """What every handler reaches through self.server.app."""

    def __init__(self, args, store, tls_ctx):
        self.store = store
        self.faults = Faults(store.cond, args.token)
        self.reqlog = RequestLog(store.cond)
        self.watches = Watches(store.cond)
        self.tls_ctx = tls_ctx
        self.verbose = args.verbose
        self.gzip = not args.no_gzip
        # Resources answered in JSON whatever is asked (as a CRD's are),
        # "all" for every one; the rest in protobuf to a client asking
        # for it first, as kube-apiserver answers.
        self.json_only = set(args.json_only.split(",")) if args.json_only else set()
        self.pb_cache = {}      # id(stored object) -> (object, its protobuf bytes)
        self.watch_timeout = args.watch_timeout
        self.bookmark_interval = args.bookmark_interval
        self.watch_cache = not args.no_watch_cache
        self.server_address = ""

    @staticmethod
    def log(msg):
        print("kapi: " + msg, file=sys.stderr, flush=True)


def parse_listen(text):
    """"HOST:PORT" or "[V6]:PORT" with a numeric host; returns (family, host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise argparse.ArgumentTypeError("expected HOST:PORT, got %r" % text)
    host = host.strip("[]")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        info = socket.getaddrinfo(host, int(port), 0, socket.SOCK_STREAM, 0,
                                  socket.AI_NUMERICHOST | socket.AI_NUMERICSERV)
    except (socket.gaierror, ValueError):
        raise argparse.ArgumentTypeError("not a numeric HOST:PORT: %r" % text)
    return info[0][0], host, int(port)


def _expand(doc):
    """A List (v1 List or a typed FooList) becomes its items."""
    if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") and \
            isinstance(doc.get("items"), list):
        item_kind = doc["kind"][:-4] if doc["kind"] != "List" else None
        for it in doc["items"]:
            if isinstance(it, dict) and item_kind and "kind" not in it:
                it = dict(it, kind=item_kind, apiVersion=doc.get("apiVersion"))
            yield from _expand(it)
    elif doc is not None:
        yield doc


def load_state(paths):
    docs = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            text = f.read()
        try:
            parsed = [json.loads(text)]
        except ValueError:
            if yaml is None:
                raise SystemExit("kapi: %s: not JSON, and PyYAML is not installed" % p)
            try:
                parsed = list(yaml.load_all(text, Loader=_Loader))
            except yaml.YAMLError as e:
                raise SystemExit("kapi: %s: %s" % (p, e))
        for d in parsed:
            docs.extend(_expand(d))
    return docs


def _exit_with_parent():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv=None):
    ap = argparse.ArgumentParser(description="stand-in kube-apiserver for kproxy tests")
    ap.add_argument("--listen", default="127.0.0.1:0", type=parse_listen,
                    help="HOST:PORT for the API (numeric host; default 127.0.0.1:0)")
    ap.add_argument("--tls-dir", help="serve HTTPS; CA, certificate and kubeconfig live here")
    ap.add_argument("--san", action="append", default=[],
                    help="extra subjectAltName (IP or DNS name) for the server certificate")
    ap.add_argument("--token", help="the bearer token required on API requests")
    ap.add_argument("--state", action="append", default=[],
                    help="JSON or YAML file of objects (Lists, multi-document) to start with")
    ap.add_argument("--port-file", help="written with the API port (and the control port)")
    ap.add_argument("--control-listen", type=parse_listen, help="HOST:PORT for the control API")
    ap.add_argument("--control-port-file", help="written with the control port alone")
    ap.add_argument("--kubeconfig",
                    help="where to write the kubeconfig (default TLS_DIR/kubeconfig)")
    ap.add_argument("--bookmark-interval", type=float, default=60.0,
                    help="seconds between BOOKMARK events (default 60)")
    ap.add_argument("--watch-timeout", type=float, default=1800.0,
                    help="close watches after this long, or after timeoutSeconds if shorter")
    ap.add_argument("--history-size", type=int, default=1000,
                    help="events kept for watch resume and past-RV lists (default 1000)")
    ap.add_argument("--initial-rv", type=int, default=1,
                    help="start the resourceVersion counter here (simulated restarts)")
    ap.add_argument("--service-cidr", default="10.96.0.0/12", help="for ClusterIP allocation")
    ap.add_argument("--disable-resource", action="append", default=[], metavar="RESOURCE",
                    help="serve no such resource (e.g. servicecidrs), as an older API server: 404")
    ap.add_argument("--raw", action="store_true",
                    help="store objects as given: no Service or EndpointSlice defaulting")
    ap.add_argument("--no-gzip", action="store_true", help="never gzip large responses")
    ap.add_argument("--json-only", default="", metavar="RESOURCE,...",
                    help="answer these resources (\"all\": every one) in JSON even to a client asking "
                         "for protobuf, as a CRD-backed resource is answered")
    ap.add_argument("--no-watch-cache", action="store_true",
                    help="serve resourceVersion=0 lists in pages, as a server without a watch cache")
    ap.add_argument("--exit-with-parent", action="store_true",
                    help="exit when the parent process dies (PR_SET_PDEATHSIG)")
    ap.add_argument("--verbose", "-v", action="store_true", help="log every request to stderr")
    args = ap.parse_args(argv)
    if args.exit_with_parent:
        _exit_with_parent()

    for r in args.disable_resource:
        kinds.disable(r)
    store = Store(args.history_size, args.initial_rv, args.service_cidr, not args.raw)
    with store.cond:
        for ns in DEFAULT_NAMESPACES:
            store.ensure_namespace(ns)
    for w in store.load(load_state(args.state), owned=True):
        App.log(w)
    if "servicecidrs" in kinds.BY_RESOURCE and not store.objs["servicecidrs"]:
        for w in store.load([kinds.default_service_cidr(args.service_cidr)], owned=True):
            App.log(w)
    # The loaded state lives as long as the server: out of the collector's
    # generations, so a full collection does not walk every object of a
    # large state (a pause of tens of ms at 20k services, in the middle of
    # whatever request is being answered).
    gc.collect()
    gc.freeze()

    family, host, port = args.listen
    tls_ctx = ca = None
    if args.tls_dir:
        crt, key, ca = kapi_tls.ensure_certs(args.tls_dir, [host] + args.san)
        tls_ctx = kapi_tls.server_context(crt, key)
    app = App(args, store, tls_ctx)
    api = Server((host, port), family, ApiHandler, app)
    api_port = api.server_address[1]
    url_host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    url_host = "[%s]" % url_host if ":" in url_host else url_host
    app.server_address = "%s:%d" % (url_host, api_port)
    ctrl = None
    if args.control_listen:
        cfam, chost, cport = args.control_listen
        ctrl = Server((chost, cport), cfam, ControlHandler, app)

    kubeconfig = args.kubeconfig or (os.path.join(args.tls_dir, "kubeconfig")
                                     if args.tls_dir else None)
    if kubeconfig:
        scheme = "https" if tls_ctx else "http"
        kapi_tls.write_kubeconfig(kubeconfig, "%s://%s" % (scheme, app.server_address), ca,
                                  args.token)
    if args.tls_dir and args.token is not None:
        kapi_tls.atomic_write(os.path.join(args.tls_dir, "token"), args.token)
    if args.control_port_file and ctrl:
        kapi_tls.atomic_write(args.control_port_file, "%d\n" % ctrl.server_address[1])
    if args.port_file:
        lines = [str(api_port)] + ([str(ctrl.server_address[1])] if ctrl else [])
        kapi_tls.atomic_write(args.port_file, "\n".join(lines) + "\n")

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if ctrl:
        threading.Thread(target=ctrl.serve_forever, args=(0.2,), daemon=True,
                         name="control").start()
    App.log("serving %s://%s (resourceVersion %d)%s" %
            ("https" if tls_ctx else "http", app.server_address, store.rv,
             ", control on port %d" % ctrl.server_address[1] if ctrl else ""))
    try:
        api.serve_forever(0.2)
    except (KeyboardInterrupt, SystemExit):
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())

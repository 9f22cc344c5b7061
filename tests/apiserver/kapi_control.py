# SPDX-License-Identifier: Apache-2.0
"""Fault injection, the request log, the open-watch registry, and the plain
HTTP control listener that drives them.

Principle of control: tests change the server's behaviour only through this
listener, and every change is visible to the API side through fields read
under the store's one Condition, so a fault wakes every watch at once and
takes effect on its next step, never halfway through writing an event.
"""
import collections
import email.utils
import json
import socket
import struct
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler


class Faults:
    def __init__(self, cond, token):
        self.cond = cond
        self.token = token
        self.error_count = 0
        self.error_until = 0.0          # time.monotonic() an error window ends
        self.error_code = 500
        self.error_match = None
        self.error_agent = None
        self.error_retry_after = None   # an int (seconds), a str (sent as is), or None
        self.error_retry_date_in = None  # seconds: an HTTP date that far ahead of the answer
        self.errors_served = 0
        self.last_error_at = None       # time.time() of the last injected error
        self.stall_until = 0.0
        self.drop_gen = 0
        self.drop_mode = "close"
        self.inject_gen = 0
        self.injected = collections.deque(maxlen=16)   # (gen, resource or None, line bytes, event)

    def take_error(self, path, agent=""):
        """Returns (code, retry_after header value or None) if this request
        is to fail, else None."""
        with self.cond:
            window = self.error_until > time.monotonic()
            if self.error_count <= 0 and not window:
                return None
            if self.error_match and self.error_match not in path:
                return None
            if self.error_agent and self.error_agent not in (agent or ""):
                return None
            if not window:
                self.error_count -= 1
            self.errors_served += 1
            self.last_error_at = time.time()
            self.cond.notify_all()
            ra = self.error_retry_after
            if self.error_retry_date_in is not None:
                ra = email.utils.formatdate(time.time() + self.error_retry_date_in, usegmt=True)
            return self.error_code, None if ra is None else str(ra)

    def injections_after(self, gen, resource, encode=None):
        """Lines injected after generation gen for this resource, or each
        event as encode(event) makes it (a protobuf watch's frames); caller
        holds the lock."""
        return [encode(ev) if encode else line for g, res, line, ev in self.injected
                if g > gen and res in (None, resource)]

    def stalled_for(self):
        """Seconds left of a stall; caller holds the lock."""
        return max(0.0, self.stall_until - time.monotonic())


class RequestLog:
    def __init__(self, cond, size=2000):
        self.cond = cond
        self.entries = collections.deque(maxlen=size)
        self.seq = 0

    def add(self, method, path, user_agent):
        with self.cond:
            self.seq += 1
            e = {"seq": self.seq, "time": round(time.time(), 3), "method": method, "path": path,
                 "status": None, "userAgent": user_agent or ""}
            self.entries.append(e)
            self.cond.notify_all()
            return e

    def set(self, entry, **fields):
        with self.cond:
            entry.update(fields)
            self.cond.notify_all()


class Watches:
    """Open watch streams, so faults can reach their sockets."""

    def __init__(self, cond):
        self.cond = cond
        self.open = {}
        self.next_id = 0

    def add(self, resource, path, sock):
        with self.cond:
            self.next_id += 1
            self.open[self.next_id] = {"resource": resource, "path": path, "sock": sock}
            self.cond.notify_all()
            return self.next_id

    def remove(self, wid):
        with self.cond:
            self.open.pop(wid, None)
            self.cond.notify_all()

    def count(self, resource=None):
        return sum(1 for w in self.open.values() if resource in (None, w["resource"]))


def raw_shutdown(sock):
    # socket.socket.shutdown, not SSLSocket.shutdown: the latter drops the TLS
    # state, and the watch thread could then write plaintext on the connection.
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


class ControlHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kapi-control"
    sys_version = ""

    def address_string(self):
        return self.client_address[0]

    def log_message(self, fmt, *args):
        if self.server.app.verbose:
            self.server.app.log("control: " + fmt % args)

    def _reply(self, code, doc):
        body = (json.dumps(doc, indent=1) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw.strip():
            return {}
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise ValueError("the body must be a JSON object")
        return doc

    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def _dispatch(self):
        app = self.server.app
        u = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query, keep_blank_values=True).items()}
        try:
            body = self._body() if self.command == "POST" else {}
        except ValueError as e:
            return self._reply(400, {"error": str(e)})
        route = (self.command, u.path.rstrip("/") or "/")
        handler = ROUTES.get(route)
        if handler is None:
            return self._reply(404, {"error": "no such control endpoint", "endpoints":
                                     sorted("%s %s" % r for r in ROUTES)})
        try:
            code, doc = handler(app, body, q)
        except (ValueError, TypeError, KeyError) as e:
            code, doc = 400, {"error": "%s: %s" % (type(e).__name__, e)}
        self._reply(code, doc)


def _state(app, body, q):
    s = app.store
    with s.cond:
        return 200, {"resourceVersion": str(s.rv), "oldestResourceVersion": str(s.oldest),
                     "historyLength": len(s.history), "counts": s.counts(),
                     "watches": app.watches.count(),
                     "watchesByResource": {k: app.watches.count(k) for k in s.objs},
                     "faults": {"errorCount": app.faults.error_count,
                                "errorCode": app.faults.error_code,
                                "errorWindowRemaining": round(max(0.0, app.faults.error_until -
                                                                  time.monotonic()), 3),
                                "errorsServed": app.faults.errors_served,
                                "lastErrorAt": app.faults.last_error_at,
                                "stallRemaining": round(app.faults.stalled_for(), 3)},
                     "requests": app.reqlog.seq}


def _requests(app, body, q):
    since = int(q.get("since", 0))
    with app.store.cond:
        return 200, {"seq": app.reqlog.seq,
                     "requests": [dict(e) for e in app.reqlog.entries if e["seq"] > since]}


def _requests_clear(app, body, q):
    with app.store.cond:
        app.reqlog.entries.clear()
        return 200, {"seq": app.reqlog.seq}


def _dump(app, body, q):
    res = q.get("resource", "services")
    with app.store.cond:
        if res not in app.store.objs:
            return 404, {"error": "no resource %s" % res}
        items = [o for _, o in sorted(app.store.objs[res].items())]
        return 200, {"kind": "List", "apiVersion": "v1",
                     "metadata": {"resourceVersion": str(app.store.rv)}, "items": items}


def _wait(app, body, q):
    """Blocks until the condition holds: watches=N [resource=R] open watches,
    and/or request=SUBSTRING logged after since=SEQ [status=CODE]."""
    timeout = float(q.get("timeout", 10))
    need = int(q.get("watches", 0))
    res = q.get("resource")
    sub = q.get("request")
    since = int(q.get("since", 0))
    status = int(q["status"]) if "status" in q else None

    def done():
        if app.watches.count(res) < need:
            return False
        if sub is None:
            return True
        return any(e["seq"] > since and sub in e["path"] and
                   (status is None or e["status"] == status) for e in app.reqlog.entries)

    with app.store.cond:
        ok = app.store.cond.wait_for(done, timeout)
        return (200 if ok else 408), {"ok": ok, "watches": app.watches.count(res),
                                      "seq": app.reqlog.seq}


def _drop(app, body, q):
    mode = body.get("mode", "close")
    if mode not in ("close", "rst", "partial"):
        raise ValueError("mode must be close, rst or partial")
    with app.store.cond:
        app.faults.drop_gen += 1
        app.faults.drop_mode = mode
        n = len(app.watches.open)
        for w in app.watches.open.values():
            if mode == "rst":
                try:
                    w["sock"].setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                         struct.pack("ii", 1, 0))
                except OSError:
                    pass
            elif mode == "close":
                raw_shutdown(w["sock"])
        app.store.cond.notify_all()
    return 200, {"dropped": n, "mode": mode}


def _error(app, body, q):
    code = int(body.get("code", 500))
    if not 400 <= code <= 599:
        raise ValueError("code must be 4xx or 5xx")
    ra = body.get("retryAfter", 1 if code == 429 else None)
    if ra is not None and not isinstance(ra, (int, str)):
        raise ValueError("retryAfter must be seconds or a string")
    date_in = body.get("retryAfterDateIn")
    with app.store.cond:
        seconds = float(body.get("seconds", 0))
        app.faults.error_until = time.monotonic() + seconds if seconds > 0 else 0.0
        app.faults.error_count = 0 if seconds > 0 else int(body.get("count", 1))
        app.faults.error_code = code
        app.faults.error_match = body.get("match")
        app.faults.error_agent = body.get("agent")
        app.faults.error_retry_after = ra
        app.faults.error_retry_date_in = None if date_in is None else float(date_in)
    return 200, {"count": app.faults.error_count, "seconds": seconds, "code": code}


def _inject(app, body, q):
    """Sends one line to every open watch (of body's resource, or all): an
    event as given, e.g. a BOOKMARK with a resourceVersion no server would
    send. padTo: an annotation makes the line that many bytes long, its
    newline included."""
    event = body["event"]
    res = body.get("resource")
    line = json.dumps(event, separators=(",", ":")).encode()
    pad = int(body.get("padTo", 0)) - 1 - len(line) - len(',"annotations":{"kapi.pad":""}')
    if pad > 0:
        md = event.setdefault("object", {}).setdefault("metadata", {})
        md.setdefault("annotations", {})["kapi.pad"] = "x" * pad
        line = json.dumps(event, separators=(",", ":")).encode()
    with app.store.cond:
        app.faults.inject_gen += 1
        app.faults.injected.append((app.faults.inject_gen, res, line + b"\n", event))
        n = app.watches.count(res)
        app.store.cond.notify_all()
    return 200, {"watches": n, "bytes": len(line) + 1}


def _stall(app, body, q):
    s = float(body.get("seconds", 0))
    with app.store.cond:
        app.faults.stall_until = time.monotonic() + s
        app.store.cond.notify_all()
    return 200, {"seconds": s}


def _compact(app, body, q):
    app.store.compact()
    with app.store.cond:
        return 200, {"resourceVersion": str(app.store.rv)}


def _token(app, body, q):
    with app.store.cond:
        app.faults.token = str(body["token"])
    return 200, {}


def _clear(app, body, q):
    with app.store.cond:
        app.faults.error_count = 0
        app.faults.error_until = 0.0
        app.faults.error_match = None
        app.faults.stall_until = 0.0
        app.store.cond.notify_all()
    return 200, {}


ROUTES = {
    ("GET", "/state"): _state,
    ("GET", "/requests"): _requests,
    ("POST", "/requests/clear"): _requests_clear,
    ("GET", "/dump"): _dump,
    ("GET", "/wait"): _wait,
    ("POST", "/fault/drop-watches"): _drop,
    ("POST", "/fault/error"): _error,
    ("POST", "/fault/inject"): _inject,
    ("POST", "/fault/stall"): _stall,
    ("POST", "/fault/compact"): _compact,
    ("POST", "/fault/token"): _token,
    ("POST", "/fault/clear"): _clear,
}

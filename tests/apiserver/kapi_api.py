# SPDX-License-Identifier: Apache-2.0
"""The Kubernetes API over HTTP/1.1: routing, discovery, list, get, writes
and watch streams.

Principle of the API handler: one thread per connection, and a request is
answered completely from one consistent view of the store: a list from a
snapshot at one resourceVersion, a watch from a cursor (the last
resourceVersion it has passed on).  Nothing is written to the socket with
the store's lock held, so a slow client holds up only its own thread.
Errors before the first byte of a response become Status objects; once a
watch is streaming, the only ways out are an ERROR event, the terminating
chunk, or a dropped connection.
"""
import base64
import bisect
import gzip
import hmac
import itertools
import json
import socket
import socketserver
import ssl
import struct
import sys
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import kapi_kinds as kinds
import kapi_patch as patches
import kapi_proto as proto
from kapi_control import raw_shutdown
from kapi_select import Selector, SelectorError
from kapi_store import ApiError

MAX_BODY = 3 * 1024 * 1024   # the real server's limit on a request body
GZIP_MIN = 128 * 1024        # the real server compresses responses from this size
QUIET = (ConnectionError, ssl.SSLError, socket.timeout, TimeoutError, EOFError)


def _truthy(v):
    return v is not None and v.lower() in ("1", "true", "yes")


def _encode(doc):
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def _chunk(data):
    return b"%x\r\n%s\r\n" % (len(data), data)


def _encode_continue(rv, key):
    doc = {"v": "meta.k8s.io/v1", "rv": rv, "start": list(key)}
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _decode_continue(tok):
    try:
        doc = json.loads(base64.urlsafe_b64decode(tok + "=" * (-len(tok) % 4)))
        rv, start = int(doc["rv"]), tuple(doc["start"])
        if doc.get("v") != "meta.k8s.io/v1" or len(start) != 2:
            raise ValueError(tok)
        return rv, start
    except (ValueError, KeyError, TypeError):
        raise ApiError(400, "continue key is not valid: incorrect encoded start resourceVersion "
                            "(version meta.k8s.io/v1)")


def _parse_rv(text, what="resourceVersion"):
    try:
        rv = int(text)
        if rv < 0:
            raise ValueError(text)
        return rv
    except (TypeError, ValueError):
        raise ApiError(400, "%s: Invalid value: %r: must be a non-negative integer" % (what, text))


def transform(ev, kind, sel):
    """What a watcher with selector sel sees of event ev: (type, object,
    cacheable) or None.  Like the watch cache, a change that makes an object
    stop matching is a DELETED carrying the previous content at the event's
    resourceVersion, and one that makes it start matching is an ADDED."""
    if ev.kind is not kind:
        return None
    if ev.type == "ADDED":
        return ("ADDED", ev.obj, True) if sel.matches(ev.obj) else None
    if ev.type == "DELETED":
        return ("DELETED", ev.obj, True) if sel.matches(ev.old) else None
    new_ok, old_ok = sel.matches(ev.obj), sel.matches(ev.old)
    if new_ok:
        return ("MODIFIED" if old_ok else "ADDED", ev.obj, True)
    if old_ok:
        gone = dict(ev.old)
        gone["metadata"] = dict(ev.old["metadata"], resourceVersion=str(ev.rv))
        return "DELETED", gone, False
    return None


class ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kapi"
    sys_version = ""
    disable_nagle_algorithm = True

    # --- connection plumbing ---------------------------------------------

    def setup(self):
        ctx = self.server.app.tls_ctx
        if ctx is not None:
            # The handshake runs here, in the connection's own thread, so a
            # slow or broken client never holds up accept().
            self.request.settimeout(10)
            self.request = ctx.wrap_socket(self.request, server_side=True)
            self.request.settimeout(None)
        super().setup()

    def finish(self):
        try:
            super().finish()
        except OSError:
            pass
        finally:
            if self.server.app.tls_ctx is not None:
                try:
                    self.request.close()
                except OSError:
                    pass

    def address_string(self):
        return self.client_address[0]  # never a reverse lookup

    def log_message(self, fmt, *args):
        if self.server.app.verbose:
            self.server.app.log("api: %s %s" % (self.address_string(), fmt % args))

    def send_response(self, code, message=None):
        super().send_response(code, message)
        self._sent = True
        entry = getattr(self, "_entry", None)
        if entry is not None:
            self.server.app.reqlog.set(entry, status=code)

    def do_GET(self):
        self._dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    # --- responses ---------------------------------------------------------

    def _reply(self, code, body, ctype="application/json", headers=None):
        enc = self.headers.get("Accept-Encoding", "")
        if self.server.app.gzip and len(body) >= GZIP_MIN and "gzip" in enc:
            body = gzip.compress(body, 1)
            headers = dict(headers or {}, **{"Content-Encoding": "gzip"})
            self.server.app.reqlog.set(self._entry, gzip=True)
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "no-cache, private")
        self.server.app.reqlog.set(self._entry, contentType=ctype, bytes=len(body))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, code, doc, headers=None):
        self._reply(code, _encode(doc), headers=headers)

    # --- request parsing ---------------------------------------------------

    def _read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts, total = [], 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if total > MAX_BODY:
                    self.close_connection = True
                    raise ApiError(413, "Request entity too large: limit is 3145728")
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(parts)
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self.close_connection = True
            raise ApiError(413, "Request entity too large: limit is 3145728")
        return self.rfile.read(n) if n else b""

    def _json_body(self, raw, ctypes=("application/json",)):
        ctype = self.headers.get("Content-Type", "application/json").split(";")[0].strip().lower()
        if ctype not in ctypes and ctype not in ("", "*/*"):
            raise ApiError(415, 'the body of the request was in an unknown format - accepted '
                                'media types include: %s' % ", ".join(ctypes))
        try:
            return json.loads(raw) if raw.strip() else None
        except ValueError as e:
            raise ApiError(400, "the body of the request could not be decoded as JSON: %s" % e)

    def _accepts_proto(self):
        """Whether the first media type of Accept the server can answer is
        protobuf (a Status can always be)."""
        for rng in (self.headers.get("Accept") or "").split(","):
            mtype = rng.split(";")[0].strip().lower()
            if mtype == proto.MEDIA and ";" not in rng:
                return True
            if mtype in ("application/json", "application/*", "*/*"):
                return False
        return False

    def _negotiate(self, kind=None):
        """None for plain JSON or protobuf (self._proto says which),
        "v1"/"v1beta1" for a Table; raises 406. Protobuf when it comes
        first in Accept and kind has a protobuf form here."""
        accept = self.headers.get("Accept")
        if not accept:
            return None
        app = self.server.app
        for rng in accept.split(","):
            fields = [f.strip() for f in rng.split(";")]
            mtype = fields[0].lower()
            params = dict(f.split("=", 1) for f in fields[1:] if "=" in f)
            if mtype == proto.MEDIA and not params and kind is not None and \
                    (kind.api_version, kind.kind) in proto.KINDS and \
                    not app.json_only & {"all", kind.name}:
                self._proto = True
                return None
            if mtype not in ("application/json", "application/*", "*/*"):
                continue
            if "as" not in params:
                return None
            if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and \
                    params.get("v") in ("v1", "v1beta1"):
                return params["v"]
        raise ApiError(406, "only the following media types are accepted: application/json, "
                            "application/json;as=Table;v=v1;g=meta.k8s.io, " + proto.MEDIA)

    @staticmethod
    def _selector(q, ns, name=None):
        try:
            return Selector(q.get("labelSelector"), q.get("fieldSelector"), ns, name)
        except SelectorError as e:
            raise ApiError(400, "unable to parse requirement: %s" % e)

    # --- dispatch -------------------------------------------------------------

    def _dispatch(self):
        app = self.server.app
        self._sent = False
        self._proto = False
        self._entry = app.reqlog.add(self.command, self.path, self.headers.get("User-Agent"))
        app.reqlog.set(self._entry, accept=self.headers.get("Accept", ""))
        try:
            body = self._read_body()
            u = urllib.parse.urlsplit(self.path)
            q = {k: v[-1] for k, v in urllib.parse.parse_qs(u.query,
                                                            keep_blank_values=True).items()}
            if u.path.split("/")[1:2] in (["healthz"], ["livez"], ["readyz"]):
                return self._reply(200, b"ok", "text/plain; charset=utf-8")
            token = app.faults.token
            auth = self.headers.get("Authorization", "")
            if token is not None and not hmac.compare_digest(auth.encode(),
                                                             ("Bearer " + token).encode()):
                raise ApiError(401, "Unauthorized")
            fault = app.faults.take_error(self.path, self.headers.get("User-Agent", ""))
            if fault:
                code, retry = fault
                app.reqlog.set(self._entry, fault=True, retryAfter=retry)
                raise ApiError(code, "injected fault (kapi /fault/error)",
                               headers={"Retry-After": retry} if retry is not None else None)
            self._route(u.path, q, body)
        except ApiError as e:
            if not self._sent and (self._proto or self._accepts_proto()):
                self._reply(e.code, proto.encode_status(e.status()), proto.MEDIA, e.headers)
            elif not self._sent:
                self._json(e.code, e.status(), e.headers)
            else:
                self.close_connection = True
        except QUIET:
            self.close_connection = True
        except OSError as e:
            if e.errno not in (32, 104, 107, 9):   # EPIPE ECONNRESET ENOTCONN EBADF
                app.log("api: %s %s: %s" % (self.command, self.path, e))
            self.close_connection = True
        except Exception:
            app.log("api: %s %s failed:\n%s" % (self.command, self.path, traceback.format_exc()))
            if not self._sent:
                self._json(500, ApiError(500, "internal error in kapi").status())
            self.close_connection = True

    def _route(self, path, q, body):
        app = self.server.app
        segs = [s for s in path.split("/") if s]
        if not segs:
            return self._json(200, {"paths": ["/api", "/api/v1", "/apis", "/healthz",
                                              "/version"] +
                                    ["/apis/%s/%s" % gv for gv in kinds.GROUP_VERSIONS if gv[0]]})
        if segs == ["version"]:
            return self._json(200, kinds.VERSION)
        if segs[0] == "api" and len(segs) == 1:
            return self._json(200, kinds.api_versions(app.server_address))
        if segs[0] == "apis" and len(segs) <= 2:
            doc = kinds.api_group_list() if len(segs) == 1 else kinds.api_group(segs[1])
            if doc is None:
                raise ApiError(404, "the server could not find the requested resource")
            return self._json(200, doc)
        if segs[0] == "api":
            group, version, rest = "", segs[1], segs[2:]
        elif segs[0] == "apis":
            group, version, rest = segs[1], segs[2], segs[3:]
        else:   # /openapi/v2, /openapi/v3, /metrics...: kubectl copes with 404
            raise ApiError(404, "the server could not find the requested resource")
        if not rest:
            doc = kinds.api_resource_list(group, version)
            if doc is None:
                raise ApiError(404, "the server could not find the requested resource")
            return self._json(200, doc)
        watch = rest[0] == "watch"
        if watch:
            rest = rest[1:]
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        kind = kinds.lookup(group, version, rest[0]) if rest else None
        if kind is None or len(rest) > 2 or (ns is not None and not kind.namespaced):
            raise ApiError(404, "the server could not find the requested resource")
        name = rest[1] if len(rest) == 2 else None
        self._verb(kind, ns, name, q, body, watch or _truthy(q.get("watch")))

    def _verb(self, kind, ns, name, q, raw, watch):
        store = self.server.app.store
        dry = q.get("dryRun") == "All"
        m = self.command
        if m == "GET":
            table = self._negotiate(kind)
            if watch:
                return self._watch(kind, ns, name, q, table)
            if name is None:
                return self._list(kind, ns, q, table)
            obj = store.get(kind, ns, name)
            if table:
                meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
                return self._json(200, kinds.table(kind, [obj], meta, q.get("includeObject",
                                                                            "Metadata"), table))
            if self._proto:
                return self._reply(200, proto.encode_object(obj, kind.api_version, kind.kind), proto.MEDIA)
            return self._json(200, obj)
        if m == "POST":
            if name is not None:
                raise ApiError(405, "the server does not allow this method on the requested "
                                    "resource")
            return self._json(201, store.create(kind, ns, self._json_body(raw), dry))
        if m == "DELETE":
            opts = self._json_body(raw) or {}
            if not isinstance(opts, dict):
                raise ApiError(400, "DeleteOptions must be a JSON object")
            if name is None:
                return self._delete_collection(kind, ns, q, opts, dry)
            return self._json(200, store.delete(kind, ns, name, opts, dry))
        if name is None:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        if m == "PUT":
            return self._json(200, store.replace(kind, ns, name, self._json_body(raw), dry))
        if m == "PATCH":
            ctype = self.headers.get("Content-Type", "").split(";")[0].strip().lower()
            fn = patches.APPLIERS.get(ctype)
            if fn is None:
                raise ApiError(415, "the body of the request was in an unknown format - accepted "
                                    "media types include: %s" % ", ".join(patches.APPLIERS))
            doc = self._json_body(raw, (ctype,))

            def apply(cur):
                try:
                    return fn(cur, doc)
                except patches.PatchError as e:
                    raise ApiError(e.code, str(e))
            return self._json(200, store.patch(kind, ns, name, apply, dry))
        raise ApiError(405, "the server does not allow this method on the requested resource")

    # --- list -----------------------------------------------------------------

    def _list(self, kind, ns, q, table):
        store = self.server.app.store
        sel = self._selector(q, ns)
        limit = _parse_rv(q["limit"], "limit") if q.get("limit") else 0
        rv_s, match, cont = q.get("resourceVersion", ""), q.get("resourceVersionMatch", ""), \
            q.get("continue", "")
        if match not in ("", "Exact", "NotOlderThan"):
            raise ApiError(422, "resourceVersionMatch: Unsupported value: %r" % match)
        if match and not rv_s:
            raise ApiError(422, "resourceVersionMatch: Forbidden: resourceVersionMatch is "
                                "forbidden unless resourceVersion is provided")
        start = None
        if cont:
            if rv_s or match:
                raise ApiError(400, "specifying resource version is not allowed when using "
                                    "continue")
            snap_rv, start = _decode_continue(cont)
        elif rv_s not in ("", "0"):
            want = _parse_rv(rv_s)
            if want > store.rv:
                store.wait_for_rv(want)
            snap_rv = want if match == "Exact" else None
        else:
            if match == "Exact":
                raise ApiError(422, "resourceVersionMatch: Forbidden: resourceVersionMatch "
                                    "\"exact\" is forbidden for resourceVersion \"0\"")
            snap_rv = None
            # "0" is served from the watch cache, which ignores limit: the
            # whole list in one answer (client-go's reflector counts on it).
            # A server without a watch cache reads etcd, in pages.
            if rv_s == "0" and self.server.app.watch_cache:
                limit = 0
        with store.cond:
            if snap_rv is None:
                snap_rv = store.rv
            try:
                snap, keys = store.sorted_snapshot(kind, snap_rv)
            except ApiError as e:
                if cont and e.code in (410, 504):
                    raise ApiError(410, "The provided continue parameter is too old to display a "
                                        "consistent list result. You can start a new list without "
                                        "the continue parameter, or use the continue token in "
                                        "this response to retrieve the remainder of the results. "
                                        "Continuing with the provided token results in an "
                                        "inconsistent list - objects that were created, modified, "
                                        "or deleted between the time the first chunk was returned "
                                        "and now may show up in the list.", "Expired",
                                   list_meta={"continue": _encode_continue(store.rv, start)})
                raise
        items, more, last = [], False, None
        at = bisect.bisect_right(keys, start) if start is not None else 0
        for key in itertools.islice(keys, at, None):
            obj = snap[key]
            if not sel.matches(obj):
                continue
            if limit and len(items) == limit:
                more = True
                break
            items.append(obj)
            last = key
        meta = {"resourceVersion": str(snap_rv)}
        if more:
            meta["continue"] = _encode_continue(snap_rv, last)
            if sel.empty:
                after = bisect.bisect_right(keys, last)
                # A namespace's keys are contiguous and end before (ns + "\0",).
                end = len(keys) if ns is None else bisect.bisect_left(keys, (ns + "\0",))
                meta["remainingItemCount"] = end - after
        if table:
            return self._json(200, kinds.table(kind, items, meta, q.get("includeObject",
                                                                        "Metadata"), table))
        if self._proto:
            cache = self.server.app.pb_cache
            if len(cache) > 2 * sum(len(o) for o in store.objs.values()) + 1000:
                cache.clear()       # the objects of past versions, kept alive by it
            return self._reply(200, proto.encode_list(kind.api_version, kind.kind, meta, items, cache),
                               proto.MEDIA)
        self._json(200, {"kind": kind.list_kind, "apiVersion": kind.api_version,
                         "metadata": meta, "items": items})

    def _delete_collection(self, kind, ns, q, opts, dry):
        store = self.server.app.store
        sel = self._selector(q, ns)
        with store.cond:
            victims = [o for _, o in sorted(store.objs[kind.name].items()) if sel.matches(o)]
            gone = [store.delete(kind, o["metadata"].get("namespace"), o["metadata"]["name"],
                                 None, dry) for o in victims]
            rv = store.rv
        self._json(200, {"kind": kind.list_kind, "apiVersion": kind.api_version,
                         "metadata": {"resourceVersion": str(rv)}, "items": gone})

    # --- watch ------------------------------------------------------------------

    def _line(self, typ, obj, kind, table):
        if self._proto:
            return proto.watch_frame(typ, obj, kind.api_version, kind.kind)
        if table and typ in ("ADDED", "MODIFIED", "DELETED"):
            obj = kinds.table(kind, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]},
                              "Metadata", table)
        return _encode({"type": typ, "object": obj})

    def _event_line(self, ev, kind, sel, table):
        t = transform(ev, kind, sel)
        if t is None:
            return None
        typ, obj, cacheable = t
        if not cacheable:
            return self._line(typ, obj, kind, table)
        key = (typ, table, self._proto)
        line = ev.cache.get(key)
        if line is None:
            line = ev.cache[key] = self._line(typ, obj, kind, table)
        return line

    def _bookmark(self, kind, rv, initial_end=False):
        md = {"resourceVersion": str(rv)}
        if initial_end:
            md["annotations"] = {"k8s.io/initial-events-end": "true"}
        return self._line("BOOKMARK", {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": md},
                          kind, None)

    def _error_event(self, e):
        if self._proto:
            return proto.watch_frame("ERROR", e.status(), "v1", "Status")
        return _encode({"type": "ERROR", "object": e.status()})

    def _injected(self, kind):
        """An injected event as this watch's format writes it."""
        return lambda ev: proto.watch_frame(ev.get("type", ""), ev.get("object") or {}, kind.api_version,
                                            kind.kind)

    def _watch(self, kind, ns, name, q, table):
        app = self.server.app
        store, faults = app.store, app.faults
        sel = self._selector(q, ns, name)
        bookmarks = _truthy(q.get("allowWatchBookmarks"))
        timeout = app.watch_timeout
        if q.get("timeoutSeconds"):
            t = _parse_rv(q["timeoutSeconds"], "timeoutSeconds")
            timeout = min(t, timeout) if timeout else t
        rv_s = q.get("resourceVersion", "")
        initial_events = _truthy(q.get("sendInitialEvents"))
        if initial_events and q.get("resourceVersionMatch") != "NotOlderThan":
            raise ApiError(422, "sendInitialEvents: Forbidden: sendInitialEvents is forbidden "
                                "unless resourceVersionMatch=NotOlderThan")
        try:
            want = _parse_rv(rv_s) if rv_s not in ("", "0") else None
        except ApiError:
            # What kube-apiserver's watch answers a version it cannot parse
            # (storage's InvalidError through InterpretWatchError).
            raise ApiError(422, '%s "" is invalid: resourceVersion: Invalid value: "%s": '
                                'strconv.ParseUint: parsing "%s": invalid syntax' %
                           (kind.kind, rv_s, rv_s), "Invalid",
                           details={"kind": kind.name, "causes": [{
                               "reason": "FieldValueInvalid", "field": "resourceVersion",
                               "message": "Invalid value: \"%s\"" % rv_s}]})
        if want is not None and want > store.rv:
            store.wait_for_rv(want)
        out, evs, failed, initial = [], [], None, None
        with store.cond:
            if initial_events or want is None:
                # Unset or "0": the current state as ADDED events, then changes.
                initial = sorted(store.objs[kind.name].items())
                cursor = store.rv
            else:
                try:
                    evs = store.events_after(want)
                    cursor = store.rv
                except ApiError as e:
                    failed, cursor = e, want
            wid = app.watches.add(kind.name, self.path, self.connection)
            gen = faults.drop_gen
            injected = faults.inject_gen
        end, sent = "client-gone", 0
        try:
            if initial is not None:   # encoded outside the lock; stored objects never change
                out = [self._line("ADDED", o, kind, table) for _, o in initial if sel.matches(o)]
                if initial_events and bookmarks:
                    out.append(self._bookmark(kind, cursor, True))
            with store.cond:   # a stalled server does not even answer
                while faults.stalled_for() > 0:
                    store.cond.wait(faults.stalled_for())
            self.send_response(200)
            self.send_header("Content-Type", proto.MEDIA + ";stream=watch" if self._proto else "application/json")
            self.send_header("Cache-Control", "no-cache, private")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if failed is not None:   # the real server answers 200, then one ERROR event
                out.append(self._error_event(failed))
            now = time.monotonic()
            deadline = now + timeout if timeout else None
            next_bm = now + app.bookmark_interval if bookmarks else None
            done = failed is not None
            while True:
                out.extend(l for l in (self._event_line(ev, kind, sel, table) for ev in evs) if l)
                evs = []
                if out and faults.stall_until <= time.monotonic():
                    self.wfile.write(b"".join(_chunk(l) for l in out))
                    sent += sum(len(l) for l in out)
                    out = []
                if done and not out:
                    end = "expired" if failed is not None else "timeout"
                    self.wfile.write(b"0\r\n\r\n")
                    return
                with store.cond:
                    while True:
                        if faults.drop_gen != gen:
                            end = "dropped"
                            return self._abort(faults.drop_mode, kind)
                        if faults.inject_gen != injected:
                            out.extend(faults.injections_after(injected, kind.name,
                                                               self._injected(kind) if self._proto else None))
                            injected = faults.inject_gen
                            if out:
                                break
                        stall = faults.stalled_for()
                        if stall > 0:
                            store.cond.wait(stall)
                            continue
                        if out:
                            break
                        now = time.monotonic()
                        if deadline is not None and now >= deadline:
                            done = True
                            break
                        if store.rv > cursor:
                            try:
                                evs = store.events_after(cursor)
                            except ApiError as e:   # fell behind the history
                                out.append(self._error_event(e))
                                failed = e
                                done = True
                            cursor = store.rv
                            break
                        if next_bm is not None and now >= next_bm:
                            out.append(self._bookmark(kind, cursor))
                            next_bm = now + app.bookmark_interval
                            break
                        waits = [t - now for t in (deadline, next_bm) if t is not None]
                        store.cond.wait(min(waits) if waits else None)
        except QUIET + (OSError,):
            self.close_connection = True
        finally:
            app.watches.remove(wid)
            app.reqlog.set(self._entry, watchEnd=end, bytes=sent,
                           contentType=proto.MEDIA + ";stream=watch" if self._proto else "application/json")

    def _abort(self, mode, kind):
        """Ends a watch the way a dying server or a broken network would: no
        terminating chunk; with "partial", half an event first."""
        self.close_connection = True
        if mode == "partial":
            try:
                half = proto.watch_frame("MODIFIED", {"metadata": {"name": "x"}}, kind.api_version,
                                         kind.kind)[:20] if self._proto else b'{"type":"MODIFIED","object":{"kind":"Se'
                self.wfile.write(b"%x\r\n" % 200 + half)
            except OSError:
                pass
        if mode != "rst":
            raw_shutdown(self.connection)
            return
        # Closing with SO_LINGER 0 sends RST.  It is done here, before the
        # socketserver's own shutdown(SHUT_WR) would send a FIN first.
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.rfile.close()
            self.connection.close()
        except OSError:
            pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, family, handler, app):
        self.address_family = family
        self.app = app
        super().__init__(addr, handler)

    def server_bind(self):
        # HTTPServer.server_bind would call socket.getfqdn(): a reverse lookup.
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = host, port

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, QUIET) or (isinstance(exc, OSError) and
                                      exc.errno in (32, 104, 107, 9)):
            return
        self.app.log("connection from %s: %s" % (client_address[0], traceback.format_exc()))

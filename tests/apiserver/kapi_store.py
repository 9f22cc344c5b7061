# SPDX-License-Identifier: Apache-2.0
"""The object store: objects, one resourceVersion counter, bounded history.

Principle of the store: it behaves like etcd behind the watch cache.  Every
write bumps one global counter and appends exactly one event, so the events
held are exactly those with resourceVersion in (oldest, rv], and a watcher's
position is just the last resourceVersion it has seen.  Stored objects are
never changed in place (a write stores a new dict), so events and snapshots
can share them and be serialised outside the lock.  A list at an older
resourceVersion is rebuilt by undoing the newer events; once an event has
left the history, anything older is "Expired" (410), as after a compaction.

All methods that touch state run under self.cond, one Condition that watch
streams, fault injection and the request log also wait on.
"""
import collections
import copy
import itertools
import secrets
import threading
import uuid

import kapi_kinds as kinds

REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           405: "MethodNotAllowed", 406: "NotAcceptable", 409: "Conflict", 410: "Expired",
           413: "RequestEntityTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
           504: "Timeout"}


class ApiError(Exception):
    """A failure answered with a Status object."""

    def __init__(self, code, message, reason=None, details=None, headers=None, list_meta=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}
        self.list_meta = list_meta or {}

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": self.list_meta,
              "status": "Failure", "message": self.message, "reason": self.reason,
              "code": self.code}
        if self.details:
            st["details"] = self.details
        return st


def not_found(kind, name):
    return ApiError(404, '%s "%s" not found' % (kind.name, name),
                    details={"name": name, "group": kind.group, "kind": kind.name})


def expired(rv, oldest):
    return ApiError(410, "too old resource version: %d (%d)" % (rv, oldest + 1), "Expired")


def too_large(rv, current):
    return ApiError(504, "Too large resource version: %d, current: %d" % (rv, current), "Timeout",
                    details={"causes": [{"reason": "ResourceVersionTooLarge",
                                         "message": "Too large resource version"}],
                             "retryAfterSeconds": 1},
                    headers={"Retry-After": "1"})


def conflict(kind, name, why="the object has been modified; please apply your changes to "
                              "the latest version and try again"):
    return ApiError(409, 'Operation cannot be fulfilled on %s "%s": %s' % (kind.name, name, why),
                    details={"name": name, "group": kind.group, "kind": kind.name})


def invalid(kind, name, field, message):
    return ApiError(422, '%s "%s" is invalid: %s: %s' % (kind.kind, name, field, message),
                    details={"name": name, "group": kind.group, "kind": kind.kind,
                             "causes": [{"reason": "FieldValueInvalid", "message": message,
                                         "field": field}]})


def obj_key(obj):
    md = obj["metadata"]
    return md.get("namespace", ""), md["name"]


_META_ORDER = ("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "labels", "annotations")


def _stamp(kind, obj):
    """Returns obj with kind and apiVersion set, keys in the order the real
    server prints them (resourceVersion is given a place to be filled in)."""
    md = obj.get("metadata", {})
    meta = {k: md.get(k, "") for k in _META_ORDER if k in md or k == "resourceVersion"}
    meta.update((k, v) for k, v in md.items() if k not in meta)
    out = {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}
    for k, v in obj.items():
        if k not in out:
            out[k] = v
    return out


def _content(obj):
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _check_meta(kind, md):
    if not isinstance(md, dict):
        raise ApiError(400, "metadata must be an object")
    for f in ("labels", "annotations"):
        m = md.get(f)
        if m is None:
            continue
        if not isinstance(m, dict) or not all(isinstance(v, str) for v in m.values()):
            raise ApiError(400, "%s.metadata.%s: must be a map of strings" % (kind.kind, f))


class Event:
    __slots__ = ("rv", "kind", "type", "obj", "old", "cache")

    def __init__(self, rv, kind, typ, obj, old):
        self.rv, self.kind, self.type, self.obj, self.old = rv, kind, typ, obj, old
        self.cache = {}


class Store:
    def __init__(self, history_size=1000, initial_rv=1, service_cidr="10.96.0.0/12",
                 defaults=True):
        self.cond = threading.Condition()
        self.rv = initial_rv
        self.oldest = initial_rv
        self.history = collections.deque()
        self.history_size = history_size
        self.objs = {k.name: {} for k in kinds.KINDS}
        self.alloc = kinds.Allocator(service_cidr)
        self.defaults = defaults
        # (kind, rv) -> (snapshot, its keys sorted): the pages of one list
        # share them, so listing N objects in pages is not quadratic.
        self.sorted_snaps = collections.OrderedDict()

    # --- internals (caller holds the lock) ---------------------------------

    def _commit(self, kind, typ, obj, old):
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        k = obj_key(obj)
        if typ == "DELETED":
            self.objs[kind.name].pop(k, None)
        else:
            self.objs[kind.name][k] = obj
        self.history.append(Event(self.rv, kind, typ, obj, old))
        while len(self.history) > self.history_size:
            self.history.popleft()
            self.oldest += 1
        self.cond.notify_all()
        return obj

    def _default(self, kind, obj, old):
        if self.defaults:
            kinds.apply_defaults(kind, obj, old, self.objs[kind.name].values(), self.alloc)

    def ensure_namespace(self, ns):
        nskind = kinds.BY_RESOURCE["namespaces"]
        if ("", ns) in self.objs["namespaces"]:
            return
        obj = {"metadata": {"name": ns, "uid": str(uuid.uuid4()),
                            "creationTimestamp": kinds.now_rfc3339()}}
        kinds.apply_defaults(nskind, obj, None, (), self.alloc)
        self._commit(nskind, "ADDED", _stamp(nskind, obj), None)

    def _finish_update(self, kind, old, obj, dry_run):
        md, omd = obj["metadata"], old["metadata"]
        md["uid"] = omd["uid"]
        md["creationTimestamp"] = omd.get("creationTimestamp")
        md["resourceVersion"] = omd["resourceVersion"]
        self._default(kind, obj, old)
        bad = kinds.spec_error(kind, obj, old)
        if bad:
            raise invalid(kind, md["name"], *bad)
        gen = omd.get("generation", 1)
        md["generation"] = gen + 1 if _content(obj) != _content(old) else gen
        obj = _stamp(kind, obj)
        if obj == old:  # a no-op write: no new resourceVersion, no event
            return old
        if dry_run:
            return obj
        return self._commit(kind, "MODIFIED", obj, old)

    def _namespace_of(self, kind, md, path_ns):
        if not kind.namespaced:
            md.pop("namespace", None)
            return ""
        body_ns = md.get("namespace")
        if body_ns and path_ns and body_ns != path_ns:
            raise ApiError(400, "the namespace of the provided object does not match the "
                                "namespace sent on the request")
        md["namespace"] = path_ns or body_ns or "default"
        return md["namespace"]

    def _check_body(self, kind, body):
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request must be a JSON object")
        if body.get("kind") not in (None, kind.kind) or \
                body.get("apiVersion") not in (None, kind.api_version):
            raise ApiError(400, "the API version in the data (%s) does not match the expected "
                                "API version (%s) or kind (%s)" %
                           (body.get("apiVersion"), kind.api_version, kind.kind))
        obj = copy.deepcopy(body)
        _check_meta(kind, obj.setdefault("metadata", {}))
        return obj

    # --- loading -------------------------------------------------------------

    def load(self, docs, owned=False):
        """Stores objects from state files as if they had always been there:
        uids and timestamps are kept, resourceVersions are new, and the
        history starts after them.  owned: docs are the store's to keep
        (just parsed), not copied.  Returns a list of warnings."""
        warnings = []
        with self.cond:
            for d in docs:
                kind = kinds.kind_of(d) if isinstance(d, dict) else None
                if kind is None:
                    warnings.append("skipping %s/%s: not served" %
                                    (d.get("apiVersion"), d.get("kind")) if isinstance(d, dict)
                                    else "skipping a non-object document")
                    continue
                obj = d if owned else copy.deepcopy(d)
                md = obj.setdefault("metadata", {})
                if not md.get("name"):
                    warnings.append("skipping a %s without metadata.name" % kind.kind)
                    continue
                ns = self._namespace_of(kind, md, None)
                if ns:
                    self.ensure_namespace(ns)
                md.pop("resourceVersion", None)
                # Derived from the name, so a restart with the same files keeps it.
                md.setdefault("uid", str(uuid.uuid5(uuid.NAMESPACE_URL, "kapi:%s/%s/%s" %
                                                    (kind.name, ns, md["name"]))))
                md.setdefault("creationTimestamp", kinds.now_rfc3339())
                md.setdefault("generation", 1)
                old = self.objs[kind.name].get(obj_key(obj))
                self._default(kind, obj, old)
                self._commit(kind, "MODIFIED" if old else "ADDED", _stamp(kind, obj), old)
            self.compact()
        return warnings

    # --- reads ---------------------------------------------------------------

    def get(self, kind, ns, name):
        with self.cond:
            obj = self.objs[kind.name].get((ns or "", name))
        if obj is None:
            raise not_found(kind, name)
        return obj

    def snapshot(self, kind, rv):
        """{key: obj} of kind as of resourceVersion rv.  Caller holds the lock."""
        self._check_snapshot_rv(rv)
        cur = dict(self.objs[kind.name])
        for ev in reversed(self.history):
            if ev.rv <= rv:
                break
            if ev.kind is kind:
                if ev.type == "ADDED":
                    cur.pop(obj_key(ev.obj), None)
                else:
                    cur[obj_key(ev.obj)] = ev.old
        return cur

    def _check_snapshot_rv(self, rv):
        if rv > self.rv:
            raise too_large(rv, self.rv)
        if rv < self.oldest:
            raise expired(rv, self.oldest)

    def sorted_snapshot(self, kind, rv):
        """snapshot()'s dict and its keys sorted, kept for the next page of
        the same list (a snapshot of rv never changes).  Caller holds the
        lock."""
        self._check_snapshot_rv(rv)    # a cached snapshot can have expired since
        key = (kind.name, rv)
        hit = self.sorted_snaps.get(key)
        if hit is None:
            snap = self.snapshot(kind, rv)
            hit = self.sorted_snaps[key] = (snap, sorted(snap))
            while len(self.sorted_snaps) > 4:
                self.sorted_snaps.popitem(last=False)
        return hit

    def events_after(self, cursor):
        """Events with resourceVersion > cursor.  Caller holds the lock."""
        if cursor < self.oldest:
            raise expired(cursor, self.oldest)
        n = self.rv - cursor
        if n <= 0:
            return []
        return list(itertools.islice(self.history, len(self.history) - n, None))

    def wait_for_rv(self, rv, timeout=3.0):
        """Like the watch cache: waits a little for a resourceVersion not yet
        reached, then gives up with 504 "Too large resource version"."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.rv >= rv, timeout):
                raise too_large(rv, self.rv)

    def compact(self):
        with self.cond:
            self.history.clear()
            self.oldest = self.rv
            self.cond.notify_all()

    def counts(self):
        with self.cond:
            return {k: len(v) for k, v in self.objs.items()}

    # --- writes --------------------------------------------------------------

    def create(self, kind, ns, body, dry_run=False):
        obj = self._check_body(kind, body)
        md = obj["metadata"]
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + "".join(secrets.choice("bcdfghjklmnpqrstvwxz2456789")
                                                      for _ in range(5))
        name = md.get("name")
        if not name:
            raise invalid(kind, "", "metadata.name", "Required value: name or generateName is "
                                                     "required")
        bad = kinds.name_error(kind, name)
        if bad:
            raise invalid(kind, name, "metadata.name", 'Invalid value: "%s": %s' % (name, bad))
        ns = self._namespace_of(kind, md, ns)
        if md.get("resourceVersion"):
            raise ApiError(500, "resourceVersion should not be set on objects to be created")
        with self.cond:
            if (ns, name) in self.objs[kind.name]:
                raise ApiError(409, '%s "%s" already exists' % (kind.name, name), "AlreadyExists",
                               details={"name": name, "group": kind.group, "kind": kind.name})
            self._default(kind, obj, None)
            bad = kinds.spec_error(kind, obj, None)
            if bad:
                raise invalid(kind, name, *bad)
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = kinds.now_rfc3339()
            md["generation"] = 1
            for f in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
                md.pop(f, None)
            obj = _stamp(kind, obj)
            if dry_run:
                return obj
            if ns:
                self.ensure_namespace(ns)
            return self._commit(kind, "ADDED", obj, None)

    def replace(self, kind, ns, name, body, dry_run=False):
        obj = self._check_body(kind, body)
        md = obj["metadata"]
        if md.get("name") != name:
            raise ApiError(400, "the name of the object (%s) does not match the name on the URL "
                                "(%s)" % (md.get("name"), name))
        ns = self._namespace_of(kind, md, ns)
        with self.cond:
            old = self.objs[kind.name].get((ns, name))
            if old is None:
                raise not_found(kind, name)
            want = md.get("resourceVersion")
            if want and want != old["metadata"]["resourceVersion"]:
                raise conflict(kind, name)
            if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
                raise conflict(kind, name, "Precondition failed: UID in precondition: %s, UID in "
                                           "object meta: %s" % (md["uid"], old["metadata"]["uid"]))
            return self._finish_update(kind, old, obj, dry_run)

    def patch(self, kind, ns, name, apply, dry_run=False):
        """apply(current_object_copy) returns the patched object."""
        with self.cond:
            old = self.objs[kind.name].get((ns or "", name))
            if old is None:
                raise not_found(kind, name)
            obj = apply(copy.deepcopy(old))
            if not isinstance(obj, dict):
                raise ApiError(422, "the patched object is not a JSON object")
            obj = self._check_body(kind, obj)
            md, omd = obj["metadata"], old["metadata"]
            if md.get("name") != name or md.get("namespace", "") != omd.get("namespace", ""):
                raise invalid(kind, name, "metadata.name", "field is immutable")
            # A resourceVersion in the patch is a precondition, as upstream.
            if md.get("resourceVersion", omd["resourceVersion"]) != omd["resourceVersion"]:
                raise conflict(kind, name)
            return self._finish_update(kind, old, obj, dry_run)

    def delete(self, kind, ns, name, options=None, dry_run=False):
        pre = (options or {}).get("preconditions") or {}
        with self.cond:
            old = self.objs[kind.name].get((ns or "", name))
            if old is None:
                raise not_found(kind, name)
            if pre.get("resourceVersion") and pre["resourceVersion"] != \
                    old["metadata"]["resourceVersion"]:
                raise conflict(kind, name, "Precondition failed: ResourceVersion in precondition: "
                                           "%s, ResourceVersion in object meta: %s" %
                               (pre["resourceVersion"], old["metadata"]["resourceVersion"]))
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise conflict(kind, name, "Precondition failed: UID in precondition: %s, UID in "
                                           "object meta: %s" % (pre["uid"], old["metadata"]["uid"]))
            if dry_run:
                return old
            if kind.name == "namespaces":  # no finalisation: the contents go at once
                for k in kinds.KINDS:
                    if k.namespaced:
                        for (ons, oname), o in sorted(self.objs[k.name].items()):
                            if ons == name:
                                self._commit(k, "DELETED", self._deleted_copy(o), o)
            return self._commit(kind, "DELETED", self._deleted_copy(old), old)

    @staticmethod
    def _deleted_copy(old):
        obj = dict(old)
        obj["metadata"] = dict(old["metadata"])
        return obj

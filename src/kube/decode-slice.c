/* SPDX-License-Identifier: Apache-2.0 */
/*
 * EndpointSlices (discovery.k8s.io/v1): the owning service's label, the
 * address type, ports, and each endpoint's address, conditions, node, zone
 * and topology hints. An endpoint without addresses is left out, as upstream
 * does; FQDN slices are KUBE_IGNORED.
 */
#include "kube/decode.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/decode-field.h"
#include "model/model.h"
#include "util/cleanup.h"
#include "util/inet.h"
#include "util/intern.h"
#include "util/alloc.h"

static int decode_strv_names(const json_t *arr, char ***ret, size_t *ret_n, bool label_value,
                             char *err, const char *path) {
        size_t n = json_array_size(arr);
        if (n == 0) {
                *ret = NULL;    /* most endpoints have no hints: no allocation */
                *ret_n = 0;
                return 0;
        }
        char **v = xcalloc(n, sizeof *v);
        for (size_t i = 0; i < n; i++) {
                const char *s = json_string_value(json_object_get(json_array_get(arr, i), "name"));
                if (!s || (label_value ? kube_valid_label_value(s) : kube_valid_dns_subdomain(s)) < 0) {
                        for (size_t j = 0; j < i; j++)
                                free(v[j]);
                        free(v);
                        return kube_field_fail(err, "%s[%zu].name: \"%.64s\" is not valid", path, i, s ? s : "");
                }
                v[i] = xstrdup(s);
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* An endpoint's hints: at most 8 by the API's validation; kproxy takes up
 * to 64 and refuses more (its count is 16 bits). */
static int decode_hints(const json_t *arr, char ***ret, uint16_t *ret_n, bool label_value, char *err,
                        const char *path) {
        size_t n = 0;
        if (json_array_size(arr) > 64)
                return kube_field_fail(err, "%s: %zu hints, more than 64", path, json_array_size(arr));
        int r = decode_strv_names(arr, ret, &n, label_value, err, path);
        *ret_n = (uint16_t) n;
        return r;
}

/* The endpoint's zone, kept once per slice: a slice's endpoints share a
 * few. It is only shown (explain), never routed on, so a slice with more
 * than 255 different zones keeps the rest unset rather than losing the
 * slice. */
static int decode_zone(const json_t *e, struct slice *s, struct slice_endpoint *ep, char *err, const char *path) {
        const char *zone;
        char sub[96];
        snprintf(sub, sizeof sub, "%s.", path);
        int r = kube_field_str(e, "zone", &zone, err, sub);
        if (r < 0 || !zone || !*zone)
                return r;
        if (kube_valid_label_value(zone) < 0)
                return kube_field_fail(err, "%s.zone: \"%.64s\" is not a valid label value", path, zone);
        uint32_t id = intern(zone);
        for (size_t i = 0; i < s->n_zones; i++)
                if (s->zones[i] == id) {
                        intern_release(id);
                        ep->zone = (uint8_t) (i + 1);
                        return 0;
                }
        if (s->n_zones == UINT8_MAX) {
                intern_release(id);
                return 0;
        }
        uint32_t *more = xrealloc(s->zones, (s->n_zones + 1) * sizeof *s->zones);
        s->zones = more;
        s->zones[s->n_zones++] = id;
        ep->zone = s->n_zones;
        return 0;
}

/* Decodes endpoint e into the slice's next one (s->n_endpoints); its
 * hints, if any, go to the slice's list. */
static int decode_slice_endpoint(const json_t *e, struct slice *s, bool *ret_skip, char *err, const char *path) {
        struct slice_endpoint *ep = &s->endpoints[s->n_endpoints];
        uint8_t family = s->family;
        struct endpoint_hints h = {0};
        const json_t *addrs, *cond, *hints, *arr;
        const char *node;
        char sub[96];
        int r;

        *ret_skip = false;
        if (!json_is_object(e))
                return kube_field_fail(err, "%s: must be an object", path);
        snprintf(sub, sizeof sub, "%s.", path);
        if ((r = kube_field_array(e, "addresses", &addrs, err, sub)) < 0)
                return r;
        if (json_array_size(addrs) == 0) {
                *ret_skip = true;       /* upstream ignores endpoints without addresses */
                return 0;
        }
        const char *a = json_string_value(json_array_get(addrs, 0));
        struct inet_addr addr;
        if (!a || inet_addr_parse(a, &addr) < 0 || addr.family != family)
                return kube_field_fail(err, "%s.addresses[0]: \"%.64s\" is not an IPv%u address", path, a ? a : "",
                            family);
        slice_endpoint_set_addr(s, s->n_endpoints, &addr);

        bool ready, serving, terminating;
        if ((r = kube_field_object(e, "conditions", &cond, err, sub)) < 0)
                return r;
        snprintf(sub, sizeof sub, "%s.conditions.", path);
        if ((r = kube_field_bool(cond, "ready", true, &ready, err, sub)) < 0 ||
            (r = kube_field_bool(cond, "serving", true, &serving, err, sub)) < 0 ||
            (r = kube_field_bool(cond, "terminating", false, &terminating, err, sub)) < 0)
                return r;
        ep->ready = ready;
        ep->serving = serving;
        ep->terminating = terminating;

        snprintf(sub, sizeof sub, "%s.", path);
        if ((r = kube_field_str(e, "nodeName", &node, err, sub)) < 0)
                return r;
        if (node) {
                if (kube_valid_dns_subdomain(node) < 0)
                        return kube_field_fail(err, "%s.nodeName: \"%.64s\" is not a valid node name", path, node);
                ep->node = intern(node);
        }

        if ((r = decode_zone(e, s, ep, err, path)) < 0)
                return r;
        if ((r = kube_field_object(e, "hints", &hints, err, sub)) < 0)
                return r;
        snprintf(sub, sizeof sub, "%s.hints.", path);
        if ((r = kube_field_array(hints, "forZones", &arr, err, sub)) < 0)
                return r;
        snprintf(sub, sizeof sub, "%s.hints.forZones", path);
        if ((r = decode_hints(arr, &h.zones, &h.n_zones, true, err, sub)) < 0)
                goto out;
        snprintf(sub, sizeof sub, "%s.hints.", path);
        if ((r = kube_field_array(hints, "forNodes", &arr, err, sub)) < 0)
                goto out;
        snprintf(sub, sizeof sub, "%s.hints.forNodes", path);
        if ((r = decode_hints(arr, &h.nodes, &h.n_nodes, false, err, sub)) < 0)
                goto out;
        if (h.n_zones == 0 && h.n_nodes == 0)
                goto out;
        if (s->n_hints >= UINT16_MAX) {
                r = kube_field_fail(err, "%s.hints: more than %u endpoints of the slice have hints", path,
                                    UINT16_MAX - 1);
                goto out;
        }
        struct endpoint_hints *more = xrealloc(s->hints, (s->n_hints + 1) * sizeof *s->hints);
        s->hints = more;
        s->hints[s->n_hints++] = h;
        ep->hints = (uint16_t) s->n_hints;
        return 0;
out:
        endpoint_hints_done(&h);
        return r;
}

/* RFC 3339 in UTC ("2024-05-06T07:08:09Z", optional fraction) to Unix
 * seconds; 0 when absent or unreadable (the metric is then just not
 * observed: a bad annotation must not cost the slice). */
static double parse_trigger_time(const char *s) {
        struct tm tm = {0};
        const char *rest;
        double frac = 0;
        if (!s || !(rest = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm)))
                return 0;
        if (*rest == '.') {
                char *end;
                frac = strtod(rest, &end);
                rest = end;
        }
        if (strcmp(rest, "Z") != 0)
                return 0;
        time_t t = timegm(&tm);
        return t < 0 ? 0 : (double) t + frac;
}

int kube_decode_slice(const json_t *obj, struct slice **ret, char err[KUBE_ERRLEN]) {
        _cleanup_(slice_freep) struct slice *s = xcalloc(1, sizeof *s);
        const json_t *labels, *ports, *eps;
        const char *svc, *at;
        int r;

        err[0] = '\0';
        if ((r = kube_field_meta(obj, true, &s->key, &labels, err)) < 0)
                return r;
        if (json_object_get(labels, KUBE_LABEL_HEADLESS))
                return kube_field_fail(err, "labelled " KUBE_LABEL_HEADLESS), KUBE_IGNORED;
        svc = kube_field_label(labels, KUBE_LABEL_SERVICE_NAME);
        if (!svc)
                return kube_field_fail(err, "metadata.labels: missing label " KUBE_LABEL_SERVICE_NAME);
        if (kube_valid_dns_label(svc) < 0)
                return kube_field_fail(err,
                                       "metadata.labels." KUBE_LABEL_SERVICE_NAME ": \"%.64s\" is not a service name",
                                       svc);
        s->trigger_time = parse_trigger_time(json_string_value(json_object_get(
                json_object_get(json_object_get(obj, "metadata"), "annotations"),
                "endpoints.kubernetes.io/last-change-trigger-time")));
        /* The service's key by the same rule as the slice's own: in its
         * namespace, or bare when the slice has none. */
        const char *slash = strchr(s->key, '/');
        size_t nslen = slash ? (size_t) (slash - s->key) : 0;
        size_t len = nslen + strlen(svc) + 2;
        s->service_key = xcalloc(len, 1);
        snprintf(s->service_key, len, "%.*s%s%s", (int) nslen, s->key, slash ? "/" : "", svc);

        if ((r = kube_field_str(obj, "addressType", &at, err, "")) < 0)
                return r;
        if (!at)
                return kube_field_fail(err, "addressType: missing");
        if (strcmp(at, "IPv4") == 0)
                s->family = 4;
        else if (strcmp(at, "IPv6") == 0)
                s->family = 6;
        else if (strcmp(at, "FQDN") == 0)
                return kube_field_fail(err, "addressType FQDN"), KUBE_IGNORED;
        else
                return kube_field_fail(err, "addressType: unknown type \"%.32s\"", at);

        if ((r = kube_field_array(obj, "ports", &ports, err, "")) < 0)
                return r;
        if (json_array_size(ports) > UINT16_MAX)        /* the API allows 100 */
                return kube_field_fail(err, "ports: %zu ports, more than %u", json_array_size(ports), UINT16_MAX);
        s->n_ports = (uint16_t) json_array_size(ports);
        s->ports = xcalloc(s->n_ports, sizeof *s->ports);
        for (size_t i = 0; i < s->n_ports; i++) {
                const json_t *p = json_array_get(ports, i);
                struct slice_port *sp = &s->ports[i];
                char path[48];
                const char *name;
                long long v = 0;
                bool set;

                snprintf(path, sizeof path, "ports[%zu].", i);
                if (!json_is_object(p))
                        return kube_field_fail(err, "ports[%zu]: must be an object", i);
                if ((r = kube_field_str(p, "name", &name, err, path)) < 0)
                        return r;
                if (kube_field_port_name(name ? name : "") < 0)
                        return kube_field_fail(err, "%sname: \"%.64s\" is not a valid port name", path, name);
                /* The API defaults a missing name to "" (an unnamed port). */
                sp->name = xstrdup(name ? name : "");
                if ((r = kube_field_protocol(p, &sp->proto, err, path)) < 0)
                        return r;
                if ((r = kube_field_int(p, "port", 1, 65535, &v, &set, err, path)) < 0)
                        return r;
                sp->port = set ? (uint16_t) v : 0;      /* nil port: unusable, ignored */
        }

        if ((r = kube_field_array(obj, "endpoints", &eps, err, "")) < 0)
                return r;
        size_t n = json_array_size(eps);
        s->endpoints = xcalloc(n, sizeof *s->endpoints);
        s->addrs = xcalloc(n, slice_addr_len(s));
        for (size_t i = 0; i < n; i++) {
                char path[48];
                bool skip;
                snprintf(path, sizeof path, "endpoints[%zu]", i);
                r = decode_slice_endpoint(json_array_get(eps, i), s, &skip, err, path);
                s->n_endpoints++;       /* so that slice_free() frees a half-built one */
                if (r < 0)
                        return r;
                if (skip)
                        s->n_endpoints--;
        }
        *ret = slice_pack(TAKE_PTR(s));
        return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * explain's answer for people, from its JSON (so that the answer of the
 * running daemon, which comes as JSON, prints as a local one does):
 *
 *   10.0.1.5 -> 172.30.0.41:80/TCP from a pod on this node (the source is in the node's pod CIDR 10.0.1.0/24)
 *   iptables mode
 *
 *   verdict      forward: to one of 2 endpoints of ns1/svc1:p80, at random
 *   service      ns1/svc1, port p80, by its cluster IP (internalTrafficPolicy Cluster)
 *   slices       ns1/svc1-abcde
 *   endpoints    10.180.0.1:80  50%  node-1  ready (internalTrafficPolicy Cluster)  KUBE-SEP-…
 *   masquerade   no: the source is inside 10.0.0.0/8 (the local traffic detector): …
 *   affinity     none
 *   chains       nat PREROUTING  -m comment … -j KUBE-SERVICES
 *                …
 */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "explain/explain.h"

static const char *s(const json_t *o, const char *key) {
        const char *v = json_string_value(json_object_get(o, key));
        return v ? v : "";
}

static const char *origin_text(const char *from) {
        return strcmp(from, "pod") == 0    ? "a pod on this node"
               : strcmp(from, "node") == 0 ? "this node's own processes"
                                           : "another node or outside the cluster";
}

static void print_endpoints(const json_t *eps, FILE *out) {
        size_t i, shown = 0;
        const json_t *e;
        json_array_foreach(eps, i, e) {
                const char *node = s(e, "node"), *zone = s(e, "zone");
                char place[160];
                bool sel = json_is_true(json_object_get(e, "selected"));
                snprintf(place, sizeof place, "%s%s%s%s", *node ? node : "(no node)", *zone ? " (" : "", zone,
                         *zone ? ")" : "");
                fprintf(out, "%-13s%-24s %5.1f%%  %-14s %s%s\n", shown++ ? "" : "endpoints", s(e, "address"),
                        100.0 * json_real_value(json_object_get(e, "probability")), place, s(e, "why"),
                        sel && json_is_true(json_object_get(e, "masquerade")) ? ", masqueraded" : "");
                if (*s(e, "chain"))
                        fprintf(out, "%-13s  chain %s\n", "", s(e, "chain"));
        }
        if (shown == 0)
                fprintf(out, "%-13snone\n", "endpoints");
}

int explain_print(const json_t *j, FILE *out) {
        const json_t *q = json_object_get(j, "query"), *svc = json_object_get(j, "service");
        const json_t *m = json_object_get(j, "masquerade"), *aff = json_object_get(j, "affinity");
        size_t i;
        const json_t *v;

        if (!json_is_object(q) || !json_is_object(m) || !json_string_value(json_object_get(j, "verdict")))
                return -EINVAL;
        fprintf(out, "%s", s(q, "source"));
        if (json_integer_value(json_object_get(q, "sourcePort")))
                fprintf(out, ":%lld", (long long) json_integer_value(json_object_get(q, "sourcePort")));
        fprintf(out, " -> %s:%lld/%s from %s", s(q, "destination"), (long long) json_integer_value(json_object_get(q, "port")),
                s(q, "protocol"), origin_text(s(q, "from")));
        if (*s(q, "interface"))
                fprintf(out, " by interface %s", s(q, "interface"));
        fprintf(out, " (%s)\n%s mode%s\n\n", s(q, "fromReason"), s(j, "mode"),
                json_is_true(json_object_get(j, "socketLB")) ? ", translated by socket load balancing" : "");
        fprintf(out, "%-13s%s: %s\n", "verdict", s(j, "verdict"), s(j, "reason"));
        if (json_is_object(svc)) {
                const char *port = s(svc, "port");
                fprintf(out, "%-13s%s%s%s, by its %s (%s)\n", "service", s(svc, "name"), *port ? ", port " : "", port,
                        s(svc, "entry"), s(svc, "policy"));
                const json_t *sl = json_object_get(svc, "endpointSlices");
                fprintf(out, "%-13s", "slices");
                json_array_foreach(sl, i, v) fprintf(out, "%s%s", i ? ", " : "", json_string_value(v));
                fprintf(out, "%s\n", json_array_size(sl) ? "" : "none");
                print_endpoints(json_object_get(j, "endpoints"), out);
        }
        if (*s(m, "reason"))
                fprintf(out, "%-13s%s: %s\n", "masquerade", json_is_true(json_object_get(m, "value")) ? "yes" : "no",
                        s(m, "reason"));
        if (json_is_object(aff))
                fprintf(out, "%-13sClientIP, %llds\n", "affinity",
                        (long long) json_integer_value(json_object_get(aff, "timeoutSeconds")));
        else if (json_is_object(svc))
                fprintf(out, "%-13snone\n", "affinity");
        json_array_foreach(json_object_get(j, "chains"), i, v)
                fprintf(out, "%-13s%s %s  %s\n", i ? "" : "chains", s(v, "table"), s(v, "chain"), s(v, "rule"));
        json_array_foreach(json_object_get(j, "notes"), i, v)
                fprintf(out, "%-13s%s\n", i ? "" : "notes", json_string_value(v));
        return 0;
}

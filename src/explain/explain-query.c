/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A connection as a user names it (`kproxy explain --source … --destination
 * …`, /debug/explain?source=…&destination=…), checked field by field, and
 * the names of explain's enums.
 */
#include "explain/explain-query.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "util/cleanup.h"

static const char *const verdicts[_EXPLAIN_VERDICT_MAX] = {
        [EXPLAIN_FORWARD] = "forward", [EXPLAIN_REJECT] = "reject", [EXPLAIN_DROP] = "drop",
        [EXPLAIN_ACCEPT] = "accept",   [EXPLAIN_NONE] = "none",
};
static const char *const origins[_EXPLAIN_FROM_MAX] = {
        [EXPLAIN_FROM_AUTO] = "auto",
        [EXPLAIN_FROM_POD] = "pod",
        [EXPLAIN_FROM_NODE] = "node",
        [EXPLAIN_FROM_EXTERNAL] = "external",
};
static const char *const entries[_EXPLAIN_ENTRY_MAX] = {
        [EXPLAIN_ENTRY_NONE] = "none",
        [EXPLAIN_ENTRY_CLUSTER_IP] = "clusterIP",
        [EXPLAIN_ENTRY_EXTERNAL_IP] = "externalIP",
        [EXPLAIN_ENTRY_LOAD_BALANCER_IP] = "loadBalancerIP",
        [EXPLAIN_ENTRY_NODE_PORT] = "nodePort",
        [EXPLAIN_ENTRY_HEALTH_CHECK_NODE_PORT] = "healthCheckNodePort",
};

const char *explain_verdict_to_string(enum explain_verdict v) {
        return (unsigned) v < ELEMENTSOF(verdicts) ? verdicts[v] : NULL;
}

const char *explain_origin_to_string(enum explain_origin o) {
        return (unsigned) o < ELEMENTSOF(origins) ? origins[o] : NULL;
}

const char *explain_entry_to_string(enum explain_entry e) {
        return (unsigned) e < ELEMENTSOF(entries) ? entries[e] : NULL;
}

const char *explain_mode_to_string(enum explain_mode m) {
        return m == EXPLAIN_MODE_IPTABLES ? "iptables" : m == EXPLAIN_MODE_NFTABLES ? "nftables" : "userspace";
}

/* "IP", "IP:port", "[IPv6]:port" or a bare IPv6 address. */
static int parse_endpoint(const char *v, bool need_port, struct inet_addr *ret, uint16_t *ret_port) {
        char ip[INET_ADDR_STRLEN + 1];
        const char *port = NULL;
        size_t n;

        if (v[0] == '[') {
                const char *close = strchr(v, ']');
                if (!close || (close[1] && close[1] != ':'))
                        return -EINVAL;
                n = (size_t) (close - v - 1);
                v++;
                port = close[1] ? close + 2 : NULL;
        } else {
                const char *colon = strchr(v, ':');
                if (colon && strchr(colon + 1, ':'))
                        colon = NULL;   /* a bare IPv6 address */
                n = colon ? (size_t) (colon - v) : strlen(v);
                port = colon ? colon + 1 : NULL;
        }
        if (n == 0 || n >= sizeof ip)
                return -EINVAL;
        memcpy(ip, v, n);
        ip[n] = '\0';
        if (inet_addr_parse(ip, ret) < 0)
                return -EINVAL;
        *ret_port = 0;
        if (port) {
                char *end;
                unsigned long p = strtoul(port, &end, 10);
                if (!*port || *end || p == 0 || p > 65535 || port[0] == '-' || port[0] == '+')
                        return -EINVAL;
                *ret_port = (uint16_t) p;
        }
        return need_port && *ret_port == 0 ? -EINVAL : 0;
}

int explain_query_set(struct explain_query *q, const char *field, const char *value, char err[EXPLAIN_ERRLEN]) {
        if (strcmp(field, "source") == 0) {
                if (parse_endpoint(value, false, &q->src, &q->src_port) < 0)
                        goto bad;
                q->has_src = true;
        } else if (strcmp(field, "destination") == 0) {
                if (parse_endpoint(value, true, &q->dst, &q->dst_port) < 0) {
                        snprintf(err, EXPLAIN_ERRLEN, "destination \"%.64s\": want IP:PORT ([IPv6]:PORT)", value);
                        return -EINVAL;
                }
                q->has_dst = true;
        } else if (strcmp(field, "protocol") == 0) {
                char up[8];
                size_t n = strlen(value);
                if (n >= sizeof up)
                        goto bad;
                for (size_t i = 0; i <= n; i++)
                        up[i] = (char) (value[i] >= 'a' && value[i] <= 'z' ? value[i] - 32 : value[i]);
                int p = l4_proto_from_string(up);
                if (p < 0)
                        goto bad;
                q->proto = p;
        } else if (strcmp(field, "from") == 0) {
                size_t n = strlen(value);
                q->iface[0] = '\0';
                if (strcmp(value, "pod") == 0)
                        q->from = EXPLAIN_FROM_POD;
                else if (strcmp(value, "node") == 0)
                        q->from = EXPLAIN_FROM_NODE;
                else if (strcmp(value, "external") == 0)
                        q->from = EXPLAIN_FROM_EXTERNAL;
                else if (strcmp(value, "auto") == 0)
                        q->from = EXPLAIN_FROM_AUTO;
                else if (n > 0 && n < sizeof q->iface && strcspn(value, "/ \t\n:") == n) {
                        /* An interface: packets come in by it, so from a pod or another host. */
                        memcpy(q->iface, value, n + 1);
                        q->from = EXPLAIN_FROM_AUTO;
                } else
                        goto bad;
        } else if (strcmp(field, "ct-state") == 0) {
                if (strcmp(value, "new") == 0)
                        q->ct_invalid = false;
                else if (strcmp(value, "invalid") == 0)
                        q->ct_invalid = true;
                else
                        goto bad;
        } else {
                snprintf(err, EXPLAIN_ERRLEN, "unknown field \"%.64s\"", field);
                return -EINVAL;
        }
        return 0;
bad:
        snprintf(err, EXPLAIN_ERRLEN, "%s \"%.64s\": want %s", field, value,
                 strcmp(field, "source") == 0     ? "IP or IP:PORT"
                 : strcmp(field, "protocol") == 0 ? "tcp, udp or sctp"
                 : strcmp(field, "from") == 0     ? "pod, node, external or an interface name"
                                                  : "new or invalid");
        return -EINVAL;
}

int explain_query_check(const struct explain_query *q, char err[EXPLAIN_ERRLEN]) {
        if (!q->has_dst) {
                snprintf(err, EXPLAIN_ERRLEN, "no destination: give IP:PORT");
                return -EINVAL;
        }
        if (!q->has_src) {
                snprintf(err, EXPLAIN_ERRLEN, "no source: give the client's IP");
                return -EINVAL;
        }
        if (q->src.family != q->dst.family) {
                snprintf(err, EXPLAIN_ERRLEN, "source and destination are of different IP families");
                return -EINVAL;
        }
        return 0;
}

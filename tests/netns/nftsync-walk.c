/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A random walk through cluster states, each applied to the kernel by an
 * incremental (partial) nftables sync, each compared with the same state
 * loaded from scratch: after any sequence of partial syncs, the kernel must
 * hold exactly what a fresh full load gives. Every fourth step is a resync
 * that is not told what changed, and sometimes finds a stray chain; every
 * fifth, kproxy restarts (a sync without records over the table the last
 * one left), before the step's changes or, every tenth, after them.
 * With WALK_SHARDS=N in the environment, the services' nat side is spread
 * over N more tables (--nftables-shards) and every table is compared.
 *
 *   nftsync-walk SEED STEPS NETNS_A NETNS_B
 *   nftsync-walk conflict 0 NETNS_A NETNS_B
 *   nftsync-walk digests 0 NETNS_A NETNS_B
 *
 * Runs in NETNS_A (the incremental table); loads the fresh table into
 * NETNS_B; compares `nft list table` of both after every step. The
 * services are small and varied: ClusterIP/NodePort/LoadBalancer, TCP/UDP,
 * two ports, ETP/ITP Local, affinity, external IPs drawn from a small pool
 * (so two services sometimes claim one key), source ranges, endpoints on
 * this node or another, ready or terminating. Prints one line per step;
 * exit 0 when every step matched, 1 at the first difference (both tables
 * are printed), 2 on a setup error.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apply/nftables.h"
#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "kube/decode.h"
#include "model/model.h"
#include "proxy/nftables/nftsync.h"
#include "render/nftir.h"
#include "render/nftmsg.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "util/log.h"

#define N_SVCS 12

static unsigned long long rng;

static unsigned rnd(unsigned n) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        return (unsigned) ((rng >> 33) % n);
}

/* Service i's name: every other one as long as the API allows (63),
 * so that chain names are as long as a real cluster's can be. */
static const char *svc_name(int i, char name[64]) {
        if (i % 2 == 0)
                snprintf(name, 64, "svc%d", i);
        else
                snprintf(name, 64, "svc%d-%.*s", i, 58 - (i > 9),
                         "a-service-name-as-long-as-the-api-allows-for-one-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        return name;
}

static json_t *make_service(int i) {
        char name[64], ip[32];
        svc_name(i, name);
        snprintf(ip, sizeof ip, "10.96.0.%d", 10 + i);
        static const char *const types[] = {"ClusterIP", "NodePort", "LoadBalancer"};
        const char *type = types[rnd(3)];
        json_t *ports = json_array();
        int n_ports = 1 + (int) rnd(2);
        for (int p = 0; p < n_ports; p++) {
                json_t *port = json_pack("{s:s, s:i, s:s, s:i}", "name", p ? "b" : "a", "port", 80 + p * 1000 + (int) rnd(2),
                                         "protocol", rnd(4) == 0 ? "UDP" : "TCP", "targetPort", 8080);
                if (strcmp(type, "ClusterIP") != 0)
                        json_object_set_new(port, "nodePort", json_integer(30000 + i * 4 + p));
                json_array_append_new(ports, port);
        }
        json_t *spec = json_pack("{s:s, s:[s], s:s, s:o}", "clusterIP", ip, "clusterIPs", ip, "type", type, "ports",
                                 ports);
        if (strcmp(type, "ClusterIP") != 0 && rnd(2))
                json_object_set_new(spec, "externalTrafficPolicy", json_string("Local"));
        if (rnd(5) == 0)
                json_object_set_new(spec, "internalTrafficPolicy", json_string("Local"));
        if (rnd(3) == 0) {
                json_object_set_new(spec, "sessionAffinity", json_string("ClientIP"));
                json_object_set_new(spec, "sessionAffinityConfig",
                                    json_pack("{s:{s:i}}", "clientIP", "timeoutSeconds", rnd(2) ? 600 : 10800));
        }
        if (rnd(3) == 0) {
                /* Two addresses per service: external IPs come and go. */
                char ext[32];
                snprintf(ext, sizeof ext, "192.0.2.%u", 10 + 2 * (unsigned) i + rnd(2));
                json_object_set_new(spec, "externalIPs", json_pack("[s]", ext));
        }
        json_t *svc = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion", "v1", "kind", "Service", "metadata",
                                "name", name, "namespace", "walk", "spec", spec);
        if (strcmp(type, "LoadBalancer") == 0) {
                char lb[32];
                snprintf(lb, sizeof lb, "198.51.100.%d", 1 + i);
                json_object_set_new(svc, "status", json_pack("{s:{s:[{s:s}]}}", "loadBalancer", "ingress", "ip", lb));
                if (rnd(2))
                        json_object_set_new(spec, "loadBalancerSourceRanges",
                                            rnd(2) ? json_pack("[s]", "203.0.113.0/24")
                                                   : json_pack("[s, s]", "203.0.113.0/25", "192.168.0.0/16"));
        }
        return svc;
}

static json_t *make_slice(int i) {
        char name[80], svc[64];
        snprintf(name, sizeof name, "%s-x", svc_name(i, svc));
        json_t *eps = json_array();
        int n = (int) rnd(5);
        for (int e = 0; e < n; e++) {
                char ip[32];
                snprintf(ip, sizeof ip, "10.244.%u.%u", rnd(2) + 1, 10 + rnd(6));
                bool ready = rnd(6) != 0;
                json_array_append_new(eps, json_pack("{s:[s], s:s, s:{s:b, s:b, s:b}}", "addresses", ip, "nodeName",
                                                     rnd(2) ? "node-1" : "node-2", "conditions", "ready", ready,
                                                     "serving", ready || rnd(2), "terminating", !ready));
        }
        json_t *ports = json_pack("[{s:s, s:i, s:s}, {s:s, s:i, s:s}]", "name", "a", "port", 8080, "protocol",
                                  rnd(4) == 0 ? "UDP" : "TCP", "name", "b", "port", 9090, "protocol", "TCP");
        return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:s, s:o, s:o}", "apiVersion", "discovery.k8s.io/v1",
                         "kind", "EndpointSlice", "metadata", "name", name, "namespace", "walk", "labels",
                         "kubernetes.io/service-name", svc, "addressType", "IPv4", "ports", ports, "endpoints", eps);
}

static void upsert(struct model *m, json_t *obj) {
        char err[KUBE_ERRLEN];
        const char *kind = json_string_value(json_object_get(obj, "kind"));
        if (strcmp(kind, "Service") == 0) {
                struct svc *s;
                if (kube_decode_service(obj, &s, err) == 0)
                        model_service_upsert(m, s);
                else
                        fprintf(stderr, "walk: bad service: %s\n", err);
        } else {
                struct slice *s;
                if (kube_decode_slice(obj, &s, err) == 0)
                        model_slice_upsert(m, s);
                else
                        fprintf(stderr, "walk: bad slice: %s\n", err);
        }
        json_decref(obj);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The table's objects in name order: `nft list` prints them in the
 * kernel's creation order, which differs between a table built up over
 * time and one loaded at once; what they hold must not. */
static void sort_blocks(struct buf *t) {
        char *blocks[4096];
        size_t n = 0;
        struct buf out = BUF_INIT;
        char *line = t->data;
        struct buf cur = BUF_INIT;
        while (line && *line) {
                char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t) (nl - line) + 1 : strlen(line);
                bool top = line[0] == '\t' && line[1] != '\t';
                bool opens = top && (strncmp(line + 1, "chain ", 6) == 0 || strncmp(line + 1, "set ", 4) == 0 ||
                                     strncmp(line + 1, "map ", 4) == 0);
                if (opens || (line[0] == '}' && cur.len)) {
                        if (cur.len && n < 4096)
                                blocks[n++] = buf_steal(&cur);
                }
                if (opens || cur.len)
                        buf_put(&cur, line, len);
                else if (line[0] != '\n' && !(line[0] == '\t' && line[1] == '\n'))
                        buf_put(&out, line, len);
                line += len;
        }
        if (cur.len && n < 4096)
                blocks[n++] = buf_steal(&cur);
        qsort(blocks, n, sizeof *blocks, cmp_str);
        for (size_t i = 0; i < n; i++) {
                /* A block's trailing blank line depends on what follows it. */
                size_t l = strlen(blocks[i]);
                while (l > 1 && blocks[i][l - 1] == '\n' && blocks[i][l - 2] == '\n')
                        blocks[i][--l] = '\0';
                buf_puts(&out, blocks[i]);
                free(blocks[i]);
        }
        buf_done(t);
        *t = out;
}

/* Services' nat side in this many more tables (WALK_SHARDS, default 0). */
static unsigned shards;

/* "kube-proxy", or the first shard when there are shards: the table that
 * holds the services chain and nat-output. */
static const char *nat_table(void) {
        return shards ? "kube-proxy-1" : "kube-proxy";
}

/* Every table of ns, each sorted on its own, in table order. */
static int table_text(const char *ns, struct buf *out) {
        struct buf one = BUF_INIT;
        buf_clear(out);
        for (unsigned t = 0; t <= shards; t++) {
                char cmd[256], name[NFTIR_TABLE_NAME_MAX], line[4096];
                snprintf(cmd, sizeof cmd, "ip netns exec %s nft list table ip %s 2>&1", ns, nftir_table_name(t, name));
                FILE *f = popen(cmd, "r");
                if (!f)
                        return -errno;
                buf_clear(&one);
                while (fgets(line, sizeof line, f))
                        buf_puts(&one, line);
                if (pclose(f) != 0) {
                        buf_done(&one);
                        return -EIO;
                }
                sort_blocks(&one);
                buf_put(out, one.data, one.len);
        }
        buf_done(&one);
        return 0;
}

/* The chains of NS's table with an anonymous set in a rule ("{ ... }",
 * but not an affinity set's "update @set { ip saddr }"):
 * the ones a sync over an existing table cannot tell are already there. */
static int chains_with_anonymous_sets(const char *ns) {
        char cmd[256], line[4096];
        int n = 0;
        bool in_chain = false, counted = false;
        snprintf(cmd, sizeof cmd, "ip netns exec %s nft list ruleset ip 2>&1", ns);
        FILE *f = popen(cmd, "r");
        if (!f)
                return -1;
        while (fgets(line, sizeof line, f)) {
                if (strncmp(line, "\tchain ", 7) == 0) {
                        in_chain = true;
                        counted = false;
                } else if (strcmp(line, "\t}\n") == 0) {
                        in_chain = false;
                } else if (in_chain && !counted && strchr(line, '{') && !strstr(line, "update @")) {
                        counted = true;
                        n++;
                }
        }
        return pclose(f) == 0 ? n : -1;
}

/* Restarts: a new sync without records, over the table the old one left. */
static int restart(struct nftsync **sync, struct nftables *nl, const struct model *m, const struct render_params *p,
                   struct nftsync_stats *st) {
        nftsync_free(*sync);
        if (!(*sync = nftsync_new(4, nl)))
                return -1;
        nftsync_set_chunk(*sync, 40);
        return nftsync_full(*sync, m, p, NULL, 0, false, st);
}

/* A fresh load of the model in the other namespace (its own socket). */
static int fresh_load(int ns_b, int ns_a, const struct model *m, const struct render_params *p) {
        struct nftables *nl = NULL;
        struct nftmsg msg;
        char err[512];
        int r;

        if (setns(ns_b, CLONE_NEWNET) < 0)
                return -errno;
        r = nftables_open(&nl);
        if (setns(ns_a, CLONE_NEWNET) < 0)
                abort();
        if (r < 0)
                return r;
        nftmsg_init(&msg, 4, 1);
        nftmsg_batch_begin(&msg);
        for (unsigned t = 0; t <= shards; t++) {
                msg.table = (uint16_t) t;
                nftmsg_table(&msg);
                nftmsg_table_del(&msg);
        }
        r = render_nftables_netlink(m, p, NULL, 0, &msg);
        nftmsg_batch_end(&msg);
        if (r == 0)
                r = nftables_commit(nl, &msg, err, sizeof err);
        if (r < 0)
                fprintf(stderr, "walk: fresh load failed: %s\n", err);
        nftmsg_done(&msg);
        nftables_close(nl);
        return r;
}

/* The service whose chain an element of service-ips goes to, in ns. */
static void element_owner(const char *ns, const char *key, char *out, size_t len) {
        char cmd[256], line[1024];
        snprintf(cmd, sizeof cmd, "ip netns exec %s nft get element ip kube-proxy service-ips '{ %s }' 2>/dev/null", ns,
                 key);
        FILE *f = popen(cmd, "r");
        snprintf(out, len, "none");
        while (f && fgets(line, sizeof line, f)) {
                char *g = strstr(line, "goto external-");
                if (g && strstr(g, "walk/"))
                        snprintf(out, len, "%.*s", (int) strcspn(strstr(g, "walk/"), "/ \n") + 5, strstr(g, "walk/"));
        }
        if (f)
                pclose(f);
        if (strncmp(out, "walk/", 5) == 0) {
                /* "walk/x/..." -> "walk/x" */
                char *slash = strchr(out + 5, '/');
                if (slash)
                        *slash = '\0';
        }
}

static json_t *ext_service(const char *name, const char *ip, const char *ext) {
        json_t *spec = json_pack("{s:s, s:[s], s:[{s:s, s:i, s:s}]}", "clusterIP", ip, "clusterIPs", ip, "ports",
                                 "name", "a", "port", 80, "protocol", "TCP");
        if (ext)
                json_object_set_new(spec, "externalIPs", json_pack("[s]", ext));
        return json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion", "v1", "kind", "Service", "metadata", "name",
                         name, "namespace", "walk", "spec", spec);
}

static json_t *one_endpoint(const char *svc, const char *ip) {
        char name[64];
        snprintf(name, sizeof name, "%s-x", svc);
        return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:s, s:[{s:s, s:i, s:s}], s:[{s:[s], s:{s:b}}]}",
                         "apiVersion", "discovery.k8s.io/v1", "kind", "EndpointSlice", "metadata", "name", name,
                         "namespace", "walk", "labels", "kubernetes.io/service-name", svc, "addressType", "IPv4",
                         "ports", "name", "a", "port", 8080, "protocol", "TCP", "endpoints", "addresses", ip,
                         "conditions", "ready", true);
}

/* Two services claim one external IP and port: the first to have it keeps
 * it, the other gets it when it is let go. */
static int conflict(const char *ns, struct nftsync *sync, const struct render_params *p) {
        static const char *const key = "192.0.2.200 . tcp . 80";
        struct model *m = model_new();
        struct nftsync_stats st;
        struct hmap changed = HMAP_INIT;
        char owner[64];
        int bad = 0;

        upsert(m, ext_service("b", "10.96.1.2", "192.0.2.200"));
        upsert(m, one_endpoint("b", "10.244.1.20"));
        upsert(m, one_endpoint("a", "10.244.1.21"));
        if (nftsync_full(sync, m, p, NULL, 0, false, &st) < 0)
                return 1;
        element_owner(ns, key, owner, sizeof owner);
        printf("b alone: %s\n", owner);
        bad |= strcmp(owner, "walk/b") != 0;

        upsert(m, ext_service("a", "10.96.1.1", "192.0.2.200"));
        hmap_put(&changed, "walk/a", NULL);
        if (nftsync_partial(sync, m, p, &changed, &st) < 0)
                return 1;
        element_owner(ns, key, owner, sizeof owner);
        printf("a claims it too: %s (conflicts %zu)\n", owner, st.conflicts);
        bad |= strcmp(owner, "walk/b") != 0 || st.conflicts != 1;

        upsert(m, ext_service("b", "10.96.1.2", NULL));
        hmap_done(&changed);
        hmap_put(&changed, "walk/b", NULL);
        if (nftsync_partial(sync, m, p, &changed, &st) < 0)
                return 1;
        element_owner(ns, key, owner, sizeof owner);
        printf("b lets go: %s\n", owner);
        bad |= strcmp(owner, "walk/a") != 0;

        model_service_delete(m, "walk/a");
        hmap_done(&changed);
        hmap_put(&changed, "walk/a", NULL);
        if (nftsync_partial(sync, m, p, &changed, &st) < 0)
                return 1;
        element_owner(ns, key, owner, sizeof owner);
        printf("a deleted: %s\n", owner);
        bad |= strcmp(owner, "none") != 0;
        hmap_done(&changed);
        model_free(m);
        return bad;
}

/* nftables_rule_digests() over chains of every size: chains with the same
 * rules have the same digest wherever they fall in the rounds of lookups
 * (1000 chains with names as long as real ones: the answers of a round
 * wait in the socket's queue), also large ones whose rules take many
 * messages; an empty chain has the empty digest, a missing one none. */
#define N_SMALL 1000

static int digests(const char *ns) {
        char file[64], cmd[160];
        snprintf(file, sizeof file, "/tmp/nftsync-walk-%d.nft", (int) getpid());
        FILE *f = fopen(file, "w");
        if (!f)
                return 2;
        fprintf(f, "add table ip kube-proxy\nadd chain ip kube-proxy empty\n");
        for (int big = 0; big < 3; big++) {
                fprintf(f, "add chain ip kube-proxy big%d\n", big);
                for (int r = 0; r < 1500; r++)
                        fprintf(f, "add rule ip kube-proxy big%d ip daddr 10.1.%d.%d tcp dport %d drop comment \"r%d\"\n",
                                big, r / 250, r % 250, 1000 + r, r);
        }
        /* Names as long as real endpoint chains', many per round of lookups. */
        static char store[N_SMALL][128];
        for (int i = 0; i < N_SMALL; i++)
                snprintf(store[i], sizeof store[i], "c%d-endpoint-ABCDEFGH-a-long-namespace-name/a-long-service-name/tcp/"
                         "https__10.244.%d.%d/8443", i, i / 250, i % 250);
        for (int i = 0; i < N_SMALL; i++) {
                fprintf(f, "add chain ip kube-proxy %s\n", store[i]);
                fprintf(f, "add rule ip kube-proxy %s ip saddr 10.2.0.%d counter accept\n", store[i], i % 2);
                fprintf(f, "add rule ip kube-proxy %s meta mark set mark or 0x%x\n", store[i], 0x4000 << (i % 2));
        }
        fclose(f);
        snprintf(cmd, sizeof cmd, "ip netns exec %s nft -f %s", ns, file);
        int r = system(cmd);
        unlink(file);
        if (r != 0)
                return 2;

        /* big0 opens the first round, big1 sits in it, big2 follows c1. */
        static const char *names[N_SMALL + 10];
        size_t n = 0;
        names[n++] = "big0";
        for (int i = 0; i < N_SMALL; i++) {
                names[n++] = store[i];
                if (i == 60)
                        names[n++] = "big1";
                if (i == 1)
                        names[n++] = "big2";
        }
        names[n++] = "empty";
        names[n++] = "missing";
        struct nftables *nl = NULL;
        struct hmap out = HMAP_INIT;
        if (nftables_open(&nl) < 0 || nftables_rule_digests(nl, 4, "kube-proxy", names, n, &out) < 0) {
                printf("digests: reading the chains failed\n");
                return 1;
        }
        const struct nftables_chain_digest *b0 = hmap_get(&out, "big0"), *c0 = hmap_get(&out, store[0]),
                                           *c1 = hmap_get(&out, store[1]), *e = hmap_get(&out, "empty");
        int bad = !b0 || !c0 || !c1 || !e || hmap_get(&out, "missing") || out.len != n - 1 ||
                  e->digest != NFTABLES_DIGEST_INIT || c0->digest == c1->digest || b0->digest == c0->digest;
        for (size_t i = 0; !bad && i < n - 2; i++) {
                const struct nftables_chain_digest *d = hmap_get(&out, names[i]);
                const struct nftables_chain_digest *same = names[i][0] == 'b' ? b0 : (atoi(names[i] + 1) % 2 ? c1 : c0);
                bad = !d || d->digest != same->digest;
                if (bad)
                        printf("digests: %s differs from a chain with the same rules\n", names[i]);
        }
        printf("digests: %zu chains read, %s\n", out.len, bad ? "WRONG" : "as expected");
        nftables_names_done(&out);
        nftables_close(nl);
        return bad;
}

int main(int argc, char **argv) {
        struct kproxy_config cfg;
        struct host_facts host = {0};
        struct render_params p;
        struct nftables *nl = NULL;
        struct nftsync *sync = NULL;
        struct nftsync_stats st;
        struct buf a = BUF_INIT, b = BUF_INIT;
        char path[256];

        if (argc != 5) {
                fprintf(stderr, "usage: nftsync-walk SEED STEPS NETNS_A NETNS_B\n");
                return 2;
        }
        rng = strtoull(argv[1], NULL, 10);
        int steps = atoi(argv[2]);
        snprintf(path, sizeof path, "/run/netns/%s", argv[3]);
        int ns_a = open(path, O_RDONLY | O_CLOEXEC);
        snprintf(path, sizeof path, "/run/netns/%s", argv[4]);
        int ns_b = open(path, O_RDONLY | O_CLOEXEC);
        if (ns_a < 0 || ns_b < 0 || setns(ns_a, CLONE_NEWNET) < 0) {
                perror("walk: namespaces");
                return 2;
        }
        log_set_verbosity(-1);
        if (getenv("WALK_SHARDS"))
                shards = (unsigned) atoi(getenv("WALK_SHARDS"));
        if (strcmp(argv[1], "digests") == 0)
                return digests(argv[3]);
        config_init(&cfg);
        cfg.mode = PROXY_MODE_NFTABLES;
        cfg.cluster_cidr = strdup("10.244.0.0/16");
        cfg.nftables_shards = (int32_t) shards;
        struct inet_cidr hostaddr;
        inet_cidr_parse("192.168.0.2/24", &hostaddr);
        host.addrs = &hostaddr;
        host.n_addrs = 1;
        if (render_params_init(&p, 4, &cfg, "node-1", NULL, &host, NULL) < 0)
                return 2;

        if (strcmp(argv[1], "conflict") == 0) {
                if (nftables_open(&nl) < 0 || !(sync = nftsync_new(4, nl)))
                        return 2;
                int bad = conflict(argv[3], sync, &p);
                nftsync_free(sync);
                nftables_close(nl);
                render_params_done(&p);
                config_done(&cfg);
                return bad;
        }
        struct model *m = model_new();
        for (int i = 0; i < N_SVCS; i++) {
                upsert(m, make_service(i));
                upsert(m, make_slice(i));
        }
        if (nftables_open(&nl) < 0 || !(sync = nftsync_new(4, nl)))
                return 2;
        nftsync_set_chunk(sync, 40);    /* several transactions even for a small table */
        if (nftsync_full(sync, m, &p, NULL, 0, false, &st) < 0) {
                fprintf(stderr, "walk: first full sync failed\n");
                return 1;
        }
        for (int step = 0; step <= steps; step++) {
                if (step > 0) {
                        struct hmap changed = HMAP_INIT;
                        char keys[4][80];
                        int n = 1 + (int) rnd(3);
                        /* A restart over the table the last sync left
                         * writes only the chains it cannot compare (those
                         * with anonymous sets) and keeps the rest. */
                        if (step % 10 == 5) {
                                int anon = chains_with_anonymous_sets(argv[3]);
                                if (restart(&sync, nl, m, &p, &st) < 0) {
                                        fprintf(stderr, "walk: step %d: full sync after a restart failed\n", step);
                                        return 1;
                                }
                                printf("step %d: restart, %zu chains written, %zu kept, %zu messages in %zu "
                                       "transactions\n", step, st.chains_written, st.chains_kept, st.messages,
                                       st.transactions);
                                if (st.transactions > st.messages / 40 + 1) {
                                        printf("step %d: more transactions than the size bound needs\n", step);
                                        return 1;
                                }
                                if (anon < 0 || st.chains_written != (size_t) anon || st.chains_kept == 0 ||
                                    st.listed_chains) {
                                        printf("step %d: a restart over an unchanged table wrote %zu chains and "
                                               "kept %zu (%d have anonymous sets), chain names %slisted\n",
                                               step, st.chains_written, st.chains_kept, anon,
                                               st.listed_chains ? "" : "not ");
                                        return 1;
                                }
                        }
                        for (int k = 0; k < n; k++) {
                                int i = (int) rnd(N_SVCS);
                                char name[64];
                                snprintf(keys[k], sizeof keys[k], "walk/%s", svc_name(i, name));
                                switch (rnd(6)) {
                                case 0:
                                        model_service_delete(m, keys[k]);
                                        break;
                                case 1:
                                case 2:
                                        upsert(m, make_service(i));
                                        break;
                                default:
                                        upsert(m, make_slice(i));
                                        break;
                                }
                                hmap_put(&changed, keys[k], NULL);
                        }
                        /* Every fourth step the changes are not told to
                         * the sync (change tracking that missed them), and
                         * a resync must find them; every eighth the table
                         * also holds a chain no record wants. Every tenth,
                         * kproxy restarts after the changes (made while it
                         * was down), and someone else changed two chains. */
                        bool resync = step % 4 == 0;
                        if (step % 8 == 0) {
                                snprintf(path, sizeof path, "ip netns exec %s nft add chain ip %s stray-%d",
                                         argv[3], step % 16 == 0 ? nat_table() : "kube-proxy", step);
                                if (system(path) != 0) {
                                        fprintf(stderr, "walk: step %d: cannot add a stray chain\n", step);
                                        return 2;
                                }
                        }
                        if (step % 10 == 0) {
                                snprintf(path, sizeof path,
                                         "ip netns exec %s nft 'flush chain ip %s services; insert rule ip "
                                         "%s nat-output ip daddr 10.96.0.10 drop'", argv[3], nat_table(), nat_table());
                                if (system(path) != 0) {
                                        fprintf(stderr, "walk: step %d: cannot change chains\n", step);
                                        return 2;
                                }
                        }
                        int r = step % 10 == 0 ? restart(&sync, nl, m, &p, &st)
                                : resync       ? nftsync_resync(sync, m, &p, NULL, 0, &st)
                                               : nftsync_partial(sync, m, &p, &changed, &st);
                        hmap_done(&changed);
                        if (r < 0) {
                                fprintf(stderr, "walk: step %d: sync failed\n", step);
                                return 1;
                        }
                        /* The tables share their transactions: a partial
                         * sync is one, whichever tables it touches; a full
                         * sync sends no transaction below the size bound
                         * but its last. */
                        if (step % 10 != 0 && !resync && st.transactions > 1) {
                                printf("step %d: a partial sync took %zu transactions\n", step, st.transactions);
                                return 1;
                        }
                        if (step % 10 == 0 && st.transactions > st.messages / 40 + 1) {
                                printf("step %d: a full sync of %zu messages took %zu transactions\n", step,
                                       st.messages, st.transactions);
                                return 1;
                        }
                        if (step % 10 == 0 || resync)
                                printf("step %d: %s, %zu chains written, %zu kept, %zu deleted, %s\n", step,
                                       step % 10 == 0 ? "restart after changes" : "resync", st.chains_written,
                                       st.chains_kept, st.chains_deleted,
                                       st.listed_chains ? "chains listed" : "chains not listed");
                        /* Without a stray, the kernel's count of chains and
                         * sets matches the records: no listing needed. */
                        if (resync && step % 10 != 0 && step % 8 != 0 && st.listed_chains) {
                                printf("step %d: a resync without strays listed the table's chains\n", step);
                                return 1;
                        }
                }
                if (fresh_load(ns_b, ns_a, m, &p) < 0 || table_text(argv[3], &a) < 0 || table_text(argv[4], &b) < 0) {
                        fprintf(stderr, "walk: step %d: cannot compare\n", step);
                        return 2;
                }
                if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0) {
                        char fa[64], fb[64], cmd[320];
                        snprintf(fa, sizeof fa, "/tmp/nftsync-walk-%d.fresh", (int) getpid());
                        snprintf(fb, sizeof fb, "/tmp/nftsync-walk-%d.incremental", (int) getpid());
                        FILE *x = fopen(fa, "w"), *y = fopen(fb, "w");
                        if (x && y) {
                                fputs(b.data, x);
                                fputs(a.data, y);
                        }
                        if (x)
                                fclose(x);
                        if (y)
                                fclose(y);
                        printf("step %d: the incremental table differs from a fresh load:\n", step);
                        fflush(stdout);
                        snprintf(cmd, sizeof cmd, "diff -u %s %s; rm -f %s %s", fa, fb, fa, fb);
                        if (system(cmd) < 0)
                                perror("diff");
                        return 1;
                }
                printf("step %d: same (%zu messages, %zu conflicts)\n", step, st.messages, st.conflicts);
        }
        nftsync_free(sync);
        nftables_close(nl);
        model_free(m);
        render_params_done(&p);
        config_done(&cfg);
        buf_done(&a);
        buf_done(&b);
        return 0;
}

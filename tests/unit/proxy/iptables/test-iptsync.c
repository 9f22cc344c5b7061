/* SPDX-License-Identifier: Apache-2.0 */
/* iptables mode's sync object against a fake kernel that applies
 * iptables-restore --noflush input the way the kernel does (a declared
 * chain is flushed, -A appends, -I inserts, -D deletes a rule, -X a chain)
 * and prints its tables as iptables-save would. Whatever iptsync leaves
 * out, rewrites by rule or reads back, the kernel must end up holding
 * exactly what a whole render restored into an empty kernel holds; and
 * what it sends is checked to be the least the tests expect. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

#include "apply/iptables-known.h"
#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "kube/intake.h"
#include "model/model.h"
#include "proxy/iptables/iptsync.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/hmap.h"
#include "test.h"

/* --- the fake kernel --- */

#define MAX_CHAINS 256
#define MAX_RULES 64

struct chain {
        char table[8];
        char name[40];
        char *rules[MAX_RULES];         /* the text after "-A NAME " */
        size_t n_rules;
};

struct kernel {
        struct chain chains[MAX_CHAINS];
        size_t n_chains;
        bool jumps;                     /* the built-in chains jump to kproxy's */
        int fail_restores;              /* the next restores to refuse */
        size_t restores, scans, observes, ensures;
        size_t last_len;                /* of the last restore input */
        char *last_input;
};

static struct chain *chain_get(struct kernel *k, const char *table, const char *name, bool create) {
        for (size_t i = 0; i < k->n_chains; i++)
                if (strcmp(k->chains[i].table, table) == 0 && strcmp(k->chains[i].name, name) == 0)
                        return &k->chains[i];
        if (!create || k->n_chains == MAX_CHAINS)
                return NULL;
        struct chain *c = &k->chains[k->n_chains++];
        *c = (struct chain) {0};
        snprintf(c->table, sizeof c->table, "%s", table);
        snprintf(c->name, sizeof c->name, "%s", name);
        return c;
}

static void chain_flush(struct chain *c) {
        for (size_t i = 0; i < c->n_rules; i++)
                free(c->rules[i]);
        c->n_rules = 0;
}

static void chain_delete(struct kernel *k, struct chain *c) {
        chain_flush(c);
        *c = k->chains[--k->n_chains];
}

static void kernel_done(struct kernel *k) {
        while (k->n_chains > 0)
                chain_delete(k, &k->chains[0]);
        free(k->last_input);
}

/* Splits "NAME REST" into the chain and, after it, the rule. */
static struct chain *line_chain(struct kernel *k, const char *table, char *arg, char **ret_rest) {
        char *sp = strchr(arg, ' ');
        if (sp)
                *sp = '\0';
        *ret_rest = sp ? sp + 1 : arg + strlen(arg);
        return chain_get(k, table, arg, false);
}

/* One line of restore input; -EINVAL for what the kernel would refuse. */
static int apply_line(struct kernel *k, const char *table, char *line) {
        char *rest;
        struct chain *c;

        if (line[0] == ':') {
                char *sp = strchr(line, ' ');
                if (sp)
                        *sp = '\0';
                c = chain_get(k, table, line + 1, true);
                if (!c)
                        return -ENOSPC;
                chain_flush(c);
                return 0;
        }
        if (strncmp(line, "-A ", 3) == 0 || strncmp(line, "-I ", 3) == 0 || strncmp(line, "-D ", 3) == 0) {
                char op = line[1];
                c = line_chain(k, table, line + 3, &rest);
                if (!c)
                        return -EINVAL;
                size_t pos = c->n_rules;
                if (op == 'I') {
                        char *end;
                        pos = strtoul(rest, &end, 10) - 1;
                        if (end == rest || pos > c->n_rules)
                                return -EINVAL;
                        rest = end + (*end == ' ');
                }
                if (op == 'D') {
                        for (pos = 0; pos < c->n_rules && strcmp(c->rules[pos], rest) != 0; pos++)
                                ;
                        if (pos == c->n_rules)
                                return -EINVAL;         /* iptables-restore: "Bad rule" */
                        free(c->rules[pos]);
                        memmove(&c->rules[pos], &c->rules[pos + 1], (--c->n_rules - pos) * sizeof *c->rules);
                        return 0;
                }
                /* The kernel refuses a jump to a chain it does not hold. */
                const char *j = strstr(rest, " -j KUBE-");
                if (j && op != 'D') {
                        char target[64];
                        snprintf(target, sizeof target, "%.*s", (int) strcspn(j + 4, " "), j + 4);
                        if (!chain_get(k, table, target, false))
                                return -EINVAL;
                }
                if (c->n_rules == MAX_RULES)
                        return -ENOSPC;
                memmove(&c->rules[pos + 1], &c->rules[pos], (c->n_rules - pos) * sizeof *c->rules);
                c->rules[pos] = strdup(rest);
                c->n_rules++;
                return 0;
        }
        if (strncmp(line, "-X ", 3) == 0) {
                c = chain_get(k, table, line + 3, false);
                if (!c)
                        return -ENOENT;
                chain_delete(k, c);
                return 0;
        }
        return line[0] == '#' || line[0] == '\0' || strcmp(line, "COMMIT") == 0 ? 0 : -EINVAL;
}

/* All or nothing, as a restore is: on a refused line the kernel is as it
 * was (the copy is put back). */
static int kernel_restore(struct kernel *k, const char *input, size_t len) {
        struct kernel saved = *k;
        char *text = strndup(input, len), *save = NULL, table[8] = "";
        int r = 0;

        for (size_t i = 0; i < k->n_chains; i++)
                for (size_t j = 0; j < k->chains[i].n_rules; j++)
                        saved.chains[i].rules[j] = strdup(k->chains[i].rules[j]);
        for (char *line = strtok_r(text, "\n", &save); line && r == 0; line = strtok_r(NULL, "\n", &save)) {
                if (line[0] == '*')
                        snprintf(table, sizeof table, "%s", line + 1);
                else
                        r = apply_line(k, table, line);
        }
        free(text);
        if (r < 0) {
                saved.last_input = k->last_input;
                k->last_input = NULL;
                kernel_done(k);
                *k = saved;
        } else {
                for (size_t i = 0; i < saved.n_chains; i++)
                        chain_flush(&saved.chains[i]);
        }
        return r;
}

/* iptables-save of one table, chains by name. */
static int cmp_chain(const void *a, const void *b) {
        const struct chain *const *x = a, *const *y = b;
        return strcmp((*x)->name, (*y)->name);
}

static void kernel_save(const struct kernel *k, const char *table, struct buf *out) {
        const struct chain *sorted[MAX_CHAINS];
        size_t n = 0;
        for (size_t i = 0; i < k->n_chains; i++)
                if (strcmp(k->chains[i].table, table) == 0)
                        sorted[n++] = &k->chains[i];
        qsort(sorted, n, sizeof *sorted, cmp_chain);
        buf_printf(out, "*%s\n", table);
        for (size_t i = 0; i < n; i++)
                buf_printf(out, ":%s - [0:0]\n", sorted[i]->name);
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < sorted[i]->n_rules; j++)
                        buf_printf(out, "-A %s %s\n", sorted[i]->name, sorted[i]->rules[j]);
        buf_puts(out, "COMMIT\n");
}

static void kernel_dump(const struct kernel *k, struct buf *out) {
        kernel_save(k, "nat", out);
        kernel_save(k, "filter", out);
}

static void kernel_observe(struct kernel *k, struct iptables_known *known) {
        static const char *const tables[] = {"nat", "filter"};
        for (size_t i = 0; i < 2 && known; i++) {
                struct buf b = BUF_INIT;
                kernel_save(k, tables[i], &b);
                iptables_known_observe(known, tables[i], b.data, b.len);
                buf_done(&b);
        }
}

static const char *const owned_prefixes[] = {"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-"};

static int fake_scan(void *u, uint8_t family, struct hmap *existing, char **ret_names, bool *ret_jumps_ok,
                     struct iptables_known *known) {
        struct kernel *k = u;
        struct buf names = BUF_INIT;
        (void) family;
        k->scans++;
        /* Names first (the buffer moves while it grows), then the map. */
        for (size_t i = 0; i < k->n_chains; i++)
                for (size_t p = 0; p < 5; p++)
                        if (strcmp(k->chains[i].table, "nat") == 0 &&
                            strncmp(k->chains[i].name, owned_prefixes[p], strlen(owned_prefixes[p])) == 0) {
                                buf_puts(&names, k->chains[i].name);
                                buf_putc(&names, '\0');
                        }
        for (size_t off = 0; off < names.len; off += strlen(names.data + off) + 1)
                hmap_put(existing, names.data + off, names.data + off);
        *ret_names = names.data;
        *ret_jumps_ok = k->jumps;
        kernel_observe(k, known);
        return 0;
}

static int fake_ensure_jumps(void *u, uint8_t family) {
        struct kernel *k = u;
        (void) family;
        k->ensures++;
        k->jumps = true;
        return 0;
}

static int fake_restore(void *u, uint8_t family, const char *input, size_t len, bool loaded) {
        struct kernel *k = u;
        (void) family;
        (void) loaded;
        k->restores++;
        free(k->last_input);
        k->last_input = strndup(input, len);
        k->last_len = len;
        if (k->fail_restores > 0) {
                k->fail_restores--;
                return -EIO;
        }
        return kernel_restore(k, input, len);
}

static int fake_observe(void *u, uint8_t family, const char *input, size_t len, struct iptables_known *known) {
        struct kernel *k = u;
        (void) family;
        (void) input;
        (void) len;
        k->observes++;
        kernel_observe(k, known);
        return 0;
}

/* --- the cluster --- */

struct cluster {
        struct kproxy_config c;
        struct host_facts h;
        struct intake *in;
        struct render_params p;
};

static void put(struct cluster *cl, enum intake_source src, const char *key, const char *text) {
        json_error_t e;
        json_t *j = text ? json_loads(text, 0, &e) : NULL;
        if (text && !j)
                fprintf(stderr, "bad test JSON: %s\n", e.text);
        intake_object(cl->in, src, key, j);
        json_decref(j);
}

/* Service sNN (cluster IP 10.96.0.NN+1, NodePort 300NN) with n endpoints. */
static void service(struct cluster *cl, int idx, int n_endpoints) {
        char key[64], text[1024], eps[512] = "";
        snprintf(key, sizeof key, "default/s%02d", idx);
        snprintf(text, sizeof text,
                 "{\"kind\":\"Service\",\"metadata\":{\"name\":\"s%02d\",\"namespace\":\"default\"},"
                 "\"spec\":{\"type\":\"NodePort\",\"clusterIP\":\"10.96.0.%d\",\"clusterIPs\":[\"10.96.0.%d\"],"
                 "\"ports\":[{\"name\":\"http\",\"port\":80,\"nodePort\":%d}]}}",
                 idx, idx + 1, idx + 1, 30000 + idx);
        put(cl, INTAKE_SERVICES, key, text);
        for (int i = 0; i < n_endpoints; i++)
                snprintf(eps + strlen(eps), sizeof eps - strlen(eps), "%s{\"addresses\":[\"10.1.%d.%d\"]}",
                         i ? "," : "", idx, i + 1);
        snprintf(key, sizeof key, "default/s%02d-1", idx);
        snprintf(text, sizeof text,
                 "{\"kind\":\"EndpointSlice\",\"metadata\":{\"name\":\"s%02d-1\",\"namespace\":\"default\","
                 "\"labels\":{\"kubernetes.io/service-name\":\"s%02d\"}},\"addressType\":\"IPv4\","
                 "\"endpoints\":[%s],\"ports\":[{\"name\":\"http\",\"port\":8080}]}",
                 idx, idx, eps);
        put(cl, INTAKE_SLICES, key, text);
}

static bool cluster_init(struct cluster *cl) {
        *cl = (struct cluster) {0};
        if (config_init(&cl->c) < 0 || intake_new("n1", NULL, &cl->in) < 0)
                return false;
        return render_params_init(&cl->p, 4, &cl->c, "n1", NULL, &cl->h, NULL) == 0;
}

static void cluster_done(struct cluster *cl) {
        render_params_done(&cl->p);
        intake_free(cl->in);
        config_done(&cl->c);
}

/* What the kernel holds after the whole render of the model is restored
 * into an empty one (with the jumps inserted). */
static void reference(struct cluster *cl, struct buf *out) {
        struct kernel k = {.jumps = true};
        struct buf input = BUF_INIT;
        CHECK(render_iptables(intake_model(cl->in), &cl->p, NULL, &input) == 0);
        CHECK(kernel_restore(&k, input.data, input.len) == 0);
        kernel_dump(&k, out);
        buf_done(&input);
        kernel_done(&k);
}

/* The kernel holds exactly the reference. */
static bool kernel_matches(struct cluster *cl, const struct kernel *k, bool quiet) {
        struct buf want = BUF_INIT, have = BUF_INIT;
        reference(cl, &want);
        kernel_dump(k, &have);
        bool same = want.len == have.len && memcmp(want.data, have.data, want.len) == 0;
        if (!same && !quiet)
                fprintf(stderr, "kernel:\n%.*s\nexpected:\n%.*s\n", (int) have.len, have.data, (int) want.len,
                        want.data);
        buf_done(&want);
        buf_done(&have);
        return same;
}

static struct iptsync_kernel fake_kernel(struct kernel *k) {
        return (struct iptsync_kernel) {
                .scan = fake_scan,
                .ensure_jumps = fake_ensure_jumps,
                .restore = fake_restore,
                .observe = fake_observe,
                .userdata = k,
        };
}

/* A rule of another process appended to a chain of kproxy's. */
static void tamper(struct kernel *k, const char *table, const char *chain_prefix) {
        for (size_t i = 0; i < k->n_chains; i++)
                if (strcmp(k->chains[i].table, table) == 0 &&
                    strncmp(k->chains[i].name, chain_prefix, strlen(chain_prefix)) == 0) {
                        struct chain *c = &k->chains[i];
                        c->rules[c->n_rules++] = strdup("-m comment --comment \"someone else\" -j ACCEPT");
                        return;
                }
}

static void test_syncs(void) {
        struct cluster cl;
        struct kernel k = {0};
        struct iptsync *s = NULL;
        struct iptsync_stats st;
        struct hmap changed = HMAP_INIT;
        char tmp[] = "/tmp/kproxy-test-iptsync-XXXXXX";

        CHECK(cluster_init(&cl));
        CHECK(mkdtemp(tmp) != NULL);
        struct iptsync_kernel fk = fake_kernel(&k);
        s = iptsync_new(4, &fk, tmp);
        if (!s)
                goto out;
        /* Enough services that the top-level chains change by rule. */
        for (int i = 0; i < 20; i++)
                service(&cl, i, 1 + i % 3);
        const struct model *m = intake_model(cl.in);

        /* First full sync: reads, inserts the jumps, writes everything. */
        CHECK(iptsync_full(s, m, &cl.p, &st) == 0);
        CHECK(k.scans == 1 && k.ensures == 1 && k.restores == 1);
        CHECK(st.chains_left_out == 0 && st.bytes_sent > 0 && !st.refused);
        CHECK(st.n_nat_rules > 0 && st.n_nat_rules == st.n_nat_rules_total);
        CHECK(kernel_matches(&cl, &k, false));
        size_t full_bytes = st.bytes_sent;

        /* Nothing changed: a partial sync leaves out every top-level
         * chain, and the next one sends nothing at all. */
        CHECK(iptsync_partial(s, m, &cl.p, &changed, &st) == 0);
        CHECK(k.restores == 2 && st.chains_by_rule > 0 && !strstr(k.last_input, "-A "));
        CHECK(iptsync_partial(s, m, &cl.p, &changed, &st) == 0);
        CHECK(k.restores == 2 && st.bytes_sent == 0);

        /* One service's endpoints: its chains, and no top-level chain. */
        service(&cl, 1, 3);
        hmap_put(&changed, "default/s01", (void *) "default/s01");
        CHECK(iptsync_partial(s, m, &cl.p, &changed, &st) == 0);
        CHECK(k.restores == 3 && k.scans == 1);
        CHECK(strstr(k.last_input, "default/s01") && !strstr(k.last_input, "default/s00"));
        CHECK(!strstr(k.last_input, ":KUBE-SERVICES"));
        CHECK(st.chains_by_rule > 0 && st.bytes_sent < full_bytes);
        CHECK(kernel_matches(&cl, &k, false));

        /* A deleted service: its jump goes by rule, its chains with -X. */
        put(&cl, INTAKE_SERVICES, "default/s02", NULL);
        hmap_done(&changed);
        hmap_put(&changed, "default/s02", (void *) "default/s02");
        CHECK(iptsync_partial(s, m, &cl.p, &changed, &st) == 0);
        CHECK(strstr(k.last_input, "-D KUBE-SERVICES") && strstr(k.last_input, "-X KUBE-SVC-"));
        CHECK(kernel_matches(&cl, &k, false));

        /* A full sync with nothing changed leaves out every chain the
         * kernel holds as rendered. */
        CHECK(iptsync_full(s, m, &cl.p, &st) == 0);
        CHECK(st.chains_left_out > 0 && st.bytes_sent < full_bytes / 4);
        CHECK(kernel_matches(&cl, &k, false));

        /* Someone else changed a service chain: the full sync rewrites it. */
        tamper(&k, "nat", "KUBE-SVC-");
        CHECK(!kernel_matches(&cl, &k, true));
        CHECK(iptsync_full(s, m, &cl.p, &st) == 0);
        CHECK(kernel_matches(&cl, &k, false));

        /* ... a top-level chain: the partial sync by rule is refused (its
         * -D meets another rule list), and a full sync follows at once. */
        service(&cl, 0, 2);
        put(&cl, INTAKE_SERVICES, "default/s01", NULL);
        hmap_done(&changed);
        hmap_put(&changed, "default/s00", (void *) "default/s00");
        hmap_put(&changed, "default/s01", (void *) "default/s01");
        for (size_t i = 0; i < k.n_chains; i++)
                if (strcmp(k.chains[i].name, "KUBE-SERVICES") == 0)
                        for (size_t j = 0; j < k.chains[i].n_rules; j++)
                                if (strstr(k.chains[i].rules[j], "default/s01")) {
                                        free(k.chains[i].rules[j]);
                                        k.chains[i].rules[j] = strdup("-j RETURN");
                                }
        size_t scans = k.scans;
        CHECK(iptsync_partial(s, m, &cl.p, &changed, &st) == 0);
        CHECK(k.scans == scans + 1);
        CHECK(kernel_matches(&cl, &k, false));

        /* Refused restores (the partial one, then the full one it falls
         * back to): the kernel keeps what it had, nothing is trusted, and
         * the next full sync writes every chain. */
        k.fail_restores = 2;
        service(&cl, 30, 2);
        hmap_done(&changed);
        hmap_put(&changed, "default/s30", (void *) "default/s30");
        struct buf before = BUF_INIT, after = BUF_INIT;
        kernel_dump(&k, &before);
        CHECK(iptsync_partial(s, m, &cl.p, &changed, &st) < 0);
        CHECK(st.refused);
        kernel_dump(&k, &after);
        CHECK(before.len == after.len && memcmp(before.data, after.data, before.len) == 0);
        buf_done(&before);
        buf_done(&after);
        CHECK(iptsync_full(s, m, &cl.p, &st) == 0);
        CHECK(st.chains_left_out == 0);
        CHECK(kernel_matches(&cl, &k, false));
        /* ... learned again by that full sync: the next leaves them out. */
        CHECK(iptsync_full(s, m, &cl.p, &st) == 0);
        CHECK(st.chains_left_out > 0);
        s = iptsync_free(s);

        /* A restart with the state directory: the first full sync writes
         * only what changed while no process ran. */
        tamper(&k, "nat", "KUBE-SEP-");
        s = iptsync_new(4, &fk, tmp);
        if (!s)
                goto out;
        CHECK(iptsync_full(s, m, &cl.p, &st) == 0);
        CHECK(st.chains_left_out > 0);
        CHECK(strstr(k.last_input, ":KUBE-SEP-") != NULL);
        CHECK(kernel_matches(&cl, &k, false));
out:
        iptsync_free(s);
        hmap_done(&changed);
        char path[4096];
        if (iptables_known_file(tmp, 4, path, sizeof path))
                unlink(path);
        rmdir(tmp);
        kernel_done(&k);
        cluster_done(&cl);
}

/* A cold start in parts: the own chains of a few services at a time, the
 * top-level chains last; the kernel ends as one input would leave it, and
 * what each part wrote is known to the next full sync. */
static void test_cold_parts(void) {
        struct cluster cl;
        struct kernel k = {0};
        struct iptsync *s = NULL;
        struct iptsync_stats st;
        struct hmap none = HMAP_INIT;
        char tmp[] = "/tmp/kproxy-test-iptsync-XXXXXX";

        CHECK(cluster_init(&cl));
        CHECK(mkdtemp(tmp) != NULL);
        struct iptsync_kernel fk = fake_kernel(&k);
        /* With a state directory a small table is read back after a full
         * sync (without one, only over netlink or past 1000 chains). */
        s = iptsync_new(4, &fk, tmp);
        if (!s)
                goto out;
        iptsync_set_part_services(s, 3);
        for (int i = 0; i < 20; i++)
                service(&cl, i, 1 + i % 3);
        const struct model *m = intake_model(cl.in);

        /* The first part fails: nothing is trusted, the kernel is as it was. */
        k.fail_restores = 1;
        CHECK(iptsync_full(s, m, &cl.p, &st) < 0);
        CHECK(st.refused && k.restores == 1);
        size_t nat_chains = 0;
        for (size_t i = 0; i < k.n_chains; i++)
                nat_chains += strncmp(k.chains[i].name, "KUBE-SEP-", 9) == 0;
        CHECK(nat_chains == 0);

        /* Seven parts of three services (or fewer), then the top level. */
        k.restores = 0;
        CHECK(iptsync_full(s, m, &cl.p, &st) == 0);
        CHECK(k.restores == 8 && !st.refused && st.chains_left_out == 0);
        CHECK(strstr(k.last_input, "-A KUBE-SERVICES") && !strstr(k.last_input, ":KUBE-SEP-"));
        CHECK(st.n_nat_rules == st.n_nat_rules_total && st.n_nat_rules > 100);
        CHECK(kernel_matches(&cl, &k, false));

        /* Every chain of every part was learned: a full sync leaves them
         * all out, and a partial one of nothing sends no rule. */
        CHECK(iptsync_full(s, m, &cl.p, &st) == 0);
        CHECK(st.chains_left_out > 0 && !strstr(k.last_input, ":KUBE-SEP-") && !strstr(k.last_input, ":KUBE-SVC-"));
        CHECK(kernel_matches(&cl, &k, false));
        CHECK(iptsync_partial(s, m, &cl.p, &none, &st) == 0);
        CHECK(st.bytes_sent == 0 || !strstr(k.last_input, "-A "));

        /* A change after the parts: a partial sync as usual. */
        service(&cl, 4, 3);
        hmap_put(&none, "default/s04", (void *) "default/s04");
        CHECK(iptsync_partial(s, m, &cl.p, &none, &st) == 0);
        CHECK(kernel_matches(&cl, &k, false));

        /* A full sync in parts over the loaded tables: a service gone while
         * nobody synced (its chains are deleted in the last part), one
         * changed, one endpoint chain changed by someone else; only those
         * are written. */
        put(&cl, INTAKE_SERVICES, "default/s07", NULL);
        service(&cl, 12, 1);
        tamper(&k, "nat", "KUBE-SEP-");
        size_t restores = k.restores;
        CHECK(iptsync_full(s, m, &cl.p, &st) == 0);
        CHECK(!st.refused && st.chains_left_out > 0);
        CHECK(k.restores - restores >= 2 && k.restores - restores <= 4);
        CHECK(strstr(k.last_input, "-X KUBE-SVC-") != NULL);
        CHECK(st.n_nat_rules == st.n_nat_rules_total);
        CHECK(kernel_matches(&cl, &k, false));
out:
        iptsync_free(s);
        hmap_done(&none);
        char path[4096];
        if (iptables_known_file(tmp, 4, path, sizeof path))
                unlink(path);
        rmdir(tmp);
        kernel_done(&k);
        cluster_done(&cl);
}

int main(void) {
        TEST_RUN(test_syncs);
        TEST_RUN(test_cold_parts);
        TEST_DONE();
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Makes the seeds of the nf_tables harnesses from what a kernel says: the
 * unit tests' in-memory nf_tables (tests/unit/nft-fake.h) is loaded with
 * a small cluster by a real sync, then nft-readers.h's sequence runs on a
 * handle whose link records every reply the fake gives, in the nft-dump
 * harness's input format ([u16 length][u8 flags][bytes], sequence numbers
 * made relative to the send they answer, which the harness maps back; an
 * empty record for a read that found nothing). Each reply of a run is
 * also a seed of the nft-digest harness (a buffer of whole messages).
 *
 *   Usage: seeds-nft CORPUS_DIR   (writes CORPUS_DIR/nft-dump/seed-*,
 *                                  CORPUS_DIR/nft-digest/seed-*)
 */
#include <errno.h>
#include <libmnl/libmnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables.h"
#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "model/model.h"
#include "../../unit/cluster.h"
#include "../../unit/nft-fake.h"
#include "../nft-readers.h"
#include "proxy/nftables/nftsync.h"
#include "render/render.h"
#include "util/buf.h"
#include "util/inet.h"

struct rec_link {
        struct nftables_link link;
        struct nftables_link *inner;
        struct recorder *rec;
        uint32_t seq0;
};

struct recorder {
        struct nft_fake *k;
        struct buf out;                 /* the nft-dump input */
        const char *dir;
        const char *name;
        unsigned n_replies;
        bool digest_seeds;              /* each reply a seed of nft-digest too */
};

static void write_file(const char *dir, const char *sub, const char *name, const void *data, size_t len) {
        char path[4096];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s/seed-%s", dir, sub, name);
        f = fopen(path, "we");
        if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
                fprintf(stderr, "seeds-nft: cannot write %s\n", path);
                exit(1);
        }
}

static int rec_send(struct nftables_link *nl, const void *buf, size_t len) {
        struct rec_link *l = (struct rec_link *) nl;
        if (len >= sizeof(struct nlmsghdr))
                l->seq0 = ((const struct nlmsghdr *) buf)->nlmsg_seq;
        return l->inner->ops->send(l->inner, buf, len);
}

static ssize_t rec_recv(struct nftables_link *nl, void *buf, size_t len) {
        struct rec_link *l = (struct rec_link *) nl;
        struct recorder *rec = l->rec;
        ssize_t n = l->inner->ops->recv(l->inner, buf, len > 65535 ? 65535 : len);
        uint16_t n16 = n > 0 ? (uint16_t) n : 0;
        uint8_t flags = 0;

        buf_put(&rec->out, (const char *) &n16, 2);
        buf_put(&rec->out, (const char *) &flags, 1);
        if (n <= 0)
                return n;
        /* The copy recorded: sequence numbers relative to the send. */
        size_t at = rec->out.len;
        buf_put(&rec->out, buf, (size_t) n);
        int left = (int) n;
        for (struct nlmsghdr *nlh = (struct nlmsghdr *) (rec->out.data + at); mnl_nlmsg_ok(nlh, left);
             nlh = mnl_nlmsg_next(nlh, &left))
                nlh->nlmsg_seq -= l->seq0;

        if (rec->digest_seeds) {
                char name[256];
                snprintf(name, sizeof name, "%s-%u", rec->name, rec->n_replies++);
                write_file(rec->dir, "nft-digest", name, buf, (size_t) n);
        }
        return n;
}

static uint32_t rec_portid(const struct nftables_link *nl) {
        const struct rec_link *l = (const struct rec_link *) nl;
        return l->inner->ops->portid(l->inner);
}

static void rec_free(struct nftables_link *nl) {
        struct rec_link *l = (struct rec_link *) nl;
        l->inner->ops->free(l->inner);
        free(l);
}

static const struct nftables_link_ops rec_ops = {rec_send, rec_recv, rec_portid, rec_free};

static int rec_open(void *kernel, size_t rcvbuf, struct nftables_link **ret) {
        struct recorder *rec = kernel;
        struct rec_link *l = calloc(1, sizeof *l);
        int r;

        if (!l)
                return -ENOMEM;
        r = nft_fake_open(rec->k, rcvbuf, &l->inner);
        if (r < 0) {
                free(l);
                return r;
        }
        l->link.ops = &rec_ops;
        l->rec = rec;
        *ret = &l->link;
        return 0;
}

/* A kernel holding family's table for a small cluster, as a full sync
 * wrote it (with_table), or an empty one. */
static struct nft_fake *loaded_kernel(uint8_t family, bool with_table) {
        struct kproxy_config cfg;
        struct host_facts host = {0};
        struct inet_cidr hostaddr;
        struct render_params p;
        struct nftables *nl;
        struct nftsync *sync;
        struct nftsync_stats st = {0};
        struct nft_fake *k = nft_fake_new();
        struct model *m = model_new();

        if (!with_table) {
                model_free(m);
                return k;
        }
        config_init(&cfg);
        cfg.mode = PROXY_MODE_NFTABLES;
        cfg.cluster_cidr = strdup(family == 4 ? "10.244.0.0/16" : "fd00:10:244::/48");
        inet_cidr_parse(family == 4 ? "192.168.0.2/24" : "fd00::2/64", &hostaddr);
        host.addrs = &hostaddr;
        host.n_addrs = 1;
        if (render_params_init(&p, family, &cfg, "node-1", NULL, &host, NULL) < 0)
                abort();
        cluster_small(m, true);
        if (nftables_open_on(nft_fake_open, k, &nl) < 0 || !(sync = nftsync_new(family, nl)) ||
            nftsync_full(sync, m, &p, NULL, 0, false, &st) < 0)
                abort();
        nftsync_free(sync);
        nftables_close(nl);
        render_params_done(&p);
        config_done(&cfg);
        model_free(m);
        return k;
}

static void record(const char *dir, const char *name, uint8_t mode, bool with_table, bool digest_seeds) {
        struct recorder rec = {.out = BUF_INIT, .dir = dir, .name = name, .digest_seeds = digest_seeds};
        struct nftables *n;

        rec.k = loaded_kernel(mode & 1 ? 6 : 4, with_table);
        buf_put(&rec.out, (const char *) &mode, 1);
        if (nftables_open_on(rec_open, &rec, &n) < 0)
                abort();
        nft_readers_run(n, mode);
        nftables_close(n);
        write_file(dir, "nft-dump", name, rec.out.data, rec.out.len);
        buf_done(&rec.out);
        nft_fake_free(rec.k);
}

int main(int argc, char **argv) {
        if (argc != 2) {
                fprintf(stderr, "usage: seeds-nft CORPUS_DIR\n");
                return 2;
        }
        record(argv[1], "ipv4", 0, true, true);
        record(argv[1], "ipv4-small-reads", 2, true, false);
        record(argv[1], "ipv6", 1, true, true);
        record(argv[1], "empty", 0, false, false);
        return 0;
}

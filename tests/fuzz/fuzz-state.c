/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: any bytes as a state file, through the whole render
 * path (JSON/YAML load, object decoding, model, categorisation, both
 * families' iptables rules and nft scripts). It must never crash, leak or trip UBSan, and
 * every line it renders must be made of known-safe characters.
 */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "kube/decode.h"
#include "kube/load.h"
#include "model/model.h"
#include <linux/netlink.h>

#include "render/nftmsg.h"
#include "render/render.h"
#include "util/buf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int add(void *u, const json_t *obj) {
        struct model *m = u;
        const char *kind = json_string_value(json_object_get(obj, "kind"));
        char err[KUBE_ERRLEN];
        struct svc *s;
        struct slice *sl;
        struct node *n;

        if (!kind)
                return 0;
        if (strcmp(kind, "Service") == 0 && kube_decode_service(obj, &s, err) == 0)
                model_service_upsert(m, s);
        else if (strcmp(kind, "EndpointSlice") == 0 && kube_decode_slice(obj, &sl, err) == 0)
                model_slice_upsert(m, sl);
        else if (strcmp(kind, "Node") == 0 && kube_decode_node(obj, &n, err) == 0)
                model_node_set(m, n);
        return 0;
}

/* Every byte printable ASCII or a newline, and none a shell would read.
 * One strspn, not a loop here: the fuzzer learns nothing from this check,
 * and an instrumented loop's compares took a fifth of each execution. */
static void safe_text(const char *p, size_t len) {
        static char allowed[128];

        if (!allowed[0]) {
                size_t n = 0;
                allowed[n++] = '\n';
                for (int c = 0x20; c < 0x7f; c++)
                        if (c != '\'' && c != '`' && c != '$' && c != '\\')
                                allowed[n++] = (char) c;
        }
        assert(len == 0 || (strlen(p) == len && strspn(p, allowed) == len));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct kproxy_config cfg;
        struct host_facts host = {.nfacct = true};
        struct model *m = model_new();
        char err[KUBE_LOAD_ERRLEN];

        config_init(&cfg);
        cfg.cluster_cidr = strdup("10.0.0.0/8,fd00::/64");
        kube_load_buffer("fuzz", (const char *) data, size, add, m, err);
        for (uint8_t family = 4; family <= 6; family += 2) {
                struct render_params p;
                struct buf out = BUF_INIT;
                if (render_params_init(&p, family, &cfg, "node-1", model_node(m), &host, NULL) == 0) {
                        p.nft_shards = family == 6 ? 3 : 0;     /* both nftables layouts */
                        render_iptables(m, &p, NULL, &out);
                        render_nftables(m, &p, NULL, 0, &out);
                        safe_text(out.data, out.len);
                        /* The daemon's netlink encoding of the same: every
                         * message well formed and inside the buffer. */
                        struct nftmsg msgs;
                        nftmsg_init(&msgs, family, 0);
                        render_nftables_netlink(m, &p, NULL, 0, &msgs);
                        size_t off = 0;
                        while (off < msgs.b.len) {
                                const struct nlmsghdr *nlh = (const struct nlmsghdr *) (msgs.b.data + off);
                                assert(msgs.b.len - off >= sizeof *nlh && nlh->nlmsg_len >= sizeof *nlh);
                                assert(nlh->nlmsg_len <= msgs.b.len - off);
                                off += NLMSG_ALIGN(nlh->nlmsg_len);
                        }
                        nftmsg_done(&msgs);
                }
                render_params_done(&p);
                buf_done(&out);
        }
        model_free(m);
        config_done(&cfg);
        return 0;
}

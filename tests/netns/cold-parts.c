/* SPDX-License-Identifier: Apache-2.0 */
/* A cold start in parts against the kernel: loads STATE, runs one full
 * sync of it into the namespace's empty tables with WINDOW services per
 * part (0: one input), then a second full sync. Prints "BYTES_FIRST
 * BYTES_SECOND LEFT_OUT_SECOND". Reads back over nf_tables netlink.
 * Usage: cold-parts STATE WINDOW   (inside a test namespace) */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/nftables.h"
#include "config/config.h"
#include "host/host.h"
#include "host/render-params.h"
#include "kube/decode.h"
#include "kube/load.h"
#include "model/model.h"
#include "proxy/iptables/iptsync.h"
#include "render/render.h"

static int add(void *u, const json_t *obj) {
        struct model *m = u;
        const char *kind = json_string_value(json_object_get(obj, "kind"));
        char err[KUBE_ERRLEN];
        if (kind && strcmp(kind, "Service") == 0) {
                struct svc *s;
                if (kube_decode_service(obj, &s, err) == 0)
                        model_service_upsert(m, s);
        } else if (kind && strcmp(kind, "EndpointSlice") == 0) {
                struct slice *s;
                if (kube_decode_slice(obj, &s, err) == 0)
                        model_slice_upsert(m, s);
        } else if (kind && strcmp(kind, "Node") == 0) {
                struct node *n;
                if (kube_decode_node(obj, &n, err) == 0)
                        model_node_set(m, n);
        }
        return 0;
}

int main(int argc, char **argv) {
        struct kproxy_config cfg;
        struct host_facts h = {0};
        struct render_params p;
        struct nftables *nl = NULL;
        struct iptsync *s = NULL;
        struct iptsync_stats first, second;
        char err[KUBE_LOAD_ERRLEN];
        struct model *m = model_new();

        if (argc != 3 || !m || config_init(&cfg) < 0) {
                fprintf(stderr, "usage: cold-parts STATE WINDOW\n");
                return 2;
        }
        if (kube_load_file(argv[1], add, m, err) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        cfg.cluster_cidr = strdup("10.128.0.0/9");
        if (host_probe(&h) < 0 || nftables_open(&nl) < 0)
                return 1;
        host_probe_iptables(&h, IPTABLES_BACKEND_NFT);
        if (render_params_init(&p, 4, &cfg, "node-0", model_node(m), &h, NULL) < 0)
                return 1;
        struct iptsync_real real = {&h.iptables, nl};
        struct iptsync_kernel k = iptsync_kernel_real(&real);
        s = iptsync_new(4, &k, NULL);
        iptsync_set_part_services(s, (size_t) atoi(argv[2]));
        if (iptsync_full(s, m, &p, &first) < 0 || iptsync_full(s, m, &p, &second) < 0)
                return 1;
        printf("%zu %zu %zu\n", first.bytes_sent, second.bytes_sent, second.chains_left_out);
        iptsync_free(s);
        render_params_done(&p);
        nftables_close(nl);
        host_facts_done(&h);
        model_free(m);
        config_done(&cfg);
        return 0;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The API client's decoding, JSON against protobuf, on bodies the stand-in
 * API server sent (bench/wire.py): a list read the way client-list.c reads
 * a page (JSON: cut into items by kube/list-scan.c, each parsed; protobuf:
 * kube/proto.c an item at a time), or a watch body framed and parsed the
 * way client-watch.c does (16 KiB chunks, as libcurl hands them); each
 * object either only decoded to its tree ("tree") or taken on into the
 * intake and the model ("model"), as the daemon does. CPU time of the one
 * thread, best of REPEAT; peak RSS of the process.
 *
 * usage: bench-wire list FILE SOURCE REPEAT      (SOURCE: 0 services, 1 slices)
 *        bench-wire watch FILE REPEAT
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube/decode.h"
#include "kube/intake.h"
#include "kube/list-scan.h"
#include "kube/proto.h"
#include "kube/watch-stream.h"

static double cpu_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

struct run {
        struct intake *intake;          /* NULL: the tree only */
        enum intake_source source;
        size_t n;
};

static void take(struct run *r, enum intake_source src, const json_t *obj) {
        r->n++;
        if (!r->intake)
                return;
        char *key = kube_object_key(obj);
        if (key)
                intake_object(r->intake, src, key, obj);
        free(key);
}

static void on_item(void *userdata, const json_t *item) {
        struct run *r = userdata;
        take(r, r->source, item);
}

/* client-list.c's report_page(), minus the reflector. */
static int read_list(const char *body, size_t len, struct run *r) {
        char why[160];
        json_t *md = NULL;

        if (kube_proto_is(body, len)) {
                if (kube_proto_list(body, len, &md, on_item, r, why, sizeof why) < 0) {
                        fprintf(stderr, "%s\n", why);
                        return -1;
                }
                json_decref(md);
                return 0;
        }
        struct kube_list_scan sc;
        if (kube_list_scan(body, len, &sc) < 0)
                return -1;
        for (size_t i = 0; i < sc.n_items; i++) {
                json_t *item = json_loadb(body + sc.items[i].off, sc.items[i].len, JSON_DECODE_ANY, NULL);
                if (!item)
                        return -1;
                on_item(r, item);
                json_decref(item);
        }
        md = json_loadb(body + sc.metadata.off, sc.metadata.len, 0, NULL);
        json_decref(md);
        kube_list_scan_done(&sc);
        return 0;
}

static bool framed;

static bool on_event(void *userdata, const char *data, size_t len) {
        static const char *const kinds[] = {"Service", "EndpointSlice", "Node", "ServiceCIDR"};
        struct run *r = userdata;
        struct kube_watch_event ev;
        char why[160];

        if ((framed ? kube_proto_watch_event(data, len, &ev, why, sizeof why)
                    : kube_watch_event_parse(data, len, &ev, why, sizeof why)) < 0)
                return true;
        const char *kind = json_string_value(json_object_get(ev.object, "kind"));
        for (int s = 0; kind && s < 4; s++)
                if (strcmp(kind, kinds[s]) == 0 && (ev.type == KUBE_WATCH_ADDED || ev.type == KUBE_WATCH_MODIFIED))
                        take(r, (enum intake_source) s, ev.object);
        kube_watch_event_done(&ev);
        return true;
}

static void no_oversize(void *userdata, size_t len, const char *head, size_t head_len) {
        (void) userdata, (void) len, (void) head, (void) head_len;
}

static int read_watch(const char *body, size_t len, struct run *r) {
        static const struct kube_watch_stream_ops ops = {.line = on_event, .oversize = no_oversize};
        struct kube_watch_stream s = {0};

        s.framed = framed;
        for (size_t off = 0; off < len; off += 16384)
                kube_watch_stream_feed(&s, body + off, len - off < 16384 ? len - off : 16384, &ops, r);
        kube_watch_stream_reset(&s);
        return 0;
}

/* VmHWM: this process's own peak (getrusage's ru_maxrss would carry the
 * forking parent's pages over the exec). */
static double peak_rss_mib(void) {
        char line[256];
        double kib = 0;
        FILE *f = fopen("/proc/self/status", "r");
        while (f && fgets(line, sizeof line, f))
                if (sscanf(line, "VmHWM: %lf", &kib) == 1)
                        break;
        if (f)
                fclose(f);
        return kib / 1024;
}

static char *slurp(const char *path, size_t *len) {
        FILE *f = fopen(path, "rb");
        if (!f)
                return NULL;
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        char *b = malloc((size_t) n + 1);
        if (!b || fread(b, 1, (size_t) n, f) != (size_t) n)
                exit(1);
        fclose(f);
        *len = (size_t) n;
        return b;
}

int main(int argc, char **argv) {
        bool list = argc == 5 && strcmp(argv[1], "list") == 0, watch = argc == 4 && strcmp(argv[1], "watch") == 0;
        if (!list && !watch) {
                fprintf(stderr, "usage: bench-wire list FILE SOURCE REPEAT | watch FILE REPEAT\n");
                return 2;
        }
        size_t len;
        char *body = slurp(argv[2], &len);
        int repeat = atoi(argv[list ? 4 : 3]);
        double best[2] = {1e9, 1e9};
        size_t n = 0;

        if (!body)
                return 1;
        framed = watch && len > 0 && body[0] != '{';
        for (int i = 0; i < repeat; i++)
                for (int model = 0; model < 2; model++) {
                        struct run r = {.source = list ? (enum intake_source) atoi(argv[3]) : 0};
                        if (model && intake_new("node-0", NULL, &r.intake) < 0)
                                return 1;
                        double c0 = cpu_now();
                        if ((list ? read_list(body, len, &r) : read_watch(body, len, &r)) < 0)
                                return 1;
                        double c = cpu_now() - c0;
                        if (c < best[model])
                                best[model] = c;
                        n = r.n;
                        intake_free(r.intake);
                }
        printf("format=%s objects=%zu bytes=%zu tree_cpu=%.4f model_cpu=%.4f tree_us_per_object=%.2f "
               "model_us_per_object=%.2f peak_rss_mib=%.1f\n",
               kube_proto_is(body, len) || framed ? "protobuf" : "json", n, len, best[0], best[1],
               n ? best[0] * 1e6 / (double) n : 0, n ? best[1] * 1e6 / (double) n : 0, peak_rss_mib());
        free(body);
        return 0;
}

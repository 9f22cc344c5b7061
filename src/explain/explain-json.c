/* SPDX-License-Identifier: Apache-2.0 */
/*
 * explain's answer as JSON: the schema docs/explain.md documents, which
 * scripts read (`kproxy explain --output json`) and the daemon serves at
 * /debug/explain. Fields are added, never renamed.
 */
#include <jansson.h>
#include <stdlib.h>

#include "explain/explain.h"
#include "model/model.h"

static json_t *str_or_null(const char *s) {
        return s ? json_string(s) : json_null();
}

static json_t *query_json(const struct explain_query *q, const struct explain_result *r) {
        char src[INET_ADDR_STRLEN], dst[INET_ADDR_STRLEN];
        return json_pack("{s:s, s:i, s:s, s:i, s:s, s:s, s:s, s:s, s:b}", "source", inet_addr_format(&q->src, src),
                         "sourcePort", q->src_port, "destination", inet_addr_format(&q->dst, dst), "port", q->dst_port,
                         "protocol", l4_proto_to_string(q->proto), "from", explain_origin_to_string(r->from), "fromReason",
                         r->from_why, "interface", q->iface, "ctInvalid", q->ct_invalid);
}

static json_t *endpoint_json(const struct explain_endpoint *e) {
        return json_pack("{s:s, s:o, s:o, s:b, s:f, s:s, s:b, s:b, s:b, s:b, s:b, s:s, s:s}", "address", e->addr,
                         "node", str_or_null(e->node), "zone", str_or_null(e->zone), "selected", e->selected, "probability", e->probability,
                         "ruleProbability", e->rule_probability, "ready", e->ready, "serving", e->serving,
                         "terminating", e->terminating, "local", e->local, "masquerade", e->masquerade, "why", e->why,
                         "chain", e->chain);
}

json_t *explain_to_json(const struct explain_query *q, const struct explain_result *r) {
        json_t *eps = json_array(), *steps = json_array(), *notes = json_array(), *slices = json_array();
        json_t *svc = json_null(), *affinity = json_null();

        if (!eps || !steps || !notes || !slices)
                goto fail;
        for (size_t i = 0; i < r->n_eps; i++)
                if (json_array_append_new(eps, endpoint_json(&r->eps[i])) < 0)
                        goto fail;
        for (size_t i = 0; i < r->n_steps; i++)
                if (json_array_append_new(steps, json_pack("{s:s, s:s, s:s}", "table", r->steps[i].table, "chain",
                                                           r->steps[i].chain, "rule", r->steps[i].rule)) < 0)
                        goto fail;
        for (size_t i = 0; i < r->n_notes; i++)
                if (json_array_append_new(notes, json_string(r->notes[i])) < 0)
                        goto fail;
        for (size_t i = 0; i < r->n_slices; i++)
                if (json_array_append_new(slices, json_string(r->slices[i])) < 0)
                        goto fail;
        if (r->service) {
                svc = json_pack("{s:s, s:o, s:s, s:s, s:O}", "name", r->service, "port", str_or_null(r->port_name),
                                "entry", explain_entry_to_string(r->entry), "policy", r->policy, "endpointSlices", slices);
                if (!svc)
                        goto fail;
        }
        if (r->affinity_timeout)
                affinity = json_pack("{s:s, s:i}", "type", "ClientIP", "timeoutSeconds", (json_int_t) r->affinity_timeout);
        json_decref(slices);
        slices = NULL;
        return json_pack("{s:o, s:s, s:b, s:s, s:s, s:o, s:o, s:{s:b, s:s}, s:o, s:o, s:o}", "query", query_json(q, r),
                         "mode", explain_mode_to_string(r->mode), "socketLB", r->socket_lb, "verdict",
                         explain_verdict_to_string(r->verdict), "reason", r->reason, "service", svc, "endpoints", eps,
                         "masquerade", "value", r->masquerade, "reason", r->masquerade_why, "affinity", affinity,
                         "chains", steps, "notes", notes);
fail:
        json_decref(eps);
        json_decref(steps);
        json_decref(notes);
        json_decref(slices);
        json_decref(svc);
        return NULL;
}

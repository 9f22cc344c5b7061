/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Field numbers are upstream's facts (docs/k8s-wire-fields.txt; the test
 * beside this file checks each against it). The flags are Go's: a field
 * whose Go type is a pointer (*string, *bool, *int32) or whose JSON tag has
 * no omitempty keeps a zero value (PB_KEEP_ZERO); every other scalar is
 * left out when zero, as the API server's JSON leaves it out. Only what
 * kproxy's decoders read is here.
 */
#include "kube/proto-schema.h"

#include <string.h>

#include "kube/pb-json.h"

#define MSG(var, msgname, ...)                                                                            \
        static const struct pb_field_def var##_fields[] = {__VA_ARGS__};                                  \
        const struct pb_message var = {msgname, var##_fields, sizeof var##_fields / sizeof var##_fields[0]}
#define SMSG(var, msgname, ...)                                                                           \
        static const struct pb_field_def var##_fields[] = {__VA_ARGS__};                                  \
        static const struct pb_message var = {msgname, var##_fields, sizeof var##_fields / sizeof var##_fields[0]}
#define F(n, name, type, flags) {n, name, type, flags, NULL}
#define M(n, name, msg, flags) {n, name, PB_MESSAGE, flags, &msg}

/* apimachinery: meta/v1 */
SMSG(object_meta, "ObjectMeta",
     F(1, "name", PB_STRING, 0),
     F(3, "namespace", PB_STRING, 0),
     F(5, "uid", PB_STRING, 0),
     F(6, "resourceVersion", PB_STRING, 0),
     F(9, "deletionTimestamp", PB_TIME, PB_KEEP_ZERO),
     F(11, "labels", PB_MAP, 0),
     F(12, "annotations", PB_MAP, 0));
MSG(kube_proto_list_meta, "ListMeta",
    F(2, "resourceVersion", PB_STRING, 0),
    F(3, "continue", PB_STRING, 0),
    F(4, "remainingItemCount", PB_INT64, PB_KEEP_ZERO));
SMSG(status_cause, "StatusCause",
     F(1, "reason", PB_STRING, 0),
     F(2, "message", PB_STRING, 0),
     F(3, "field", PB_STRING, 0));
SMSG(status_details, "StatusDetails",
     F(1, "name", PB_STRING, 0),
     F(2, "group", PB_STRING, 0),
     F(3, "kind", PB_STRING, 0),
     M(4, "causes", status_cause, PB_REPEATED),
     F(5, "retryAfterSeconds", PB_INT32, 0),
     F(6, "uid", PB_STRING, 0));
MSG(kube_proto_status, "Status",
    M(1, "metadata", kube_proto_list_meta, 0),
    F(2, "status", PB_STRING, 0),
    F(3, "message", PB_STRING, 0),
    F(4, "reason", PB_STRING, 0),
    M(5, "details", status_details, 0),
    F(6, "code", PB_INT32, 0));

/* core/v1 Service */
SMSG(client_ip_config, "ClientIPConfig",
     F(1, "timeoutSeconds", PB_INT32, PB_KEEP_ZERO));
SMSG(session_affinity_config, "SessionAffinityConfig",
     M(1, "clientIP", client_ip_config, 0));
SMSG(service_port, "ServicePort",
     F(1, "name", PB_STRING, 0),
     F(2, "protocol", PB_STRING, 0),
     F(3, "port", PB_INT32, PB_KEEP_ZERO),
     F(4, "targetPort", PB_INT_OR_STRING, 0),
     F(5, "nodePort", PB_INT32, 0),
     F(6, "appProtocol", PB_STRING, PB_KEEP_ZERO));
SMSG(service_spec, "ServiceSpec",
     M(1, "ports", service_port, PB_REPEATED),
     F(2, "selector", PB_MAP, 0),
     F(3, "clusterIP", PB_STRING, 0),
     F(4, "type", PB_STRING, 0),
     F(5, "externalIPs", PB_STRING, PB_REPEATED),
     F(7, "sessionAffinity", PB_STRING, 0),
     F(8, "loadBalancerIP", PB_STRING, 0),
     F(9, "loadBalancerSourceRanges", PB_STRING, PB_REPEATED),
     F(10, "externalName", PB_STRING, 0),
     F(11, "externalTrafficPolicy", PB_STRING, 0),
     F(12, "healthCheckNodePort", PB_INT32, 0),
     F(13, "publishNotReadyAddresses", PB_BOOL, 0),
     M(14, "sessionAffinityConfig", session_affinity_config, 0),
     F(17, "ipFamilyPolicy", PB_STRING, PB_KEEP_ZERO),
     F(18, "clusterIPs", PB_STRING, PB_REPEATED),
     F(19, "ipFamilies", PB_STRING, PB_REPEATED),
     F(20, "allocateLoadBalancerNodePorts", PB_BOOL, PB_KEEP_ZERO),
     F(21, "loadBalancerClass", PB_STRING, PB_KEEP_ZERO),
     F(22, "internalTrafficPolicy", PB_STRING, PB_KEEP_ZERO),
     F(23, "trafficDistribution", PB_STRING, PB_KEEP_ZERO));
SMSG(load_balancer_ingress, "LoadBalancerIngress",
     F(1, "ip", PB_STRING, 0),
     F(2, "hostname", PB_STRING, 0),
     F(3, "ipMode", PB_STRING, PB_KEEP_ZERO));
SMSG(load_balancer_status, "LoadBalancerStatus",
     M(1, "ingress", load_balancer_ingress, PB_REPEATED));
SMSG(service_status, "ServiceStatus",
     M(1, "loadBalancer", load_balancer_status, 0));
MSG(kube_proto_service, "Service",
    M(1, "metadata", object_meta, 0),
    M(2, "spec", service_spec, 0),
    M(3, "status", service_status, 0));

/* discovery/v1 EndpointSlice */
SMSG(endpoint_conditions, "EndpointConditions",
     F(1, "ready", PB_BOOL, PB_KEEP_ZERO),
     F(2, "serving", PB_BOOL, PB_KEEP_ZERO),
     F(3, "terminating", PB_BOOL, PB_KEEP_ZERO));
SMSG(for_zone, "ForZone",
     F(1, "name", PB_STRING, PB_KEEP_ZERO));
/* ForNode came in 1.33, after the kubectl the facts were read from: its
 * number is upstream's (generated.proto of k8s.io/api 1.33), not checked
 * against a descriptor here. */
SMSG(for_node, "ForNode",
     F(1, "name", PB_STRING, PB_KEEP_ZERO));
SMSG(endpoint_hints, "EndpointHints",
     M(1, "forZones", for_zone, PB_REPEATED),
     M(2, "forNodes", for_node, PB_REPEATED));
SMSG(endpoint, "Endpoint",
     F(1, "addresses", PB_STRING, PB_REPEATED),
     M(2, "conditions", endpoint_conditions, 0),
     F(3, "hostname", PB_STRING, PB_KEEP_ZERO),
     F(6, "nodeName", PB_STRING, PB_KEEP_ZERO),
     F(7, "zone", PB_STRING, PB_KEEP_ZERO),
     M(8, "hints", endpoint_hints, 0));
SMSG(endpoint_port, "EndpointPort",
     F(1, "name", PB_STRING, PB_KEEP_ZERO),
     F(2, "protocol", PB_STRING, PB_KEEP_ZERO),
     F(3, "port", PB_INT32, PB_KEEP_ZERO),
     F(4, "appProtocol", PB_STRING, PB_KEEP_ZERO));
MSG(kube_proto_endpoint_slice, "EndpointSlice",
    M(1, "metadata", object_meta, 0),
    M(2, "endpoints", endpoint, PB_REPEATED),
    M(3, "ports", endpoint_port, PB_REPEATED),
    F(4, "addressType", PB_STRING, PB_KEEP_ZERO));

/* core/v1 Node */
SMSG(taint, "Taint",
     F(1, "key", PB_STRING, PB_KEEP_ZERO),
     F(2, "value", PB_STRING, 0),
     F(3, "effect", PB_STRING, PB_KEEP_ZERO));
SMSG(node_spec, "NodeSpec",
     F(1, "podCIDR", PB_STRING, 0),
     F(4, "unschedulable", PB_BOOL, 0),
     M(5, "taints", taint, PB_REPEATED),
     F(7, "podCIDRs", PB_STRING, PB_REPEATED));
SMSG(node_address, "NodeAddress",
     F(1, "type", PB_STRING, PB_KEEP_ZERO),
     F(2, "address", PB_STRING, PB_KEEP_ZERO));
SMSG(node_status, "NodeStatus",
     M(5, "addresses", node_address, PB_REPEATED));
MSG(kube_proto_node, "Node",
    M(1, "metadata", object_meta, 0),
    M(2, "spec", node_spec, 0),
    M(3, "status", node_status, 0));

/* networking/v1 (and v1beta1, the same fields) ServiceCIDR */
SMSG(service_cidr_spec, "ServiceCIDRSpec",
     F(1, "cidrs", PB_STRING, PB_REPEATED));
MSG(kube_proto_service_cidr, "ServiceCIDR",
    M(1, "metadata", object_meta, 0),
    M(2, "spec", service_cidr_spec, 0));

static const struct {
        const char *kind;
        const struct pb_message *schema;
} kinds[] = {
        {"Service", &kube_proto_service},
        {"EndpointSlice", &kube_proto_endpoint_slice},
        {"Node", &kube_proto_node},
        {"ServiceCIDR", &kube_proto_service_cidr},
        {"Status", &kube_proto_status},
};

const struct pb_message *kube_proto_schema(const char *kind, size_t len, bool *ret_list) {
        bool list = len > 4 && memcmp(kind + len - 4, "List", 4) == 0;

        if (list)
                len -= 4;
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
                if (strlen(kinds[i].kind) == len && memcmp(kinds[i].kind, kind, len) == 0 &&
                    !(list && kinds[i].schema == &kube_proto_status)) {
                        *ret_list = list;
                        return kinds[i].schema;
                }
        return NULL;
}

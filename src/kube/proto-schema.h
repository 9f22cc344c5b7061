/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The Kubernetes API's protobuf messages kproxy reads, as schemas for
 * kube/pb-json.h (proto-schema.c): the fields the decoders use, with
 * upstream's field numbers (docs/k8s-wire-fields.txt, read out of kubectl's
 * own descriptors by tools/k8s-proto-fields.py) and Go's JSON names.
 */
#include <stdbool.h>
#include <stddef.h>

struct pb_message;

/* The schema of an object of kind (as a runtime.Unknown names it:
 * "Service", "EndpointSlice", "Node", "ServiceCIDR", "Status"), or of the
 * items of a list kind ("ServiceList": *ret_list true). NULL: a kind
 * kproxy does not read. */
const struct pb_message *kube_proto_schema(const char *kind, size_t len, bool *ret_list);

/* The messages themselves, for tests: each one's fields, in number order. */
extern const struct pb_message kube_proto_service, kube_proto_endpoint_slice, kube_proto_node,
        kube_proto_service_cidr, kube_proto_status, kube_proto_list_meta;

/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The API server's protobuf serialization, read (proto.c): a response body
 * is the magic "k8s\0" and a runtime.Unknown {typeMeta {apiVersion, kind},
 * raw, contentEncoding, contentType} whose raw bytes are the object (or
 * list) of that kind; a watch is a stream of bare WatchEvent {type, object
 * {raw}} frames, each object's raw bytes an envelope again. Every object
 * comes out as the JSON tree the decoders read (kube/pb-json.h), so the
 * reflector and the decoders are the same for either format. Pure.
 */
#include <stdbool.h>
#include <stddef.h>

typedef struct json_t json_t;
struct kube_watch_event;

#define KUBE_PROTO_MAGIC "k8s\0"
#define KUBE_PROTO_MAGIC_LEN 4

/* Whether a Content-Type is the protobuf one (its parameters aside:
 * "application/vnd.kubernetes.protobuf;stream=watch" for a watch). */
bool kube_proto_media(const char *content_type);

/* Whether a body is in the envelope (starts with the magic): a response
 * needs no Content-Type to be read right. */
bool kube_proto_is(const void *body, size_t len);

/* A whole body: one object of a kind kproxy reads (a Status, a Service,
 * ...), with "kind" and "apiVersion" from the envelope. Returns 0, or
 * -EINVAL with the reason in why (whylen bytes). */
int kube_proto_object(const void *body, size_t len, json_t **ret, char *why, size_t whylen);

/* A list body ("ServiceList", ...): its ListMeta as JSON into *ret_md, and
 * each item, in order, to fn as it is read (borrowed: one item is held at a
 * time, never the whole list's tree). Returns 0, or -EINVAL with why (the
 * list, or the item by index and name, and the field). Items before a bad
 * one have been passed on. */
int kube_proto_list(const void *body, size_t len, json_t **ret_md,
                    void (*fn)(void *userdata, const json_t *item), void *userdata, char *why, size_t whylen);

/* One watch frame (a WatchEvent), as kube_watch_event_parse() reads a
 * JSON line. Returns 0, or -EINVAL with why, *ret untouched. */
int kube_proto_watch_event(const void *frame, size_t len, struct kube_watch_event *ret, char *why, size_t whylen);

/* What the first bytes of a frame say it is about, for a message (an
 * over-long event's head): "Service ns/name" or as much as they hold, ""
 * when nothing; only name characters are copied. Returns out. */
const char *kube_proto_event_describe(const void *head, size_t len, char *out, size_t outlen);

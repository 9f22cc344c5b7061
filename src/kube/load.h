/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Reading Kubernetes objects from files: the output of `kubectl get -o json`
 * or `-o yaml` (a List), single objects, or multi-document YAML manifests.
 * JSON is read with jansson, YAML with libyaml (converted to the same
 * jansson trees, scalars resolved as Kubernetes' YAML reader does), so one
 * decoder serves both.
 */
#include <stddef.h>

typedef struct json_t json_t;

/* Called once per object; items of a List are passed one by one. A negative
 * return stops the load and is returned. */
typedef int (*kube_object_fn)(void *userdata, const json_t *obj);

#define KUBE_LOAD_ERRLEN 512

/* Loads path ("-" is stdin). Returns 0; -EINVAL for malformed content, or
 * -errno when the file cannot be read, with "path:line:column: problem" (or
 * "path: problem") in err; or the callback's negative return. */
int kube_load_file(const char *path, kube_object_fn fn, void *userdata, char err[KUBE_LOAD_ERRLEN]);
/* The same for a buffer; name is used in messages. */
int kube_load_buffer(const char *name, const char *data, size_t len, kube_object_fn fn, void *userdata,
                     char err[KUBE_LOAD_ERRLEN]);
/* One YAML document stream to jansson values (exposed for the config file
 * reader and for tests): calls fn for each document's root. */
int kube_yaml_parse(const char *name, const char *data, size_t len, kube_object_fn fn, void *userdata,
                    char err[KUBE_LOAD_ERRLEN]);

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
/* The largest state file read: five times a dump of 50k services with 10
 * endpoints each (whose parsed objects take more memory than a node has
 * to spare anyway). */
#define KUBE_LOAD_MAX_BYTES (512u << 20)

/* Loads path ("-" is stdin). Returns 0; -EINVAL for malformed content
 * (also text over a cap of util/yamlcap.h, or with a NUL byte), -EFBIG
 * past KUBE_LOAD_MAX_BYTES, or -errno when the file cannot be read, with
 * "path:line:column: problem" (or "path: problem") in err; or the
 * callback's negative return. */
int kube_load_file(const char *path, kube_object_fn fn, void *userdata, char err[KUBE_LOAD_ERRLEN]);
/* The same for a buffer; name is used in messages. */
int kube_load_buffer(const char *name, const char *data, size_t len, kube_object_fn fn, void *userdata,
                     char err[KUBE_LOAD_ERRLEN]);
/* One YAML document stream to jansson values (exposed for the kubeconfig
 * reader and for tests): calls fn for each document's root. Nesting and
 * alias expansion are capped (util/yamlcap.h): past a cap, -EINVAL with
 * the cap named in err. */
int kube_yaml_parse(const char *name, const char *data, size_t len, kube_object_fn fn, void *userdata,
                    char err[KUBE_LOAD_ERRLEN]);

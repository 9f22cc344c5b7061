/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Asking the running daemon (its metrics server) for a JSON answer:
 * `kproxy explain --daemon http://127.0.0.1:10249`.
 */
typedef struct json_t json_t;

#define CLI_DAEMON_ERRLEN 512

/* GETs base + path + "?" + the n query arguments keys[i]=values[i]
 * (escaped here) and parses the body as JSON. Returns 0, or -errno with
 * the problem (the URL, the status and the body's first line) in err. */
int cli_daemon_get_json(const char *base, const char *path, const char *const *keys, const char *const *values,
                        unsigned n, json_t **ret, char err[CLI_DAEMON_ERRLEN]);

/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Go's value syntax as kube-proxy's flags and files spell values (strconv,
 * net, resource.Quantity, go-yaml's scalar typing), and the owned strings
 * and string lists the configuration keeps. Private to src/config/.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline bool streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

/* Replaces *p with a copy of s; NULL and "" both store NULL. 0 or -ENOMEM. */
int config_value_str_set(char **p, const char *s);
/* Appends ",v" to *p (or sets it to v). 0 or -ENOMEM. */
int config_value_str_append(char **p, const char *v);
void config_value_strv_free(char **v, size_t n);
/* Appends a copy of s[0..len). 0 or -ENOMEM. */
int config_value_strv_push(char ***v, size_t *n, const char *s, size_t len);
/* Moves *s and *len past blanks at both ends. */
void config_value_trim(const char **s, size_t *len);
/* The parsers return 0, -EINVAL for bad syntax or -ERANGE; *ret is written
 * only on success. */
int config_value_parse_bool(const char *s, bool *ret);
int config_value_parse_int(const char *s, int64_t *ret);
int config_value_parse_decimal(const char *s, uint64_t max, uint64_t *ret);
int config_value_parse_float32(const char *s, float *ret);
/* AF_INET (IPv4-mapped IPv6 too), AF_INET6, or 0 when s is no IP / CIDR. */
int config_value_ip_family(const char *s);
int config_value_cidr_family(const char *s);
/* net.SplitHostPort: copies the host to host, points *ret_port into s. */
int config_value_split_host_port(const char *s, char *host, size_t hostlen, const char **ret_port);
/* NULL if s is IP:port, else what is wrong with it. */
const char *config_value_host_port_problem(const char *s);
/* A bare IP in *addr gets ":port" (IPv6 bracketed). 0 or -ENOMEM. */
int config_value_append_port(char **addr, unsigned port);
bool config_value_quantity_valid(const char *s);
/* A non-negative resource.Quantity ("0", "64Ki", "1.5M") as bytes, rounded
 * up as Quantity.Value() does. 0, -EINVAL or -ERANGE. */
int config_value_parse_quantity(const char *s, uint64_t *ret);
/* The bytes as a quantity string: with a binary suffix when exact. */
void config_value_format_quantity(uint64_t v, char *out, size_t len);
bool config_value_logging_format_valid(const char *v);

/* A YAML scalar typed as go-yaml v2 types an untagged plain one. */
enum config_scalar_kind {
        CONFIG_SCALAR_NULL,
        CONFIG_SCALAR_BOOL,
        CONFIG_SCALAR_INT,
        CONFIG_SCALAR_FLOAT,
        CONFIG_SCALAR_STRING,
};

struct config_scalar {
        enum config_scalar_kind kind;
        const char *text;       /* borrowed */
        bool b;
        int64_t i;
        double f;
};

void config_value_yaml_resolve(const char *s, struct config_scalar *ret);

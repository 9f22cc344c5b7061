/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * IP addresses and CIDRs, parsed once at the edge and kept binary. Text for
 * rules is always produced by inet_addr_format(), never copied from input.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INET_ADDR_STRLEN 46     /* INET6_ADDRSTRLEN */
#define INET_CIDR_STRLEN 50

struct inet_addr {
        uint8_t family;         /* 4 or 6 */
        uint8_t bytes[16];      /* IPv4 in the first 4 bytes */
};

struct inet_cidr {
        struct inet_addr addr;  /* network address: host bits are zero */
        uint8_t prefix;
};

/* Parses an IPv4 (dotted quad; leading zeros are read as decimal, as
 * Kubernetes' sloppy parser does) or IPv6 address. Surrounding whitespace is
 * not accepted. Returns 0 or -EINVAL. */
int inet_addr_parse(const char *s, struct inet_addr *ret);
/* Parses "ADDR/PREFIX"; host bits are cleared. Leading and trailing blanks are
 * tolerated, as upstream trims them. Returns 0 or -EINVAL. */
int inet_cidr_parse(const char *s, struct inet_cidr *ret);
/* Canonical text (RFC 5952 for IPv6). out must hold INET_ADDR_STRLEN. */
const char *inet_addr_format(const struct inet_addr *a, char *out);
const char *inet_cidr_format(const struct inet_cidr *c, char *out);
bool inet_addr_equal(const struct inet_addr *a, const struct inet_addr *b);
/* Whether a is one of the n addresses of v. */
bool inet_addr_in(const struct inet_addr *a, const struct inet_addr *v, size_t n);
bool inet_cidr_contains(const struct inet_cidr *c, const struct inet_addr *a);
bool inet_addr_is_loopback(const struct inet_addr *a);
bool inet_addr_is_unspecified(const struct inet_addr *a);

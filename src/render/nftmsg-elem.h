/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Map and set elements as nf_tables messages (render/nftmsg.h's stream).
 */
#include <stddef.h>
#include <stdint.h>

struct nftmsg;
struct nftir_elem;

#define NFTMSG_KEY_MAX 24       /* ipv6_addr . inet_proto . inet_service */

void nftmsg_elem(struct nftmsg *m, const struct nftir_elem *e);
/* Deletes an element of m->table's set by its key (nftmsg_elem_key()'s bytes). */
void nftmsg_elem_del(struct nftmsg *m, const char *set, const uint8_t *key, size_t key_len);

/* The kernel's key of an element: address, protocol and port as the
 * concatenation lays them out (each field in 4-byte registers). Returns
 * its length. */
size_t nftmsg_elem_key(uint8_t family, const struct nftir_elem *e, uint8_t key[NFTMSG_KEY_MAX]);

/* src's element messages (nftmsg_elem()'s, one element each), as few
 * messages as possible: one per set, up to about 32 kB each. The kernel
 * looks the set up once per message, not once per element. */
void nftmsg_append_elems_merged(struct nftmsg *m, const struct nftmsg *src);

/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Element ids: a map or set element known by one short string, its set
 * and its key (nftsync-elemid.c says how). Pure.
 */
#include <stddef.h>
#include <stdint.h>

#include "render/nftmsg-elem.h"

struct nftmsg;

/* The size of an id, NUL included, at most. */
#define NFTSYNC_ELEMID_MAX (64 + 2 * NFTMSG_KEY_MAX)

/* The id of key (n bytes, at most NFTMSG_KEY_MAX) in set (its first 63
 * characters: the renderer's maps have short names), in
 * out[NFTSYNC_ELEMID_MAX]. Never holds a newline. */
void nftsync_elemid(const char *set, const uint8_t *key, size_t n, char *out);
/* Decodes an id back into its set (set_len bytes of room) and key (room
 * for NFTMSG_KEY_MAX), *ret_len its length. Returns 0, or -EINVAL for a
 * string that is no id. */
int nftsync_elemid_parse(const char *id, char *set, size_t set_len, uint8_t *key, size_t *ret_len);
/* The id for a log, "<set> <key in hex>", in out (size bytes). Returns out. */
const char *nftsync_elemid_show(const char *id, char *out, size_t size);
/* Appends the deletion of the element to m (nothing for a bad id). */
void nftsync_elemid_del(struct nftmsg *m, const char *id);

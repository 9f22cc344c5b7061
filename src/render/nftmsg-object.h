/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * The table's objects as nf_tables messages (render/nftmsg.h's stream):
 * the table (m->table's), named sets and maps, chains, and their removal
 * by name.
 */
struct nftmsg;
struct nftir_set;
struct nftir_chain;

void nftmsg_table(struct nftmsg *m);
void nftmsg_table_del(struct nftmsg *m);
void nftmsg_set(struct nftmsg *m, const struct nftir_set *s);
void nftmsg_set_del(struct nftmsg *m, const char *name);
/* Empties a set or map. */
void nftmsg_set_flush(struct nftmsg *m, const char *name);
/* The chain itself (created if missing, left alone if it exists). */
void nftmsg_chain(struct nftmsg *m, const struct nftir_chain *c);
void nftmsg_chain_flush(struct nftmsg *m, const char *name);
void nftmsg_chain_del(struct nftmsg *m, const char *name);

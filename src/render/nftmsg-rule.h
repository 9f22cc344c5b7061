/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * A chain's rules as nf_tables messages (render/nftmsg.h's stream): each
 * nftir statement as the expressions nft 1.0.6 emits for its text.
 */
struct nftmsg;
struct nftir_chain;

/* The chain's rules, appended (each after the anonymous sets it uses). */
void nftmsg_rules(struct nftmsg *m, const struct nftir_chain *c);

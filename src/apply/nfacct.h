/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Upstream's nfacct counters (ct_state_invalid_dropped_pkts,
 * localhost_nps_accepted_pkts): created before a full sync so the rules can
 * count with them. A counter that cannot be created is simply not used.
 */
#include <stdbool.h>

/* Creates every counter that does not exist yet. Returns true when all of
 * them exist afterwards. */
bool nfacct_ensure_all(void);

/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * kproxy's own commands besides the daemon and render (main.c dispatches).
 */

/* `kproxy explain`: argv after the subcommand. Returns the exit status. */
int cli_explain(int argc, char **argv);
/* `kproxy trace`: likewise. */
int cli_trace(int argc, char **argv);

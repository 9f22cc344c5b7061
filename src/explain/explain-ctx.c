/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the parts of an answer write into it (explain-ctx.h).
 */
#include "explain/explain-ctx.h"

#include <stdarg.h>
#include <stdio.h>

void explain_step(struct explain_ctx *c, const char *table, const char *chain, const char *fmt, ...) {
        struct explain_result *r = c->r;
        if (r->n_steps == EXPLAIN_MAX_STEPS)
                return;
        struct explain_step *s = &r->steps[r->n_steps++];
        snprintf(s->table, sizeof s->table, "%s", table);
        snprintf(s->chain, sizeof s->chain, "%s", chain);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->rule, sizeof s->rule, fmt, ap);
        va_end(ap);
}

void explain_note(struct explain_result *r, const char *fmt, ...) {
        if (r->n_notes == EXPLAIN_MAX_NOTES)
                return;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->notes[r->n_notes++], EXPLAIN_TEXT, fmt, ap);
        va_end(ap);
}

void explain_say(char *out, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(out, EXPLAIN_TEXT, fmt, ap);
        va_end(ap);
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Messages about the configuration, on stderr (config-message.h says why
 * not through the log).
 */
#include "config/config-message.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "util/buf.h"

static void config_vmessage(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
static void config_vmessage(const char *fmt, va_list ap) {
        struct buf b = BUF_INIT;

        buf_vprintf(&b, fmt, ap);
        /* Values from argv and files end up in messages; keep each one a
         * single, readable line whatever bytes they hold. */
        if (b.len > 480) {
                buf_truncate(&b, 480);
                buf_puts(&b, "...");
        }
        for (size_t i = 0; i < b.len; i++)
                if ((unsigned char) b.data[i] < 0x20 || b.data[i] == 0x7f)
                        b.data[i] = '?';
        fprintf(stderr, "kproxy: %s\n", b.data);
        buf_done(&b);
}

int config_error(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        config_vmessage(fmt, ap);
        va_end(ap);
        return -EINVAL;
}

void config_print(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        config_vmessage(fmt, ap);
        va_end(ap);
}

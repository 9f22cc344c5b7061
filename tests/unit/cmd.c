/* SPDX-License-Identifier: Apache-2.0 */
/* What a shell command prints (cmd.h). */
#include "cmd.h"

#include <stdio.h>

#include "util/buf.h"

char *test_cmd_output(const char *cmd) {
        FILE *f = popen(cmd, "r");
        struct buf b = BUF_INIT;
        char line[1024];

        if (!f)
                return NULL;
        while (fgets(line, sizeof line, f))
                buf_puts(&b, line);
        pclose(f);
        buf_putc(&b, '\0');
        return b.data;
}

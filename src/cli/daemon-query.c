/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One GET to the daemon's metrics server with libcurl's easy interface (a
 * command that waits for one answer needs no event loop), the answer read
 * as JSON. The server speaks plain HTTP on the address the node chose for
 * it; nothing here follows redirects or sends credentials.
 */
#include "cli/daemon-query.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "util/buf.h"

#define MAX_BODY (16u << 20)

static size_t on_body(char *data, size_t size, size_t n, void *userdata) {
        struct buf *b = userdata;
        if (b->len + size * n > MAX_BODY)
                return 0;
        buf_put(b, data, size * n);
        return size * n;
}

int cli_daemon_get_json(const char *base, const char *path, const char *const *keys, const char *const *values,
                        unsigned n, json_t **ret, char err[CLI_DAEMON_ERRLEN]) {
        struct buf url = BUF_INIT, body = BUF_INIT;
        CURL *h = curl_easy_init();
        long status = 0;
        int r = -EIO;

        if (!h) {
                snprintf(err, CLI_DAEMON_ERRLEN, "cannot start libcurl");
                return -ENOMEM;
        }
        buf_puts(&url, base);
        while (url.len && url.data[url.len - 1] == '/')
                url.data[--url.len] = '\0';
        buf_puts(&url, path);
        for (unsigned i = 0; i < n; i++) {
                char *v = curl_easy_escape(h, values[i], 0);
                if (!v)
                        goto out;
                buf_printf(&url, "%c%s=%s", i ? '&' : '?', keys[i], v);
                curl_free(v);
        }
        curl_easy_setopt(h, CURLOPT_URL, url.data);
        curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        CURLcode cr = curl_easy_perform(h);
        if (cr != CURLE_OK) {
                snprintf(err, CLI_DAEMON_ERRLEN, "%s: %s", url.data, curl_easy_strerror(cr));
                goto out;
        }
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        buf_putc(&body, '\0');
        if (status != 200) {
                snprintf(err, CLI_DAEMON_ERRLEN, "%s: HTTP %ld: %.*s", url.data, status,
                         (int) strcspn(body.data, "\n"), body.data);
                r = status == 404 ? -ENOENT : -EINVAL;
                goto out;
        }
        json_error_t je;
        *ret = json_loads(body.data, 0, &je);
        if (!*ret) {
                snprintf(err, CLI_DAEMON_ERRLEN, "%s: the answer is not JSON: %s", url.data, je.text);
                r = -EINVAL;
                goto out;
        }
        r = 0;
out:
        curl_easy_cleanup(h);
        buf_done(&url);
        buf_done(&body);
        return r;
}

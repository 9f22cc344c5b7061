/* SPDX-License-Identifier: Apache-2.0 */
#pragma once
/*
 * Go's time.Duration at the edges, milliseconds inside.
 */
#include <stddef.h>
#include <stdint.h>

/* time.ParseDuration to signed nanoseconds. 0, -EINVAL or -ERANGE. */
int config_duration_parse_ns(const char *s, int64_t *ret);

/* Go duration strings ("1s", "1m30s", "500ms", "24h0m0s") to milliseconds and
 * back (formatted as Go's time.Duration.String() does). Parsing drops parts
 * below a millisecond and returns -EINVAL for bad syntax, -ERANGE for a
 * negative duration or one beyond Go's (2562047h); *ret_ms is written only
 * on success. Formatting truncates to outlen, always NUL-terminated. */
int config_parse_duration(const char *s, uint64_t *ret_ms);
void config_format_duration(uint64_t ms, char *out, size_t outlen);

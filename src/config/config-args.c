/* SPDX-License-Identifier: Apache-2.0 */
/*
 * argv in pflag's syntax, as kube-proxy's cobra command reads it: long flags
 * with "=" or a separate value, bare booleans, "-v 4" and bundled shorthands,
 * "--" ending the flags. Values go to the flag table (config-flags.c) or to
 * the subcommand's extra flags.
 */
#include "config/config-args.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config/config-flags.h"
#include "config/config-message.h"
#include "config/config-types.h"
#include "config/config-value.h"
#include "util/cleanup.h"

static int extra_apply(const struct config_extra_flag *x, void *userdata, const char *value) {
        bool b;
        int r;

        /* set() gets a boolean already spelled "true" or "false". */
        if (x->is_bool) {
                if (config_value_parse_bool(value, &b) < 0)
                        return config_error("invalid value \"%s\" for flag --%s: must be true or false", value,
                                            x->name);
                value = b ? "true" : "false";
        }
        r = x->set(userdata, value);
        if (r == -EINVAL)
                return config_error("invalid value \"%s\" for flag --%s", value, x->name);
        return r;
}

/* "--name", "--name=value" or "--name value"; *i moves past a consumed value. */
static int parse_long(struct kproxy_config *c, int argc, char **argv, int *i,
                      const struct config_extra_flag *extra, size_t n_extra, void *userdata) {
        const char *arg = argv[*i], *body = arg + 2, *eq = strchr(body, '='), *value;
        _cleanup_free_ char *name = strndup(body, eq ? (size_t) (eq - body) : strlen(body));
        const struct config_extra_flag *x = NULL;
        const struct config_flag *f;
        bool is_bool;

        if (!name)
                return -ENOMEM;
        if (!*name || *name == '-')
                return config_error("bad flag syntax: %s", arg);
        f = config_flags_find(name);
        for (size_t k = 0; k < n_extra && !f && !x; k++)
                if (config_flags_name_eq(extra[k].name, name))
                        x = &extra[k];
        if (!f && !x)
                return config_error("unknown flag: --%s", name);

        is_bool = f ? config_flags_is_bool(f) : x->is_bool;
        if (eq)
                value = eq + 1;
        else if (is_bool)
                value = "true";
        else if (*i + 1 < argc)
                value = argv[++*i];     /* pflag takes it even if it starts with "-" */
        else
                return config_error("flag needs an argument: --%s", f ? config_flags_name(f) : x->name);
        return f ? config_flags_apply(c, f, value) : extra_apply(x, userdata, value);
}

/* "-h", "-v 4", "-v4", "-v=4", and bundles such as "-hv4". */
static int parse_short(struct kproxy_config *c, int argc, char **argv, int *i) {
        const char *arg = argv[*i];

        for (const char *p = arg + 1; *p; p++) {
                const struct config_flag *f = config_flags_find_shorthand(*p);
                const char *value;

                if (!f)
                        return config_error("unknown shorthand flag: '%c' in %s", *p, arg);
                if (p[1] == '=')
                        return config_flags_apply(c, f, p + 2);
                if (config_flags_is_bool(f)) {
                        int r = config_flags_apply(c, f, "true");

                        if (r < 0)
                                return r;
                        continue;
                }
                if (p[1])
                        value = p + 1;
                else if (*i + 1 < argc)
                        value = argv[++*i];
                else
                        return config_error("flag needs an argument: -%c", *p);
                return config_flags_apply(c, f, value);
        }
        return 0;
}

int config_parse_args(struct kproxy_config *c, int argc, char **argv,
                      const struct config_extra_flag *extra, size_t n_extra, void *userdata,
                      char ***ret_args, size_t *ret_n_args) {
        _cleanup_free_ char **args = NULL;
        size_t n_args = 0;
        int r;

        assert(c);
        assert(c->cmdline);
        assert(argc >= 0);
        assert(argv || argc == 0);
        assert(extra || n_extra == 0);

        args = calloc((size_t) argc + 1, sizeof(char *));
        if (!args)
                return -ENOMEM;

        for (int i = 0; i < argc; i++) {
                const char *a = argv[i];

                if (streq(a, "--")) {
                        while (++i < argc)
                                args[n_args++] = argv[i];
                        break;
                }
                if (a[0] != '-' || a[1] == '\0') {
                        args[n_args++] = argv[i];
                        continue;
                }
                if (a[1] == '-')
                        r = parse_long(c, argc, argv, &i, extra, n_extra, userdata);
                else
                        r = parse_short(c, argc, argv, &i);
                if (r < 0)
                        return r;
        }

        if (ret_n_args)
                *ret_n_args = n_args;
        if (ret_args)
                *ret_args = TAKE_PTR(args);
        return 0;
}

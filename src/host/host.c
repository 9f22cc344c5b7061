/* SPDX-License-Identifier: Apache-2.0 */
#include "host/host.h"

#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_acct.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "util/cleanup.h"

void host_facts_done(struct host_facts *h) {
        free(h->addrs);
        free(h->hostname);
        *h = (struct host_facts) {0};
}

int host_parse_addresses(const char *s, struct inet_cidr **ret, size_t *ret_n) {
        size_t cap = 1;
        for (const char *p = s; *p; p++)
                cap += *p == ',';
        struct inet_cidr *v = calloc(cap, sizeof *v);
        size_t n = 0;
        if (!v)
                return -ENOMEM;
        while (*s) {
                size_t len = strcspn(s, ",");
                char tmp[INET_CIDR_STRLEN + 8], *slash;
                struct inet_cidr c;
                if (len == 0 || len >= sizeof tmp)
                        goto bad;
                memcpy(tmp, s, len);
                tmp[len] = '\0';
                slash = strchr(tmp, '/');
                /* Keep the host part: parse the prefix separately from the address. */
                if (!slash || inet_cidr_parse(tmp, &c) < 0)
                        goto bad;
                *slash = '\0';
                if (inet_addr_parse(tmp, &c.addr) < 0)
                        goto bad;
                v[n++] = c;
                s += len + (s[len] == ',');
        }
        *ret = v;
        *ret_n = n;
        return 0;
bad:
        free(v);
        return -EINVAL;
}

static int probe_addresses(struct host_facts *h) {
        struct ifaddrs *ifa, *i;
        size_t cap = 0;

        if (getifaddrs(&ifa) < 0)
                return 0;       /* no addresses known: nodePortAddresses then match none */
        for (i = ifa; i; i = i->ifa_next)
                cap++;
        h->addrs = calloc(cap + 1, sizeof *h->addrs);
        if (!h->addrs) {
                freeifaddrs(ifa);
                return -ENOMEM;
        }
        for (i = ifa; i; i = i->ifa_next) {
                struct inet_cidr *c = &h->addrs[h->n_addrs];
                if (!i->ifa_addr || !i->ifa_netmask)
                        continue;
                if (i->ifa_addr->sa_family == AF_INET) {
                        c->addr.family = 4;
                        memcpy(c->addr.bytes, &((struct sockaddr_in *) i->ifa_addr)->sin_addr, 4);
                        uint32_t m = ntohl(((struct sockaddr_in *) i->ifa_netmask)->sin_addr.s_addr);
                        c->prefix = (uint8_t) __builtin_popcount(m);
                } else if (i->ifa_addr->sa_family == AF_INET6) {
                        c->addr.family = 6;
                        memcpy(c->addr.bytes, &((struct sockaddr_in6 *) i->ifa_addr)->sin6_addr, 16);
                        const uint8_t *m = ((struct sockaddr_in6 *) i->ifa_netmask)->sin6_addr.s6_addr;
                        unsigned bits = 0;
                        for (int k = 0; k < 16; k++)
                                bits += (unsigned) __builtin_popcount(m[k]);
                        c->prefix = (uint8_t) bits;
                } else {
                        continue;
                }
                h->n_addrs++;
        }
        freeifaddrs(ifa);
        return 0;
}

/* iptables >= 1.6.2 has --random-fully (upstream's check), from its
 * version line ("iptables v1.8.9 (nf_tables)"). */
static bool has_random_fully(const char *version) {
        unsigned a = 0, b = 0, c = 0;
        const char *v = strstr(version, " v");
        if (!v || sscanf(v + 2, "%u.%u.%u", &a, &b, &c) < 2)
                return false;
        return a > 1 || (a == 1 && (b > 6 || (b == 6 && c >= 2)));
}

static const char *tools_name(enum iptables_backend b) {
        return b == IPTABLES_BACKEND_NFT ? "iptables-nft" : "iptables-legacy";
}

void host_probe_iptables(struct host_facts *h, enum iptables_backend want) {
        enum iptables_backend b = want;
        char version[128];
        size_t n;

        h->iptables_explicit = want != IPTABLES_BACKEND_AUTO;
        if (want == IPTABLES_BACKEND_AUTO)
                iptables_backend_detect(&b, h->iptables_why, sizeof h->iptables_why);
        else
                snprintf(h->iptables_why, sizeof h->iptables_why, "--iptables-backend=%s",
                         iptables_backend_to_string(want));
        n = strlen(h->iptables_why);
        h->iptables_missing = iptables_tools_find(b, &h->iptables) < 0;
        if (h->iptables_missing && want == IPTABLES_BACKEND_AUTO) {
                /* A guess on a node whose agents use a backend the image
                 * lacks: the other backend works, beside their rules. */
                enum iptables_backend other = b == IPTABLES_BACKEND_NFT ? IPTABLES_BACKEND_LEGACY
                                                                        : IPTABLES_BACKEND_NFT;
                if (iptables_tools_find(other, &h->iptables) == 0) {
                        snprintf(h->iptables_why + n, sizeof h->iptables_why - n,
                                 "; but %s is not installed, so %s, beside the node's other rules", tools_name(b),
                                 tools_name(other));
                        h->iptables_missing = false;
                        b = other;
                }
        } else if (h->iptables_missing) {
                snprintf(h->iptables_why + n, sizeof h->iptables_why - n, "; but %s is not installed",
                         tools_name(b));
        }
        if (h->iptables_missing)
                h->iptables = (struct iptables_tools) {.backend = b};
        h->iptables_nft = b == IPTABLES_BACKEND_NFT;
        h->random_fully = !h->iptables_missing &&
                          iptables_tools_version(&h->iptables, version, sizeof version) == 0 &&
                          has_random_fully(version);
}

/* Upstream's two nfacct counters; rules reference them only when they exist
 * (the daemon creates them before its first sync). */
static const char *const nfacct_counters[] = {
        "ct_state_invalid_dropped_pkts",
        "localhost_nps_accepted_pkts",
};

/* True when every counter upstream's rules reference exists in this network
 * namespace (a dump of nfnetlink_acct lists them by name). */
static bool probe_nfacct(void) {
        _cleanup_close_ int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
        struct {
                struct nlmsghdr nh;
                struct nfgenmsg nfg;
        } req = {
                .nh = {
                        .nlmsg_len = sizeof req,
                        .nlmsg_type = (NFNL_SUBSYS_ACCT << 8) | NFNL_MSG_ACCT_GET,
                        .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
                        .nlmsg_seq = 1,
                },
                .nfg = {.nfgen_family = AF_UNSPEC, .version = NFNETLINK_V0},
        };
        char reply[16384];
        struct timeval tv = {.tv_sec = 1};
        bool found[ELEMENTSOF(nfacct_counters)] = {false};

        if (fd < 0)
                return false;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (send(fd, &req, sizeof req, 0) < 0)
                return false;
        for (;;) {
                ssize_t n = recv(fd, reply, sizeof reply, 0);
                if (n <= 0)
                        return false;
                for (struct nlmsghdr *nh = (struct nlmsghdr *) reply; NLMSG_OK(nh, (size_t) n);
                     nh = NLMSG_NEXT(nh, n)) {
                        if (nh->nlmsg_type == NLMSG_ERROR)
                                return false;
                        if (nh->nlmsg_type == NLMSG_DONE) {
                                for (size_t i = 0; i < ELEMENTSOF(found); i++)
                                        if (!found[i])
                                                return false;
                                return true;
                        }
                        size_t off = NLMSG_LENGTH(sizeof(struct nfgenmsg));
                        while (off + sizeof(struct nlattr) <= nh->nlmsg_len) {
                                const struct nlattr *a = (const struct nlattr *) ((const char *) nh + off);
                                if (a->nla_len < sizeof *a || off + a->nla_len > nh->nlmsg_len)
                                        break;
                                if ((a->nla_type & NLA_TYPE_MASK) == NFACCT_NAME)
                                        for (size_t i = 0; i < ELEMENTSOF(found); i++)
                                                if (strncmp((const char *) (a + 1), nfacct_counters[i],
                                                            a->nla_len - sizeof *a) == 0)
                                                        found[i] = true;
                                off += NLA_ALIGN(a->nla_len);
                        }
                }
        }
}

static bool probe_tcp_be_liberal(void) {
        FILE *f = fopen("/proc/sys/net/netfilter/nf_conntrack_tcp_be_liberal", "re");
        int v = 0;
        if (!f)
                return false;
        if (fscanf(f, "%d", &v) != 1)
                v = 0;
        fclose(f);
        return v != 0;
}

int host_caps(uint64_t *ret, int *ret_last) {
        char line[256];
        unsigned long long eff = 0;
        bool found = false;
        int last = -1;

        FILE *f = fopen("/proc/self/status", "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof line, f))
                if (sscanf(line, "CapEff: %llx", &eff) == 1) {
                        found = true;
                        break;
                }
        fclose(f);
        if (!found)
                return -ENODATA;
        f = fopen("/proc/sys/kernel/cap_last_cap", "re");
        if (f) {
                if (fscanf(f, "%d", &last) != 1)
                        last = -1;
                fclose(f);
        }
        *ret = eff;
        *ret_last = last;
        return 0;
}

int host_name(char **ret) {
        struct utsname u;

        if (uname(&u) < 0 || !*u.nodename)
                return -ENOENT;
        char *name = strdup(u.nodename);
        if (!name)
                return -ENOMEM;
        for (char *p = name; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        *ret = name;
        return 0;
}

int host_probe(struct host_facts *ret) {
        struct host_facts h = {0};
        int r;

        r = probe_addresses(&h);
        if (r < 0)
                return r;
        r = host_name(&h.hostname);
        if (r == -ENOMEM) {
                host_facts_done(&h);
                return r;
        }
        h.nfacct = probe_nfacct();
        h.tcp_be_liberal = probe_tcp_be_liberal();
        *ret = h;
        return 0;
}

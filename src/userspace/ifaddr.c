/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle: every request carries NLM_F_ACK and is read until its ack (or
 * the end of its dump), so each call returns the kernel's own answer and
 * no reply is ever left in the socket for the next call to misread.
 */
#include "userspace/ifaddr.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/inet.h"

#define IFADDR_BUF 32768

struct ifaddr {
        struct mnl_socket *nl;
        unsigned portid;
        unsigned seq;
        char name[IFNAMSIZ];
        char buf[IFADDR_BUF];
};

struct ifaddr *ifaddr_close(struct ifaddr *ia) {
        if (!ia)
                return NULL;
        if (ia->nl)
                mnl_socket_close(ia->nl);
        free(ia);
        return NULL;
}

static void ifaddr_closep(struct ifaddr **ia) {
        ifaddr_close(*ia);
}

int ifaddr_open(const char *name, struct ifaddr **ret) {
        _cleanup_(ifaddr_closep) struct ifaddr *ia = NULL;

        if (!name || !*name || strlen(name) >= IFNAMSIZ)
                return -EINVAL;
        ia = calloc(1, sizeof *ia);
        if (!ia)
                return -ENOMEM;
        strcpy(ia->name, name);
        ia->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (!ia->nl)
                return -errno;
        if (mnl_socket_bind(ia->nl, 0, MNL_SOCKET_AUTOPID) < 0)
                return -errno;
        ia->portid = mnl_socket_get_portid(ia->nl);
        ia->seq = (unsigned) time(NULL);
        *ret = TAKE_PTR(ia);
        return 0;
}

/* Sends the request built in ia->buf and reads until its ack or the end
 * of its dump, calling cb for each data message. Returns 0 or the
 * kernel's -errno. */
static int ifaddr_request(struct ifaddr *ia, struct nlmsghdr *nlh, mnl_cb_t cb, void *data) {
        unsigned seq = ++ia->seq;
        int r;

        nlh->nlmsg_flags |= NLM_F_REQUEST | NLM_F_ACK;
        nlh->nlmsg_seq = seq;
        if (mnl_socket_sendto(ia->nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        do {
                ssize_t n = mnl_socket_recvfrom(ia->nl, ia->buf, sizeof ia->buf);
                if (n < 0)
                        return -errno;
                r = mnl_cb_run(ia->buf, (size_t) n, seq, ia->portid, cb, data);
                if (r < 0)
                        return -errno;
        } while (r > MNL_CB_STOP);
        return 0;
}

/* The kinds of interface that can hold the addresses, in order of
 * preference. Both are address holders with no lower device and no
 * neighbours. "dummy" is what IPVS mode uses; kernels built without it
 * (CONFIG_DUMMY unset: some VM and sandbox kernels) often have "ifb",
 * which, with no tc redirect into it, sends and receives nothing either. */
static const char *const ifaddr_kinds[] = {"dummy", "ifb"};

struct link_info {
        int ifindex;
        unsigned flags;
        bool ours;              /* of one of ifaddr_kinds */
};

static int link_linkinfo_cb(const struct nlattr *attr, void *data) {
        struct link_info *li = data;

        if (mnl_attr_get_type(attr) == IFLA_INFO_KIND && mnl_attr_validate(attr, MNL_TYPE_STRING) >= 0)
                for (size_t i = 0; i < ELEMENTSOF(ifaddr_kinds); i++)
                        if (strcmp(mnl_attr_get_str(attr), ifaddr_kinds[i]) == 0)
                                li->ours = true;
        return MNL_CB_OK;
}

static int link_attr_cb(const struct nlattr *attr, void *data) {
        if (mnl_attr_get_type(attr) == IFLA_LINKINFO && mnl_attr_validate(attr, MNL_TYPE_NESTED) >= 0)
                mnl_attr_parse_nested(attr, link_linkinfo_cb, data);
        return MNL_CB_OK;
}

static int link_cb(const struct nlmsghdr *nlh, void *data) {
        struct link_info *li = data;
        const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);

        if (nlh->nlmsg_type != RTM_NEWLINK)
                return MNL_CB_OK;
        li->ifindex = ifi->ifi_index;
        li->flags = ifi->ifi_flags;
        return mnl_attr_parse(nlh, sizeof *ifi, link_attr_cb, data);
}

/* The interface by name. Returns 0 with ret filled, -ENODEV, or -errno. */
static int ifaddr_link_get(struct ifaddr *ia, struct link_info *ret) {
        struct link_info li = {0};
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(ia->buf);
        struct ifinfomsg *ifi;
        int r;

        nlh->nlmsg_type = RTM_GETLINK;
        ifi = mnl_nlmsg_put_extra_header(nlh, sizeof *ifi);
        ifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, ia->name);
        r = ifaddr_request(ia, nlh, link_cb, &li);
        if (r < 0)
                return r;
        if (li.ifindex <= 0)
                return -ENODEV;
        *ret = li;
        return 0;
}

/* RTM_NEWLINK: create one of kind (ifindex 0), or bring up ifindex. */
static int ifaddr_link_new(struct ifaddr *ia, int ifindex, const char *kind) {
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(ia->buf);
        struct ifinfomsg *ifi;

        nlh->nlmsg_type = RTM_NEWLINK;
        ifi = mnl_nlmsg_put_extra_header(nlh, sizeof *ifi);
        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = ifindex;
        ifi->ifi_flags = IFF_UP;
        ifi->ifi_change = IFF_UP;
        if (ifindex == 0) {
                struct nlattr *info;
                nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
                mnl_attr_put_strz(nlh, IFLA_IFNAME, ia->name);
                info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
                mnl_attr_put_strz(nlh, IFLA_INFO_KIND, kind);
                mnl_attr_nest_end(nlh, info);
        }
        return ifaddr_request(ia, nlh, NULL, NULL);
}

int ifaddr_link_ensure(struct ifaddr *ia) {
        struct link_info li;
        int r;

        r = ifaddr_link_get(ia, &li);
        if (r == -ENODEV) {
                /* The kernel answers EOPNOTSUPP for a kind it was built
                 * without (and cannot load): try the next one. */
                r = -EOPNOTSUPP;
                for (size_t i = 0; i < ELEMENTSOF(ifaddr_kinds) && r == -EOPNOTSUPP; i++)
                        r = ifaddr_link_new(ia, 0, ifaddr_kinds[i]);
                /* Another process may have created it meanwhile: read again. */
                if (r < 0 && r != -EEXIST)
                        return r;
                r = ifaddr_link_get(ia, &li);
        }
        if (r < 0)
                return r;
        if (!li.ours)
                return -EEXIST;
        if (!(li.flags & IFF_UP)) {
                r = ifaddr_link_new(ia, li.ifindex, NULL);
                if (r < 0)
                        return r;
        }
        return li.ifindex;
}

int ifaddr_link_delete(struct ifaddr *ia) {
        struct link_info li;
        struct nlmsghdr *nlh;
        struct ifinfomsg *ifi;
        int r;

        r = ifaddr_link_get(ia, &li);
        if (r == -ENODEV)
                return 0;
        if (r < 0)
                return r;
        if (!li.ours)
                return -EEXIST;
        nlh = mnl_nlmsg_put_header(ia->buf);
        nlh->nlmsg_type = RTM_DELLINK;
        ifi = mnl_nlmsg_put_extra_header(nlh, sizeof *ifi);
        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = li.ifindex;
        r = ifaddr_request(ia, nlh, NULL, NULL);
        return r == -ENODEV ? 0 : r;
}

struct addr_list {
        int ifindex;
        struct inet_addr *addrs;
        size_t n, cap;
        int error;
};

static int addr_attr_cb(const struct nlattr *attr, void *data) {
        const struct nlattr **tb = data;
        int type = mnl_attr_get_type(attr);

        if ((type == IFA_ADDRESS || type == IFA_LOCAL) && mnl_attr_validate(attr, MNL_TYPE_BINARY) >= 0)
                tb[type] = attr;
        return MNL_CB_OK;
}

static int addr_cb(const struct nlmsghdr *nlh, void *data) {
        struct addr_list *al = data;
        const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
        const struct nlattr *tb[IFA_MAX + 1] = {0};
        const struct nlattr *a;
        struct inet_addr ip = {0};
        size_t len;

        if (nlh->nlmsg_type != RTM_NEWADDR || (int) ifa->ifa_index != al->ifindex ||
            ifa->ifa_scope != RT_SCOPE_UNIVERSE)
                return MNL_CB_OK;
        if (mnl_attr_parse(nlh, sizeof *ifa, addr_attr_cb, tb) < 0)
                return MNL_CB_OK;
        /* IFA_LOCAL is the address itself; IPv6 sends only IFA_ADDRESS. */
        a = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
        len = ifa->ifa_family == AF_INET ? 4 : ifa->ifa_family == AF_INET6 ? 16 : 0;
        if (!a || len == 0 || mnl_attr_get_payload_len(a) != len)
                return MNL_CB_OK;
        ip.family = len == 4 ? 4 : 6;
        memcpy(ip.bytes, mnl_attr_get_payload(a), len);
        if (al->n == al->cap) {
                size_t cap = al->cap ? al->cap * 2 : 16;
                struct inet_addr *p = realloc(al->addrs, cap * sizeof *p);
                if (!p) {
                        al->error = -ENOMEM;
                        return MNL_CB_OK;   /* read the dump to its end all the same */
                }
                al->addrs = p;
                al->cap = cap;
        }
        al->addrs[al->n++] = ip;
        return MNL_CB_OK;
}

int ifaddr_list(struct ifaddr *ia, struct inet_addr **ret_addrs, size_t *ret_n) {
        struct addr_list al = {0};
        struct link_info li;
        struct nlmsghdr *nlh;
        struct ifaddrmsg *ifa;
        int r;

        r = ifaddr_link_get(ia, &li);
        if (r < 0)
                return r;
        al.ifindex = li.ifindex;
        nlh = mnl_nlmsg_put_header(ia->buf);
        nlh->nlmsg_type = RTM_GETADDR;
        nlh->nlmsg_flags = NLM_F_DUMP;
        ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
        ifa->ifa_family = AF_UNSPEC;
        r = ifaddr_request(ia, nlh, addr_cb, &al);
        if (r == 0)
                r = al.error;
        if (r < 0) {
                free(al.addrs);
                return r;
        }
        *ret_addrs = al.addrs;
        *ret_n = al.n;
        return 0;
}

static int ifaddr_change(struct ifaddr *ia, int type, const struct inet_addr *a) {
        struct link_info li;
        struct nlmsghdr *nlh;
        struct ifaddrmsg *ifa;
        size_t len = a->family == 4 ? 4 : a->family == 6 ? 16 : 0;
        int r;

        if (len == 0)
                return -EAFNOSUPPORT;
        r = ifaddr_link_get(ia, &li);
        if (r < 0)
                return r;
        nlh = mnl_nlmsg_put_header(ia->buf);
        nlh->nlmsg_type = type;
        if (type == RTM_NEWADDR)
                nlh->nlmsg_flags = NLM_F_CREATE | NLM_F_EXCL;
        ifa = mnl_nlmsg_put_extra_header(nlh, sizeof *ifa);
        ifa->ifa_family = len == 4 ? AF_INET : AF_INET6;
        ifa->ifa_prefixlen = (unsigned char) (len * 8);
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        ifa->ifa_index = (unsigned) li.ifindex;
        mnl_attr_put(nlh, IFA_LOCAL, len, a->bytes);
        mnl_attr_put(nlh, IFA_ADDRESS, len, a->bytes);
        if (type == RTM_NEWADDR) {
                /* No DAD: the address is usable at once (a dummy has no
                 * neighbours to ask). No prefix route: the local route the
                 * kernel adds is all that delivery needs, and the main
                 * table stays as it was. */
                ifa->ifa_flags = IFA_F_NODAD;
                mnl_attr_put_u32(nlh, IFA_FLAGS, IFA_F_NODAD | IFA_F_NOPREFIXROUTE);
        }
        return ifaddr_request(ia, nlh, NULL, NULL);
}

int ifaddr_add(struct ifaddr *ia, const struct inet_addr *a) {
        int r = ifaddr_change(ia, RTM_NEWADDR, a);
        return r == -EEXIST ? 0 : r;
}

int ifaddr_del(struct ifaddr *ia, const struct inet_addr *a) {
        int r = ifaddr_change(ia, RTM_DELADDR, a);
        return r == -EADDRNOTAVAIL ? 0 : r;
}

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle of the connection book: three intrusive lists, idle, busy and
 * closing, each in the order its connections entered it, which is the
 * order of their clocks: a connection that changes state goes to the tail
 * of its new list with the time of the change. So the head of the idle
 * list is both the longest waiting connection and the next one due, and
 * finding a client's longest waiting one is a walk from the head.
 *
 * The lists hold at most max connections (plus those closing), tens to a
 * few hundred, so a client's share is counted by walking them rather
 * than kept in a map that every state change would have to update.
 */
#include "http/mhd-conns.h"
#include "util/alloc.h"

#include <assert.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum mhd_conn_state {
        MHD_CONN_IDLE,
        MHD_CONN_BUSY,
        MHD_CONN_CLOSING,
        _MHD_CONN_STATE_MAX,
};

/* A client: 4 and an IPv4 address, or 6 and an IPv6 /64; anything else
 * (a socket that is not IP) is one client "0". */
struct mhd_client {
        uint8_t family;
        uint8_t bytes[8];
};

struct mhd_conn {
        struct mhd_conns *set;
        struct mhd_conn *prev, *next;
        enum mhd_conn_state state;
        int fd;
        uint64_t since_ms;              /* when it entered its state */
        struct mhd_client client;
};

struct mhd_conn_list {
        struct mhd_conn *head, *tail;
        unsigned n;
};

struct mhd_conns {
        unsigned max, per_client;
        uint64_t wait_ms;
        struct mhd_conn_list lists[_MHD_CONN_STATE_MAX];
};

static struct mhd_client mhd_client_of(const struct sockaddr *sa) {
        static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        struct mhd_client c = {0};

        if (sa && sa->sa_family == AF_INET) {
                c.family = 4;
                memcpy(c.bytes, &((const struct sockaddr_in *) sa)->sin_addr, 4);
        } else if (sa && sa->sa_family == AF_INET6) {
                const uint8_t *a = ((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr;

                /* A dual-stack socket sees IPv4 clients as mapped addresses. */
                if (memcmp(a, v4mapped, sizeof v4mapped) == 0) {
                        c.family = 4;
                        memcpy(c.bytes, a + 12, 4);
                } else {
                        c.family = 6;
                        memcpy(c.bytes, a, 8);
                }
        }
        return c;
}

static bool mhd_client_equal(const struct mhd_client *a, const struct mhd_client *b) {
        return a->family == b->family && memcmp(a->bytes, b->bytes, sizeof a->bytes) == 0;
}

static void mhd_list_append(struct mhd_conn_list *list, struct mhd_conn *c) {
        c->prev = list->tail;
        c->next = NULL;
        if (list->tail)
                list->tail->next = c;
        else
                list->head = c;
        list->tail = c;
        list->n++;
}

static void mhd_list_unlink(struct mhd_conn_list *list, struct mhd_conn *c) {
        if (c->prev)
                c->prev->next = c->next;
        else
                list->head = c->next;
        if (c->next)
                c->next->prev = c->prev;
        else
                list->tail = c->prev;
        c->prev = c->next = NULL;
        list->n--;
}

static void mhd_conn_move(struct mhd_conn *c, enum mhd_conn_state state, uint64_t now_ms) {
        mhd_list_unlink(&c->set->lists[c->state], c);
        c->state = state;
        c->since_ms = now_ms;
        mhd_list_append(&c->set->lists[state], c);
}

struct mhd_conns *mhd_conns_new(unsigned max, unsigned per_client, uint64_t wait_ms) {
        struct mhd_conns *set;

        assert(max > 0);
        set = xcalloc(1, sizeof *set);
        set->max = max;
        set->per_client = per_client == 0 || per_client > max ? max : per_client;
        set->wait_ms = wait_ms;
        return set;
}

struct mhd_conns *mhd_conns_free(struct mhd_conns *set) {
        if (!set)
                return NULL;
        for (size_t i = 0; i < _MHD_CONN_STATE_MAX; i++)
                while (set->lists[i].head)
                        mhd_conns_remove(set->lists[i].head);
        free(set);
        return NULL;
}

unsigned mhd_conns_held(const struct mhd_conns *set) {
        return set->lists[MHD_CONN_IDLE].n + set->lists[MHD_CONN_BUSY].n;
}

/* The client's longest waiting connection, idle ones first; and how many
 * it holds. */
static struct mhd_conn *mhd_conns_oldest_of(const struct mhd_conns *set, const struct mhd_client *client,
                                            unsigned *ret_held) {
        struct mhd_conn *oldest = NULL;
        unsigned held = 0;

        for (size_t i = MHD_CONN_IDLE; i <= MHD_CONN_BUSY; i++)
                for (struct mhd_conn *c = set->lists[i].head; c; c = c->next)
                        if (mhd_client_equal(&c->client, client)) {
                                held++;
                                if (!oldest)
                                        oldest = c;
                        }
        *ret_held = held;
        return oldest;
}

struct mhd_conn *mhd_conns_victim(const struct mhd_conns *set, const struct sockaddr *sa) {
        struct mhd_client client = mhd_client_of(sa);
        struct mhd_conn *own;
        unsigned held;

        own = mhd_conns_oldest_of(set, &client, &held);
        if (held >= set->per_client)
                return own;
        if (mhd_conns_held(set) >= set->max)
                return mhd_conns_oldest(set) ?: set->lists[MHD_CONN_BUSY].head;
        return NULL;
}

struct mhd_conn *mhd_conns_add(struct mhd_conns *set, int fd, const struct sockaddr *sa, uint64_t now_ms) {
        struct mhd_conn *c = calloc(1, sizeof *c);

        if (!c)
                return NULL;
        *c = (struct mhd_conn) {
                .set = set,
                .state = MHD_CONN_IDLE,
                .fd = fd,
                .since_ms = now_ms,
                .client = mhd_client_of(sa),
        };
        mhd_list_append(&set->lists[MHD_CONN_IDLE], c);
        return c;
}

void mhd_conns_busy(struct mhd_conn *c, uint64_t now_ms) {
        if (c->state == MHD_CONN_IDLE)
                mhd_conn_move(c, MHD_CONN_BUSY, now_ms);
}

void mhd_conns_idle(struct mhd_conn *c, uint64_t now_ms) {
        if (c->state == MHD_CONN_BUSY)
                mhd_conn_move(c, MHD_CONN_IDLE, now_ms);
}

void mhd_conns_closing(struct mhd_conn *c) {
        if (c->state != MHD_CONN_CLOSING)
                mhd_conn_move(c, MHD_CONN_CLOSING, c->since_ms);
}

void mhd_conns_remove(struct mhd_conn *c) {
        mhd_list_unlink(&c->set->lists[c->state], c);
        free(c);
}

struct mhd_conn *mhd_conns_oldest(const struct mhd_conns *set) {
        return set->lists[MHD_CONN_IDLE].head;
}

struct mhd_conn *mhd_conns_expired(const struct mhd_conns *set, uint64_t now_ms) {
        struct mhd_conn *c = mhd_conns_oldest(set);
        uint64_t due;

        return c && mhd_conns_deadline(set, &due) && due <= now_ms ? c : NULL;
}

bool mhd_conns_deadline(const struct mhd_conns *set, uint64_t *ret_ms) {
        const struct mhd_conn *c = set->lists[MHD_CONN_IDLE].head;

        if (!c)
                return false;
        *ret_ms = c->since_ms > UINT64_MAX - set->wait_ms ? UINT64_MAX : c->since_ms + set->wait_ms;
        return true;
}

int mhd_conn_fd(const struct mhd_conn *c) {
        return c->fd;
}

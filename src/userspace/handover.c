/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Principle: the sockets describe themselves. A message carries only fds
 * and a 4-byte tag (the successor's request "KPHT"; then "KPH1" with fds,
 * "KPHE" at the end); the successor
 * asks each socket what it is, so no description can disagree with the
 * socket it describes. SOCK_SEQPACKET keeps each message and its fds
 * together; a message with truncated control data (MSG_CTRUNC: the
 * receiver's fd limit) fails the whole hand-over rather than losing a
 * socket silently.
 */
#include "userspace/handover.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/cleanup.h"

#define HANDOVER_FDS_PER_MSG 64
static const char handover_tag_fds[4] = {'K', 'P', 'H', '1'};
static const char handover_tag_end[4] = {'K', 'P', 'H', 'E'};
static const char handover_tag_take[4] = {'K', 'P', 'H', 'T'};

static int handover_addr(const char *path, struct sockaddr_un *ret) {
        struct sockaddr_un sun = {.sun_family = AF_UNIX};

        if (!path || !*path)
                return -EINVAL;
        if (strlen(path) >= sizeof sun.sun_path)
                return -ENAMETOOLONG;
        strcpy(sun.sun_path, path);
        *ret = sun;
        return 0;
}

int handover_listen(const char *path) {
        _cleanup_close_ int fd = -1;
        struct sockaddr_un sun;
        int r;

        r = handover_addr(path, &sun);
        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* Only this user may connect: the socket file takes the socket's
         * mode at bind (whatever the umask). */
        if (fchmod(fd, 0600) < 0)
                return -errno;
        /* A socket file left by a crashed predecessor would make bind fail. */
        (void) unlink(path);
        if (bind(fd, (struct sockaddr *) &sun, sizeof sun) < 0 || listen(fd, 4) < 0)
                return -errno;
        r = fd;
        fd = -1;
        return r;
}

static void set_timeouts(int fd, int timeout_ms) {
        struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};

        (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

/* One message: the tag, and n fds (n may be 0). */
static int send_fds(int fd, const char tag[4], const int *fds, size_t n) {
        union {
                char buf[CMSG_SPACE(sizeof(int) * HANDOVER_FDS_PER_MSG)];
                struct cmsghdr align;
        } ctl;
        struct iovec iov = {.iov_base = (void *) tag, .iov_len = 4};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

        if (n > 0) {
                struct cmsghdr *cm;
                memset(&ctl, 0, sizeof ctl);
                msg.msg_control = ctl.buf;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
                cm = CMSG_FIRSTHDR(&msg);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
                memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
        }
        return sendmsg(fd, &msg, MSG_NOSIGNAL) == 4 ? 0 : -errno;
}

int handover_accept(int lfd) {
        _cleanup_close_ int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        int r;

        if (c < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        /* The socket file's mode keeps others out; this is the check that
         * does not depend on it. */
        struct ucred cred;
        socklen_t clen = sizeof cred;
        if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0)
                return -errno;
        if (cred.uid != geteuid())
                return -EPERM;
        r = c;
        c = -1;
        return r;
}

int handover_wait(int c) {
        char tag[8];
        ssize_t n = recv(c, tag, sizeof tag, MSG_DONTWAIT);

        if (n < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        return n == 4 && memcmp(tag, handover_tag_take, 4) == 0;
}

int handover_give(int c, const int *fds, size_t n, int timeout_ms) {
        int r;

        /* Blocking, within the timeouts: a successor is reading. */
        if (fcntl(c, F_SETFL, fcntl(c, F_GETFL) & ~O_NONBLOCK) < 0)
                return -errno;
        set_timeouts(c, timeout_ms);
        for (size_t i = 0; i < n; i += HANDOVER_FDS_PER_MSG) {
                size_t k = n - i < HANDOVER_FDS_PER_MSG ? n - i : HANDOVER_FDS_PER_MSG;
                r = send_fds(c, handover_tag_fds, fds + i, k);
                if (r < 0)
                        return r;
        }
        return send_fds(c, handover_tag_end, NULL, 0);
}

void handover_socks_free(struct handover_sock *socks, size_t n) {
        for (size_t i = 0; socks && i < n; i++)
                if (socks[i].fd >= 0)
                        close(socks[i].fd);
        free(socks);
}

/* What fd is: a listening TCP or a bound UDP socket, with its address.
 * Returns 0, or -EBADF for anything else. */
static int describe(int fd, struct handover_sock *ret) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int proto = 0, listening = 0;
        socklen_t ilen = sizeof proto;

        if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &ilen) < 0)
                return -EBADF;
        ilen = sizeof listening;
        if (proto == IPPROTO_TCP && (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &ilen) < 0 || !listening))
                return -EBADF;
        if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
                return -EBADF;
        if (getsockname(fd, (struct sockaddr *) &ss, &len) < 0 ||
            fwd_addr_from_sockaddr((struct sockaddr *) &ss, len, &ret->addr) < 0 || ret->addr.port == 0)
                return -EBADF;
        ret->fd = fd;
        ret->proto = proto;
        return 0;
}

struct take {
        struct handover_sock *socks;
        size_t n, cap;
};

/* Receives one message into t. Returns 1 at the end marker, 0 after a
 * message of fds, -EBADMSG or -errno. Every fd received is either stored
 * in t or closed. */
static int take_one(int c, struct take *t) {
        union {
                char buf[CMSG_SPACE(sizeof(int) * HANDOVER_FDS_PER_MSG)];
                struct cmsghdr align;
        } ctl;
        char tag[8];
        struct iovec iov = {.iov_base = tag, .iov_len = sizeof tag};
        struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                             .msg_controllen = sizeof ctl.buf};
        ssize_t n = recvmsg(c, &msg, MSG_CMSG_CLOEXEC);
        int r = 0;

        if (n < 0)
                return -errno;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
                size_t k;
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
                        if (r == 0 && t->n == t->cap) {
                                size_t cap = t->cap ? t->cap * 2 : 64;
                                struct handover_sock *p = realloc(t->socks, cap * sizeof *p);
                                if (p) {
                                        t->socks = p;
                                        t->cap = cap;
                                } else
                                        r = -ENOMEM;
                        }
                        if (r < 0 || describe(fd, &t->socks[t->n]) < 0)
                                close(fd);
                        else
                                t->n++;
                }
        }
        if (r < 0)
                return r;
        if (n != 4 || (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)))
                return -EBADMSG;
        if (memcmp(tag, handover_tag_end, 4) == 0)
                return 1;
        return memcmp(tag, handover_tag_fds, 4) == 0 ? 0 : -EBADMSG;
}

int handover_connect(const char *path) {
        _cleanup_close_ int c = -1;
        struct sockaddr_un sun;
        int r;

        r = handover_addr(path, &sun);
        if (r < 0)
                return r;
        c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (c < 0)
                return -errno;
        if (connect(c, (struct sockaddr *) &sun, sizeof sun) < 0)
                return -errno;
        r = c;
        c = -1;
        return r;
}

int handover_take(int c, int timeout_ms, struct handover_sock **ret, size_t *ret_n) {
        struct take t = {0};
        int r;

        set_timeouts(c, timeout_ms);
        r = send_fds(c, handover_tag_take, NULL, 0);
        if (r < 0)
                return r == -EAGAIN ? -ETIMEDOUT : r;
        do
                r = take_one(c, &t);
        while (r == 0);
        if (r < 0) {
                /* A predecessor that hung up before the end marker (a 0-byte
                 * read: -EBADMSG) or went silent sent a hand-over cut
                 * short: the caller binds afresh instead. */
                handover_socks_free(t.socks, t.n);
                return r == -EAGAIN ? -ETIMEDOUT : r;
        }
        *ret = t.socks;
        *ret_n = t.n;
        return 0;
}

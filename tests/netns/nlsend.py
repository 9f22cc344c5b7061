#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Sends one nf_tables netlink batch (bytes on stdin, as `kproxy render
--proxy-mode nftables --output netlink` prints it) to the kernel of the
current network namespace, and waits for the answer to its last message.
Exit 0 when the transaction committed; otherwise prints each error (errno
and the sequence number of the refused message) and exits 1."""
import errno
import os
import socket
import struct
import sys

NETLINK_NETFILTER = 12
NLMSG_ERROR = 2
NLM_F_ACK = 4


def main():
    data = sys.stdin.buffer.read()
    msgs = []
    off = 0
    while off + 16 <= len(data):
        length, typ, flags, seq, _ = struct.unpack_from("=IHHII", data, off)
        msgs.append((typ, flags, seq))
        off += (length + 3) & ~3
    acked = [seq for typ, flags, seq in msgs if flags & NLM_F_ACK]
    if not acked:
        print("nlsend: no message asks for an acknowledgement", file=sys.stderr)
        return 2
    last = acked[-1]
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    s.setsockopt(socket.SOL_SOCKET, 32, len(data) + 65536)  # SO_SNDBUFFORCE
    s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE: room for many errors
    s.bind((0, 0))
    s.sendto(data, (0, 0))
    bad = 0
    while True:
        reply = s.recv(65536)
        off = 0
        while off + 16 <= len(reply):
            length, typ, flags, seq, _ = struct.unpack_from("=IHHII", reply, off)
            if typ == NLMSG_ERROR:
                err = -struct.unpack_from("=i", reply, off + 16)[0]
                if err:
                    bad += 1
                    print("nlsend: message %d: %s" % (seq, os.strerror(err) if err in errno.errorcode else err),
                          file=sys.stderr)
                if seq == last:
                    return 1 if bad else 0
            off += (length + 3) & ~3


if __name__ == "__main__":
    sys.exit(main())

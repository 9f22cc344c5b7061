#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A "pod": answers every TCP connection with one line "NAME PEER_IP\\n" and
every UDP datagram with "NAME PEER_IP". Plain sockets (no http.server: it
does a reverse DNS lookup per request). Writes READY_FILE once listening.

usage: podserver.py NAME ADDRESS TCP_PORT UDP_PORT READY_FILE
"""
import os
import selectors
import socket
import sys


def main():
    name, addr, tcp_port, udp_port, ready = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    t = socket.socket(fam, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((addr, tcp_port))
    t.listen(512)
    u = socket.socket(fam, socket.SOCK_DGRAM)
    u.bind((addr, udp_port))
    sel = selectors.DefaultSelector()
    sel.register(t, selectors.EVENT_READ)
    sel.register(u, selectors.EVENT_READ)
    with open(ready + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(ready + ".tmp", ready)
    while True:
        for key, _ in sel.select():
            s = key.fileobj
            try:
                if s is t:
                    c, peer = t.accept()
                    try:
                        c.sendall(("%s %s\n" % (name, peer[0])).encode())
                    finally:
                        c.close()
                else:
                    data, peer = u.recvfrom(2048)
                    u.sendto(("%s %s" % (name, peer[0])).encode(), peer)
            except OSError:
                pass


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A pod namespace's server for bench/socketlb.py: answers every TCP
connection on PORT with the local address it was made to (the endpoint the
connection reached), then closes. usage: whoami.py PORT"""
import socket
import sys

s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(4096)
while True:
    c, _ = s.accept()
    try:
        c.sendall(("%s\n" % c.getsockname()[0]).encode())
    except OSError:
        pass
    c.close()

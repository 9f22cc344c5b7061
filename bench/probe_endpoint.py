#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/socketlb.py's prober: connects to IP:PORT in a loop until a
connection reaches one of WANT (comma-separated addresses; whoami.py names
the endpoint reached), then prints the CLOCK_MONOTONIC time of that
connection's start and how many tries it took. Prints "ready" first, once
connections work. usage: probe_endpoint.py IP PORT WANT TIMEOUT_S"""
import socket
import sys
import time

ip, port, want, timeout = sys.argv[1], int(sys.argv[2]), set(sys.argv[3].split(",")), float(sys.argv[4])


def once():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.settimeout(1)
    try:
        s.connect((ip, port))
        return s.recv(64).decode().strip()
    except OSError:
        return None
    finally:
        s.close()


once()
print("ready", flush=True)
deadline = time.monotonic() + timeout
tries = 0
while time.monotonic() < deadline:
    t = time.monotonic()
    tries += 1
    if once() in want:
        print("reached %.6f %d" % (t, tries), flush=True)
        sys.exit(0)
print("timeout %d" % tries, flush=True)

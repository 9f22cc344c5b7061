#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Connects COUNT times to HOST:PORT (TCP: a new connection each time, as
the spread tests need; UDP: one datagram per new socket, or all from one
socket with --same-socket) and prints a JSON summary:
{"replies": {"pod-a": 97, ...}, "peers": {"10.244.1.100": 300}, "errors": {"ECONNREFUSED": 0, ...},
 "max_connect_ms": 1.2}

usage: client.py HOST PORT COUNT [--udp] [--same-socket] [--connected] [--reconnect] [--timeout S]
                 [--until-seconds S] [--interval S] [--bind-port P]
With --until-seconds the client loops for that long instead of COUNT times.
--connected: UDP through connect()ed sockets, which see ICMP errors (a
REJECT's port unreachable is ECONNREFUSED). --reconnect: with --same-socket,
a new socket after an error (as an application does when its socket is
closed under it). --interval: a pause between tries.
--bind-port: from this local port (UDP or TCP), so a test can tell its
flow's conntrack entry from those earlier tests left, or reuse a port.
After 10 failures in a row it gives up ("gave_up": true in the summary):
a broken service fails its test in seconds, not after COUNT timeouts.
"""
import errno
import json
import socket
import sys
import time


def one_tcp(host, port, timeout, bind_port=0):
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if bind_port:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", bind_port))
    t0 = time.monotonic()
    try:
        s.connect((host, port))
        took = time.monotonic() - t0
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(256)
            if not chunk:
                break
            data += chunk
        return data.decode().split(), took, None
    except OSError as e:
        return None, time.monotonic() - t0, errno.errorcode.get(e.errno, "timeout" if isinstance(e, socket.timeout) else str(e))
    finally:
        s.close()


def main():
    args = sys.argv[1:]
    host, port, count = args[0], int(args[1]), int(args[2])
    udp = "--udp" in args
    same = "--same-socket" in args
    timeout = float(args[args.index("--timeout") + 1]) if "--timeout" in args else 2.0
    until = float(args[args.index("--until-seconds") + 1]) if "--until-seconds" in args else None
    interval = float(args[args.index("--interval") + 1]) if "--interval" in args else 0
    connected = "--connected" in args
    reconnect = "--reconnect" in args
    bind_port = int(args[args.index("--bind-port") + 1]) if "--bind-port" in args else 0
    replies, peers, errors = {}, {}, {}
    max_ms = 0.0
    usock = None
    deadline = time.monotonic() + until if until else None
    i = in_a_row = 0
    gave_up = False
    while (deadline is None and i < count) or (deadline is not None and time.monotonic() < deadline):
        i += 1
        if udp:
            fam = socket.AF_INET6 if ":" in host else socket.AF_INET
            if usock is None or not same:
                if usock:
                    usock.close()
                usock = socket.socket(fam, socket.SOCK_DGRAM)
                usock.settimeout(timeout)
                if bind_port:
                    usock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    usock.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", bind_port))
                if connected:
                    usock.connect((host, port))
            t0 = time.monotonic()
            try:
                if connected:
                    usock.send(b"ping")
                else:
                    usock.sendto(b"ping", (host, port))
                data = usock.recv(256).decode().split()
                err = None
            except OSError as e:
                data, err = None, errno.errorcode.get(e.errno, "timeout")
                if reconnect:
                    usock.close()
                    usock = None
            took = time.monotonic() - t0
        else:
            data, took, err = one_tcp(host, port, timeout, bind_port)
        max_ms = max(max_ms, took * 1000)
        if not err and not (data and len(data) == 2):
            err = "short-reply"
        if err:
            errors[err] = errors.get(err, 0) + 1
            in_a_row += 1
            if in_a_row >= 10:
                gave_up = True
                break
        else:
            in_a_row = 0
            replies[data[0]] = replies.get(data[0], 0) + 1
            peers[data[1]] = peers.get(data[1], 0) + 1
        if interval:
            time.sleep(interval)
    print(json.dumps({"replies": replies, "peers": peers, "errors": errors, "attempts": i,
                      "max_connect_ms": round(max_ms, 3), "gave_up": gave_up}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Print upstream kube-proxy's nftables object-name body of each argument.

Reference nftables-mode.md section 5.1: body = base32(sha256(base))[:8] + "-" + base,
cut to 237 characters + "..." when longer than 240. The base string is
  <ns>/<svc>/<proto>/<portName>                          service-/local-/external-/firewall-
  <ns>/<svc>/<proto>/<portName>__<epIP>/<epPort>         endpoint-/affinity-
with every ':' of an IPv6 endpoint IP replaced by '.'. Examples:
  nftname.py ns1/svc1/tcp/p80                 -> ULMVA6XW-ns1/svc1/tcp/p80
  nftname.py ns1/svc1/tcp/p80__10.180.0.1/80  -> 5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80
"""
import base64
import hashlib
import sys


def body(base):
    h = base64.b32encode(hashlib.sha256(base.encode()).digest()).decode()[:8]
    s = h + '-' + base
    if len(s) > 240:
        s = s[:237] + '...'
    return s


if __name__ == '__main__':
    for arg in sys.argv[1:]:
        print(body(arg))

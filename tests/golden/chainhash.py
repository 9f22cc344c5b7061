#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Print upstream kube-proxy's 16-character chain hash of each argument.

Reference section 3: base32(sha256(s))[:16], where s is SPN + proto for the
KUBE-SVC-/SVL-/EXT-/FW- chains of a service port and SPN + proto + EP for
its KUBE-SEP- chains. Examples:
  chainhash.py 'ns1/svc1:p80tcp'              -> XPGD46QRK7WJZT7O
  chainhash.py 'ns1/svc1:p80tcp10.180.0.1:80' -> SXIVWICOYRO3J4NJ
"""
import base64
import hashlib
import sys


def chain_hash(s):
    return base64.b32encode(hashlib.sha256(s.encode()).digest()).decode()[:16]


if __name__ == '__main__':
    for arg in sys.argv[1:]:
        print(chain_hash(arg), arg)

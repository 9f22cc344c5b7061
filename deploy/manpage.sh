#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Prints kproxy(8) made from the binary's own --help text, so the manual
# never lists flags the binary does not have.
# Usage: deploy/manpage.sh BINARY VERSION
set -eu
bin=$1
version=$2
help=$("$bin" --help)
cat <<HEAD
.TH KPROXY 8 "" "kproxy $version" "System Administration"
.SH NAME
kproxy \\- Kubernetes service proxy, a drop-in replacement for kube-proxy
.SH SYNOPSIS
.B kproxy
[\\fIflags\\fR]
.br
.B kproxy render
[\\fIflags\\fR] \\fISTATE\\fR...
.SH DESCRIPTION
kproxy watches the Kubernetes API server's Services, EndpointSlices and its
Node, and keeps the node's iptables or nftables rules in step, as kube-proxy
does, with kube-proxy's flags and KubeProxyConfiguration file.
Stopping it leaves the rules in place;
.B kproxy \\-\\-cleanup
removes them.
.SH OPTIONS
The text of
.BR "kproxy \\-\\-help" :
.PP
.nf
HEAD
# Roff: escape backslashes and hyphens (so flags copy and paste as typed),
# and keep lines that start with . or ' from being requests.
printf '%s\n' "$help" | sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^\\([.']\\)/\\\\\\&\\1/"
cat <<TAIL
.fi
.SH FILES
.TP
.I /etc/kproxy/config.conf
the KubeProxyConfiguration the systemd unit passes with \\-\\-config
.TP
.I /etc/default/kproxy
KPROXY_ARGS: further flags for the systemd unit (\\-\\-hostname\\-override, \\-v)
.SH SEE ALSO
.BR iptables (8),
.BR nft (8),
.BR conntrack (8)
TAIL

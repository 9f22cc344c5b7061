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
.br
.B kproxy explain
[\\fIflags\\fR] \\-\\-source \\fIIP\\fR \\-\\-destination \\fIIP:PORT\\fR [\\fISTATE\\fR...]
.br
.B kproxy trace
[\\fIflags\\fR] \\-\\-destination \\fIIP\\fR[:\\fIPORT\\fR]
.SH DESCRIPTION
kproxy watches the Kubernetes API server's Services, EndpointSlices and its
Node, and keeps the node's service proxying in step, as kube-proxy does, with
kube-proxy's flags and KubeProxyConfiguration file. Its modes
(\\-\\-proxy\\-mode) are iptables and nftables, which write upstream's rules,
and userspace, kproxy's own, which forwards connections in the process for
nodes without a packet filter; \\-\\-socket\\-lb adds eBPF socket load
balancing beside iptables or nftables mode.
Stopping it leaves the rules (and socket load balancing's pinned maps) in
place, so traffic keeps flowing; in userspace mode new connections are refused
until kproxy runs again.
.B kproxy \\-\\-cleanup
removes what every mode left.
.PP
.B kproxy render
prints what a mode would write for a cluster state, without touching the node.
.B kproxy explain
says what the proxy does with one connection and why (the verdict, the
endpoints and their chances, masquerading, the chain walk), from a cluster
state, the API server or the running daemon;
.B kproxy trace
prints the kernel's own walk of real packets through every table (nf_tables
and legacy iptables).
Each has its own \\-\\-help.
.SH "EXIT STATUS"
The daemon exits 0, or 1 for any error (a flag, the configuration file, the
API connection, start-up), as kube-proxy does.
.BR "kproxy render" ,
.B explain
and
.B trace
exit 2 for a usage error (a flag they do not honour, a file they cannot read).
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

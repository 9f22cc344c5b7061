# kproxy's container image: a drop-in for the kube-proxy image. The binary
# is also /usr/local/bin/kube-proxy, so kubeadm's DaemonSet (which runs
# `/usr/local/bin/kube-proxy --config=... --hostname-override=...`) works
# with nothing changed but the image.
#
#   docker build -t kproxy:$(cat VERSION) .
#
# tests/deploy/test_deploy.py checks this file: the stages, and that the
# runtime stage installs the package of every shared library the binary
# loads.

# --- build: the Makefile's build dependencies (DEB_BUILD), less the
# fuzzer's runtime (clang compiles --socket-lb's programs to BPF).
FROM debian:12 AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        build-essential pkg-config libjansson-dev libyaml-dev libssl-dev libcurl4-openssl-dev \
        libmicrohttpd-dev libnetfilter-conntrack-dev libmnl-dev clang libbpf-dev bpftool \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Makefile VERSION ./
COPY src ./src
RUN make -j"$(nproc)" \
    && install -D -s -m 0755 build/kproxy /out/usr/local/bin/kproxy

# --- runtime: the libraries kproxy links against (their own dependencies
# come with them), and the netfilter tools: kproxy runs iptables,
# iptables-save and iptables-restore (and the ip6tables ones) in iptables
# mode and to clean that mode up from nftables mode; nftables mode talks
# netlink itself, so nft and conntrack are there for operators to look with,
# as in the kube-proxy image. Debian's iptables package has both backends'
# tools (iptables-nft*, iptables-legacy*); kproxy runs those of the backend
# the node's kubelet uses, as the kube-proxy image does with iptables-wrapper.
FROM debian:12-slim AS runtime
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libjansson4 libyaml-0-2 libssl3 libcurl4 libmicrohttpd12 libnetfilter-conntrack3 libnfnetlink0 libmnl0 \
        libbpf1 iptables nftables conntrack \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/usr/local/bin/kproxy /usr/local/bin/kproxy
RUN ln -s kproxy /usr/local/bin/kube-proxy
ENTRYPOINT ["/usr/local/bin/kproxy"]

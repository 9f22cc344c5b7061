/* SPDX-License-Identifier: Apache-2.0 */
/* Tiny TCP responder for the packet-path benchmark (bench/programming.py).
 * usage: dp_server PORT
 * Accepts, reads one request (up to 512 bytes), writes a fixed 40-byte reply, then waits
 * for the client to close first and closes. The client therefore holds TIME_WAIT; the
 * server holds none, so a reused client port never hits a server TIME_WAIT socket whose
 * TCP timestamps came from a different (pre-DNAT) destination (PAWS drops -> 1 s stalls).
 * Single-threaded and blocking on purpose: one core, no allocation per connection. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 8080;
    signal(SIGPIPE, SIG_IGN);
    int s = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 4096)) { perror("bind/listen"); return 1; }
    static const char reply[] = "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok";
    char buf[512];
    for (;;) {
        int c = accept(s, NULL, NULL);
        if (c < 0) continue;
        if (read(c, buf, sizeof buf) > 0 && write(c, reply, sizeof reply - 1) > 0)
            while (read(c, buf, sizeof buf) > 0)
                ;
        close(c);
    }
}

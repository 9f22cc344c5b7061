/* SPDX-License-Identifier: Apache-2.0 */
/* Chain-name hashing against the names upstream's tests expect, and the
 * probability text of the statistic match. */
#include "render/chain.h"
#include "test.h"

static void check_hash(const char *spn, const char *proto, const char *ep, const char *want) {
        char out[CHAIN_HASH_LEN + 1];
        chain_hash(spn, proto, ep, out);
        CHECK_STREQ(out, want);
}

static void test_reference_names(void) {
        check_hash("default/kubernetes:https", "tcp", NULL, "NPX46M4PTMTKRN6Y");
        check_hash("default/kubernetes:https", "tcp", "172.18.0.2:6443", "V2PECCYPB6X2GSCW");
        check_hash("ns1/svc1:p80", "tcp", NULL, "XPGD46QRK7WJZT7O");
        check_hash("ns2/svc2:p80", "tcp", NULL, "GNZBNJ2PO5MGZ6GT");
        check_hash("ns3/svc3:p80", "tcp", NULL, "X27LE4BHSL4DOUIK");
        check_hash("ns4/svc4:p80", "tcp", NULL, "4SW47YFZTEDKD3PK");
        check_hash("ns5/svc5:p80", "tcp", NULL, "NUKIZ6OKUXPJNT4C");
        check_hash("kube-system/kube-dns:dns", "udp", NULL, "TCOU7JCQXEZGVUNU");
        check_hash("kube-system/kube-dns:dns-tcp", "tcp", NULL, "ERIFXISQEP7F7OF4");
        check_hash("ns1/svc1", "tcp", NULL, "AQI2S6QIMU7PVVRP");
        check_hash("ns1/svc1:p80", "tcp", "10.180.0.1:80", "SXIVWICOYRO3J4NJ");
        check_hash("ns1/svc1:p80", "tcp", "10.180.0.2:80", "LXVODXWDISEETFEF");
        check_hash("ns5/svc5:p80", "tcp", "10.180.0.3:80", "I77PXRDZVX7PMWMN");
        check_hash("ns4/svc4:p80", "tcp", "10.180.0.4:80", "UKSFD7AGPMPPLUHC");
        check_hash("ns4/svc4:p80", "tcp", "10.180.0.5:80", "C6EBXVWJJZMIWKLZ");
}

static void test_base32_rfc4648(void) {
        /* RFC 4648 §10 test vectors (without padding). */
        char out[32];
        chain_base32((const unsigned char *) "f", 1, out);
        CHECK_STREQ(out, "MY");
        chain_base32((const unsigned char *) "fo", 2, out);
        CHECK_STREQ(out, "MZXQ");
        chain_base32((const unsigned char *) "foo", 3, out);
        CHECK_STREQ(out, "MZXW6");
        chain_base32((const unsigned char *) "foob", 4, out);
        CHECK_STREQ(out, "MZXW6YQ");
        chain_base32((const unsigned char *) "fooba", 5, out);
        CHECK_STREQ(out, "MZXW6YTB");
        chain_base32((const unsigned char *) "foobar", 6, out);
        CHECK_STREQ(out, "MZXW6YTBOI");
}

static void test_probability_text(void) {
        /* The renderer prints 1/n with "%.10f"; upstream's table. */
        static const struct {
                int n;
                const char *text;
        } cases[] = {
                {2, "0.5000000000"}, {3, "0.3333333333"}, {4, "0.2500000000"},
                {6, "0.1666666667"}, {7, "0.1428571429"}, {11, "0.0909090909"},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                char buf[32];
                snprintf(buf, sizeof buf, "%.10f", 1.0 / (double) cases[i].n);
                CHECK_STREQ(buf, cases[i].text);
        }
}

int main(void) {
        TEST_RUN(test_reference_names);
        TEST_RUN(test_base32_rfc4648);
        TEST_RUN(test_probability_text);
        TEST_DONE();
}

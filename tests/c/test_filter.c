/*
 * The C library against libpcap: sift_filter_run must give bpf_filter()'s result for every
 * packet of the sample capture and a set of expressions, from one thread and from several.
 * Built and run by scripts/test-c-library (dynamically and statically linked).
 */
#include <pcap/pcap.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sift.h>

#include "common.h"

#define THREADS 4

static const char *const EXPRESSIONS[] = {
    "",
    "ip",
    "tcp port 80",
    "tcp port 80 and host 10.0.0.1",
    "udp or icmp or arp",
    "ip src 10.1.1.1 and ip dst 10.2.2.2 and tcp src port 20 and tcp dst port 30",
    "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
    "not ip6 and len > 100",
    "ip[2:2] - ((ip[0]&0xf)<<2) - ((tcp[12]&0xf0)>>2) > 0",
};

struct job {
    const sift_filter *filter;
    const uint32_t *expected;
    int mismatches;
};

static void *run_all(void *arg) {
    struct job *job = arg;
    for (int round = 0; round < 20; round++)
        for (size_t i = 0; i < npackets; i++)
            if (sift_filter_run(job->filter, packets[i], caplens[i], wirelens[i]) !=
                job->expected[i])
                job->mismatches++;
    return NULL;
}

static void errors_and_edge_cases(void) {
    char err[512];
    CHECK(strlen(sift_version()) > 0, "version");
    CHECK(sift_filter_compile("tcp port 99999", 1, 65535, err, sizeof err) == NULL,
          "a port out of range compiles");
    CHECK(strchr(err, '^') != NULL, "no caret in: %s", err);
    CHECK(sift_filter_compile("tcp and", 1, 65535, err, sizeof err) == NULL, "syntax error");
    CHECK(strlen(err) > 0, "empty message");
    /* A tiny buffer is truncated and terminated, and NULL buffers are fine. */
    char tiny[4] = {1, 1, 1, 1};
    CHECK(sift_filter_compile("tcp and", 1, 65535, tiny, sizeof tiny) == NULL, "tiny");
    CHECK(tiny[3] == 0, "not terminated");
    CHECK(sift_filter_compile("tcp and", 1, 65535, NULL, 0) == NULL, "NULL err");
    CHECK(sift_filter_compile(NULL, 1, 65535, err, sizeof err) == NULL, "NULL expression");
    CHECK(sift_filter_compile("ip", 105, 65535, err, sizeof err) == NULL, "link type 105");
    sift_filter_free(NULL);
    CHECK(sift_filter_run(NULL, NULL, 0, 0) == 0, "NULL filter");

    sift_filter *f = sift_filter_compile("tcp dst port 80", 1, 262144, err, sizeof err);
    CHECK(f != NULL, "compile: %s", err);
    uint8_t pkt[54] = {0};
    pkt[12] = 0x08;
    pkt[14] = 0x45;
    pkt[23] = 6;
    pkt[37] = 80;
    CHECK(sift_filter_run(f, pkt, 54, 54) == 262144, "port 80 rejected");
    CHECK(sift_filter_run(f, pkt, 36, 54) == 0, "truncated packet accepted");
    CHECK(sift_filter_run(f, NULL, 0, 54) == 0, "empty packet accepted");
    pkt[37] = 81;
    CHECK(sift_filter_run(f, pkt, 54, 54) == 0, "port 81 accepted");
    sift_filter_free(f);
}

/* sift's extensions, behind SIFT_EXTENSIONS: a payload search and a port set. */
static void extensions(void) {
    char err[512];
    const char *expr = "tcp port in {22, 8000-8100} and payload contains nocase \"get /admin\"";
    CHECK(sift_filter_compile(expr, 1, 262144, err, sizeof err) == NULL,
          "extensions accepted without SIFT_EXTENSIONS");
    sift_filter *f = sift_filter_compile_flags(expr, 1, 262144, SIFT_EXTENSIONS, err, sizeof err);
    CHECK(f != NULL, "compile with SIFT_EXTENSIONS: %s", err);
    uint8_t pkt[80] = {0};
    pkt[12] = 0x08;
    pkt[14] = 0x45;
    pkt[23] = 6;
    pkt[36] = 8000 >> 8;
    pkt[37] = 8000 & 0xff;
    pkt[46] = 0x50; /* data offset: 5 words */
    memcpy(pkt + 54, "xxGET /Admin/", 13);
    CHECK(sift_filter_run(f, pkt, 67, 67) == 262144, "payload match rejected");
    pkt[37] = 0;
    CHECK(sift_filter_run(f, pkt, 67, 67) == 0, "port outside the set accepted");
    pkt[36] = 0;
    pkt[37] = 22;
    CHECK(sift_filter_run(f, pkt, 67, 67) == 262144, "port 22 rejected");
    CHECK(sift_filter_run(f, pkt, 62, 67) == 0, "pattern beyond the capture accepted");
    sift_filter_free(f);
    sift_demux *d = sift_demux_new_flags(1, SIFT_EXTENSIONS);
    int64_t id = sift_demux_insert(d, expr, 0, err, sizeof err);
    CHECK(id > 0, "demux insert: %s", err);
    CHECK(sift_demux_match(d, pkt, 67, 67) == id, "demux missed the payload match");
    sift_demux_free(d);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CAPTURE\n", argv[0]);
        return 2;
    }
    int linktype = read_capture(argv[1]);
    errors_and_edge_cases();
    extensions();

    pcap_t *dead = pcap_open_dead(linktype, 262144);
    static uint32_t expected[MAX_PACKETS], got[MAX_PACKETS];
    size_t compared = 0;
    for (size_t e = 0; e < sizeof EXPRESSIONS / sizeof *EXPRESSIONS; e++) {
        const char *expr = EXPRESSIONS[e];
        struct bpf_program prog;
        if (pcap_compile(dead, &prog, expr, 1, PCAP_NETMASK_UNKNOWN) != 0) {
            fprintf(stderr, "libpcap rejects %s: %s\n", expr, pcap_geterr(dead));
            return 2;
        }
        char err[512];
        sift_filter *f = sift_filter_compile(expr, (uint32_t)linktype, 262144, err, sizeof err);
        CHECK(f != NULL, "%s: %s", expr, err);
        if (!f)
            continue;
        size_t accepted = 0;
        for (size_t i = 0; i < npackets; i++) {
            expected[i] = bpf_filter(prog.bf_insns, packets[i], wirelens[i], caplens[i]);
            accepted += expected[i] != 0;
            uint32_t r = sift_filter_run(f, packets[i], caplens[i], wirelens[i]);
            CHECK(r == expected[i], "%s: packet %zu: sift %u, libpcap %u", expr, i, r,
                  expected[i]);
        }
        size_t batch = sift_filter_run_batch(f, packets, caplens, wirelens, got, npackets);
        CHECK(batch == accepted, "%s: batch accepted %zu, expected %zu", expr, batch, accepted);
        CHECK(memcmp(got, expected, npackets * sizeof *got) == 0, "%s: batch results", expr);

        pthread_t threads[THREADS];
        struct job jobs[THREADS];
        for (int t = 0; t < THREADS; t++) {
            jobs[t] = (struct job){f, expected, 0};
            pthread_create(&threads[t], NULL, run_all, &jobs[t]);
        }
        for (int t = 0; t < THREADS; t++) {
            pthread_join(threads[t], NULL);
            CHECK(jobs[t].mismatches == 0, "%s: %d mismatches on thread %d", expr,
                  jobs[t].mismatches, t);
        }
        sift_filter_free(f);
        pcap_freecode(&prog);
        compared += npackets;
    }
    pcap_close(dead);
    printf("C library: %zu expressions x %zu packets compared with bpf_filter, %d failures\n",
           sizeof EXPRESSIONS / sizeof *EXPRESSIONS, npackets, failures);
    return failures ? 1 : 0;
}

/*
 * What the C test programs share: the packets of a capture read with libpcap, and CHECK.
 */
#ifndef SIFT_TEST_COMMON_H
#define SIFT_TEST_COMMON_H

#include <pcap/pcap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PACKETS 100000

static const u_char *packets[MAX_PACKETS];
static uint32_t caplens[MAX_PACKETS], wirelens[MAX_PACKETS];
static size_t npackets;
static int failures;

#define CHECK(cond, ...)                                                                      \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                              \
            fprintf(stderr, __VA_ARGS__);                                                     \
            fprintf(stderr, "\n");                                                            \
            failures++;                                                                       \
        }                                                                                     \
    } while (0)

/* Reads every packet of `path` into `packets`; returns its link type. */
static int read_capture(const char *path) {
    char errbuf[PCAP_ERRBUF_SIZE];
    pcap_t *p = pcap_open_offline(path, errbuf);
    if (!p) {
        fprintf(stderr, "%s\n", errbuf);
        exit(2);
    }
    int linktype = pcap_datalink(p);
    struct pcap_pkthdr *h;
    const u_char *data;
    while (npackets < MAX_PACKETS && pcap_next_ex(p, &h, &data) == 1) {
        u_char *copy = malloc(h->caplen ? h->caplen : 1);
        memcpy(copy, data, h->caplen);
        packets[npackets] = copy;
        caplens[npackets] = h->caplen;
        wirelens[npackets] = h->len;
        npackets++;
    }
    pcap_close(p);
    return linktype;
}

#endif

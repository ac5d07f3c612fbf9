/*
 * The demultiplexer's C API against libpcap: for the sample capture and a set of filters with
 * priorities, sift_demux_match must return the filter that running every filter alone with
 * bpf_filter() in priority order picks; also while another thread inserts and deletes filters.
 * Built and run by scripts/test-c-library.
 */
#include <pcap/pcap.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sift.h>

#include "common.h"

#define READERS 3

struct rule {
    const char *expr;
    int32_t priority;
    int copy;
};

/* Listed highest rank first (priority, then insertion order). */
static const struct rule RULES[] = {
    {"tcp and host 10.0.0.1", 20, 1},
    {"tcp port 80 and host 10.0.0.1", 10, 0},
    {"tcp port 80", 10, 0},
    {"udp", 5, 0},
    {"ip", 0, 0},
    {"arp", 0, 1},
    {"", -10, 0},
};
#define NRULES (sizeof RULES / sizeof *RULES)

static int64_t expected_best[MAX_PACKETS];
static atomic_int stop;

struct reader_job {
    const sift_demux *d;
    long mismatches, matches;
};

static void *reader(void *arg) {
    struct reader_job *job = arg;
    while (!atomic_load(&stop)) {
        for (size_t i = 0; i < npackets; i++) {
            if (sift_demux_match(job->d, packets[i], caplens[i], wirelens[i]) != expected_best[i])
                job->mismatches++;
            job->matches++;
        }
    }
    return NULL;
}

/* An Ethernet/IPv4 UDP fragment of datagram `id` at byte `offset` of its payload. */
static size_t fragment(uint8_t *p, uint16_t id, uint16_t offset, int more, uint16_t dport) {
    memset(p, 0, 64);
    p[12] = 0x08;
    p[14] = 0x45;
    p[16] = 0;
    p[17] = 20 + 16;
    p[18] = (uint8_t)(id >> 8);
    p[19] = (uint8_t)id;
    uint16_t frag = (uint16_t)((more ? 0x2000 : 0) | (offset / 8));
    p[20] = (uint8_t)(frag >> 8);
    p[21] = (uint8_t)frag;
    p[22] = 64;
    p[23] = 17;
    memcpy(p + 26, "\x0a\x00\x00\x01\x0a\x00\x00\x02", 8);
    if (offset == 0) {
        p[34] = 0x1f;
        p[35] = 0x40; /* source port 8000 */
        p[36] = (uint8_t)(dport >> 8);
        p[37] = (uint8_t)dport;
    }
    return 14 + 20 + 16;
}

static void fragments(void) {
    char err[256];
    sift_demux *d = sift_demux_new(1);
    int64_t id = sift_demux_insert(d, "udp dst port 7001", 0, err, sizeof err);
    CHECK(id > 0, "insert: %s", err);
    sift_fragments *f = sift_fragments_new(d, 1, 1000000000, 0);
    CHECK(f != NULL, "sift_fragments_new");
    uint8_t first[64], second[64], lone[64];
    size_t n1 = fragment(first, 7, 0, 1, 7001), n2 = fragment(second, 7, 16, 0, 0);
    size_t n3 = fragment(lone, 9, 16, 0, 0);
    int64_t best = -1, released = -1;
    uint64_t cookie = 0;
    /* The second fragment first: held; then the first: delivered, and the second released. */
    CHECK(sift_fragments_dispatch(f, second, (uint32_t)n2, (uint32_t)n2, 10, 2, &best) ==
              SIFT_FRAGMENT_POSTPONED, "second fragment not held");
    CHECK(sift_fragments_next_release(f, &cookie, &released) == 0, "early release");
    CHECK(sift_fragments_dispatch(f, first, (uint32_t)n1, (uint32_t)n1, 20, 1, &best) ==
              SIFT_FRAGMENT_DELIVERED && best == id, "first fragment: %lld", (long long)best);
    CHECK(sift_fragments_next_release(f, &cookie, &released) == 1 && cookie == 2 &&
              released == id, "release: cookie %llu to %lld", (unsigned long long)cookie,
          (long long)released);
    /* A later fragment whose first never comes: held, then dropped at the end. */
    CHECK(sift_fragments_dispatch(f, lone, (uint32_t)n3, (uint32_t)n3, 30, 3, &best) ==
              SIFT_FRAGMENT_POSTPONED, "lone fragment not held");
    sift_fragments_flush(f);
    CHECK(sift_fragments_next_release(f, &cookie, &released) == 1 && cookie == 3 &&
              released == 0, "flushed fragment");
    CHECK(sift_fragments_new(d, 105, 1, 0) == NULL, "link type 105");
    sift_fragments_free(f);
    sift_fragments_free(NULL);
    sift_demux_free(d);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CAPTURE\n", argv[0]);
        return 2;
    }
    int linktype = read_capture(argv[1]);
    pcap_t *dead = pcap_open_dead(linktype, 262144);
    struct bpf_program progs[NRULES];
    int64_t ids[NRULES];
    sift_demux *d = sift_demux_new((uint32_t)linktype);
    char err[512];
    /* Insert in reverse so that insertion order does not give the ranking for free. */
    for (size_t r = 0; r < NRULES; r++) {
        if (pcap_compile(dead, &progs[r], RULES[r].expr, 1, PCAP_NETMASK_UNKNOWN) != 0) {
            fprintf(stderr, "libpcap: %s\n", pcap_geterr(dead));
            return 2;
        }
    }
    for (size_t k = NRULES; k-- > 0;) {
        ids[k] = RULES[k].copy
                     ? sift_demux_insert_copy(d, RULES[k].expr, RULES[k].priority, err, sizeof err)
                     : sift_demux_insert(d, RULES[k].expr, RULES[k].priority, err, sizeof err);
        CHECK(ids[k] > 0, "insert %s: %s", RULES[k].expr, err);
    }
    /* Equal priorities: the earlier insertion wins, so with reverse insertion `tcp port 80`
     * (inserted before `tcp port 80 and host 10.0.0.1`) outranks it. Compute the expected
     * rank order accordingly: by priority, then by id. */
    size_t order[NRULES];
    for (size_t r = 0; r < NRULES; r++)
        order[r] = r;
    for (size_t a = 0; a < NRULES; a++)
        for (size_t b = a + 1; b < NRULES; b++) {
            const struct rule *x = &RULES[order[a]], *y = &RULES[order[b]];
            if (y->priority > x->priority ||
                (y->priority == x->priority && ids[order[b]] < ids[order[a]])) {
                size_t t = order[a];
                order[a] = order[b];
                order[b] = t;
            }
        }
    size_t delivered_total = 0;
    for (size_t i = 0; i < npackets; i++) {
        int64_t want[NRULES];
        size_t nwant = 0;
        expected_best[i] = 0;
        for (size_t k = 0; k < NRULES; k++) {
            size_t r = order[k];
            if (bpf_filter(progs[r].bf_insns, packets[i], wirelens[i], caplens[i]) == 0)
                continue;
            want[nwant++] = ids[r];
            if (!RULES[r].copy) {
                expected_best[i] = ids[r];
                break;
            }
        }
        int64_t got = sift_demux_match(d, packets[i], caplens[i], wirelens[i]);
        CHECK(got == expected_best[i], "packet %zu: sift %lld, expected %lld", i, (long long)got,
              (long long)expected_best[i]);
        int64_t got_ids[NRULES];
        size_t n = sift_demux_match_ids(d, packets[i], caplens[i], wirelens[i], 0, got_ids,
                                        NRULES);
        CHECK(n == nwant && memcmp(got_ids, want, n * sizeof *want) == 0,
              "packet %zu: delivered to %zu filters, expected %zu", i, n, nwant);
        delivered_total += n;
    }
    static int64_t batch[MAX_PACKETS];
    sift_demux_match_batch(d, packets, caplens, wirelens, batch, npackets);
    CHECK(memcmp(batch, expected_best, npackets * sizeof *batch) == 0, "batch");

    /* Readers match while this thread inserts and deletes a filter ranked below everything. */
    pthread_t threads[READERS];
    struct reader_job jobs[READERS];
    for (int t = 0; t < READERS; t++) {
        jobs[t] = (struct reader_job){d, 0, 0};
        pthread_create(&threads[t], NULL, reader, &jobs[t]);
    }
    int updates = 0;
    for (int round = 0; round < 300; round++) {
        char expr[64];
        snprintf(expr, sizeof expr, "udp port %d", 10000 + round);
        int64_t id = sift_demux_insert(d, expr, -100, err, sizeof err);
        CHECK(id > 0, "churn insert: %s", err);
        CHECK(sift_demux_delete(d, id) == 0, "churn delete");
        CHECK(sift_demux_delete(d, id) < 0, "deleted twice");
        updates += 2;
    }
    atomic_store(&stop, 1);
    long matches = 0;
    for (int t = 0; t < READERS; t++) {
        pthread_join(threads[t], NULL);
        CHECK(jobs[t].mismatches == 0, "thread %d: %ld mismatches", t, jobs[t].mismatches);
        matches += jobs[t].matches;
    }
    /* Errors. */
    CHECK(sift_demux_insert(d, "tcp port 99999", 0, err, sizeof err) < 0, "bad expression");
    CHECK(strchr(err, '^') != NULL, "no caret: %s", err);
    CHECK(sift_demux_insert(d, NULL, 0, err, sizeof err) < 0, "NULL expression");
    CHECK(sift_demux_insert(NULL, "ip", 0, err, sizeof err) < 0, "NULL demux");
    CHECK(sift_demux_delete(d, 0) < 0 && sift_demux_delete(d, -5) < 0, "bad ids");
    CHECK(sift_demux_match(NULL, NULL, 0, 0) == 0, "NULL demux match");
    sift_demux_free(d);
    sift_demux_free(NULL);
    fragments();
    for (size_t r = 0; r < NRULES; r++)
        pcap_freecode(&progs[r]);
    pcap_close(dead);
    printf("C demultiplexer: %zu filters x %zu packets (%zu deliveries) as libpcap in priority "
           "order; %ld concurrent matches during %d updates; %d failures\n",
           NRULES, npackets, delivered_total, matches, updates, failures);
    return failures ? 1 : 0;
}

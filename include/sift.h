/*
 * sift: packet filters in the tcpdump/libpcap language, with libpcap 1.10's exact semantics.
 *
 * Link with -lsift (pkg-config --cflags --libs sift). Compiled filters are immutable: one
 * filter may be run from many threads at once. No function reads outside the packet it is
 * given, and none aborts the program on bad input.
 */
#ifndef SIFT_H
#define SIFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Link types (the LINKTYPE_* numbers of pcap files). */
#define SIFT_LINKTYPE_NULL 0
#define SIFT_LINKTYPE_ETHERNET 1
#define SIFT_LINKTYPE_RAW 101
#define SIFT_LINKTYPE_LOOP 108
#define SIFT_LINKTYPE_LINUX_SLL 113
#define SIFT_LINKTYPE_IPV4 228
#define SIFT_LINKTYPE_IPV6 229
#define SIFT_LINKTYPE_LINUX_SLL2 276

typedef struct sift_filter sift_filter;

/* The library version, e.g. "0.1.0". */
const char *sift_version(void);

/*
 * Compiles a filter expression for captures of `linktype` with snapshot length `snaplen`, as
 * `tcpdump -r` does. Returns NULL on error, with a message in `err` (at most `errlen` bytes,
 * NUL-terminated; the expression with a caret line under the offending part). `err` may be NULL.
 */
sift_filter *sift_filter_compile(const char *expr, uint32_t linktype, uint32_t snaplen,
                                 char *err, size_t errlen);

/*
 * Runs the filter on one packet: `caplen` captured bytes at `pkt`, `wirelen` bytes on the
 * wire. Returns 0 to reject, otherwise the number of bytes to keep (as bpf_filter()).
 */
uint32_t sift_filter_run(const sift_filter *f, const uint8_t *pkt, uint32_t caplen,
                         uint32_t wirelen);

/*
 * Runs the filter on `count` packets (`pkts[i]`, `caplens[i]`, `wirelens[i]`), writing each
 * result to `results[i]`. Returns the number of packets accepted.
 */
size_t sift_filter_run_batch(const sift_filter *f, const uint8_t *const *pkts,
                             const uint32_t *caplens, const uint32_t *wirelens,
                             uint32_t *results, size_t count);

/* Frees a filter. NULL is ignored. */
void sift_filter_free(sift_filter *f);

#ifdef __cplusplus
}
#endif

#endif /* SIFT_H */

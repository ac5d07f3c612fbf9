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

/* Flags of sift_filter_compile_flags and sift_demux_new_flags. */
#define SIFT_EXTENSIONS 1u  /* sift's payload tests and sets (docs/extensions.md) */
#define SIFT_NO_OPTIMIZE 2u /* libpcap's meaning without its optimizer (tcpdump -O) */

/* As sift_filter_compile, with SIFT_* flags. */
sift_filter *sift_filter_compile_flags(const char *expr, uint32_t linktype, uint32_t snaplen,
                                       uint32_t flags, char *err, size_t errlen);

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

/*
 * The demultiplexer: many filters, one pass per packet. Filters are tried by priority, highest
 * first (equal priorities: the earlier insertion wins). A packet goes to the first matching
 * exclusive filter, and to every matching copy filter ranked before it. Matching may run on
 * many threads while another thread inserts and deletes; each match sees the filter set
 * before or after any update, never a mixture.
 */
typedef struct sift_demux sift_demux;

sift_demux *sift_demux_new(uint32_t linktype);

/* A demultiplexer whose filters are compiled with SIFT_* flags. */
sift_demux *sift_demux_new_flags(uint32_t linktype, uint32_t flags);

/* Installs an exclusive filter: its id (> 0), or < 0 on error with the message in `err`. */
int64_t sift_demux_insert(sift_demux *d, const char *expr, int32_t priority, char *err,
                          size_t errlen);

/* Installs a copy filter: it gets the packets it matches and passes them on. */
int64_t sift_demux_insert_copy(sift_demux *d, const char *expr, int32_t priority, char *err,
                               size_t errlen);

/* Removes a filter: 0, or < 0 for an unknown id. */
int sift_demux_delete(sift_demux *d, int64_t id);

/* The id of the exclusive filter the packet goes to, 0 if none. */
int64_t sift_demux_match(const sift_demux *d, const uint8_t *pkt, uint32_t caplen,
                         uint32_t wirelen);

/*
 * The ids the packet is delivered to, highest rank first (the copy filters ranked before the
 * exclusive winner, then the winner; with `all` nonzero, every matching filter). Writes at most
 * `max` ids to `ids` and returns how many there are.
 */
size_t sift_demux_match_ids(const sift_demux *d, const uint8_t *pkt, uint32_t caplen,
                            uint32_t wirelen, int all, int64_t *ids, size_t max);

/* best[i] = sift_demux_match(d, pkts[i], caplens[i], wirelens[i]), against one filter set. */
void sift_demux_match_batch(const sift_demux *d, const uint8_t *const *pkts,
                            const uint32_t *caplens, const uint32_t *wirelens, int64_t *best,
                            size_t count);

/* Frees a demultiplexer. NULL is ignored; no other call may be running on it. */
void sift_demux_free(sift_demux *d);

/*
 * Fragment dispatch in front of a demultiplexer (MPF's): an IP fragment goes where its
 * datagram's first fragment went; fragments that come before it are held, and handed back by
 * sift_fragments_next_release when the first arrives (or dropped after `timeout_ns`, by the
 * caller's clock `now_ns`). One sift_fragments serves one stream of packets on one thread.
 */
typedef struct sift_fragments sift_fragments;

#define SIFT_FRAGMENT_DELIVERED 0 /* deliver now to *best (0: no filter) */
#define SIFT_FRAGMENT_POSTPONED 1 /* held: comes back with its cookie */
#define SIFT_FRAGMENT_DROPPED 2

/* NULL for an unsupported link type. max_postponed 0 keeps the default bound (8192). */
sift_fragments *sift_fragments_new(const sift_demux *d, uint32_t linktype, uint64_t timeout_ns,
                                   size_t max_postponed);

int sift_fragments_dispatch(sift_fragments *f, const uint8_t *pkt, uint32_t caplen,
                            uint32_t wirelen, uint64_t now_ns, uint64_t cookie, int64_t *best);

/* 1 when a held packet was decided (*best: its filter, 0 if dropped or none), 0 if none. */
int sift_fragments_next_release(sift_fragments *f, uint64_t *cookie, int64_t *best);

/* End of input: every held packet is dropped (and returned by sift_fragments_next_release). */
void sift_fragments_flush(sift_fragments *f);

void sift_fragments_free(sift_fragments *f);

#ifdef __cplusplus
}
#endif

#endif /* SIFT_H */

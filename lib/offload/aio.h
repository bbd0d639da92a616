/* offload/aio: file I/O for offloading, through io_uring.
 *
 * A file is a set of stripes: one file per directory given (offload.nvme_path), the
 * logical bytes laid out in blocks of block_size, block i in stripe i % K at (i / K) ×
 * block_size. Files are opened with O_DIRECT (page cache bypassed); a file system that
 * refuses it (tmpfs) gets buffered I/O and one warning. A transfer is split into blocks,
 * queue_depth of them in flight over all transfers; every completion is checked: a short
 * one continues where it stopped, an error (EIO, ENOSPC, a file removed or truncated
 * underneath: reading past its end) fails the transfer with a message naming the file.
 * Offsets and buffers are multiples of ZT_AIO_ALIGN (4096); lengths are rounded up to it
 * (the files are sized in whole blocks).
 *
 *     zt_aio *a;
 *     zt_aio_open(&a, 1 << 20, 32);
 *     zt_aio_file f;
 *     zt_aio_file_open(a, &f, paths, npaths, "rank-00000.optim");   // created, truncated
 *     zt_aio_req w;
 *     zt_aio_write(a, &f, buf, bytes, 0, &w);   // queued; buf stays untouched until the wait
 *     st = zt_aio_wait(a, &w);                  // done, or why not
 *     zt_aio_file_close(&f, 1);                 // 1: delete the stripes
 *     zt_aio_close(a);
 *
 * Without liburing (NO_URING=1) the same calls run synchronously with pread/pwrite.
 */
#ifndef ZT_OFFLOAD_AIO_H
#define ZT_OFFLOAD_AIO_H

#include <stddef.h>
#include <stdint.h>

#include "lib/core/status.h"

#define ZT_AIO_ALIGN 4096
#define ZT_AIO_MAX_PATHS 16

typedef struct zt_aio zt_aio;

typedef struct zt_aio_file {
    int fd[ZT_AIO_MAX_PATHS];
    int nfd, direct;
    char path[ZT_AIO_MAX_PATHS][512];
} zt_aio_file;

/* One transfer: filled by zt_aio_read/zt_aio_write, finished by zt_aio_wait. */
typedef struct zt_aio_req {
    zt_aio_file *f;
    char *buf;
    uint64_t off, bytes; /* logical, multiples of ZT_AIO_ALIGN */
    uint64_t next;       /* the first byte not yet submitted */
    uint64_t done;       /* bytes completed */
    int write, inflight;
    zt_status st;
    struct zt_aio_req *queued; /* the aio's list of transfers with blocks still to submit */
} zt_aio_req;

zt_status zt_aio_open(zt_aio **out, size_t block_size, int queue_depth);
void zt_aio_close(zt_aio *a);
/* Opens (creates, empties) name in each of the paths (directories, made if missing). */
zt_status zt_aio_file_open(zt_aio *a, zt_aio_file *f, const char *const *paths, int npaths, const char *name);
void zt_aio_file_close(zt_aio_file *f, int unlink_it);
/* Reserves the blocks of bytes logical bytes on the disks (posix_fallocate each stripe's
 * share): a full disk shows here rather than in the middle of a step, and first writes need
 * not grow the file (which ext4 serialises under O_DIRECT). */
zt_status zt_aio_file_reserve(zt_aio *a, zt_aio_file *f, uint64_t bytes);
/* Queue a transfer of bytes at logical offset off; r must live until zt_aio_wait. */
zt_status zt_aio_read(zt_aio *a, zt_aio_file *f, void *buf, size_t bytes, uint64_t off, zt_aio_req *r);
zt_status zt_aio_write(zt_aio *a, zt_aio_file *f, const void *buf, size_t bytes, uint64_t off, zt_aio_req *r);
/* Runs the queue until r is done; its status. */
zt_status zt_aio_wait(zt_aio *a, zt_aio_req *r);
/* Bytes read and written since the last call (for metrics' io_read_bytes, io_write_bytes). */
void zt_aio_take_bytes(zt_aio *a, uint64_t *read, uint64_t *written);
/* Seconds callers spent waiting for transfers since the last call (I/O not hidden behind work). */
double zt_aio_take_wait_s(zt_aio *a);

/* An aligned, zeroed buffer of bytes rounded up to ZT_AIO_ALIGN; free with zt_aio_free. */
void *zt_aio_alloc(size_t bytes);
void zt_aio_free(void *p);
/* The name of a run's scratch file: zt-<host>-<pid>-rank-<R>.<kind> (whose it was, should a killed run leave it). */
void zt_aio_scratch_name(char *out, size_t n, int rank, const char *kind);
static inline size_t zt_aio_round(size_t bytes) { return (bytes + ZT_AIO_ALIGN - 1) & ~(size_t)(ZT_AIO_ALIGN - 1); }

#endif

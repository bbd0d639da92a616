/* A quantized base held in memory, loaded through its content-addressed cache file
 * (qbase_read.h: zt_qbase_load). The file: a header, then the layers' part of the flat array,
 * [layer0_off, norm_off), as the quantized base holds it. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/core/crc32c.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "qbase_read.h"

#define MAGIC "ZTQBASE2"
enum { CHUNK = 64 << 20 }; /* bytes read or checked at a time */

typedef struct cache_header {
    char magic[8];
    uint32_t crc; /* CRC-32C of every byte after this field */
    uint32_t kind, double_quant, real_bytes;
    uint64_t key[2];
    uint64_t elems; /* of the layers, zt_real each */
} cache_header;

static size_t layer_elems(const zt_llama *m) { return m->norm_off - m->layer0_off; }

static cache_header header_of(const zt_llama *m, const uint64_t key[2])
{
    cache_header h = {.kind = m->qbase->kind,
                      .double_quant = (uint32_t)m->qbase->double_quant,
                      .real_bytes = sizeof(zt_real),
                      .key = {key[0], key[1]},
                      .elems = layer_elems(m)};
    memcpy(h.magic, MAGIC, sizeof h.magic);
    return h;
}

static uint32_t header_crc(const cache_header *h)
{
    size_t from = offsetof(cache_header, crc) + sizeof h->crc;
    return zt_crc32c(0, (const char *)h + from, sizeof *h - from);
}

/* The layers from the entry at path into m's flat array at params (host memory), when it holds
 * what key names, whole (ZT_OK); else the reason. */
static zt_status read_entry(const zt_llama *m, zt_real *params, const char *path, const uint64_t key[2])
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return zt_fail(ZT_EIO, "%s", strerror(errno));
    cache_header h, want = header_of(m, key);
    char *dst = (char *)(params + m->layer0_off);
    size_t bytes = layer_elems(m) * sizeof(zt_real), done = 0;
    zt_status st = ZT_OK;
    off_t end = lseek(fd, 0, SEEK_END);
    if (end != (off_t)(sizeof h + bytes))
        st = zt_fail(ZT_EUSER, "%lld bytes, not %zu", (long long)end, sizeof h + bytes);
    else if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) st = zt_fail(ZT_EIO, "unreadable");
    else if (memcmp(&h.magic, &want.magic, offsetof(cache_header, crc)) ||
             memcmp((char *)&h + offsetof(cache_header, kind), (char *)&want + offsetof(cache_header, kind),
                    sizeof h - offsetof(cache_header, kind)))
        st = zt_fail(ZT_EUSER, "its header is not that of this model and encoding");
    uint32_t crc = st ? 0 : header_crc(&h);
    while (!st && done < bytes) {
        size_t len = bytes - done < CHUNK ? bytes - done : CHUNK;
        ssize_t got = pread(fd, dst + done, len, (off_t)(sizeof h + done));
        if (got <= 0) st = zt_fail(ZT_EIO, "unreadable at byte %zu", sizeof h + done);
        else crc = zt_crc32c(crc, dst + done, (size_t)got), done += (size_t)got;
    }
    close(fd);
    if (!st && crc != h.crc) st = zt_fail(ZT_EUSER, "checksum mismatch");
    return st;
}

/* m's layers, as read into params, written to the entry at path. */
static zt_status write_entry(const zt_llama *m, const zt_real *params, const char *path, const uint64_t key[2])
{
    cache_header h = header_of(m, key);
    const char *src = (const char *)(params + m->layer0_off);
    size_t bytes = layer_elems(m) * sizeof(zt_real);
    h.crc = zt_crc32c(header_crc(&h), src, bytes);
    zt_atomic_file o;
    zt_status st = zt_atomic_open(&o, path);
    if (st) return st;
    if (!(st = zt_atomic_write(&o, &h, sizeof h))) st = zt_atomic_write(&o, src, bytes);
    if (st) {
        zt_atomic_abort(&o);
        return st;
    }
    return zt_atomic_commit(&o);
}

/* The layers through the cache entry for r's base in dir (under a lock, so that ranks and runs
 * that start together build it once). */
static zt_status cached_layers(zt_llama *m, zt_real *params, zt_qbase_reader *r, const char *dir, int *hit)
{
    uint64_t key[2];
    char path[4096];
    int lfd;
    zt_status st = zt_qbase_reader_key(r, key);
    if (!st) st = zt_mkdir_p(dir);
    if (st) return st;
    if (snprintf(path, sizeof path, "%s/base-%s%s-%016llx%016llx.bin", dir, zt_qbase_kind_names[m->qbase->kind],
                 m->qbase->double_quant ? "-dq" : "", (unsigned long long)key[0],
                 (unsigned long long)key[1]) >= (int)sizeof path)
        return zt_fail(ZT_EUSER, "data.cache_dir is too long");
    if ((st = zt_lock_file(path, &lfd))) return st;
    if (zt_path_exists(path)) {
        *hit = !read_entry(m, params, path, key);
        if (!*hit) zt_log_warn("the quantized base '%s' is bad (%s): quantizing the base again", path, zt_errmsg());
    }
    if (!*hit && !(st = zt_qbase_read(r, m->layer0_off, layer_elems(m), params + m->layer0_off)))
        st = write_entry(m, params, path, key);
    zt_unlock_file(lfd);
    return st;
}

zt_status zt_qbase_load(zt_llama *m, zt_qbase_reader *r, const char *cache_dir, int *hit)
{
    zt_status st;
    *hit = 0;
    zt_real *p = zt_llama_params_map(m); /* beside a device, a host copy that goes up at the end */
    if (!p) return zt_fail(ZT_ENOMEM, "out of host memory for the quantized base (%zu elements)", m->numel);
    if (!cache_dir || zt_qbase_reader_prequantized(r)) {
        st = zt_qbase_read(r, 0, m->numel, p);
    } else if (!(st = cached_layers(m, p, r, cache_dir, hit)) && !(st = zt_qbase_read(r, 0, m->layer0_off, p))) {
        st = zt_qbase_read(r, m->norm_off, m->numel - m->norm_off, p + m->norm_off); /* the head */
    }
    zt_llama_params_unmap(m, p, !st);
    return st;
}

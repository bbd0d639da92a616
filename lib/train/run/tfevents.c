#include "tfevents.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "lib/core/crc32c.h"

struct zt_tfevents {
    FILE *f;
    char path[4200];
};

/* protocol buffer encoding, the few wire types an Event needs */
typedef struct {
    unsigned char b[512];
    size_t n;
} pb;

static void pb_varint(pb *p, uint64_t v)
{
    do {
        p->b[p->n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

static void pb_tag(pb *p, int field, int wire) { pb_varint(p, (uint64_t)(field << 3 | wire)); }

static void pb_bytes(pb *p, int field, const void *data, size_t len)
{
    pb_tag(p, field, 2);
    pb_varint(p, len);
    memcpy(p->b + p->n, data, len);
    p->n += len;
}

static void pb_fixed(pb *p, int field, const void *v, int bytes) /* little-endian host */
{
    pb_tag(p, field, bytes == 8 ? 1 : 5);
    memcpy(p->b + p->n, v, (size_t)bytes);
    p->n += (size_t)bytes;
}

static uint32_t masked_crc(const void *data, size_t len)
{
    uint32_t c = zt_crc32c(0, data, len);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static zt_status write_record(zt_tfevents *tb, const pb *event)
{
    uint64_t len = event->n;
    uint32_t lcrc = masked_crc(&len, 8), dcrc = masked_crc(event->b, event->n);
    if (fwrite(&len, 8, 1, tb->f) != 1 || fwrite(&lcrc, 4, 1, tb->f) != 1 ||
        fwrite(event->b, 1, event->n, tb->f) != event->n || fwrite(&dcrc, 4, 1, tb->f) != 1 || fflush(tb->f))
        return zt_fail(ZT_EIO, "cannot write '%s'", tb->path);
    return ZT_OK;
}

static double wall_time(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return tv.tv_sec + tv.tv_usec * 1e-6;
}

zt_status zt_tfevents_open(zt_tfevents **out, const char *dir)
{
    zt_tfevents *tb = calloc(1, sizeof *tb);
    if (!tb) return zt_fail(ZT_ENOMEM, "out of memory");
    char host[256] = "localhost";
    gethostname(host, sizeof host - 1);
    snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%ld.%s", dir, (long)wall_time(), host);
    tb->f = fopen(tb->path, "wb");
    if (!tb->f) {
        free(tb);
        return zt_fail(ZT_EIO, "cannot create the TensorBoard file in '%s'", dir);
    }
    pb e = {0};
    double now = wall_time();
    pb_fixed(&e, 1, &now, 8);
    pb_bytes(&e, 3, "brain.Event:2", 13); /* file_version */
    zt_status st = write_record(tb, &e);
    if (st) zt_tfevents_close(tb);
    else *out = tb;
    return st;
}

zt_status zt_tfevents_scalar(zt_tfevents *tb, const char *tag, int64_t step, double value)
{
    size_t taglen = strlen(tag);
    if (taglen > 200) return zt_fail(ZT_EUSER, "TensorBoard tag too long: '%.40s...'", tag);
    pb val = {0}, summary = {0}, e = {0};
    float f = (float)value;
    pb_bytes(&val, 1, tag, taglen);      /* Summary.Value.tag */
    pb_fixed(&val, 2, &f, 4);            /* Summary.Value.simple_value */
    pb_bytes(&summary, 1, val.b, val.n); /* Summary.value */
    double now = wall_time();
    pb_fixed(&e, 1, &now, 8); /* Event.wall_time */
    pb_tag(&e, 2, 0);         /* Event.step */
    pb_varint(&e, (uint64_t)step);
    pb_bytes(&e, 5, summary.b, summary.n); /* Event.summary */
    return write_record(tb, &e);
}

zt_status zt_tfevents_close(zt_tfevents *tb)
{
    if (!tb) return ZT_OK;
    int bad = fclose(tb->f) != 0;
    zt_status st = bad ? zt_fail(ZT_EIO, "cannot write '%s'", tb->path) : ZT_OK;
    free(tb);
    return st;
}

/* Activation offload (actstore.h). */
#include "actstore.h"

#include <string.h>

/* nvme: finishes the transfer of staging buffer b, if one is in flight */
static void finish(zt_actstore *s, int b)
{
    if (!s->busy[b]) return;
    zt_status st = zt_aio_wait(s->aio, &s->req[b]);
    if (!s->error) s->error = st;
    s->busy[b] = 0;
}

/* nvme: starts reading layer's slot into staging buffer b */
static void start_read(zt_actstore *s, int b, int layer)
{
    finish(s, b);
    if (s->error) return;
    s->error = zt_aio_read(s->aio, &s->file, s->stage[b], s->bytes, (uint64_t)layer * s->slot, &s->req[b]);
    s->busy[b] = !s->error;
    s->staged[b] = layer;
}

static void put(void *ctx, int layer, zt_real *x, size_t bytes)
{
    zt_actstore *s = ctx;
    zt_backend *be = s->be;
    if (!s->nvme) {
        be->download(be, s->host + (size_t)layer * s->slot, x, bytes);
    } else { /* written while the next layers compute; two buffers, so at most one write waits */
        int b = layer & 1;
        finish(s, b);
        be->download(be, s->stage[b], x, bytes);
        if (!s->error &&
            !(s->error = zt_aio_write(s->aio, &s->file, s->stage[b], bytes, (uint64_t)layer * s->slot, &s->req[b])))
            s->busy[b] = 1, s->staged[b] = -1;
    }
    be->discard(be, x, bytes);
}

static void get(void *ctx, int layer, zt_real *x, size_t bytes)
{
    zt_actstore *s = ctx;
    zt_backend *be = s->be;
    zt_status st = be->populate(be, x, bytes);
    if (!s->error) s->error = st;
    if (st) return;
    if (!s->nvme) {
        be->upload(be, x, s->host + (size_t)layer * s->slot, bytes);
        return;
    }
    int b = layer & 1;
    if (layer == s->layers - 1) { /* the backward's first layer: the forward's writes must be done */
        finish(s, 0), finish(s, 1);
        start_read(s, b, layer);
    }
    if (s->staged[b] != layer) start_read(s, b, layer); /* not prefetched */
    finish(s, b);
    if (s->error) return;
    be->upload(be, x, s->stage[b], bytes);
    s->staged[b] = -1;
    if (layer > 0) start_read(s, b ^ 1, layer - 1); /* the next layer's input, while this one computes */
}

size_t zt_actstore_input_bytes(const zt_actstore_options *o, const zt_llama *m)
{
    return o->tokens * m->C * sizeof(zt_real);
}

size_t zt_actstore_slot_bytes(const zt_actstore_options *o, const zt_llama *m)
{
    return zt_aio_round(zt_actstore_input_bytes(o, m));
}

size_t zt_actstore_bytes(const zt_actstore_options *o, const zt_llama *m)
{
    size_t slot = zt_actstore_slot_bytes(o, m);
    return o->tier == ZT_OFFLOAD_NVME ? 2 * slot : slot * (size_t)m->L;
}

zt_status zt_actstore_open(zt_actstore *s, const zt_actstore_options *o, zt_llama *m, const char *name)
{
    memset(s, 0, sizeof *s);
    s->be = m->be;
    s->nvme = o->tier == ZT_OFFLOAD_NVME;
    s->layers = m->L;
    s->bytes = zt_actstore_input_bytes(o, m);
    s->slot = zt_actstore_slot_bytes(o, m);
    s->staged[0] = s->staged[1] = -1;
    if (!o->checkpointing)
        return zt_fail(ZT_EUSER,
                       "offload.activations = \"%s\" needs model.activation_checkpointing = true (it "
                       "moves the checkpointed layer inputs)",
                       zt_offload_tier_names[o->tier]);
    if (!s->nvme && m->be->host_memory)
        return zt_fail(ZT_EUSER, "offload.activations = \"cpu\" on the CPU backend moves nothing: host memory is "
                                 "where it computes (use nvme, or none)");
    s->hooks = (zt_llama_act_hooks){s, put, get};
    if (!s->nvme) {
        s->host = m->be->host_alloc(m->be, zt_actstore_bytes(o, m));
        return s->host ? ZT_OK : zt_fail(ZT_ENOMEM, "out of host memory for %d layer inputs", s->layers);
    }
    zt_status st;
    if (!(s->stage[0] = zt_aio_alloc(s->slot)) || !(s->stage[1] = zt_aio_alloc(s->slot)))
        return zt_fail(ZT_ENOMEM, "out of memory for activation staging");
    if ((st = zt_aio_open(&s->aio, o->io.block_size, o->io.queue_depth)) ||
        (st = zt_aio_file_open(s->aio, &s->file, o->io.nvme_paths, o->io.npaths, name)) ||
        (st = zt_aio_file_reserve(s->aio, &s->file, (uint64_t)s->slot * s->layers)))
        return st;
    uint64_t rd, wr;
    zt_aio_take_bytes(s->aio, &rd, &wr);
    return ZT_OK;
}

void zt_actstore_close(zt_actstore *s)
{
    if (s->nvme) {
        finish(s, 0), finish(s, 1);
        if (s->file.nfd) zt_aio_file_close(&s->file, 1);
        zt_aio_close(s->aio);
        zt_aio_free(s->stage[0]);
        zt_aio_free(s->stage[1]);
    } else if (s->host) {
        s->be->host_free(s->be, s->host);
    }
    memset(s, 0, sizeof *s);
}

zt_status zt_actstore_error(zt_actstore *s)
{
    zt_status st = s->error;
    s->error = ZT_OK;
    return st;
}

void zt_actstore_take_io(zt_actstore *s, uint64_t *read, uint64_t *written, double *wait_s)
{
    *read = *written = 0, *wait_s = 0;
    if (!s->aio) return;
    zt_aio_take_bytes(s->aio, read, written);
    *wait_s = zt_aio_take_wait_s(s->aio);
}

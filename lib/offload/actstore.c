/* Activation offload (actstore.h). */
#include "actstore.h"

#include <string.h>

static void put(void *ctx, int layer, zt_real *x, size_t bytes)
{
    zt_actstore *s = ctx;
    zt_backend *be = s->be;
    if (s->error) return;
    if (!s->nvme) {
        be->download(be, s->host + (size_t)layer * s->slot, x, bytes);
    } else {
        zt_aio_req w;
        be->download(be, s->host, x, bytes);
        if (!(s->error = zt_aio_write(s->aio, &s->file, s->host, bytes, (uint64_t)layer * s->slot, &w)))
            s->error = zt_aio_wait(s->aio, &w);
    }
    be->discard(be, x, bytes);
}

static void get(void *ctx, int layer, zt_real *x, size_t bytes)
{
    zt_actstore *s = ctx;
    zt_backend *be = s->be;
    be->populate(be, x, bytes);
    if (s->error) return;
    char *from = s->host + (s->nvme ? 0 : (size_t)layer * s->slot);
    if (s->nvme) {
        zt_aio_req q;
        if (!(s->error = zt_aio_read(s->aio, &s->file, s->host, bytes, (uint64_t)layer * s->slot, &q)))
            s->error = zt_aio_wait(s->aio, &q);
        if (s->error) return;
    }
    be->upload(be, x, from, bytes);
}

zt_status zt_actstore_open(zt_actstore *s, const zt_recipe *r, zt_llama *m, const char *name)
{
    memset(s, 0, sizeof *s);
    s->be = m->be;
    s->nvme = !strcmp(r->offload.activations, "nvme");
    s->layers = m->L;
    s->bytes = (size_t)r->train.micro_batch_size * r->data.max_length * m->C * sizeof(zt_real);
    s->slot = zt_aio_round(s->bytes);
    if (!r->model.activation_checkpointing)
        return zt_fail(ZT_EUSER, "offload.activations = \"%s\" needs model.activation_checkpointing = true (it "
                                 "moves the checkpointed layer inputs)", r->offload.activations);
    if (!s->nvme && m->be->host_memory)
        return zt_fail(ZT_EUSER, "offload.activations = \"cpu\" on the CPU backend moves nothing: host memory is "
                                 "where it computes (use nvme, or none)");
    zt_status st;
    if (!s->nvme) {
        s->host = m->be->host_alloc(m->be, s->slot * (size_t)s->layers);
        if (!s->host) return zt_fail(ZT_ENOMEM, "out of host memory for %d layer inputs", s->layers);
    } else {
        const zt_strlist *paths = &r->offload.nvme_path;
        if (!(s->host = zt_aio_alloc(s->slot))) return zt_fail(ZT_ENOMEM, "out of memory for activation staging");
        if ((st = zt_aio_open(&s->aio, (size_t)r->offload.aio.block_size, r->offload.aio.queue_depth)) ||
            (st = zt_aio_file_open(s->aio, &s->file, (const char *const *)paths->items, paths->n, name)) ||
            (st = zt_aio_file_reserve(s->aio, &s->file, (uint64_t)s->slot * s->layers)))
            return st;
        uint64_t rd, wr;
        zt_aio_take_bytes(s->aio, &rd, &wr);
    }
    s->hooks = (zt_llama_act_hooks){s, put, get};
    return ZT_OK;
}

void zt_actstore_close(zt_actstore *s)
{
    if (s->nvme) {
        if (s->file.nfd) zt_aio_file_close(&s->file, 1);
        zt_aio_close(s->aio);
        zt_aio_free(s->host);
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

void zt_actstore_take_io(zt_actstore *s, uint64_t *read, uint64_t *written)
{
    *read = *written = 0;
    if (s->aio) zt_aio_take_bytes(s->aio, read, written);
}

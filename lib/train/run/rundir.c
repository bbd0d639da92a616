#include "rundir.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu/gemm_bf16.h"
#include "lib/core/cpu.h"
#include "lib/core/fileio.h"
#include "lib/core/log.h"
#include "lib/core/version.h"

void zt_json_number(cJSON *o, const char *key, double v)
{
    if (isfinite(v)) cJSON_AddNumberToObject(o, key, v);
    else cJSON_AddNullToObject(o, key);
}

zt_status zt_rundir_path(const zt_rundir *rd, char *out, size_t n, const char *name)
{
    return zt_path_join(out, n, rd->dir, name);
}

static int dir_is_empty(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 1;
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) empty = 0;
    closedir(d);
    return empty;
}

static void iso_time(char *buf, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* the run files a new run replaces in an existing directory */
static zt_status clear_run_files(const zt_rundir *rd)
{
    static const char *files[] = {"metrics.jsonl", "summary.json", "run.json", "train.log", "final", "checkpoints"};
    char path[4096 + 64];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        zt_status st = zt_rundir_path(rd, path, sizeof path, files[i]);
        if (!st) st = zt_remove_tree(path);
        if (st) return st;
    }
    DIR *d = opendir(rd->dir);
    struct dirent *e;
    zt_status st = ZT_OK;
    while (d && !st && (e = readdir(d)))
        if (!strncmp(e->d_name, "events.out.tfevents.", 20) && !(st = zt_rundir_path(rd, path, sizeof path, e->d_name)))
            st = zt_remove_tree(path);
    if (d) closedir(d);
    return st;
}

zt_status zt_rundir_check(const char *dir, int overwrite)
{
    if (strlen(dir) >= sizeof((zt_rundir *)0)->dir) return zt_fail(ZT_EUSER, "output.dir is too long");
    if (!dir_is_empty(dir) && !overwrite)
        return zt_fail(ZT_EUSER, "output directory '%s' is not empty (set output.overwrite = true to replace it)", dir);
    return ZT_OK;
}

/* A file of a run that was killed before it ended: what zt_rundir_open writes, the
 * resolved recipe, TensorBoard events, checkpoints/, and the temporary files of their
 * atomic writes (not summary.json or final/: those of a run that ended). */
static int is_start_file(const char *name)
{
    static const char *names[] = {"run.json", "train.log", "metrics.jsonl", "recipe.resolved.toml", "checkpoints"};
    if (!strncmp(name, "events.out.tfevents.", 20)) return 1;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        if (!strncmp(name, names[i], n) && (!name[n] || !strncmp(name + n, ".tmp", 4))) return 1;
    }
    return 0;
}

/* The recipe's keys and values: the text after the comments that say where it came from. */
static const char *recipe_body(const char *text)
{
    const char *s = strstr(text, "\n[");
    return s ? s : text;
}

zt_status zt_rundir_is_restart(const char *dir, const char *resolved, int *restart)
{
    char path[4096 + 64], *text;
    size_t len;
    *restart = 0;
    DIR *d = opendir(dir);
    if (!d) return ZT_OK;
    int only_start_files = 1;
    for (struct dirent *e; only_start_files && (e = readdir(d));)
        only_start_files = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || is_start_file(e->d_name);
    closedir(d);
    if (!only_start_files || zt_path_join(path, sizeof path, dir, "recipe.resolved.toml") || !zt_path_exists(path))
        return ZT_OK;
    zt_status st = zt_read_file(path, &text, &len);
    if (st) return st;
    *restart = !strcmp(recipe_body(text), recipe_body(resolved));
    free(text);
    return ZT_OK;
}

/* Keeps the rows of metrics.jsonl up to step (a resumed run reads as one run). */
static zt_status truncate_metrics(const char *path, long step)
{
    char *text;
    size_t len;
    if (!zt_path_exists(path)) return ZT_OK;
    zt_status st = zt_read_file(path, &text, &len);
    if (st) return st;
    zt_atomic_file a;
    if ((st = zt_atomic_open(&a, path))) {
        free(text);
        return st;
    }
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        cJSON *row = cJSON_Parse(line);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(row, "step");
        if (cJSON_IsNumber(s) && s->valuedouble <= step) fprintf(a.f, "%s\n", line);
        cJSON_Delete(row);
    }
    free(text);
    return zt_atomic_commit(&a);
}

zt_status zt_rundir_open(zt_rundir *rd, const char *dir, int overwrite, int tensorboard, int world, long resume_step,
                         int argc, char **argv)
{
    memset(rd, 0, sizeof *rd);
    zt_status st = resume_step >= 0 ? ZT_OK : zt_rundir_check(dir, overwrite);
    if (st) return st;
    snprintf(rd->dir, sizeof rd->dir, "%s", dir);
    st = zt_mkdir_p(dir);
    if (!st && overwrite && resume_step < 0) st = clear_run_files(rd);
    char path[4096 + 64];
    if (!st && resume_step >= 0 && !(st = zt_rundir_path(rd, path, sizeof path, "metrics.jsonl")))
        st = truncate_metrics(path, resume_step);
    if (st) return st;

    char now[32], host[256] = "";
    iso_time(now, sizeof now);
    gethostname(host, sizeof host - 1);
    rd->run = cJSON_CreateObject();
    cJSON_AddStringToObject(rd->run, "zt_version", ZT_VERSION);
    cJSON_AddStringToObject(rd->run, "commit", ZT_COMMIT);
    cJSON *cmd = cJSON_AddArrayToObject(rd->run, "command_line");
    for (int i = 0; i < argc; i++) cJSON_AddItemToArray(cmd, cJSON_CreateString(argv[i]));
    cJSON *hosts = cJSON_AddArrayToObject(rd->run, "hosts");
    cJSON_AddItemToArray(hosts, cJSON_CreateString(host));
    cJSON_AddNumberToObject(rd->run, "world_size", world);
    cJSON_AddStringToObject(rd->run, "cpu_kernels", zt_cpu_level_name());
    cJSON_AddStringToObject(rd->run, "bf16_gemm", zt_gemm_bf16_name());
    if (resume_step >= 0) cJSON_AddNumberToObject(rd->run, "resumed_from_step", resume_step);
    cJSON_AddStringToObject(rd->run, "start_time", now);
    if ((st = zt_rundir_path(rd, path, sizeof path, "run.json")) || (st = zt_json_write(path, rd->run))) return st;

    if ((st = zt_rundir_path(rd, path, sizeof path, "metrics.jsonl"))) return st;
    rd->metrics = fopen(path, resume_step >= 0 ? "a" : "w");
    if ((st = zt_rundir_path(rd, path, sizeof path, "train.log"))) return st;
    rd->log = fopen(path, resume_step >= 0 ? "a" : "w");
    if (!rd->metrics || !rd->log) return zt_fail(ZT_EIO, "cannot create files in '%s'", dir);
    zt_log_set_mirror(rd->log);
    return tensorboard ? zt_tfevents_open(&rd->tb, dir) : ZT_OK;
}

static zt_status tensorboard_row(zt_rundir *rd, const cJSON *row)
{
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(row, "step");
    const char *prefix = cJSON_GetObjectItemCaseSensitive(row, "split") ? "valid" : "train";
    zt_status st = ZT_OK;
    char tag[128];
    for (const cJSON *f = row->child; f && !st; f = f->next) {
        if (!cJSON_IsNumber(f) || f == step || !strncmp(f->string, "comm_bytes", 10) || !strncmp(f->string, "io_", 3))
            continue;
        snprintf(tag, sizeof tag, "%s/%s", prefix, f->string);
        st = zt_tfevents_scalar(rd->tb, tag, step ? (int64_t)step->valuedouble : 0, f->valuedouble);
    }
    return st;
}

static zt_status metrics_failed(const zt_rundir *rd)
{
    return zt_fail(ZT_EIO, "writing '%s/metrics.jsonl' failed: %s", rd->dir, strerror(errno));
}

zt_status zt_rundir_metrics(zt_rundir *rd, cJSON *row)
{
    char *text = cJSON_PrintUnformatted(row);
    zt_status st = ZT_OK;
    if (!text) st = zt_fail(ZT_ENOMEM, "out of memory writing metrics");
    else if (fprintf(rd->metrics, "%s\n", text) < 0 || fflush(rd->metrics)) st = metrics_failed(rd);
    if (!st && rd->tb) st = tensorboard_row(rd, row);
    free(text);
    cJSON_Delete(row);
    return st;
}

zt_status zt_rundir_close(zt_rundir *rd, cJSON *summary)
{
    char path[4096 + 64], now[32];
    /* the first failure is the one reported: the events and the metrics, then the summary */
    zt_log_set_mirror(NULL);
    zt_status st = zt_tfevents_close(rd->tb);
    if (rd->metrics && fclose(rd->metrics) && !st) st = metrics_failed(rd);
    if (summary) { /* not after a failure here: its status would be wrong */
        if (!st && !(st = zt_rundir_path(rd, path, sizeof path, "summary.json"))) st = zt_json_write(path, summary);
        cJSON_Delete(summary);
    }
    if (rd->run) {
        iso_time(now, sizeof now);
        cJSON_AddStringToObject(rd->run, "end_time", now);
        if (!st && !(st = zt_rundir_path(rd, path, sizeof path, "run.json"))) st = zt_json_write(path, rd->run);
        cJSON_Delete(rd->run);
    }
    if (rd->log) fclose(rd->log);
    memset(rd, 0, sizeof *rd);
    return st;
}

/* train/run/rundir: the run directory of docs/architecture.md: run.json,
 * train.log, recipe.resolved.toml, metrics.jsonl, summary.json, final/.
 *
 *     zt_rundir rd;
 *     if ((st = zt_rundir_open(&rd, dir, overwrite, argc, argv))) return st;
 *     cJSON *row = cJSON_CreateObject(); ...; zt_rundir_metrics(&rd, row);  // takes row
 *     zt_rundir_close(&rd, summary);                                          // takes summary
 */
#ifndef ZT_TRAIN_RUN_RUNDIR_H
#define ZT_TRAIN_RUN_RUNDIR_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "lib/core/json.h"

#include "lib/core/status.h"
#include "tfevents.h"

typedef struct zt_rundir {
    char dir[4096];
    FILE *metrics, *log;
    cJSON *run;      /* run.json, rewritten with the end time at close */
    zt_tfevents *tb; /* TensorBoard scalars (output.tensorboard) */
} zt_rundir;

/* Fails (ZT_EUSER) when dir is not empty and overwrite is off: call before slow setup. */
zt_status zt_rundir_check(const char *dir, int overwrite);
/* *restart = 1 when dir holds only the files of an earlier start of this run that ended
 * before it did (killed: no summary.json, no final/) and its recipe.resolved.toml has the
 * keys and values of resolved (this run's, zt_recipe_resolved_text). The caller, having
 * found no complete checkpoint there, may then start afresh as with overwrite. */
zt_status zt_rundir_is_restart(const char *dir, const char *resolved, int *restart);
/* Creates dir (a non-empty one only with overwrite, whose run files are then
 * replaced), writes run.json, starts mirroring the log into train.log and, with
 * tensorboard, an events file. resume_step >= 0 continues a run instead: its files
 * are kept, metrics.jsonl loses the rows after that step and is appended to. */
zt_status zt_rundir_open(zt_rundir *rd, const char *dir, int overwrite, int tensorboard, int world, long resume_step,
                         int argc, char **argv);
/* path of a file inside the run directory */
zt_status zt_rundir_path(const zt_rundir *rd, char *out, size_t n, const char *name);
/* Appends one row to metrics.jsonl (non-finite numbers become null) and its numbers
 * to TensorBoard as train/<key> (valid/<key> for rows with "split": "valid") at
 * the row's step. Frees row. */
zt_status zt_rundir_metrics(zt_rundir *rd, cJSON *row);
/* Closes the events and metrics.jsonl, then writes summary.json and the final run.json
 * (not after a failure to close those); frees summary. */
zt_status zt_rundir_close(zt_rundir *rd, cJSON *summary);

/* Adds a number to a JSON object, as null when it is not finite (NaN, inf). */
void zt_json_number(cJSON *o, const char *key, double v);

#endif

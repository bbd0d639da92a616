/* train/rlhf/reward_program: the external reward program of RLHF (rlhf.reward_command).
 *
 * The program is started once per run with /bin/sh -c, in a process group of its own,
 * and kept running. zt writes
 * one JSON object per completion to its stdin, one a line ({"prompt": ...,
 * "completion": ..., <extra prompt fields>}), and reads one number per line from its
 * stdout, in order; the program must flush each answer. Its stderr is ours. A crash,
 * no answer within timeout_s, or a line that is not a finite number is a ZT_EUSER
 * error naming the input line (counted from the start of the run); after one, score
 * keeps failing and close kills the program. Close ends the whole group (what the program
 * started too: SIGTERM, then SIGKILL after 1 s), and so do zt's exit and a SIGINT, SIGHUP
 * or SIGTERM that zt has no handler of its own for.
 *
 *     zt_reward_program rp = {0};
 *     if ((st = zt_reward_program_open(&rp, r->rlhf.reward_command, r->rlhf.reward_timeout_s))) return st;
 *     st = zt_reward_program_score(&rp, objects, n, rewards);
 *     zt_reward_program_close(&rp);
 */
#ifndef ZT_TRAIN_RLHF_REWARD_PROGRAM_H
#define ZT_TRAIN_RLHF_REWARD_PROGRAM_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/core/status.h"

typedef struct zt_reward_program {
    char *command;            /* NULL when not open */
    pid_t pid;                /* also its process group's id; reaped by close */
    int to_child, from_child; /* our ends of its stdin and stdout (non-blocking); to_child is -1 once it is gone */
    double timeout_s;
    long sent, answered; /* input lines written in full, answers read: since open */
    int failed;          /* an error left its answers out of step with our lines */
    size_t len;          /* bytes in buf: the start of an answer not yet ended by a newline */
    char buf[4096];
} zt_reward_program;

/* Starts `command` with /bin/sh -c; timeout_s bounds the wait for each answer. */
zt_status zt_reward_program_open(zt_reward_program *p, const char *command, double timeout_s);
/* Writes the n objects (one JSON line each, cJSON_PrintUnformatted) and reads n numbers into rewards[]. */
zt_status zt_reward_program_score(zt_reward_program *p, cJSON *const *objects, int n, double *rewards);
/* The number of one line the program printed, s[0..len) (followed by its newline): blanks
 * around it allowed; else ZT_EUSER, "answer to line LINE is '...', not a (finite) number". */
zt_status zt_reward_parse_answer(const char *s, size_t len, long line, double *v);
/* Closes its stdin, waits briefly for it to exit (kills it after ~2 s), ends its group, frees
 * everything. Safe on a zeroed struct. */
void zt_reward_program_close(zt_reward_program *p);

#endif

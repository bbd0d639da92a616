/* train/reward_program: real programs (sh and python3 one-liners) score in order across calls,
 * see each object as one JSON line with its extra fields, take 20000 lines at once without a
 * deadlock, and a crash, a signal, a bad answer or a timeout fails naming the line; close
 * ends a program that ignores the end of its input. */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/fileio.h"
#include "lib/core/status.h"
#include "lib/train/rlhf/reward_program.h"
#include "tests/unit/test.h"

static char root[256];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int has(const char *msg, const char *part) { return strstr(msg, part) != NULL; }

static cJSON *example(const char *completion, const char *answer, int id)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "prompt", "What is 6 × 7? \"quoted\"\nsecond line");
    cJSON_AddStringToObject(o, "completion", completion);
    if (answer) cJSON_AddStringToObject(o, "answer", answer);
    cJSON_AddNumberToObject(o, "id", id);
    return o;
}

/* Scores one program on n objects and returns the status; the message is in zt_errmsg(). */
static zt_status score_once(const char *command, double timeout_s, cJSON *const *objects, int n, double *rewards)
{
    zt_reward_program p;
    zt_status st = zt_reward_program_open(&p, command, timeout_s);
    CHECK(st == ZT_OK);
    if (!st) st = zt_reward_program_score(&p, objects, n, rewards);
    zt_reward_program_close(&p);
    return st;
}

static void test_exact_match(void)
{
    char script[300], seen[300], command[1000];
    snprintf(script, sizeof script, "%s/reward.py", root);
    snprintf(seen, sizeof seen, "%s/seen.jsonl", root);
    test_write_text(script, "import json, sys\n"
                            "seen = open(sys.argv[1], 'w')\n"
                            "for line in sys.stdin:\n"
                            "    seen.write(line); seen.flush()\n"
                            "    d = json.loads(line)\n"
                            "    ok = d['completion'] == d['answer'] if 'answer' in d else None\n"
                            "    print('oops' if ok is None else int(ok), flush=True)\n");
    snprintf(command, sizeof command, "/usr/bin/python3 %s %s", script, seen);

    cJSON *objects[6] = {example("42", "42", 0),  example("41", "42", 1), example("yes", "yes", 2),
                         example("no", "yes", 3), example("7", "7", 4),   example("none", NULL, 5)};
    double rewards[3] = {-1, -1, -1}, want[5] = {1, 0, 1, 0, 1};
    zt_reward_program p;
    CHECK(zt_reward_program_open(&p, command, 10) == ZT_OK);
    CHECK(zt_reward_program_score(&p, objects, 3, rewards) == ZT_OK);
    for (int i = 0; i < 3; i++) CHECK(rewards[i] == want[i]);
    CHECK(zt_reward_program_score(&p, objects + 3, 2, rewards) == ZT_OK);
    for (int i = 0; i < 2; i++) CHECK(rewards[i] == want[3 + i]);
    CHECK(p.sent == 5 && p.answered == 5);
    CHECK(zt_reward_program_score(&p, objects + 5, 1, rewards) == ZT_EUSER);
    CHECK_MSG(has(zt_errmsg(), "answer to line 6 is 'oops', not a number") && has(zt_errmsg(), command) &&
                  has(zt_errmsg(), "(input line 6: {\"prompt\":"),
              "%s", zt_errmsg());
    CHECK(zt_reward_program_score(&p, objects, 1, rewards) == ZT_EUSER && has(zt_errmsg(), "earlier error"));
    zt_reward_program_close(&p);

    /* the program saw each object as one line, in order, with its extra fields */
    char *text = NULL, want_text[4096] = "";
    size_t len;
    CHECK(zt_read_file(seen, &text, &len) == ZT_OK);
    for (int i = 0; i < 6; i++) {
        char *line = cJSON_PrintUnformatted(objects[i]);
        snprintf(want_text + strlen(want_text), sizeof want_text - strlen(want_text), "%s\n", line);
        free(line);
        cJSON_Delete(objects[i]);
    }
    CHECK_MSG(text && !strcmp(text, want_text), "saw:\n%s", text ? text : "(nothing)");
    free(text);
}

/* 20000 lines of ~100 bytes in and ~50 out: far more than a pipe holds either way */
static void test_large_batch(void)
{
    enum { N = 20000 };
    cJSON **objects = malloc(N * sizeof *objects);
    double *rewards = malloc(N * sizeof *rewards);
    for (int i = 0; i < N; i++) objects[i] = example("a completion of some length, to fill the pipe", "x", i);
    const char *command = "/usr/bin/python3 -c 'import json, sys\n"
                          "for line in sys.stdin: print(\"%.40f\" % (json.loads(line)[\"id\"] * 0.5), flush=True)'";
    CHECK_MSG(score_once(command, 10, objects, N, rewards) == ZT_OK, "%s", zt_errmsg());
    int bad = 0;
    for (int i = 0; i < N; i++) bad += rewards[i] != i * 0.5;
    CHECK_MSG(bad == 0, "%d rewards wrong", bad);

    /* a program that exits at once: our writes fail (EPIPE, no SIGPIPE death) and its exit is reported */
    CHECK(score_once("exit 3", 10, objects, N, rewards) == ZT_EUSER);
    CHECK_MSG(has(zt_errmsg(), "reward program 'exit 3': exited with status 3 before answering line 1"), "%s",
              zt_errmsg());
    for (int i = 0; i < N; i++) cJSON_Delete(objects[i]);
    free(objects), free(rewards);
}

static void test_crash(void)
{
    cJSON *objects[5];
    double rewards[5];
    for (int i = 0; i < 5; i++) objects[i] = example("c", "c", i);
    CHECK(score_once("read -r l; echo 1; read -r l; echo 2; exit 3", 10, objects, 5, rewards) == ZT_EUSER);
    CHECK_MSG(has(zt_errmsg(), "exited with status 3 before answering line 3 (input line 3: {\"prompt\":"), "%s",
              zt_errmsg());
    CHECK(rewards[0] == 1 && rewards[1] == 2);
    CHECK(score_once("read -r l; kill -9 $$", 10, objects, 5, rewards) == ZT_EUSER);
    CHECK_MSG(has(zt_errmsg(), "killed by signal 9 before answering line 1"), "%s", zt_errmsg());
    CHECK(score_once("no-such-reward-program-zt", 10, objects, 5, rewards) == ZT_EUSER);
    CHECK_MSG(has(zt_errmsg(), "exited with status 127 before answering line 1"), "%s", zt_errmsg());
    for (int i = 0; i < 5; i++) cJSON_Delete(objects[i]);
}

static void test_bad_answer(void)
{
    cJSON *objects[2] = {example("c", "c", 0), example("d", "d", 1)};
    double rewards[2] = {0, 0};
    CHECK(score_once("while read -r l; do printf ' 2.5\\r\\n'; done", 10, objects, 2, rewards) == ZT_OK);
    CHECK(rewards[0] == 2.5 && rewards[1] == 2.5);
    CHECK(score_once("read -r l; echo abc", 10, objects, 2, rewards) == ZT_EUSER);
    CHECK_MSG(has(zt_errmsg(), "answer to line 1 is 'abc', not a number"), "%s", zt_errmsg());
    CHECK(score_once("read -r l; echo 1; read -r l; echo", 10, objects, 2, rewards) == ZT_EUSER);
    CHECK_MSG(has(zt_errmsg(), "answer to line 2 is '', not a number"), "%s", zt_errmsg());
    CHECK(score_once("read -r l; echo nan", 10, objects, 2, rewards) == ZT_EUSER);
    CHECK_MSG(has(zt_errmsg(), "answer to line 1 is 'nan', not a finite number"), "%s", zt_errmsg());
    /* two answers to line 1: the second is seen with line 1's or, at the latest, before line 2 is sent */
    zt_reward_program p;
    CHECK(zt_reward_program_open(&p, "read -r l; echo 1; echo 2; cat >/dev/null", 10) == ZT_OK);
    zt_status st = zt_reward_program_score(&p, objects, 1, rewards);
    usleep(100000);
    if (!st) st = zt_reward_program_score(&p, objects + 1, 1, rewards);
    CHECK(st == ZT_EUSER);
    CHECK_MSG(has(zt_errmsg(), "printed '2' before it was sent line 2"), "%s", zt_errmsg());
    zt_reward_program_close(&p);
    for (int i = 0; i < 2; i++) cJSON_Delete(objects[i]);
}

static void test_timeout(void)
{
    cJSON *objects[1] = {example("c", "c", 0)};
    double rewards[1];
    zt_reward_program p;
    CHECK(zt_reward_program_open(&p, "sleep 10", 0.5) == ZT_OK);
    double t0 = now_s();
    CHECK(zt_reward_program_score(&p, objects, 1, rewards) == ZT_EUSER);
    double t1 = now_s();
    CHECK_MSG(has(zt_errmsg(), "reward program 'sleep 10': no answer to line 1 within 0.5 s"), "%s", zt_errmsg());
    CHECK_MSG(t1 - t0 >= 0.45 && t1 - t0 < 1.5, "score took %.2f s", t1 - t0);
    zt_reward_program_close(&p); /* after an error: killed at once */
    CHECK_MSG(now_s() - t1 < 0.5, "close took %.2f s", now_s() - t1);
    cJSON_Delete(objects[0]);
}

/* The pid a program wrote to path, 0 if none. */
static pid_t read_pid(const char *path)
{
    FILE *f = fopen(path, "r");
    long pid = 0;
    if (f && fscanf(f, "%ld", &pid) != 1) pid = 0;
    if (f) fclose(f);
    return (pid_t)pid;
}

/* A hung program whose shell forks a child that holds our stderr: killing the program
 * ends the child too, so that a reader of our stderr (zt ... 2>&1 | cat) sees its end. */
static void test_kill_ends_children(void)
{
    cJSON *objects[1] = {example("c", "c", 0)};
    double rewards[1];
    char pidfile[512], command[1024];
    snprintf(pidfile, sizeof pidfile, "%s/child.pid", root);
    snprintf(command, sizeof command, "sleep 1000 & echo $! > %s; wait", pidfile);
    int err[2], saved = dup(2);
    CHECK(pipe(err) == 0);
    dup2(err[1], 2); /* the program's stderr (it inherits ours) is this pipe */
    zt_reward_program p;
    zt_status st = zt_reward_program_open(&p, command, 0.5);
    dup2(saved, 2);
    close(saved), close(err[1]);
    CHECK(st == ZT_OK);
    CHECK(zt_reward_program_score(&p, objects, 1, rewards) == ZT_EUSER);
    pid_t child = read_pid(pidfile);
    CHECK(child > 0);
    zt_reward_program_close(&p);
    /* once no process holds the pipe's write end it reads as ended (the bound only keeps a
     * failing test from hanging) */
    struct pollfd fd = {.fd = err[0], .events = POLLIN};
    char c;
    int ended = poll(&fd, 1, 10000) == 1 && read(err[0], &c, 1) == 0;
    CHECK_MSG(ended, "the program's child %ld still holds stderr", (long)child);
    if (!ended && child > 0) kill(child, SIGKILL);
    close(err[0]);
    cJSON_Delete(objects[0]);
}

static int lowest_free_fd(void)
{
    int fd = dup(0);
    close(fd);
    return fd;
}

static void test_close(void)
{
    zt_reward_program zero = {0};
    zt_reward_program_close(&zero);
    int free_fd = lowest_free_fd();
    /* the program has stdin, stdout and stderr, nothing else of ours */
    cJSON *objects[1] = {example("c", "c", 0)};
    double rewards[1] = {0};
    /* counted by the program itself (a shell pipeline's own pipe would race with ls), less listdir's */
    CHECK(score_once("exec /usr/bin/python3 -c 'import os, sys; sys.stdin.readline(); "
                     "print(len(os.listdir(\"/proc/self/fd\")) - 1, flush=True)'",
                     10, objects, 1, rewards) == ZT_OK);
    CHECK_MSG(rewards[0] == 3, "%g descriptors", rewards[0]);
    cJSON_Delete(objects[0]);
    zt_reward_program p;
    CHECK(zt_reward_program_open(&p, "cat >/dev/null", 1) == ZT_OK);
    double t0 = now_s();
    zt_reward_program_close(&p); /* exits at the end of its input */
    CHECK_MSG(now_s() - t0 < 0.5, "close took %.2f s", now_s() - t0);
    CHECK(zt_reward_program_open(&p, "sleep 30", 1) == ZT_OK);
    t0 = now_s();
    zt_reward_program_close(&p); /* ignores it: killed after ~2 s */
    CHECK_MSG(now_s() - t0 > 1.5 && now_s() - t0 < 3.5, "close took %.2f s", now_s() - t0);
    CHECK(p.command == NULL && p.pid == 0);
    CHECK(lowest_free_fd() == free_fd);
}

int main(void)
{
    snprintf(root, sizeof root, "%s", "build/tests/reward.XXXXXX");
    CHECK(mkdtemp(root) != NULL);
    RUN(test_exact_match);
    RUN(test_large_batch);
    RUN(test_crash);
    RUN(test_bad_answer);
    RUN(test_timeout);
    RUN(test_kill_ends_children);
    RUN(test_close);
    zt_remove_tree(root);
    return test_summary();
}

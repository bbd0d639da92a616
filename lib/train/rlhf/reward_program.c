#define _GNU_SOURCE
#include "reward_program.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/log.h"

enum { ECHO_MAX = 80 }; /* bytes of an input line or an answer quoted in a message */

/* the input lines of one score call */
typedef struct batch {
    char *text;  /* every line, each ended by '\n' */
    size_t *off; /* line i is text[off[i], off[i + 1]) */
    int n;
    long first;     /* run line number of line 0 */
    size_t written; /* bytes of text in the pipe so far */
    int done;       /* lines written in full */
} batch;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Waits up to seconds for pid to exit, leaving it unreaped (so that its pid, the id of its
 * process group, cannot be reused while we may still signal the group): 1 once it has
 * exited (*info says how), 0 while it runs, -1 when it cannot be waited for. */
static int wait_exit(pid_t pid, double seconds, siginfo_t *info)
{
    double end = now_s() + seconds;
    for (;;) {
        memset(info, 0, sizeof *info);
        int r = waitid(P_PID, (id_t)pid, info, WEXITED | WNOHANG | WNOWAIT);
        if (r == 0 && info->si_pid == pid) return 1;
        if (r < 0 && errno != EINTR) return -1;
        if (now_s() >= end) return 0;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
}

/* The process groups of the programs open now, for the exit and signal handlers: a program
 * runs in a group of its own (a terminal's Ctrl-C does not reach it), so zt ends it. */
enum { MAX_PROGRAMS = 16 };
static volatile sig_atomic_t open_groups[MAX_PROGRAMS];

static void kill_open_groups(int sig)
{
    for (int i = 0; i < MAX_PROGRAMS; i++)
        if (open_groups[i]) kill(-(pid_t)open_groups[i], sig);
}

static void kill_at_exit(void) { kill_open_groups(SIGKILL); }

/* SIGINT or SIGHUP with no handler of zt's: end the programs, then die of the signal as before. */
static void kill_on_signal(int sig)
{
    kill_open_groups(SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void track_group(pid_t pgid)
{
    static int installed;
    if (!installed) {
        installed = 1;
        atexit(kill_at_exit);
        const int sigs[] = {SIGINT, SIGHUP, SIGTERM}; /* SIGTERM: unless the trainer stops gracefully on it */
        for (int i = 0; i < 3; i++) {
            struct sigaction old;
            if (!sigaction(sigs[i], NULL, &old) && old.sa_handler == SIG_DFL) signal(sigs[i], kill_on_signal);
        }
    }
    for (int i = 0; i < MAX_PROGRAMS; i++)
        if (!open_groups[i]) {
            open_groups[i] = pgid;
            return;
        }
}

static void untrack_group(pid_t pgid)
{
    for (int i = 0; i < MAX_PROGRAMS; i++)
        if (open_groups[i] == pgid) open_groups[i] = 0;
}

zt_status zt_reward_program_open(zt_reward_program *p, const char *command, double timeout_s)
{
    ZT_ASSERT(timeout_s > 0);
    memset(p, 0, sizeof *p);
    char *copy = strdup(command);
    int in[2], out[2]; /* its stdin and its stdout; ours are in[1] and out[0] */
    if (!copy) return zt_fail(ZT_ENOMEM, "out of memory starting reward program '%s'", command);
    if (pipe2(in, O_CLOEXEC)) {
        free(copy);
        return zt_fail(ZT_EIO, "reward program '%s': cannot make a pipe: %s", command, strerror(errno));
    }
    if (pipe2(out, O_CLOEXEC)) {
        int err = errno;
        close(in[0]), close(in[1]), free(copy);
        return zt_fail(ZT_EIO, "reward program '%s': cannot make a pipe: %s", command, strerror(err));
    }
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(out[0], F_SETFL, O_NONBLOCK);

    /* It gets the two pipes as stdin and stdout, our stderr, no other descriptor of ours, its own process group,
     * no blocked signals and the default SIGPIPE (ignored ones would stay ignored across exec). */
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, pipe_sig;
    sigemptyset(&none);
    sigemptyset(&pipe_sig);
    sigaddset(&pipe_sig, SIGPIPE);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0); /* a group of its own, which close ends as a whole */
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &pipe_sig);
    char *argv[] = {"sh", "-c", copy, NULL};
    pid_t pid;
    int err = posix_spawn(&pid, "/bin/sh", &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(in[0]), close(out[1]);
    if (err) {
        close(in[1]), close(out[0]), free(copy);
        return zt_fail(ZT_EUSER, "reward program '%s': cannot start /bin/sh: %s", command, strerror(err));
    }
    p->command = copy;
    p->pid = pid;
    track_group(pid);
    p->to_child = in[1];
    p->from_child = out[0];
    p->timeout_s = timeout_s;
    return ZT_OK;
}

static zt_status input_oom(void) { return zt_fail(ZT_ENOMEM, "out of memory writing the reward program's input"); }

static zt_status batch_build(batch *b, cJSON *const *objects, int n, long first)
{
    *b = (batch){.n = n, .first = first, .off = malloc(((size_t)n + 1) * sizeof *b->off)};
    if (!b->off) return input_oom();
    size_t len = 0, cap = 0;
    for (int i = 0; i < n; i++) {
        char *line = cJSON_PrintUnformatted(objects[i]);
        if (!line) return input_oom();
        size_t k = strlen(line);
        if (len + k + 1 > cap) {
            cap = 2 * (len + k + 1);
            char *grown = realloc(b->text, cap);
            if (!grown) {
                free(line);
                return input_oom();
            }
            b->text = grown;
        }
        b->off[i] = len;
        memcpy(b->text + len, line, k); /* no newline inside: cJSON escapes control characters */
        b->text[len + k] = '\n';
        len += k + 1;
        free(line);
    }
    b->off[n] = len;
    return ZT_OK;
}

/* Fails with what went wrong, then the start of the input line the program did not answer (once written). */
__attribute__((format(printf, 3, 4))) static zt_status line_fail(const zt_reward_program *p, const batch *b,
                                                                 const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    long line = p->answered + 1, i = line - b->first;
    if (i >= b->done) return zt_fail(ZT_EUSER, "reward program '%s': %s", p->command, what);
    int len = (int)(b->off[i + 1] - b->off[i] - 1);
    return zt_fail(ZT_EUSER, "reward program '%s': %s (input line %ld: %.*s%s)", p->command, what, line,
                   len < ECHO_MAX ? len : ECHO_MAX, b->text + b->off[i], len > ECHO_MAX ? "..." : "");
}

/* The program closed its output: says how it ended, if it did. */
static zt_status ended_fail(zt_reward_program *p, const batch *b)
{
    long line = p->answered + 1;
    siginfo_t info;
    if (wait_exit(p->pid, 1.0, &info) != 1) return line_fail(p, b, "closed its output before answering line %ld", line);
    if (info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED)
        return line_fail(p, b, "killed by signal %d before answering line %ld", info.si_status, line);
    return line_fail(p, b, "exited with status %d before answering line %ld%s", info.si_status, line,
                     info.si_status == 127 ? " (the shell's 'command not found')" : "");
}

static void trim(const char **s, size_t *len)
{
    while (*len && isspace((unsigned char)(*s)[*len - 1])) --*len; /* a trailing \r too */
    while (*len && isspace((unsigned char)**s)) ++*s, --*len;
}

zt_status zt_reward_parse_answer(const char *s, size_t len, long line, double *v)
{
    trim(&s, &len);
    int shown = len < ECHO_MAX ? (int)len : ECHO_MAX;
    char *end = NULL;
    double x = len ? strtod(s, &end) : 0;
    if (end != s + len) return zt_fail(ZT_EUSER, "answer to line %ld is '%.*s', not a number", line, shown, s);
    if (!isfinite(x)) return zt_fail(ZT_EUSER, "answer to line %ld is '%.*s', not a finite number", line, shown, s);
    *v = x;
    return ZT_OK;
}

/* One line of output: the answer to the next line. */
static zt_status take_answer(zt_reward_program *p, const batch *b, const char *s, size_t len, double *rewards)
{
    long line = p->answered + 1;
    if (p->answered >= p->sent) {
        trim(&s, &len);
        return line_fail(p, b, "printed '%.*s' before it was sent line %ld (one number per line)",
                         len < ECHO_MAX ? (int)len : ECHO_MAX, s, line);
    }
    if (zt_reward_parse_answer(s, len, line, &rewards[line - b->first])) return line_fail(p, b, "%s", zt_errmsg());
    p->answered++;
    return ZT_OK;
}

/* Reads what the program printed and takes its whole lines; each one moves the deadline. */
static zt_status read_answers(zt_reward_program *p, const batch *b, double *rewards, double *deadline)
{
    ssize_t k = read(p->from_child, p->buf + p->len, sizeof p->buf - p->len);
    if (k < 0)
        return errno == EINTR || errno == EAGAIN
                   ? ZT_OK
                   : zt_fail(ZT_EIO, "reward program '%s': cannot read its output: %s", p->command, strerror(errno));
    if (k == 0) return ended_fail(p, b);
    p->len += (size_t)k;
    char *at = p->buf, *end = p->buf + p->len, *nl;
    zt_status st = ZT_OK;
    while (!st && (nl = memchr(at, '\n', (size_t)(end - at)))) {
        st = take_answer(p, b, at, (size_t)(nl - at), rewards);
        at = nl + 1;
        *deadline = now_s() + p->timeout_s;
    }
    p->len = (size_t)(end - at);
    memmove(p->buf, at, p->len);
    if (!st && p->len == sizeof p->buf)
        st = line_fail(p, b, "answer to line %ld runs over %zu bytes, not a number", p->answered + 1, sizeof p->buf);
    return st;
}

/* Writes what the pipe takes. A program that has gone (EPIPE) is reported by the reader, which sees how it ended. */
static zt_status write_lines(zt_reward_program *p, batch *b)
{
    size_t total = b->off[b->n];
    while (b->written < total) {
        ssize_t k = write(p->to_child, b->text + b->written, total - b->written);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && errno == EAGAIN) break;
        if (k < 0 && errno == EPIPE) {
            close(p->to_child);
            p->to_child = -1;
            break;
        }
        if (k < 0)
            return zt_fail(ZT_EIO, "reward program '%s': cannot write its input: %s", p->command, strerror(errno));
        b->written += (size_t)k;
    }
    for (; b->done < b->n && b->off[b->done + 1] <= b->written; b->done++) p->sent++;
    return ZT_OK;
}

zt_status zt_reward_program_score(zt_reward_program *p, cJSON *const *objects, int n, double *rewards)
{
    if (p->failed) return zt_fail(ZT_EUSER, "reward program '%s': stopped by an earlier error", p->command);
    if (n <= 0) return ZT_OK;
    batch b;
    zt_status st = batch_build(&b, objects, n, p->answered + 1);
    /* Writing to a program that has gone raises SIGPIPE in this thread: blocked, the write fails with EPIPE instead. */
    sigset_t pipe_sig, old_mask;
    sigemptyset(&pipe_sig);
    sigaddset(&pipe_sig, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_sig, &old_mask);
    double deadline = now_s() + p->timeout_s;
    long last = b.first + n - 1;
    while (!st && p->answered < last) {
        /* both ways at once: the program may answer while we write, and each pipe holds only 64 KiB */
        struct pollfd fds[2] = {{.fd = p->from_child, .events = POLLIN},
                                {.fd = b.written < b.off[n] ? p->to_child : -1, .events = POLLOUT}};
        double left = deadline - now_s();
        int r = left > 0 ? poll(fds, 2, left < 1e6 ? (int)ceil(left * 1e3) : 1000000000) : 0;
        if (r < 0 && errno != EINTR)
            st = zt_fail(ZT_EIO, "reward program '%s': cannot wait for it: %s", p->command, strerror(errno));
        else if (r == 0 && now_s() >= deadline)
            st = line_fail(p, &b, "no answer to line %ld within %g s", p->answered + 1, p->timeout_s);
        if (!st && r > 0 && fds[0].revents) st = read_answers(p, &b, rewards, &deadline);
        if (!st && r > 0 && fds[1].revents) st = write_lines(p, &b);
    }
    if (p->to_child < 0) sigtimedwait(&pipe_sig, NULL, &(struct timespec){0, 0}); /* the SIGPIPE of the EPIPE */
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    if (st) p->failed = 1;
    free(b.text);
    free(b.off);
    return st;
}

/* Ends the program's process group (what it started too): SIGTERM, a short grace for
 * the program to exit, SIGKILL for whatever is left; then reaps it. */
static void end_group(pid_t pid)
{
    siginfo_t info;
    kill(-pid, SIGTERM);
    wait_exit(pid, 1.0, &info);
    kill(-pid, SIGKILL);
    untrack_group(pid);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

void zt_reward_program_close(zt_reward_program *p)
{
    if (p->command) {
        if (p->to_child >= 0) close(p->to_child);
        siginfo_t info;
        if (!p->failed && wait_exit(p->pid, 2.0, &info) == 0)
            zt_log_warn("reward program '%s' still runs 2 s after its input ended: killing it", p->command);
        end_group(p->pid);
        close(p->from_child);
    }
    free(p->command);
    memset(p, 0, sizeof *p);
}

/* launch/hostfile: the hosts a job may use and their slots, as DeepSpeed's
 * launcher reads them. A hostfile has lines "HOST slots=N", '#' comments and
 * blank lines; a host listed twice is an error. --include/--exclude then pick
 * hosts and slots: "worker-0@worker-1:0,2" (a bare host means all its slots).
 *
 *     zt_host_pool p;
 *     zt_status st = zt_hostfile_load(&p, "hostfile");   // or zt_host_pool_local(&p, 4)
 *     if (!st) st = zt_host_pool_select(&p, include, exclude);   // either may be NULL
 *     for (int i = 0; !st && i < p.n; i++) printf("%s: %d ranks\n", p.hosts[i].name, p.hosts[i].nused);
 *     zt_host_pool_free(&p);   // also after a failure
 *
 * Host names may only hold letters, digits, '.', '-' and '_' (starting with a
 * letter or digit): Open MPI hands them to remote shells, so anything else could
 * run as a command there.
 */
#ifndef ZT_LAUNCH_HOSTFILE_H
#define ZT_LAUNCH_HOSTFILE_H

#include "lib/core/status.h"

enum { ZT_HOST_MAX_SLOTS = 4096 };

typedef struct zt_host {
    char *name;
    int nslots;          /* slots=N of the hostfile: slot ids 0..N-1 */
    unsigned char *used; /* nslots flags: the slot runs a rank */
    int nused;
} zt_host;

typedef struct zt_host_pool {
    zt_host *hosts; /* hostfile order; hosts left with no slot are dropped by select */
    int n;
} zt_host_pool;

/* Parses hostfile text; where names the file in messages ("hostfile:3: ..."). */
zt_status zt_hostfile_parse(zt_host_pool *p, const char *text, const char *where);
zt_status zt_hostfile_load(zt_host_pool *p, const char *path);
/* One host, "localhost", with nslots slots: a job on this machine. */
zt_status zt_host_pool_local(zt_host_pool *p, int nslots);
/* Gives every host nslots slots, all used (--nproc-per-node with a hostfile). */
zt_status zt_host_pool_resize(zt_host_pool *p, int nslots);
/* Keeps what include names, or drops what exclude names (not both); fails on an
 * unknown host or slot, a malformed spec, or when no slot is left. */
zt_status zt_host_pool_select(zt_host_pool *p, const char *include, const char *exclude);
/* 1 when the used slots of h are 0..nused-1 (no device list is needed). */
int zt_host_uses_prefix(const zt_host *h);
/* The ranks every host runs, or 0 when hosts differ. */
int zt_host_pool_ranks_per_node(const zt_host_pool *p);
/* The most ranks any host runs. */
int zt_host_pool_max_ranks(const zt_host_pool *p);
void zt_host_pool_free(zt_host_pool *p);

#endif

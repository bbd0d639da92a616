/* cmd/options: command-line options declared as data. The same table parses
 * the arguments and prints the usage, so help never drifts from behaviour.
 *
 *     const char *out = NULL; long seed = 0;
 *     zt_option opts[] = {
 *         {"out", 'S', &out, "DIR", "directory to write", 0, 0},
 *         {"seed", 'I', &seed, "N", "random seed", 0, LONG_MAX},
 *         {0},
 *     };
 *     int n = zt_options_parse(argc, argv, opts, &usage);  // leaves the positional words in argv
 *
 * Types: 'S' string, 'I' integer (long) in [min, max], 'D' number (double) in
 * [min, max], 'L' a string that may repeat (into a zt_option_list), 'F' flag (int,
 * no value). Options may be given as --name VALUE or --name=VALUE; "--" ends them.
 */
#ifndef ZT_CMD_OPTIONS_H
#define ZT_CMD_OPTIONS_H

#include <stdio.h>

typedef struct zt_option_list {
    const char *items[32];
    int n;
} zt_option_list;

typedef struct zt_option {
    const char *name;
    char type;
    void *dest;
    const char *arg;  /* what the value is called in the usage */
    const char *help;
    long min, max;
} zt_option;

typedef struct zt_usage {
    const char *command;  /* "zt init" */
    const char *synopsis; /* "--arch llama --out DIR [options] [key=value ...]" */
    const char *summary;  /* one line on what the command does */
} zt_usage;

/* Parses options out of argv, keeping the positional words (argv[0] included)
 * in order; returns their count, or -1 after printing an error (exit 2). Prints
 * the usage and returns -2 for --help. */
int zt_options_parse(int argc, char **argv, const zt_option *opts, const zt_usage *usage);
void zt_options_usage(FILE *f, const zt_option *opts, const zt_usage *usage);
/* Strict integer parsing with a range; 0 on success. */
int zt_parse_long(const char *s, long min, long max, long *out);
/* A byte size: digits with an optional B, KB, MB, GB, TB (powers of 1000) or
 * KiB, MiB, GiB suffix ("5GB" as Hugging Face writes it); 0 on success. */
int zt_parse_size(const char *s, unsigned long long *out);
/* Edit distance for did-you-mean suggestions. */
int zt_edit_distance(const char *a, const char *b);

#endif

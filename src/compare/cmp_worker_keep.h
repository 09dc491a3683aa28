/* The kept replay worker's socket (cmp_worker_keep.c), for cmp_worker.c. */
#ifndef MSPROBE_CMP_WORKER_KEEP_H
#define MSPROBE_CMP_WORKER_KEEP_H

/* The kept worker (cmp_worker_keep.c). cmp_keep_seconds: how long a
 * worker stays after its last session (MSPROBE_REPLAY_KEEP, default 60; 0:
 * none is kept). cmp_keep_place: the socket of the worker for this Python,
 * source, sandbox settings cfg and environment, and in *dir its working
 * directory (both malloc'd), or NULL (logged when say) when none can be kept.
 * cmp_keep_connect: a connection to it, or -1 with errno. cmp_keep_listen:
 * the socket bound and listening, as a descriptor above 3, or -1 with errno
 * (EADDRINUSE: a live worker holds it). cmp_keep_hello: a session's first
 * message, which hands the worker err_fd for the session's stderr. */
double cmp_keep_seconds(void);
char *cmp_keep_place(const char *python, const char *src, const char *cfg, char **dir, int say);
int cmp_keep_connect(const char *path);
int cmp_keep_listen(const char *path);
int cmp_keep_hello(int fd, int err_fd);

#endif

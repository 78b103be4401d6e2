/* SIGINT and SIGTERM taken by one waiting thread; see signals.h. */
#include "base/signals.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"

#define MAX_PATHS 4

/* Seconds after the first signal of the graceful phase during which more
 * signals are the same request: timeout(1) forwards one SIGINT or SIGTERM
 * to its child and then to its own process group, which holds the child
 * again, and a terminal's ^C reaches every process of the foreground group
 * (mpirun forwards it too): one request arrives as two signals a few
 * milliseconds apart. Only a signal after this counts as asking again. */
#define REPEAT_SECONDS 1.0

/* The process-wide state of signals.h: the stop flag (0 or a signal), the
 * phase (1: graceful), and the files to remove on a stop at once. */
static atomic_int stop_signal;
static atomic_int graceful_phase;
static pthread_mutex_t paths_lock = PTHREAD_MUTEX_INITIALIZER;
static char *remove_paths[MAX_PATHS];

static void stop_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
}

/* Remove the registered files and exit; the lock stays held, so no path
 * is registered or forgotten meanwhile. */
static void quit_at_once(int sig, int again)
{
    pthread_mutex_lock(&paths_lock);
    for (int i = 0; i < MAX_PATHS; i++)
        if (remove_paths[i])
            unlink(remove_paths[i]);
    dprintf(STDERR_FILENO, "singletrain: %s%s: stopped at once\n", strsignal(sig),
            again ? " again" : "");
    _exit(128 + sig);
}

static void *wait_signals(void *arg)
{
    (void)arg;
    sigset_t set;
    stop_set(&set);
    double first_at = 0.0; /* when the stop flag was set (this thread's alone) */
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        int first = 0;
        if (atomic_load(&graceful_phase) &&
            atomic_compare_exchange_strong(&stop_signal, &first, sig)) {
            first_at = st_now();
            continue;
        }
        if (first != 0 && st_now() - first_at < REPEAT_SECONDS)
            continue; /* the same request, delivered twice */
        quit_at_once(sig, first != 0);
    }
    return NULL;
}

st_status st_signals_start(st_error *err)
{
    sigset_t set;
    stop_set(&set);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0)
        return st_fail(err, ST_EINTERNAL, "cannot block SIGINT and SIGTERM");
    signal(SIGPIPE, SIG_IGN);
    pthread_t waiter;
    if (pthread_create(&waiter, NULL, wait_signals, NULL) != 0)
        return st_fail(err, ST_EINTERNAL, "cannot start the thread that takes SIGINT and "
                       "SIGTERM");
    pthread_detach(waiter);
    return ST_OK;
}

void st_signals_set_graceful(int graceful)
{
    atomic_store(&graceful_phase, graceful != 0);
}

const atomic_int *st_signals_stop_flag(void)
{
    return &stop_signal;
}

int st_signals_caught(void)
{
    return atomic_load(&stop_signal);
}

st_status st_signals_remove_on_exit(const char *path, st_error *err)
{
    char *copy = strdup(path);
    if (!copy)
        return st_fail(err, ST_ENOMEM, "out of memory registering %s", path);
    pthread_mutex_lock(&paths_lock);
    int slot = 0;
    while (slot < MAX_PATHS && remove_paths[slot])
        slot++;
    if (slot < MAX_PATHS)
        remove_paths[slot] = copy;
    pthread_mutex_unlock(&paths_lock);
    if (slot == MAX_PATHS) {
        free(copy);
        return st_fail(err, ST_EINTERNAL, "more than %d files to remove on a signal",
                       MAX_PATHS);
    }
    return ST_OK;
}

void st_signals_keep(const char *path)
{
    pthread_mutex_lock(&paths_lock);
    for (int i = 0; i < MAX_PATHS; i++)
        if (remove_paths[i] && strcmp(remove_paths[i], path) == 0) {
            free(remove_paths[i]);
            remove_paths[i] = NULL;
        }
    pthread_mutex_unlock(&paths_lock);
}

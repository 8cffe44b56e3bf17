/*
 * notify.c — the change-notification benchmark, through Atoll's C ABI (include/atoll.h).
 *
 *   usage: notify DIR
 *
 * Five measurements, each on its own realm file in DIR (sizes from the environment, defaults in
 * brackets):
 *
 *   L_thread   commit -> callback on another handle of this process, "notifications": "thread":
 *              an object observer on Tick 1; the writer handle sets its seq; CLOCK_MONOTONIC
 *              just before atoll_realm_commit() to the callback's first line.
 *              BENCH_NOTIFY_SAMPLES [1000] samples, one commit each, each waited for.
 *   L_process  the same with the writer in another process (forked before this process touches
 *              the library); the child takes the time just before its commit and sends it through
 *              a pipe (CLOCK_MONOTONIC is system-wide). BENCH_NOTIFY_PROC_SAMPLES [300].
 *              A commit not delivered within 10 s is counted, and noted with whether it arrives
 *              within 5 s more (no other commit is made meanwhile).
 *   DIFF       a results observer on BENCH_NOTIFY_DIFF_N [100000] objects (all Items, no sort) in
 *              host delivery; another handle commits a change to 10 of them; the time from
 *              calling atoll_realm_deliver_notifications() to the callback (refresh + diff), and
 *              of the whole call. BENCH_NOTIFY_DIFF_SAMPLES [20]. DIFF_sorted: the same for
 *              results sorted by name (string sort).
 *   OBS        BENCH_NOTIFY_OBSERVERS [1000] results observers, each on its own query (`_id` in a
 *              range of 10 objects), thread delivery; one commit on another handle changes one
 *              object in every range; time from just before the commit until the last of the
 *              callbacks ran. BENCH_NOTIFY_OBS_SAMPLES [10]. OBS_sorted: the same queries sorted
 *              by age.
 *   growth     BENCH_NOTIFY_COMMITS [20000] small commits (one object's age each, 100 objects
 *              in turn) with a results observer on another handle (thread delivery); at ten
 *              points: database file size, -wal size, change-log entries.
 *
 * Prints "<name> <seconds>" lines (L_thread_p50 0.000231), "samples <name> <n>",
 * "growth <commits> <file bytes> <wal bytes> <log entries>" and "#" comments.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "atoll.h"

static const char *const SCHEMA =
    "[{\"name\": \"Tick\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"int\", \"seq\": \"int\"}},"
    " {\"name\": \"Item\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"int\", \"name\": \"string\","
    " \"age\": \"int\"}}]";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    atoll_error_t e;
    atoll_last_error(&e);
    fprintf(stderr, "notify: %s: %s (%s)\n", what, e.message ? e.message : "",
            atoll_status_name(e.code) ? atoll_status_name(e.code) : "?");
    exit(1);
}

static long env_long(const char *name, long fallback, long minimum) {
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') return fallback;
    char *end;
    long n = strtol(v, &end, 10);
    if (*end != '\0' || n < minimum) {
        fprintf(stderr, "notify: %s must be an integer >= %ld\n", name, minimum);
        exit(2);
    }
    return n;
}

static atoll_realm_t *open_realm(const char *path, const char *mode) {
    char config[2048];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s, \"notifications\": \"%s\"}", path,
             SCHEMA, mode);
    atoll_realm_t *r = atoll_realm_open(config);
    if (!r) die("atoll_realm_open");
    return r;
}

static void put(atoll_realm_t *r, const char *cls, const char *json) {
    char *out = atoll_object_create(r, cls, json, ATOLL_UPDATE_MODIFIED);
    if (!out) die("atoll_object_create");
    atoll_free(out);
}

static void begin(atoll_realm_t *r) { if (!atoll_realm_begin_write(r)) die("atoll_realm_begin_write"); }
static void commit(atoll_realm_t *r) { if (!atoll_realm_commit(r)) die("atoll_realm_commit"); }

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values. */
static double percentile(const double *sorted, size_t n, double q) {
    if (n == 0) return NAN;
    size_t rank = (size_t)ceil(q * (double)n);
    if (rank < 1) rank = 1;
    if (rank > n) rank = n;
    return sorted[rank - 1];
}

/* Prints NAME_p50, NAME_p90, NAME_p99, NAME_max and the sample count. */
static void report(const char *name, double *values, size_t n) {
    qsort(values, n, sizeof *values, by_value);
    printf("%s_p50 %.6f\n%s_p90 %.6f\n%s_p99 %.6f\n%s_max %.6f\nsamples %s %zu\n", name,
           percentile(values, n, 0.50), name, percentile(values, n, 0.90), name,
           percentile(values, n, 0.99), name, n ? values[n - 1] : NAN, name, n);
    fflush(stdout);
}

/* MARK: - Waiting for callbacks */

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long seq;      /* the Tick's seq in the last call */
    double when;   /* CLOCK_MONOTONIC at the last call's first line */
    long calls;
    long target;   /* OBS: calls to wait for */
    double last;   /* OBS: when the target-th call ran */
    long counted;  /* DIFF: modifications in the last change */
} waiter_t;

static void waiter_init(waiter_t *w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &attr);
    pthread_condattr_destroy(&attr);
}

static void deadline_in(struct timespec *ts, double seconds) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    long long ns = (long long)ts->tv_nsec + (long long)(seconds * 1e9);
    ts->tv_sec += (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
}

/* The object observer's callback: {"deleted": false, ..., "new": {"seq": n}}. */
static void tick_changed(void *userdata, const char *changes) {
    double t = now();
    waiter_t *w = userdata;
    const char *p = changes ? strstr(changes, "\"new\"") : NULL;
    p = p ? strstr(p, "\"seq\"") : NULL;
    long seq = -1;
    if (p) {
        p += 5;
        while (*p == ' ' || *p == ':') p++;
        seq = strtol(p, NULL, 10);
    }
    pthread_mutex_lock(&w->mu);
    w->seq = seq;
    w->when = t;
    w->calls++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* When the callback saw seq (CLOCK_MONOTONIC), or -1 after `timeout` seconds. */
static double wait_seq(waiter_t *w, long seq, double timeout) {
    struct timespec deadline;
    deadline_in(&deadline, timeout);
    double when = -1;
    pthread_mutex_lock(&w->mu);
    while (w->seq < seq && pthread_cond_timedwait(&w->cv, &w->mu, &deadline) != ETIMEDOUT) {
    }
    if (w->seq >= seq) when = w->when;
    pthread_mutex_unlock(&w->mu);
    return when;
}

/* A results observer's callback: counts calls; the target-th call notes its time. */
static void counted(void *userdata, const char *changes) {
    double t = now();
    (void)changes;
    waiter_t *w = userdata;
    pthread_mutex_lock(&w->mu);
    w->calls++;
    if (w->calls == w->target) {
        w->last = t;
        pthread_cond_broadcast(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
}

/* Waits until `calls` reached `target`; false after `timeout` seconds. */
static bool wait_calls(waiter_t *w, long target, double timeout) {
    struct timespec deadline;
    deadline_in(&deadline, timeout);
    pthread_mutex_lock(&w->mu);
    while (w->calls < target && pthread_cond_timedwait(&w->cv, &w->mu, &deadline) != ETIMEDOUT) {
    }
    bool ok = w->calls >= target;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

/* The DIFF callback: the time of the call and the number of modifications. */
static void diffed(void *userdata, const char *changes) {
    double t = now();
    waiter_t *w = userdata;
    long mods = 0;
    const char *p = changes ? strstr(changes, "\"modifications\"") : NULL;
    if (p && (p = strchr(p, '[')) != NULL) {
        for (p++; *p && *p != ']'; p++)
            if (*p >= '0' && *p <= '9' && (p[-1] == '[' || p[-1] == ',' || p[-1] == ' ')) mods++;
    }
    pthread_mutex_lock(&w->mu);
    w->when = t;
    w->calls++;
    w->counted = mods;
    pthread_mutex_unlock(&w->mu);
}

/* MARK: - The writer process */

/* Commands the parent sends the child: 'o' + path (open), 'c' (commit the next seq and answer
 * with (seq, time just before the commit)), 'q' (close and exit). */
typedef struct { long seq; double t0; } stamp_t;

static void child_main(int commands, int answers) {
    atoll_realm_t *r = NULL;
    long seq = 0;
    for (;;) {
        char cmd;
        if (read(commands, &cmd, 1) != 1) _exit(r ? 0 : 3);
        if (cmd == 'o') {
            char path[1024];
            size_t len = 0;
            while (len + 1 < sizeof path && read(commands, &path[len], 1) == 1 && path[len] != '\0') len++;
            path[len] = '\0';
            r = open_realm(path, "thread");
            char ok = 1;
            if (write(answers, &ok, 1) != 1) _exit(4);
        } else if (cmd == 'c') {
            char obj[64];
            snprintf(obj, sizeof obj, "{\"_id\": 1, \"seq\": %ld}", ++seq);
            begin(r);
            put(r, "Tick", obj);
            stamp_t s = { seq, now() };
            commit(r);
            if (write(answers, &s, sizeof s) != (ssize_t)sizeof s) _exit(5);
        } else {
            atoll_realm_close(r);
            _exit(0);
        }
    }
}

/* MARK: - Measurements */

static void bench_thread_latency(const char *dir, long samples) {
    char path[1024];
    snprintf(path, sizeof path, "%s/latency.realm", dir);
    atoll_realm_t *observer = open_realm(path, "thread");
    atoll_realm_t *writer = open_realm(path, "thread");
    begin(writer);
    put(writer, "Tick", "{\"_id\": 1, \"seq\": 0}");
    commit(writer);
    if (!atoll_realm_refresh(observer)) die("atoll_realm_refresh");
    waiter_t w;
    waiter_init(&w);
    atoll_token_t *token = atoll_object_observe(observer, "Tick", "1", NULL, tick_changed, &w, NULL);
    if (!token) die("atoll_object_observe");
    double *lat = malloc(sizeof(double) * (size_t)samples);
    long warmup = 20, timeouts = 0;
    size_t n = 0;
    for (long i = 1; i <= warmup + samples; i++) {
        char obj[64];
        snprintf(obj, sizeof obj, "{\"_id\": 1, \"seq\": %ld}", i);
        begin(writer);
        put(writer, "Tick", obj);
        double t0 = now();
        commit(writer);
        double t1 = wait_seq(&w, i, 10);
        if (t1 < 0) { timeouts++; continue; }
        if (i > warmup) lat[n++] = t1 - t0;
    }
    printf("# L_thread: %ld samples after %ld warm-up commits, %ld not delivered within 10 s\n", samples, warmup,
           timeouts);
    report("L_thread", lat, n);
    free(lat);
    atoll_token_free(token);
    atoll_realm_close(writer);
    atoll_realm_close(observer);
}

static void bench_process_latency(const char *dir, long samples, int commands, int answers) {
    char path[1024];
    snprintf(path, sizeof path, "%s/process.realm", dir);
    atoll_realm_t *observer = open_realm(path, "thread");
    begin(observer);
    put(observer, "Tick", "{\"_id\": 1, \"seq\": 0}");
    commit(observer);
    waiter_t w;
    waiter_init(&w);
    atoll_token_t *token = atoll_object_observe(observer, "Tick", "1", NULL, tick_changed, &w, NULL);
    if (!token) die("atoll_object_observe");
    char cmd = 'o';
    char ok = 0;
    if (write(commands, &cmd, 1) != 1 || write(commands, path, strlen(path) + 1) != (ssize_t)strlen(path) + 1 ||
        read(answers, &ok, 1) != 1) {
        fprintf(stderr, "notify: the writer process does not answer\n");
        exit(1);
    }
    double *lat = malloc(sizeof(double) * (size_t)samples);
    long warmup = 10, timeouts = 0;
    size_t n = 0;
    for (long i = 1; i <= warmup + samples; i++) {
        cmd = 'c';
        stamp_t s;
        if (write(commands, &cmd, 1) != 1 || read(answers, &s, sizeof s) != (ssize_t)sizeof s || s.seq != i) {
            fprintf(stderr, "notify: the writer process failed at commit %ld\n", i);
            exit(1);
        }
        double t1 = wait_seq(&w, i, 10);
        if (t1 < 0) {
            /* A missed wake-up: say whether it comes at all without another commit. */
            timeouts++;
            double late = wait_seq(&w, i, 5);
            if (late < 0) printf("# L_process: commit %ld was not delivered within 15 s\n", i);
            else printf("# L_process: commit %ld was delivered after %.1f s\n", i, late - s.t0);
            continue;
        }
        if (i > warmup) lat[n++] = t1 - s.t0;
    }
    printf("# L_process: %ld samples after %ld warm-up commits, %ld not delivered within 10 s\n", samples, warmup,
           timeouts);
    report("L_process", lat, n);
    free(lat);
    atoll_token_free(token);
    atoll_realm_close(observer);
}

/* Items first..first+count-1 ({"_id": i, "name": "name-<i>", "age": i % 100}) in one transaction. */
static void fill_items(atoll_realm_t *r, long count) {
    enum { BATCH = 10000 };
    size_t cap = (size_t)BATCH * 64 + 16;
    char *json = malloc(cap);
    begin(r);
    for (long start = 0; start < count; start += BATCH) {
        long end = start + BATCH < count ? start + BATCH : count;
        size_t len = 0;
        json[len++] = '[';
        for (long i = start; i < end; i++)
            len += (size_t)snprintf(json + len, cap - len, "%s{\"_id\":%ld,\"name\":\"name-%ld\",\"age\":%ld}",
                                    i == start ? "" : ",", i, i, i % 100);
        json[len++] = ']';
        json[len] = '\0';
        if (!atoll_objects_create_many(r, "Item", json, ATOLL_UPDATE_ERROR, NULL)) die("atoll_objects_create_many");
    }
    commit(r);
    free(json);
}

/* One DIFF measurement; `base` makes each pass's new ages differ from the previous pass's. */
static void diff_pass(const char *name, atoll_realm_t *observer, atoll_realm_t *writer, const char *rql, long n,
                      long samples, long base) {
    atoll_results_t *res = atoll_results_query(observer, "Item", rql, NULL);
    if (!res) die("atoll_results_query");
    waiter_t w;
    waiter_init(&w);
    atoll_token_t *token = atoll_results_observe(res, NULL, diffed, &w, NULL);
    if (!token) die("atoll_results_observe");
    double t0 = now();
    if (!atoll_realm_deliver_notifications(observer)) die("atoll_realm_deliver_notifications");
    printf("# %s: initial delivery (the whole result) %.1f ms\n", name, (now() - t0) * 1000);
    double *to_cb = malloc(sizeof(double) * (size_t)samples);
    double *whole = malloc(sizeof(double) * (size_t)samples);
    long wrong = 0;
    for (long s = 0; s < samples; s++) {
        begin(writer);
        for (long j = 0; j < 10; j++) {
            char obj[96];
            long id = (s * 7919 + j * (n / 10 + 1)) % n;
            snprintf(obj, sizeof obj, "{\"_id\": %ld, \"age\": %ld}", id, base + s);
            put(writer, "Item", obj);
        }
        commit(writer);
        long before = w.calls;
        double start = now();
        if (!atoll_realm_deliver_notifications(observer)) die("atoll_realm_deliver_notifications");
        double end = now();
        if (w.calls != before + 1 || w.counted != 10) wrong++;
        to_cb[s] = w.when - start;
        whole[s] = end - start;
    }
    if (wrong) printf("# %s: %ld deliveries did not report exactly 10 modifications\n", name, wrong);
    char whole_name[64];
    snprintf(whole_name, sizeof whole_name, "%s_call", name);
    report(name, to_cb, (size_t)samples);
    report(whole_name, whole, (size_t)samples);
    free(to_cb);
    free(whole);
    atoll_token_free(token);
    atoll_results_free(res);
}

static void bench_diff(const char *dir, long n, long samples) {
    char path[1024];
    snprintf(path, sizeof path, "%s/diff.realm", dir);
    atoll_realm_t *observer = open_realm(path, "host");
    atoll_realm_t *writer = open_realm(path, "thread");
    fill_items(writer, n);
    printf("# DIFF: %ld objects, 10 changed per commit, host delivery\n", n);
    diff_pass("DIFF", observer, writer, NULL, n, samples, 1000);
    diff_pass("DIFF_sorted", observer, writer, "TRUEPREDICATE SORT(name ASC)", n, samples, 1000 + samples);
    atoll_realm_close(writer);
    atoll_realm_close(observer);
}

/* OBS: `observers` results observers on range queries (`sort`: "" or a SORT clause), one commit
 * changing one object of every range, until the last callback ran. */
static void bench_observers(const char *dir, const char *name, const char *sort, long observers, long samples) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.realm", dir, name);
    atoll_realm_t *observer = open_realm(path, "thread");
    atoll_realm_t *writer = open_realm(path, "thread");
    fill_items(writer, observers * 10);
    if (!atoll_realm_refresh(observer)) die("atoll_realm_refresh");
    waiter_t w;
    waiter_init(&w);
    atoll_token_t **tokens = malloc(sizeof(atoll_token_t *) * (size_t)observers);
    atoll_results_t **results = malloc(sizeof(atoll_results_t *) * (size_t)observers);
    pthread_mutex_lock(&w.mu);
    w.target = observers;
    pthread_mutex_unlock(&w.mu);
    double t0 = now();
    for (long k = 0; k < observers; k++) {
        char args[64];
        snprintf(args, sizeof args, "[%ld, %ld]", k * 10, k * 10 + 10);
        char rql[128];
        snprintf(rql, sizeof rql, "_id >= $0 AND _id < $1%s", sort);
        results[k] = atoll_results_query(observer, "Item", rql, args);
        if (!results[k]) die("atoll_results_query");
        tokens[k] = atoll_results_observe(results[k], NULL, counted, &w, NULL);
        if (!tokens[k]) die("atoll_results_observe");
    }
    double registered = now() - t0;
    if (!wait_calls(&w, observers, 60)) { fprintf(stderr, "notify: initial calls missing\n"); exit(1); }
    printf("# %s: %ld results observers, each on its own 10-object range query (_id >= $0 AND _id < $1%s), thread"
           " delivery; registering them took %.1f ms, their initial calls %.1f ms in all\n",
           name, observers, sort, registered * 1000, (now() - t0) * 1000);
    double *lat = malloc(sizeof(double) * (size_t)samples);
    size_t n = 0;
    long missing = 0;
    for (long s = 0; s < samples; s++) {
        pthread_mutex_lock(&w.mu);
        w.calls = 0;
        pthread_mutex_unlock(&w.mu);
        begin(writer);
        for (long k = 0; k < observers; k++) {
            char obj[96];
            snprintf(obj, sizeof obj, "{\"_id\": %ld, \"age\": %ld}", k * 10 + s % 10, 1000 + s);
            put(writer, "Item", obj);
        }
        double start = now();
        commit(writer);
        if (!wait_calls(&w, observers, 60)) { missing++; continue; }
        lat[n++] = w.last - start;
        nanosleep(&(struct timespec){ 0, 20000000L }, NULL); /* late extra calls land before the reset */
    }
    if (missing) printf("# %s: %ld commits did not reach every observer within 60 s\n", name, missing);
    report(name, lat, n);
    free(lat);
    for (long k = 0; k < observers; k++) {
        atoll_token_free(tokens[k]);
        atoll_results_free(results[k]);
    }
    free(tokens);
    free(results);
    atoll_realm_close(writer);
    atoll_realm_close(observer);
}

static long long size_of(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

static long log_entries(atoll_realm_t *r) {
    char *log = atoll_realm_changes(r, 0, 0);
    if (!log) die("atoll_realm_changes");
    long n = 0;
    for (const char *p = log; (p = strstr(p, "\"version\"")) != NULL; p += 9) n++;
    atoll_free(log);
    return n;
}

static void bench_growth(const char *dir, long commits) {
    char path[1024], wal[1100];
    snprintf(path, sizeof path, "%s/growth.realm", dir);
    snprintf(wal, sizeof wal, "%s-wal", path);
    atoll_realm_t *observer = open_realm(path, "thread");
    atoll_realm_t *writer = open_realm(path, "thread");
    fill_items(writer, 100);
    if (!atoll_realm_refresh(observer)) die("atoll_realm_refresh");
    waiter_t w;
    waiter_init(&w);
    atoll_results_t *res = atoll_results_query(observer, "Item", NULL, NULL);
    atoll_token_t *token = atoll_results_observe(res, NULL, counted, &w, NULL);
    if (!token) die("atoll_results_observe");
    printf("# growth: %ld commits (one object's age each), a results observer on another handle (thread "
           "delivery)\n", commits);
    long step = commits / 10 > 0 ? commits / 10 : 1;
    double t0 = now();
    for (long i = 1; i <= commits; i++) {
        char obj[96];
        snprintf(obj, sizeof obj, "{\"_id\": %ld, \"age\": %ld}", i % 100, 1000 + i);
        begin(writer);
        put(writer, "Item", obj);
        commit(writer);
        if (i % step == 0 || i == commits)
            printf("growth %ld %lld %lld %ld\n", i, size_of(path), size_of(wal), log_entries(writer));
    }
    double elapsed = now() - t0;
    pthread_mutex_lock(&w.mu);
    long calls = w.calls;
    pthread_mutex_unlock(&w.mu);
    printf("# growth: %.0f commits/s with the observer attached; the observer was called %ld times\n",
           (double)commits / elapsed, calls);
    printf("G_commit %.6f\n", elapsed / (double)commits);
    atoll_token_free(token);
    atoll_results_free(res);
    atoll_realm_close(writer);
    atoll_realm_close(observer);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: notify DIR\n"); return 2; }
    const char *dir = argv[1];
    long samples = env_long("BENCH_NOTIFY_SAMPLES", 1000, 1);
    long proc_samples = env_long("BENCH_NOTIFY_PROC_SAMPLES", 300, 1);
    long diff_n = env_long("BENCH_NOTIFY_DIFF_N", 100000, 100);
    long diff_samples = env_long("BENCH_NOTIFY_DIFF_SAMPLES", 20, 1);
    long observers = env_long("BENCH_NOTIFY_OBSERVERS", 1000, 1);
    long obs_samples = env_long("BENCH_NOTIFY_OBS_SAMPLES", 10, 1);
    long commits = env_long("BENCH_NOTIFY_COMMITS", 20000, 10);

    /* The writer process is forked before this process touches the library: no SQLite connection
     * or library thread crosses the fork. */
    int commands[2], answers[2];
    if (pipe(commands) != 0 || pipe(answers) != 0) { perror("notify: pipe"); return 1; }
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) { perror("notify: fork"); return 1; }
    if (child == 0) {
        close(commands[1]);
        close(answers[0]);
        child_main(commands[0], answers[1]);
    }
    close(commands[0]);
    close(answers[1]);

    if (atoll_libversion_number() != ATOLL_VERSION_NUMBER) {
        fprintf(stderr, "notify: header %s, library %s\n", ATOLL_VERSION, atoll_libversion());
        return 1;
    }
    printf("# notifications through the C ABI (libatoll %s)\n", atoll_libversion());
    bench_thread_latency(dir, samples);
    bench_process_latency(dir, proc_samples, commands[1], answers[0]);
    char quit = 'q';
    if (write(commands[1], &quit, 1) != 1) perror("notify: quit");
    close(commands[1]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "notify: the writer process failed (status %d)\n", status);
        return 1;
    }
    bench_diff(dir, diff_n, diff_samples);
    bench_observers(dir, "OBS", "", observers, obs_samples);
    bench_observers(dir, "OBS_sorted", " SORT(age ASC)", observers, obs_samples);
    bench_growth(dir, commits);
    return 0;
}

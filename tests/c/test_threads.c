/* test_threads.c — several threads on one handle never corrupt anything; the last error is per
 * thread; a second writer (another handle on the same file) waits in atoll_realm_begin_write()
 * until the first commits or cancels; readers never block. */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 4, PER_THREAD = 250 };

/* MARK: - One handle, several threads */

typedef struct {
    atoll_realm_t *realm;
    int thread;
    pthread_barrier_t *barrier;
    atomic_int *stop;
    int result;
    double when;
} worker_t;

static void *create_worker(void *arg) {
    worker_t *w = arg;
    pthread_barrier_wait(w->barrier);
    for (int i = 0; i < PER_THREAD; i++) {
        int id = w->thread * 1000 + i;
        char obj[128], key[32];
        snprintf(obj, sizeof obj, "{\"_id\": %d, \"name\": \"dog-%d\", \"age\": %d}", id, id, i);
        json_t *d = CREATE(w->realm, "Dog", obj, ATOLL_UPDATE_ERROR);
        if (!CHECK(d != NULL)) return NULL;
        CHECK_INT(atoll_jint(d, "_id"), id);
        json_decref(d);
        /* read back one written earlier by this thread */
        int back = w->thread * 1000 + i / 2;
        snprintf(key, sizeof key, "%d", back);
        d = GET(w->realm, "Dog", key);
        char expected[32];
        snprintf(expected, sizeof expected, "dog-%d", back);
        CHECK_STR(atoll_jstr(d, "name"), expected);
        json_decref(d);
    }
    return NULL;
}

static void test_concurrent_creates_on_one_handle(void) {
    atoll_realm_t *r = atoll_test_open(atoll_tmp_realm_path("threads-create"), NULL);
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r)); /* the transaction belongs to the handle */
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, THREADS);
    pthread_t t[THREADS];
    worker_t w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i] = (worker_t){ .realm = r, .thread = i + 1, .barrier = &barrier };
        pthread_create(&t[i], NULL, create_worker, &w[i]);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&barrier);
    CHECK(atoll_realm_commit(r));

    atoll_results_t *res = atoll_results_query(r, "Dog", NULL, NULL);
    size_t n = 0;
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, THREADS * PER_THREAD);
    atoll_results_free(res);
    for (int i = 1; i <= THREADS; i++) {
        char args[64];
        snprintf(args, sizeof args, "[%d, %d]", i * 1000, i * 1000 + PER_THREAD);
        res = atoll_results_query(r, "Dog", "_id >= $0 AND _id < $1 AND name BEGINSWITH 'dog-'", args);
        CHECK(atoll_results_count(res, &n));
        CHECK_INT(n, PER_THREAD);
        atoll_results_free(res);
    }
    uint64_t v = 0;
    CHECK(atoll_realm_version(r, &v));
    CHECK_INT(v, 1);
    atoll_realm_close(r);
}

static void *reader_worker(void *arg) {
    worker_t *w = arg;
    size_t last = 0;
    int rounds = 0;
    while (!atomic_load(w->stop) || rounds < 5) {  /* at least 5 rounds */
        rounds++;
        atoll_results_t *res = atoll_results_query(w->realm, "Dog", "age >= 0 SORT(_id ASC)", NULL);
        if (!CHECK(res != NULL)) break;
        size_t n = 0;
        CHECK(atoll_results_count(res, &n));
        CHECK(n >= last); /* nothing is ever deleted */
        last = n;
        json_t *arr = TAKE_JSON(atoll_results_json(res, 0, 20));
        CHECK(json_is_array(arr));
        size_t i;
        json_t *o;
        json_array_foreach(arr, i, o) {
            char expected[32];
            snprintf(expected, sizeof expected, "dog-%lld", atoll_jint(o, "_id"));
            CHECK_STR(atoll_jstr(o, "name"), expected);
        }
        json_decref(arr);
        atoll_results_free(res);
        bool in_write;
        CHECK(atoll_realm_is_in_write(w->realm, &in_write));
    }
    /* One more read after the writer's last commit. */
    atoll_results_t *res = atoll_results_query(w->realm, "Dog", NULL, NULL);
    size_t n = 0;
    CHECK(atoll_results_count(res, &n));
    atoll_results_free(res);
    w->result = (int)n;
    return NULL;
}

static void test_readers_and_a_writer_on_one_handle(void) {
    atoll_realm_t *r = atoll_test_open(atoll_tmp_realm_path("threads-rw"), NULL);
    if (!CHECK(r != NULL)) return;
    atomic_int stop = 0;
    pthread_t t[THREADS - 1];
    worker_t w[THREADS - 1];
    for (int i = 0; i < THREADS - 1; i++) {
        w[i] = (worker_t){ .realm = r, .thread = i, .stop = &stop };
        pthread_create(&t[i], NULL, reader_worker, &w[i]);
    }
    for (int tx = 0; tx < 50; tx++) {
        if (!CHECK(atoll_realm_begin_write(r))) break;
        for (int k = 0; k < 5; k++) {
            int id = tx * 5 + k;
            char obj[128];
            snprintf(obj, sizeof obj, "{\"_id\": %d, \"name\": \"dog-%d\", \"age\": %d}", id, id, k);
            char *d = atoll_object_create(r, "Dog", obj, ATOLL_UPDATE_ERROR);
            CHECK(d != NULL);
            atoll_free(d);
        }
        CHECK(atoll_realm_commit(r));
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS - 1; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < THREADS - 1; i++) CHECK_INT(w[i].result, 250);
    uint64_t v = 0;
    CHECK(atoll_realm_version(r, &v));
    CHECK_INT(v, 50);
    atoll_realm_close(r);
}

typedef struct {
    atoll_realm_t *realm;
    pthread_barrier_t *barrier;
    bool began;
    int code;
} race_t;

static void *begin_racer(void *arg) {
    race_t *x = arg;
    pthread_barrier_wait(x->barrier);
    x->began = atoll_realm_begin_write(x->realm);
    atoll_error_t e;
    atoll_last_error(&e);
    x->code = e.code;
    return NULL;
}

static void test_begin_write_race_on_one_handle(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    for (int round = 0; round < 20; round++) {
        pthread_barrier_t barrier;
        pthread_barrier_init(&barrier, NULL, 2);
        race_t a = { r, &barrier, false, -1 }, b = { r, &barrier, false, -1 };
        pthread_t ta, tb;
        pthread_create(&ta, NULL, begin_racer, &a);
        pthread_create(&tb, NULL, begin_racer, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_barrier_destroy(&barrier);
        CHECK(a.began != b.began); /* exactly one */
        race_t *loser = a.began ? &b : &a;
        CHECK_INT(loser->code, ATOLL_ERR_ALREADY_IN_WRITE);
        CHECK(atoll_realm_cancel_write(r)); /* from another thread than the one that began */
    }
    atoll_realm_close(r);
}

static void *use_until_closed(void *arg) {
    worker_t *w = arg;
    int successes = 0;
    atoll_error_t e;
    for (;;) {
        size_t n = 0;
        atoll_results_t *res = atoll_results_query(w->realm, "Dog", "age > 1", NULL);
        if (res == NULL) {
            atoll_last_error(&e);
            break;
        }
        bool ok = atoll_results_count(res, &n);
        atoll_last_error(&e); /* before atoll_results_free(), which clears it */
        atoll_results_free(res);
        if (!ok) break;
        CHECK_INT(n, 2); /* both dogs are older than 1 */
        successes++;
    }
    w->result = e.code;
    w->thread = successes;
    return NULL;
}

static void test_close_while_another_thread_uses_the_handle(void) {
    for (int round = 0; round < 5; round++) {
        atoll_realm_t *r = atoll_test_open(NULL, NULL);
        if (!CHECK(r != NULL)) return;
        CHECK(atoll_realm_begin_write(r));
        CHECK(atoll_objects_create_many(r, "Dog", "[{\"_id\": 1, \"age\": 2}, {\"_id\": 2, \"age\": 3}]",
                                        ATOLL_UPDATE_ERROR, NULL));
        CHECK(atoll_realm_commit(r));
        worker_t w = { .realm = r };
        pthread_t t;
        pthread_create(&t, NULL, use_until_closed, &w);
        atoll_sleep_ms(20 + 10 * (unsigned)round);
        atoll_realm_close(r);
        pthread_join(t, NULL);
        CHECK(w.thread > 0);
        CHECK_INT(w.result, ATOLL_ERR_CLOSED);
    }
}

/* MARK: - The last error is per thread */

static void *error_in_thread(void *arg) {
    worker_t *w = arg;
    /* A new thread starts with no error, whatever the main thread did. */
    w->result = atoll_last_error(NULL) ? 1 : 0;
    atoll_realm_open("{\"inMemory\": true, \"schemaVersion\": \"x\"}");
    atoll_error_t e;
    atoll_last_error(&e);
    w->thread = e.code;
    return NULL;
}

static void test_last_error_is_per_thread(void) {
    CHECK(atoll_realm_open("not json") == NULL);
    worker_t w = { 0 };
    pthread_t t;
    pthread_create(&t, NULL, error_in_thread, &w);
    pthread_join(t, NULL);
    CHECK_INT(w.result, 0);
    CHECK_INT(w.thread, ATOLL_ERR_INVALID_ARGUMENT);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, ""); /* the main thread's error is untouched */
}

/* MARK: - Two handles on one file */

typedef struct {
    const char *path;
    atoll_realm_t *realm;
    double started, returned;
    bool began;
    int code;
    pthread_barrier_t *ready;
} second_writer_t;

static void *second_writer(void *arg) {
    second_writer_t *s = arg;
    pthread_barrier_wait(s->ready);
    s->started = atoll_now();
    s->began = atoll_realm_begin_write(s->realm);
    s->returned = atoll_now();
    atoll_error_t e;
    atoll_last_error(&e);
    s->code = e.code;
    if (s->began) {
        /* It sees what the first writer committed, and writes on top of it. */
        json_t *d = GET(s->realm, "Dog", "1");
        CHECK_STR(atoll_jstr(d, "name"), "first");
        json_decref(d);
        atoll_free(atoll_object_create(s->realm, "Dog", "{\"_id\": 2, \"name\": \"second\"}", ATOLL_UPDATE_ERROR));
        CHECK(atoll_realm_commit(s->realm));
    }
    return NULL;
}

static void test_second_writer_waits_for_commit(void) {
    const char *path = atoll_tmp_realm_path("two-writers");
    atoll_realm_t *a = atoll_test_open(path, NULL);
    atoll_realm_t *b = atoll_test_open(path, NULL); /* writeTimeoutMs -1: waits as long as it takes */
    if (!CHECK(a != NULL && b != NULL)) return;
    CHECK(atoll_realm_begin_write(a));
    pthread_barrier_t ready;
    pthread_barrier_init(&ready, NULL, 2);
    second_writer_t s = { .path = path, .realm = b, .ready = &ready };
    pthread_t t;
    pthread_create(&t, NULL, second_writer, &s);
    pthread_barrier_wait(&ready);
    atoll_sleep_ms(400);
    /* Readers never block: a's transaction is open, b (in its begin_write) is waiting, and a
     * third handle still reads the committed state at once. */
    atoll_realm_t *c = atoll_test_open(path, NULL);
    double t0 = atoll_now();
    CHECK(c != NULL);
    char *none = atoll_object_get(c, "Dog", "1");
    CHECK(none == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    CHECK(atoll_now() - t0 < 1.0);
    atoll_realm_close(c);

    atoll_free(atoll_object_create(a, "Dog", "{\"_id\": 1, \"name\": \"first\"}", ATOLL_UPDATE_ERROR));
    double committing = atoll_now();
    CHECK(atoll_realm_commit(a));
    pthread_join(t, NULL);
    pthread_barrier_destroy(&ready);

    double waited = s.returned - s.started;
    printf("    second writer waited %.0f ms in atoll_realm_begin_write()\n", waited * 1000);
    CHECK(s.began);
    CHECK_INT(s.code, ATOLL_OK);
    CHECK(waited >= 0.35);               /* it waited while a held the lock... */
    CHECK(s.returned >= committing);     /* ...and returned only once a committed */
    CHECK(s.returned - committing < 5.0);

    CHECK(atoll_realm_refresh(a));       /* a reads as of its commit until it refreshes */
    atoll_results_t *res = atoll_results_query(a, "Dog", NULL, NULL);
    size_t n = 0;
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 2);
    atoll_results_free(res);
    uint64_t v = 0;
    CHECK(atoll_realm_version(a, &v));
    CHECK_INT(v, 2);
    atoll_realm_close(a);
    atoll_realm_close(b);
}

static void *waiting_writer(void *arg) {
    second_writer_t *s = arg;
    pthread_barrier_wait(s->ready);
    s->started = atoll_now();
    s->began = atoll_realm_begin_write(s->realm);
    s->returned = atoll_now();
    if (s->began) atoll_realm_cancel_write(s->realm);
    return NULL;
}

static void test_second_writer_waits_for_cancel_and_close(void) {
    const char *path = atoll_tmp_realm_path("two-writers-cancel");
    atoll_realm_t *a = atoll_test_open(path, NULL);
    atoll_realm_t *b = atoll_test_open(path, NULL);
    if (!CHECK(a != NULL && b != NULL)) return;
    for (int how = 0; how < 2; how++) {
        CHECK(atoll_realm_begin_write(a));
        pthread_barrier_t ready;
        pthread_barrier_init(&ready, NULL, 2);
        second_writer_t s = { .realm = b, .ready = &ready };
        pthread_t t;
        pthread_create(&t, NULL, waiting_writer, &s);
        pthread_barrier_wait(&ready);
        atoll_sleep_ms(250);
        double releasing = atoll_now();
        if (how == 0) CHECK(atoll_realm_cancel_write(a));
        else atoll_realm_close(a); /* closing with a transaction open releases the lock too */
        pthread_join(t, NULL);
        pthread_barrier_destroy(&ready);
        CHECK(s.began);
        CHECK(s.returned - s.started >= 0.2);
        CHECK(s.returned >= releasing);
    }
    atoll_realm_close(b);
}

/* Two handles on one file, each on its own thread, each incrementing a counter in its own
 * transactions: serialized writers lose no update. */
typedef struct {
    const char *path;
    int rounds;
    int failures;
} counter_t;

static void *increment_counter(void *arg) {
    counter_t *c = arg;
    atoll_realm_t *r = atoll_test_open(c->path, NULL);
    if (!CHECK(r != NULL)) return NULL;
    for (int i = 0; i < c->rounds; i++) {
        if (!CHECK(atoll_realm_begin_write(r))) { c->failures++; continue; }
        json_t *p = GET(r, "Person", "\"counter\"");
        long long age = atoll_jint(p, "age");
        json_decref(p);
        char obj[96];
        snprintf(obj, sizeof obj, "{\"name\": \"counter\", \"age\": %lld}", age + 1);
        char *out = atoll_object_create(r, "Person", obj, ATOLL_UPDATE_MODIFIED);
        if (!CHECK(out != NULL)) c->failures++;
        atoll_free(out);
        if (!CHECK(atoll_realm_commit(r))) c->failures++;
    }
    atoll_realm_close(r);
    return NULL;
}

static void test_two_handles_lose_no_update(void) {
    const char *path = atoll_tmp_realm_path("counter");
    atoll_realm_t *r = atoll_test_open(path, NULL);
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Person", "{\"name\": \"counter\", \"age\": 0}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));
    counter_t c1 = { path, 40, 0 }, c2 = { path, 40, 0 };
    pthread_t t1, t2;
    pthread_create(&t1, NULL, increment_counter, &c1);
    pthread_create(&t2, NULL, increment_counter, &c2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    CHECK_INT(c1.failures + c2.failures, 0);
    CHECK(atoll_realm_refresh(r));
    json_t *p = GET(r, "Person", "\"counter\"");
    CHECK_INT(atoll_jint(p, "age"), 80);
    json_decref(p);
    uint64_t v = 0;
    CHECK(atoll_realm_version(r, &v));
    CHECK_INT(v, 81);
    atoll_realm_close(r);
}

static const atoll_test_t tests[] = {
    ATOLL_TEST(test_concurrent_creates_on_one_handle),
    ATOLL_TEST(test_readers_and_a_writer_on_one_handle),
    ATOLL_TEST(test_begin_write_race_on_one_handle),
    ATOLL_TEST(test_close_while_another_thread_uses_the_handle),
    ATOLL_TEST(test_last_error_is_per_thread),
    ATOLL_TEST(test_second_writer_waits_for_commit),
    ATOLL_TEST(test_second_writer_waits_for_cancel_and_close),
    ATOLL_TEST(test_two_handles_lose_no_update),
};

int main(int argc, char **argv) { return ATOLL_CHECK_MAIN(tests, argc, argv); }

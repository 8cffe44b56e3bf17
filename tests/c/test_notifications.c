/* test_notifications.c — live data through the C ABI: results, object, collection and realm
 * observers with their exact change sets (indices and keys), key-path filters, both delivery
 * modes ("host": the test delivers, then asserts; "thread": the test waits on a condition
 * variable, with a generous timeout and no timing assertions), commits from another handle,
 * another thread and another process, tokens freed inside their callback and while a callback
 * runs, free_userdata exactly once, snapshots until refresh, frozen results, the change log
 * pruned behind observers, and bad input that must fail cleanly. The tests at the end each
 * failed once: a commit right after the first observe, snapshots after commit and cancel,
 * delivery without observers.
 *
 * JSON written by the test uses single quotes ('), turned into double quotes by J() and
 * CHECK_JSON(), so that expected change sets read as they are documented. */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a thread-mode test waits for a delivery before it counts as missing (seconds). */
#define WAIT_S 20.0

static const char *const SCHEMA =
    "["
    "{\"name\": \"Person\", \"primaryKey\": \"id\", \"properties\": {"
    "  \"id\": \"int\", \"name\": \"string\", \"age\": \"int\", \"dog\": \"Dog?\", \"dogs\": \"Dog[]\","
    "  \"addresses\": \"Address[]\", \"tags\": \"string<>\", \"scores\": \"int{}\", \"numbers\": \"int[]\"}},"
    "{\"name\": \"Dog\", \"primaryKey\": \"id\", \"properties\": {"
    "  \"id\": \"int\", \"name\": \"string\", \"age\": \"int\","
    "  \"owners\": {\"type\": \"linkingObjects\", \"objectType\": \"Person\", \"property\": \"dogs\"}}},"
    "{\"name\": \"Address\", \"embedded\": true, \"properties\": {\"city\": \"string\", \"street\": \"string\"}},"
    "{\"name\": \"Tag\", \"primaryKey\": \"name\", \"properties\": {\"name\": \"string\", \"weight\": \"int\"}},"
    "{\"name\": \"Note\", \"properties\": {\"text\": \"string\"}}"
    "]";

/* MARK: - Helpers */

/* Opens `path` with SCHEMA; mode "host", "thread" or NULL (the default). */
static atoll_realm_t *open_realm(const char *path, const char *mode) {
    char config[4096];
    if (mode)
        snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s, \"notifications\": \"%s\"}",
                 path, SCHEMA, mode);
    else
        snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s}", path, SCHEMA);
    return atoll_realm_open(config);
}


/* Creates or updates (ATOLL_UPDATE_MODIFIED) an object inside the current write transaction. */
static bool put_(atoll_realm_t *r, const char *cls, const char *obj, const char *file, int line) {
    char *out = atoll_object_create(r, cls, J(obj), ATOLL_UPDATE_MODIFIED);
    atoll_check_(out != NULL, "atoll_object_create", file, line);
    atoll_free(out);
    return out != NULL;
}
#define PUT(r, cls, obj) put_((r), (cls), (obj), __FILE__, __LINE__)
#define DEL(r, cls, key) CHECK(atoll_object_delete((r), (cls), J(key)))
#define BEGIN(r) CHECK(atoll_realm_begin_write(r))
#define COMMIT(r) CHECK(atoll_realm_commit(r))
#define DELIVER(r) CHECK(atoll_realm_deliver_notifications(r))
/* A write transaction of one PUT or one DEL: COMMIT_PUT(r, "Dog", "{'id': 1}") stands for
 * BEGIN(r); PUT(r, "Dog", "{'id': 1}"); COMMIT(r); and makes their three checks. */
#define WRITE_ONE(r, op, cls, arg)                                                                 \
    do {                                                                                           \
        BEGIN(r);                                                                                  \
        op(r, cls, arg);                                                                           \
        COMMIT(r);                                                                                 \
    } while (0)
#define COMMIT_PUT(r, cls, obj) WRITE_ONE(r, PUT, cls, obj)
#define COMMIT_DEL(r, cls, key) WRITE_ONE(r, DEL, cls, key)

/* Person first..last ({"id": i, "name": "p<i>", "age": i}) in one transaction. */
static void people(atoll_realm_t *r, int first, int last) {
    BEGIN(r);
    for (int i = first; i <= last; i++) {
        char obj[128];
        snprintf(obj, sizeof obj, "{'id': %d, 'name': 'p%d', 'age': %d}", i, i, i);
        PUT(r, "Person", obj);
    }
    COMMIT(r);
}

static size_t count_of(atoll_realm_t *r, const char *cls, const char *rql) {
    atoll_results_t *res = atoll_results_query(r, cls, rql, NULL);
    size_t n = (size_t)-1;
    if (!atoll_results_count(res, &n)) n = (size_t)-1;
    atoll_results_free(res);
    return n;
}

static uint64_t version_of(atoll_realm_t *r) {
    uint64_t v = UINT64_MAX;
    if (!atoll_realm_version(r, &v)) v = UINT64_MAX;
    return v;
}

/* Whether `fd` becomes readable within `seconds`. */
static bool readable_within(int fd, double seconds) {
    double deadline = atoll_now() + seconds;
    for (;;) {
        double left = deadline - atoll_now();
        if (left < 0) left = 0;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int n = poll(&p, 1, (int)(left * 1000));
        if (n > 0) return (p.revents & POLLIN) != 0;
        if (n == 0) return false;
        if (errno != EINTR) return false;
    }
}

/* MARK: - Inbox: what a callback received */

typedef struct inbox {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    json_t *items;          /* the changes received and not taken yet */
    int calls;              /* callback calls in all */
    int freed;              /* free_userdata calls */
    int bad;                /* calls with NULL or non-JSON text */
    atoll_results_t *probe; /* when set, counted inside each call into probe_count */
    long long probe_count;
} inbox_t;

static void inbox_init(inbox_t *in) {
    memset(in, 0, sizeof *in);
    pthread_mutex_init(&in->mu, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&in->cv, &attr);
    pthread_condattr_destroy(&attr);
    in->items = json_array();
}

static void inbox_destroy(inbox_t *in) {
    json_decref(in->items);
    pthread_cond_destroy(&in->cv);
    pthread_mutex_destroy(&in->mu);
}

/* Each of a list of inboxes initialized, or destroyed: INIT_INBOXES(&a, &b, &c). */
static void each_inbox_(void (*fn)(inbox_t *), inbox_t *const *list, size_t n) {
    for (size_t i = 0; i < n; i++) fn(list[i]);
}
#define INBOX_LIST_(...)                                                                           \
    (inbox_t *const[]){ __VA_ARGS__ }, sizeof((inbox_t *const[]){ __VA_ARGS__ }) / sizeof(inbox_t *)
#define INIT_INBOXES(...) each_inbox_(inbox_init, INBOX_LIST_(__VA_ARGS__))
#define DESTROY_INBOXES(...) each_inbox_(inbox_destroy, INBOX_LIST_(__VA_ARGS__))

static void on_change(void *userdata, const char *changes_json) {
    inbox_t *in = userdata;
    json_t *value = changes_json ? json_loads(changes_json, 0, NULL) : NULL;
    long long probed = -1;
    if (in->probe) {
        size_t n = 0;
        probed = atoll_results_count(in->probe, &n) ? (long long)n : -2;
    }
    pthread_mutex_lock(&in->mu);
    in->calls++;
    if (value) json_array_append_new(in->items, value);
    else in->bad++;
    in->probe_count = probed;
    pthread_cond_broadcast(&in->cv);
    pthread_mutex_unlock(&in->mu);
}

static void on_free(void *userdata) {
    inbox_t *in = userdata;
    pthread_mutex_lock(&in->mu);
    in->freed++;
    pthread_cond_broadcast(&in->cv);
    pthread_mutex_unlock(&in->mu);
}

static void deadline_in(struct timespec *ts, double seconds) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    long long ns = (long long)ts->tv_nsec + (long long)(seconds * 1e9);
    ts->tv_sec += (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
}

/* Takes what arrived (a new reference to an array); first waits, up to WAIT_S, until at least
 * `wait_for` changes are there (0: no wait, for host delivery). */
static json_t *take(inbox_t *in, size_t wait_for) {
    struct timespec deadline;
    deadline_in(&deadline, WAIT_S);
    pthread_mutex_lock(&in->mu);
    while (json_array_size(in->items) < wait_for &&
           pthread_cond_timedwait(&in->cv, &in->mu, &deadline) != ETIMEDOUT) {
    }
    json_t *taken = in->items;
    in->items = json_array();
    pthread_mutex_unlock(&in->mu);
    return taken;
}

/* Waits (up to WAIT_S) until free_userdata ran `n` times; returns how many times it ran. */
static int wait_freed(inbox_t *in, int n) {
    struct timespec deadline;
    deadline_in(&deadline, WAIT_S);
    pthread_mutex_lock(&in->mu);
    while (in->freed < n && pthread_cond_timedwait(&in->cv, &in->mu, &deadline) != ETIMEDOUT) {
    }
    int freed = in->freed;
    pthread_mutex_unlock(&in->mu);
    return freed;
}

static int calls_of(inbox_t *in) {
    pthread_mutex_lock(&in->mu);
    int n = in->calls;
    pthread_mutex_unlock(&in->mu);
    return n;
}

static int freed_of(inbox_t *in) {
    pthread_mutex_lock(&in->mu);
    int n = in->freed;
    pthread_mutex_unlock(&in->mu);
    return n;
}

/* What an inbox received, checked in one line. `wait_for`: as for take() (0 for host delivery,
 * where the test delivered first). Each is a macro, so that a failure names the test's line. */

/* Takes the changes on `in` and returns the only one (a new reference, which the caller
 * decrefs); NULL, and a failed check, unless exactly one arrived. */
static json_t *take_one_(inbox_t *in, size_t wait_for, const char *file, int line) {
    json_t *batch = take(in, wait_for);
    char expr[64];
    snprintf(expr, sizeof expr, "exactly one change (got %zu)", json_array_size(batch));
    atoll_check_(json_array_size(batch) == 1, expr, file, line);
    json_t *one = json_array_size(batch) == 1 ? json_incref(json_array_get(batch, 0)) : NULL;
    json_decref(batch);
    return one;
}
#define TAKE_ONE(in) take_one_((in), 0, __FILE__, __LINE__)

/* Exactly one change arrived, and it (or, when `member` is not NULL, its member `member`) equals
 * `expected`: two checks, the count and the value. */
static bool expect_one_(inbox_t *in, size_t wait_for, const char *member, const char *expected,
                        const char *expr, const char *file, int line) {
    json_t *one = take_one_(in, wait_for, file, line);
    bool ok = atoll_check_json_(member && one ? json_object_get(one, member) : one, expected, expr, file,
                          line);
    json_decref(one);
    return ok;
}
/* Host delivery: the one change now on `in` equals `expected`. */
#define EXPECT_ONE(in, expected)                                                                   \
    expect_one_((in), 0, NULL, (expected), "the change on " #in, __FILE__, __LINE__)
/* Host delivery: the one change now on `in` has `member` equal to `expected`. */
#define EXPECT_ONE_MEMBER(in, member, expected)                                                    \
    expect_one_((in), 0, (member), (expected), "member " #member " of the change on " #in,        \
                __FILE__, __LINE__)
/* Thread delivery: waits for a change on `in`; it is the only one and equals `expected`. */
#define AWAIT_ONE(in, expected)                                                                    \
    expect_one_((in), 1, NULL, (expected), "the change on " #in, __FILE__, __LINE__)

/* Exactly `n` changes arrived (after waiting, up to WAIT_S, for `wait_for` of them). */
static bool expect_changes_(inbox_t *in, size_t wait_for, size_t n, const char *expr,
                            const char *file, int line) {
    json_t *batch = take(in, wait_for);
    bool ok = atoll_check_int_((long long)json_array_size(batch), (long long)n, expr, file, line);
    json_decref(batch);
    return ok;
}
/* Host delivery: exactly `n` changes are on `in` now. */
#define EXPECT_CHANGES(in, n)                                                                      \
    expect_changes_((in), 0, (n), "changes on " #in " == " #n, __FILE__, __LINE__)
/* Host delivery: nothing is on `in`. */
#define EXPECT_NONE(in) EXPECT_CHANGES(in, 0)
/* Thread delivery: waits for `n` changes on `in`; exactly `n` arrived. */
#define AWAIT_CHANGES(in, n)                                                                       \
    expect_changes_((in), (n), (n), "changes on " #in " == " #n, __FILE__, __LINE__)

/* Collects, from changes arriving on `in`, the members `member` (arrays) until `want` elements
 * are there or WAIT_S passes; returns the concatenation (new reference). */
static json_t *collect_members(inbox_t *in, const char *member, size_t want) {
    json_t *all = json_array();
    double deadline = atoll_now() + WAIT_S;
    while (json_array_size(all) < want && atoll_now() < deadline) {
        json_t *batch = take(in, 1);
        size_t i;
        json_t *c;
        json_array_foreach(batch, i, c) json_array_extend(all, json_object_get(c, member));
        json_decref(batch);
    }
    return all;
}

/* The expected results change with the given members (JSON texts) and count. */
static const char *results_change(const char *deletions, const char *insertions,
                                  const char *modifications, const char *moves,
                                  const char *deleted_keys, const char *inserted_keys,
                                  const char *modified_keys, int count) {
    static char text[2048];
    snprintf(text, sizeof text,
             "{'initial': false, 'deletions': %s, 'insertions': %s, 'modifications': %s, 'moves': %s,"
             " 'deletedKeys': %s, 'insertedKeys': %s, 'modifiedKeys': %s, 'count': %d}",
             deletions, insertions, modifications, moves, deleted_keys, inserted_keys, modified_keys,
             count);
    return text;
}

static const char *initial_results(int count) {
    static char text[512];
    snprintf(text, sizeof text,
             "{'initial': true, 'deletions': [], 'insertions': [], 'modifications': [], 'moves': [],"
             " 'deletedKeys': [], 'insertedKeys': [], 'modifiedKeys': [], 'count': %d}", count);
    return text;
}

/* A collection change: a results change with "deleted". */
static const char *collection_change(bool initial, bool deleted, const char *deletions,
                                     const char *insertions, const char *modifications,
                                     const char *moves, const char *deleted_keys,
                                     const char *inserted_keys, const char *modified_keys, int count) {
    static char text[2048];
    snprintf(text, sizeof text,
             "{'initial': %s, 'deleted': %s, 'deletions': %s, 'insertions': %s, 'modifications': %s,"
             " 'moves': %s, 'deletedKeys': %s, 'insertedKeys': %s, 'modifiedKeys': %s, 'count': %d}",
             initial ? "true" : "false", deleted ? "true" : "false", deletions, insertions,
             modifications, moves, deleted_keys, inserted_keys, modified_keys, count);
    return text;
}

/* A collection observer's initial call, for a collection of `count` elements. */
static const char *initial_collection(int count) {
    return collection_change(true, false, "[]", "[]", "[]", "[]", "[]", "[]", "[]", count);
}

/* atoll_token_free() of each of a list of tokens, in order (NULL ones included). */
static void free_tokens_(atoll_token_t *const *list, size_t n) {
    for (size_t i = 0; i < n; i++) atoll_token_free(list[i]);
}
#define FREE_TOKENS(...)                                                                           \
    free_tokens_((atoll_token_t *const[]){ __VA_ARGS__ },                                          \
                 sizeof((atoll_token_t *const[]){ __VA_ARGS__ }) / sizeof(atoll_token_t *))

/* MARK: - Another process */

/* A writer process, forked before this process touches the library (SQLite connections and the
 * library's threads must not cross a fork). Released by release_child(), it opens `path` and
 * commits Person first..first+count-1, one transaction each, then exits 0 (or the number of the
 * step that failed). */
typedef struct child {
    pid_t pid;
    int go; /* the write end of the pipe the child waits on */
} child_t;

static bool fork_writer(child_t *c, const char *path, int first, int count) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
        close(fds[1]);
        char byte;
        if (read(fds[0], &byte, 1) != 1) _exit(9); /* the parent gave up */
        atoll_realm_t *r = open_realm(path, NULL);
        if (r == NULL) _exit(10);
        for (int i = first; i < first + count; i++) {
            char obj[128];
            snprintf(obj, sizeof obj, "{\"id\": %d, \"name\": \"child\", \"age\": %d}", i, i);
            if (!atoll_realm_begin_write(r)) _exit(11);
            char *out = atoll_object_create(r, "Person", obj, ATOLL_UPDATE_MODIFIED);
            if (out == NULL) _exit(12);
            atoll_free(out);
            if (!atoll_realm_commit(r)) _exit(13);
        }
        atoll_realm_close(r);
        _exit(0);
    }
    close(fds[0]);
    c->pid = pid;
    c->go = fds[1];
    return true;
}

static void release_child(child_t *c) {
    char byte = 1;
    CHECK(write(c->go, &byte, 1) == 1);
    close(c->go);
    c->go = -1;
}

/* Waits for the child; its exit status (-1 when it did not exit normally). */
static int finish_child(child_t *c) {
    if (c->go >= 0) close(c->go);
    int status = 0;
    while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* MARK: - Results (host delivery: exact) */

static void test_results_insert_delete_modify(void) {
    atoll_realm_t *r = open_realm(atoll_tmp_realm_path("results"), "host");
    if (!CHECK(r != NULL)) return;
    people(r, 1, 5);
    atoll_results_t *res = atoll_results_query(r, "Person", "age >= 2", NULL);
    inbox_t in;
    inbox_init(&in);
    in.probe = res;
    atoll_token_t *token = atoll_results_observe(res, NULL, on_change, &in, on_free);
    CHECK(token != NULL);
    CHECK_OK();
    CHECK_INT(calls_of(&in), 0); /* nothing is delivered before the host asks */
    int fd = atoll_realm_notification_fd(r);
    CHECK(fd >= 0);
    CHECK(readable_within(fd, WAIT_S)); /* the initial call is due */
    DELIVER(r);
    CHECK_OK();
    EXPECT_ONE(&in, initial_results(4));

    BEGIN(r);
    PUT(r, "Person", "{'id': 6, 'name': 'p6', 'age': 6}");
    DEL(r, "Person", "3");
    PUT(r, "Person", "{'id': 4, 'age': 40}");
    PUT(r, "Person", "{'id': 1, 'age': 10}"); /* enters the results */
    COMMIT(r);
    CHECK_INT(calls_of(&in), 1); /* host delivery: nothing until the host delivers */
    CHECK(readable_within(fd, WAIT_S));
    DELIVER(r);
    /* old: 2 3 4 5; new: 1 2 4 5 6 */
    EXPECT_ONE(&in, results_change("[1]", "[0, 4]", "[2]", "[]", "[3]", "[1, 6]", "[4]", 5));
    CHECK_INT(in.probe_count, 5); /* inside the callback the realm shows the new state */

    /* A commit that does not touch the results delivers nothing; neither does a delivery
     * with nothing due. */
    BEGIN(r);
    PUT(r, "Tag", "{'name': 'x'}");
    PUT(r, "Person", "{'id': 1, 'name': 'p1'}"); /* same value: not a change */
    COMMIT(r);
    DELIVER(r);
    DELIVER(r);
    EXPECT_NONE(&in);

    /* A modification only. */
    COMMIT_PUT(r, "Person", "{'id': 5, 'name': 'five'}");
    DELIVER(r);
    EXPECT_ONE(&in, results_change("[]", "[]", "[3]", "[]", "[]", "[]", "[5]", 5));

    /* Everything leaves. */
    BEGIN(r);
    atoll_results_t *all = atoll_results_query(r, "Person", NULL, NULL);
    CHECK(atoll_results_delete_all(all, NULL));
    atoll_results_free(all);
    COMMIT(r);
    DELIVER(r);
    EXPECT_ONE(&in, results_change("[0, 1, 2, 3, 4]", "[]", "[]", "[]", "[1, 2, 4, 5, 6]", "[]", "[]",
                                   0));

    atoll_token_free(token);
    CHECK_INT(in.freed, 1);
    CHECK_INT(in.bad, 0);
    atoll_results_free(res);
    atoll_realm_close(r);
    inbox_destroy(&in);
}

static void test_sorted_results_report_moves(void) {
    atoll_realm_t *r = open_realm(atoll_tmp_realm_path("sorted"), "host");
    if (!CHECK(r != NULL)) return;
    people(r, 1, 5);
    atoll_results_t *res = atoll_results_query(r, "Person", "TRUEPREDICATE SORT(age ASC)", NULL);
    inbox_t in;
    inbox_init(&in);
    atoll_token_t *token = atoll_results_observe(res, NULL, on_change, &in, NULL);
    CHECK(token != NULL);
    DELIVER(r);
    json_decref(take(&in, 0));
    /* 1 2 3 4 5 -> 2 3 4 5 1 (1 moves to the end), and 3 changes its name only. A moved object is
     * a deletion at its old index and an insertion at its new one; its key is neither deleted
     * nor inserted. */
    BEGIN(r);
    PUT(r, "Person", "{'id': 1, 'age': 99}");
    PUT(r, "Person", "{'id': 3, 'name': 'three'}");
    COMMIT(r);
    DELIVER(r);
    EXPECT_ONE(&in, results_change("[0]", "[4]", "[1, 4]", "[{'from': 0, 'to': 4}]", "[]", "[]",
                                   "[3, 1]", 5));

    /* Descending sort, one object moves to the front. 2 3 4 5 1(99) sorted DESC by age is
     * 1 5 4 3 2; now 2 gets age 100: 2 1 5 4 3. */
    atoll_results_t *desc = atoll_results_query(r, "Person", "TRUEPREDICATE SORT(age DESC)", NULL);
    inbox_t in2;
    inbox_init(&in2);
    atoll_token_t *t2 = atoll_results_observe(desc, NULL, on_change, &in2, NULL);
    DELIVER(r);
    json_decref(take(&in2, 0));
    COMMIT_PUT(r, "Person", "{'id': 2, 'age': 100}");
    DELIVER(r);
    EXPECT_ONE(&in2, results_change("[4]", "[0]", "[0]", "[{'from': 4, 'to': 0}]", "[]", "[]",
                                    "[2]", 5));
    json_decref(take(&in, 0));

    FREE_TOKENS(t2, token);
    atoll_results_free(desc);
    atoll_results_free(res);
    atoll_realm_close(r);
    DESTROY_INBOXES(&in2, &in);
}

static void test_string_and_row_keys(void) {
    atoll_realm_t *r = open_realm(atoll_tmp_realm_path("keys"), "host");
    if (!CHECK(r != NULL)) return;
    BEGIN(r);
    PUT(r, "Tag", "{'name': 'a', 'weight': 1}");
    PUT(r, "Tag", "{'name': 'b', 'weight': 1}");
    PUT(r, "Tag", "{'name': 'c', 'weight': 1}");
    /* A class without primary key: objects named by their row key, given here. */
    PUT(r, "Note", "{'_atoll_key': 101, 'text': 'n1'}");
    PUT(r, "Note", "{'_atoll_key': 102, 'text': 'n2'}");
    PUT(r, "Note", "{'_atoll_key': 103, 'text': 'n3'}");
    COMMIT(r);
    atoll_results_t *tags = atoll_results_query(r, "Tag", NULL, NULL);
    atoll_results_t *notes = atoll_results_query(r, "Note", NULL, NULL);
    inbox_t in_tags, in_notes, in_note;
    INIT_INBOXES(&in_tags, &in_notes, &in_note);
    atoll_token_t *t1 = atoll_results_observe(tags, NULL, on_change, &in_tags, NULL);
    atoll_token_t *t2 = atoll_results_observe(notes, NULL, on_change, &in_notes, NULL);
    atoll_token_t *t3 = atoll_object_observe(r, "Note", "102", NULL, on_change, &in_note, NULL);
    CHECK(t1 && t2 && t3);
    DELIVER(r);
    json_decref(take(&in_tags, 0));
    json_decref(take(&in_notes, 0));

    BEGIN(r);
    DEL(r, "Tag", "'b'");
    PUT(r, "Tag", "{'name': 'c', 'weight': 2}");
    PUT(r, "Tag", "{'name': 'd'}");
    atoll_results_t *n2 = atoll_results_query(r, "Note", "text == 'n2'", NULL);
    size_t deleted = 0;
    CHECK(atoll_results_delete_all(n2, &deleted));
    CHECK_INT(deleted, 1);
    atoll_results_free(n2);
    PUT(r, "Note", "{'text': 'n4'}"); /* a new key, chosen by the library */
    PUT(r, "Note", "{'_atoll_key': 103, 'text': 'n3!'}");
    COMMIT(r);
    DELIVER(r);

    EXPECT_ONE(&in_tags, results_change("[1]", "[2]", "[1]", "[]", "['b']", "['d']", "['c']", 3));
    /* old 101 102 103, new 101 103 n4 */
    json_t *c = TAKE_ONE(&in_notes);
    json_t *inserted = json_object_get(c, "insertedKeys");
    CHECK(json_array_size(inserted) == 1 && json_is_integer(json_array_get(inserted, 0)));
    json_t *key4 = json_integer(json_integer_value(json_array_get(inserted, 0)));
    json_object_set_new(c, "insertedKeys", json_array());
    CHECK_JSON(c, results_change("[1]", "[2]", "[1]", "[]", "[102]", "[]", "[103]", 3));
    json_decref(c);
    /* The new note's key is the one its observer takes. */
    char *key_text = json_dumps(key4, JSON_ENCODE_ANY);
    atoll_token_t *t4 = atoll_object_observe(r, "Note", key_text, NULL, on_change, &in_note, NULL);
    CHECK(t4 != NULL);
    free(key_text);
    json_decref(key4);
    /* The note's own observer: deleted, with the note as last seen. */
    c = TAKE_ONE(&in_note);
    CHECK(json_is_true(json_object_get(c, "deleted")));
    CHECK_JSON(json_object_get(c, "changedProperties"), "[]");
    CHECK_JSON(json_object_get(c, "new"), "{}");
    CHECK_STR(atoll_jstr(json_object_get(c, "old"), "text"), "n2");
    json_decref(c);

    FREE_TOKENS(t1, t2, t3, t4);
    atoll_results_free(tags);
    atoll_results_free(notes);
    atoll_realm_close(r);
    DESTROY_INBOXES(&in_tags, &in_notes, &in_note);
}

/* MARK: - Key paths */

static void test_key_path_filters(void) {
    atoll_realm_t *r = open_realm(atoll_tmp_realm_path("keypaths"), "host");
    if (!CHECK(r != NULL)) return;
    BEGIN(r);
    PUT(r, "Dog", "{'id': 10, 'name': 'Rex', 'age': 3}");
    PUT(r, "Dog", "{'id': 11, 'name': 'Fido', 'age': 4}");
    PUT(r, "Person", "{'id': 1, 'name': 'Ann', 'dogs': [10], 'addresses': [{'city': 'Oslo', 'street': 'A'}]}");
    PUT(r, "Person", "{'id': 2, 'name': 'Bob', 'dogs': [11]}");
    COMMIT(r);
    atoll_results_t *res = atoll_results_query(r, "Person", "TRUEPREDICATE SORT(id ASC)", NULL);
    inbox_t all, names, dog_names, cities;
    INIT_INBOXES(&all, &names, &dog_names, &cities);
    atoll_token_t *tokens[4] = {
        atoll_results_observe(res, NULL, on_change, &all, NULL),
        atoll_results_observe(res, J("['name']"), on_change, &names, NULL),
        atoll_results_observe(res, J("['name', 'dogs.name']"), on_change, &dog_names, NULL),
        atoll_results_observe(res, J("['addresses.city']"), on_change, &cities, NULL),
    };
    CHECK(tokens[0] && tokens[1] && tokens[2] && tokens[3]);
    DELIVER(r);
    inbox_t *inboxes[4] = { &all, &names, &dog_names, &cities };
    for (int i = 0; i < 4; i++) EXPECT_ONE(inboxes[i], initial_results(2));

    /* A dog's age: only the observer without key paths sees Ann change. */
    COMMIT_PUT(r, "Dog", "{'id': 10, 'age': 5}");
    DELIVER(r);
    EXPECT_ONE(&all, results_change("[]", "[]", "[0]", "[]", "[]", "[]", "[1]", 2));
    for (int i = 1; i < 4; i++) EXPECT_NONE(inboxes[i]);

    /* A dog's name: "dogs.name" counts it (Bob's dog); "name" and "addresses.city" do not. */
    COMMIT_PUT(r, "Dog", "{'id': 11, 'name': 'Max'}");
    DELIVER(r);
    EXPECT_ONE(&all, results_change("[]", "[]", "[1]", "[]", "[]", "[]", "[2]", 2));
    EXPECT_ONE(&dog_names, results_change("[]", "[]", "[1]", "[]", "[]", "[]", "[2]", 2));
    EXPECT_NONE(&names);
    EXPECT_NONE(&cities);

    /* A street in an embedded list: the list is replaced whole, which is a change of the list
     * itself, so "addresses.city" counts it too; "name" and "dogs.name" do not. */
    COMMIT_PUT(r, "Person", "{'id': 1, 'addresses': [{'city': 'Oslo', 'street': 'B'}]}");
    DELIVER(r);
    EXPECT_ONE(&all, results_change("[]", "[]", "[0]", "[]", "[]", "[]", "[1]", 2));
    EXPECT_ONE(&cities, results_change("[]", "[]", "[0]", "[]", "[]", "[]", "[1]", 2));
    EXPECT_NONE(&names);
    EXPECT_NONE(&dog_names);

    /* A name: "name" and "dogs.name" count it, "addresses.city" does not. */
    COMMIT_PUT(r, "Person", "{'id': 2, 'name': 'Bo'}");
    DELIVER(r);
    const char *bo = results_change("[]", "[]", "[1]", "[]", "[]", "[]", "[2]", 2);
    EXPECT_ONE(&names, bo);
    EXPECT_ONE(&dog_names, results_change("[]", "[]", "[1]", "[]", "[]", "[]", "[2]", 2));
    EXPECT_CHANGES(&all, 1);
    EXPECT_NONE(&cities);

    /* Insertions and deletions always count, whatever the key paths. */
    BEGIN(r);
    PUT(r, "Person", "{'id': 3, 'name': 'Cy'}");
    DEL(r, "Person", "1");
    COMMIT(r);
    DELIVER(r);
    for (int i = 0; i < 4; i++)
        EXPECT_ONE(inboxes[i], results_change("[0]", "[1]", "[]", "[]", "[1]", "[3]", "[]", 2));

    for (int i = 0; i < 4; i++) atoll_token_free(tokens[i]);
    atoll_results_free(res);
    atoll_realm_close(r);
    for (int i = 0; i < 4; i++) inbox_destroy(inboxes[i]);
}

/* MARK: - Objects */

static void test_object_old_new_and_deletion(void) {
    atoll_realm_t *r = open_realm(atoll_tmp_realm_path("object"), "host");
    if (!CHECK(r != NULL)) return;
    BEGIN(r);
    PUT(r, "Dog", "{'id': 10, 'name': 'Rex'}");
    PUT(r, "Dog", "{'id': 11, 'name': 'Fido'}");
    PUT(r, "Person", "{'id': 1, 'name': 'Ann', 'age': 30, 'dog': 10}");
    PUT(r, "Person", "{'id': 2, 'name': 'Bob', 'dogs': [11]}");
    COMMIT(r);
    inbox_t in, age_only, bob, dog_name;
    INIT_INBOXES(&in, &age_only, &bob, &dog_name);
    atoll_token_t *token = atoll_object_observe(r, "Person", "1", NULL, on_change, &in, on_free);
    CHECK_OK();
    atoll_token_t *filtered = atoll_object_observe(r, "Person", "1", J("['age']"), on_change, &age_only, on_free);
    atoll_token_t *bobs = atoll_object_observe(r, "Person", "2", NULL, on_change, &bob, NULL);
    atoll_token_t *by_dog_name = atoll_object_observe(r, "Person", "1", J("['dog.name']"), on_change, &dog_name, NULL);
    CHECK(token && filtered && bobs && by_dog_name);
    DELIVER(r);
    CHECK_INT(calls_of(&in), 0); /* no initial call */

    COMMIT_PUT(r, "Person", "{'id': 1, 'name': 'Anna', 'age': 31}");
    DELIVER(r);
    EXPECT_ONE(&in, "{'deleted': false, 'changedProperties': ['name', 'age'],"
                    " 'old': {'name': 'Ann', 'age': 30}, 'new': {'name': 'Anna', 'age': 31}}");
    EXPECT_ONE(&age_only, "{'deleted': false, 'changedProperties': ['age'],"
                          " 'old': {'age': 30}, 'new': {'age': 31}}");
    EXPECT_NONE(&bob); /* another object's change */

    EXPECT_NONE(&dog_name); /* neither name nor age is the dog's name */

    /* A change of the linked dog counts as a change of `dog` (the link itself is the same), as
     * the key paths allow: its age is not "dog.name". */
    COMMIT_PUT(r, "Dog", "{'id': 10, 'age': 9}");
    DELIVER(r);
    EXPECT_ONE_MEMBER(&in, "changedProperties", "['dog']");
    EXPECT_NONE(&dog_name);
    COMMIT_PUT(r, "Dog", "{'id': 10, 'name': 'Max'}");
    DELIVER(r);
    json_t *c = TAKE_ONE(&in);
    CHECK_JSON(json_object_get(c, "changedProperties"), "['dog']");
    CHECK(json_is_false(json_object_get(c, "deleted")));
    json_decref(c);
    EXPECT_ONE_MEMBER(&dog_name, "changedProperties", "['dog']");
    EXPECT_NONE(&age_only);

    /* Deleting the dog nulls the link: a changed link property, old 10, new null. */
    COMMIT_DEL(r, "Dog", "10");
    DELIVER(r);
    EXPECT_ONE(&in, "{'deleted': false, 'changedProperties': ['dog'], 'old': {'dog': 10},"
                    " 'new': {'dog': null}}");
    EXPECT_NONE(&age_only);
    json_t *ann = GET(r, "Person", "1");
    CHECK(ann != NULL && json_is_null(json_object_get(ann, "dog")));
    json_decref(ann);

    /* A change of a dog in a list of links counts as a change of `dogs`. */
    COMMIT_PUT(r, "Dog", "{'id': 11, 'age': 7}");
    DELIVER(r);
    EXPECT_ONE_MEMBER(&bob, "changedProperties", "['dogs']");

    /* Deleted: the object as last seen, and nothing more after that. */
    COMMIT_DEL(r, "Person", "1");
    DELIVER(r);
    c = TAKE_ONE(&in);
    CHECK(json_is_true(json_object_get(c, "deleted")));
    CHECK_JSON(json_object_get(c, "changedProperties"), "[]");
    CHECK_JSON(json_object_get(c, "new"), "{}");
    json_t *old = json_object_get(c, "old");
    CHECK_STR(atoll_jstr(old, "name"), "Anna");
    CHECK_INT(atoll_jint(old, "age"), 31);
    CHECK_INT(atoll_jint(old, "id"), 1);
    CHECK(json_is_null(json_object_get(old, "dog")));
    json_decref(c);
    EXPECT_ONE_MEMBER(&age_only, "deleted", "true");
    COMMIT_PUT(r, "Person", "{'id': 1, 'name': 'again'}");
    DELIVER(r);
    CHECK_INT(calls_of(&in), 5);
    CHECK_INT(calls_of(&age_only), 2);

    FREE_TOKENS(token, filtered, bobs, by_dog_name);
    CHECK_INT(freed_of(&in), 1);
    CHECK_INT(freed_of(&age_only), 1);
    CHECK_INT(in.bad + age_only.bad + bob.bad, 0);
    atoll_realm_close(r);
    DESTROY_INBOXES(&in, &age_only, &bob, &dog_name);
}

/* MARK: - Collections */

static void test_list_set_and_dictionary(void) {
    atoll_realm_t *r = open_realm(atoll_tmp_realm_path("collections"), "host");
    if (!CHECK(r != NULL)) return;
    COMMIT_PUT(r, "Person", "{'id': 1, 'numbers': [1, 2, 3, 4], 'tags': ['a', 'b'], 'scores': {'x': 1, 'y': 2}}");
    inbox_t list, set, dict;
    INIT_INBOXES(&list, &set, &dict);
    atoll_token_t *tokens[3] = {
        atoll_collection_observe(r, "Person", "1", "numbers", NULL, on_change, &list, on_free),
        atoll_collection_observe(r, "Person", "1", "tags", NULL, on_change, &set, on_free),
        atoll_collection_observe(r, "Person", "1", "scores", NULL, on_change, &dict, on_free),
    };
    CHECK(tokens[0] && tokens[1] && tokens[2]);
    DELIVER(r);
    EXPECT_ONE(&list, initial_collection(4));
    EXPECT_ONE(&set, initial_collection(2));
    EXPECT_ONE(&dict, initial_collection(2));

    /* Lists are replaced whole; the change is computed by value. */
    COMMIT_PUT(r, "Person", "{'id': 1, 'numbers': [9, 4, 1, 33], 'tags': ['b', 'c'], 'scores': {'y': 20, 'z': 3}}");
    DELIVER(r);
    /* old 1 2 3 4 -> new 9 4 1 33: 2 and 3 deleted, 9 and 33 inserted, 1 moved from 0 to 2. */
    EXPECT_ONE(&list, collection_change(false, false, "[0, 1, 2]", "[0, 2, 3]", "[]",
                                        "[{'from': 0, 'to': 2}]", "[2, 3]", "[9, 33]", "[]", 4));
    EXPECT_ONE(&set, collection_change(false, false, "[0]", "[1]", "[]", "[]", "['a']", "['c']", "[]",
                                       2));
    /* Dictionaries: indices in key order, keys are the dictionary's keys. old x y, new y z. */
    EXPECT_ONE(&dict, collection_change(false, false, "[0]", "[1]", "[0]", "[]", "['x']", "['z']",
                                        "['y']", 2));

    /* Another property of the owner changes nothing of the collections. */
    COMMIT_PUT(r, "Person", "{'id': 1, 'name': 'renamed'}");
    DELIVER(r);
    CHECK_INT(calls_of(&list) + calls_of(&set) + calls_of(&dict), 6);

    /* The owner deleted: a last call with "deleted": true, then nothing. */
    COMMIT_DEL(r, "Person", "1");
    DELIVER(r);
    inbox_t *inboxes[3] = { &list, &set, &dict };
    for (int i = 0; i < 3; i++) EXPECT_ONE_MEMBER(inboxes[i], "deleted", "true");
    COMMIT_PUT(r, "Person", "{'id': 1, 'numbers': [5]}");
    DELIVER(r);
    CHECK_INT(calls_of(&list) + calls_of(&set) + calls_of(&dict), 9);

    for (int i = 0; i < 3; i++) atoll_token_free(tokens[i]);
    for (int i = 0; i < 3; i++) {
        CHECK_INT(freed_of(inboxes[i]), 1);
        CHECK_INT(inboxes[i]->bad, 0);
    }
    atoll_realm_close(r);
    for (int i = 0; i < 3; i++) inbox_destroy(inboxes[i]);
}

static void test_list_of_links(void) {
    atoll_realm_t *r = open_realm(atoll_tmp_realm_path("links"), "host");
    if (!CHECK(r != NULL)) return;
    BEGIN(r);
    PUT(r, "Dog", "{'id': 10, 'name': 'Rex'}");
    PUT(r, "Dog", "{'id': 11, 'name': 'Fido'}");
    PUT(r, "Person", "{'id': 1, 'dogs': [10, 11]}");
    COMMIT(r);
    inbox_t in, names;
    INIT_INBOXES(&in, &names);
    atoll_token_t *token = atoll_collection_observe(r, "Person", "1", "dogs", NULL, on_change, &in, NULL);
    atoll_token_t *named = atoll_collection_observe(r, "Person", "1", "dogs", J("['name']"), on_change,
                                                    &names, NULL);
    CHECK(token && named);
    DELIVER(r);
    json_decref(take(&in, 0));
    json_decref(take(&names, 0));

    /* A linked dog's age: a modification (its index, its key) unless the key paths leave it out. */
    COMMIT_PUT(r, "Dog", "{'id': 11, 'age': 2}");
    DELIVER(r);
    EXPECT_ONE(&in, collection_change(false, false, "[]", "[]", "[1]", "[]", "[]", "[]", "[11]", 2));
    EXPECT_NONE(&names);

    COMMIT_PUT(r, "Dog", "{'id': 10, 'name': 'Max'}");
    DELIVER(r);
    EXPECT_ONE(&names, collection_change(false, false, "[]", "[]", "[0]", "[]", "[]", "[]", "[10]", 2));
    json_decref(take(&in, 0));

    /* A linked dog deleted: it leaves the list. */
    COMMIT_DEL(r, "Dog", "10");
    DELIVER(r);
    EXPECT_ONE(&in, collection_change(false, false, "[0]", "[]", "[]", "[]", "[10]", "[]", "[]", 1));

    FREE_TOKENS(token, named);
    atoll_realm_close(r);
    DESTROY_INBOXES(&in, &names);
}

/* MARK: - Realm */

static void test_realm_observer(void) {
    const char *path = atoll_tmp_realm_path("realm-observer");
    atoll_realm_t *r = open_realm(path, "host");
    atoll_realm_t *writer = open_realm(path, NULL);
    if (!CHECK(r && writer)) return;
    inbox_t in;
    inbox_init(&in);
    atoll_token_t *token = atoll_realm_observe(r, on_change, &in, on_free);
    CHECK(token != NULL);
    CHECK_OK();
    DELIVER(r);
    CHECK_INT(calls_of(&in), 0); /* no initial call */

    people(r, 1, 1);
    DELIVER(r);
    EXPECT_ONE(&in, "{'previousVersion': 0, 'version': 1, 'classes': ['Person']}");

    /* Several commits, one delivery; an empty commit adds no version and calls nothing. */
    COMMIT_PUT(r, "Dog", "{'id': 1}");
    COMMIT_PUT(r, "Tag", "{'name': 't'}");
    BEGIN(r);
    COMMIT(r);
    DELIVER(r);
    json_t *c = TAKE_ONE(&in);
    CHECK_INT(atoll_jint(c, "previousVersion"), 1);
    CHECK_INT(atoll_jint(c, "version"), 3);
    json_t *classes = json_object_get(c, "classes");
    CHECK_INT(json_array_size(classes), 2);
    bool dog = false, tag = false;
    size_t i;
    json_t *name;
    json_array_foreach(classes, i, name) {
        if (json_is_string(name) && strcmp(json_string_value(name), "Dog") == 0) dog = true;
        if (json_is_string(name) && strcmp(json_string_value(name), "Tag") == 0) tag = true;
    }
    CHECK(dog && tag);
    json_decref(c);
    BEGIN(r);
    COMMIT(r);
    DELIVER(r);
    CHECK_INT(calls_of(&in), 2);

    /* Another handle's commit: the host is woken through the descriptor, and its reads keep the
     * snapshot until it delivers (or refreshes). */
    CHECK_INT(count_of(r, "Person", NULL), 1);
    people(writer, 2, 3);
    CHECK_INT(count_of(r, "Person", NULL), 1);
    CHECK_INT(version_of(r), 3);
    CHECK(readable_within(atoll_realm_notification_fd(r), WAIT_S));
    CHECK_INT(calls_of(&in), 2);
    DELIVER(r);
    EXPECT_ONE(&in, "{'previousVersion': 3, 'version': 4, 'classes': ['Person']}");
    CHECK_INT(count_of(r, "Person", NULL), 3);

    /* Inside a write transaction a delivery delivers nothing; once the write is cancelled, what
     * was due is delivered. */
    COMMIT_PUT(writer, "Tag", "{'name': 'w'}");
    BEGIN(r);
    DELIVER(r);
    CHECK_INT(calls_of(&in), 3);
    CHECK(atoll_realm_cancel_write(r));
    CHECK(readable_within(atoll_realm_notification_fd(r), WAIT_S));
    DELIVER(r);
    EXPECT_ONE(&in, "{'previousVersion': 4, 'version': 5, 'classes': ['Tag']}");

    /* A refresh moves the snapshot; the observers hear of it at the next delivery. */
    COMMIT_PUT(writer, "Dog", "{'id': 2}");
    CHECK(atoll_realm_refresh(r));
    CHECK_OK();
    CHECK_INT(count_of(r, "Dog", NULL), 2);
    CHECK_INT(calls_of(&in), 4);
    DELIVER(r);
    EXPECT_ONE(&in, "{'previousVersion': 5, 'version': 6, 'classes': ['Dog']}");

    atoll_token_free(token);
    CHECK_INT(freed_of(&in), 1);
    atoll_realm_close(writer);
    atoll_realm_close(r);
    inbox_destroy(&in);
}

/* MARK: - Snapshots */

static void test_reads_see_the_snapshot_until_refresh(void) {
    const char *path = atoll_tmp_realm_path("snapshot");
    atoll_realm_t *writer = open_realm(path, NULL);
    atoll_realm_t *reader = open_realm(path, "host");
    if (!CHECK(writer && reader)) return;
    CHECK_INT(count_of(reader, "Person", NULL), 0);
    people(writer, 1, 3);
    CHECK_INT(count_of(reader, "Person", NULL), 0); /* the reader's snapshot holds */
    CHECK_INT(version_of(reader), 0);
    json_t *missing = GET(reader, "Person", "1");
    CHECK(missing == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    CHECK(atoll_realm_refresh(reader));
    CHECK_INT(count_of(reader, "Person", NULL), 3);
    CHECK_INT(version_of(reader), 1);
    CHECK(atoll_realm_refresh(reader)); /* nothing newer: fine */

    /* begin_write refreshes; inside a write, refresh does nothing. */
    people(writer, 4, 4);
    CHECK_INT(count_of(reader, "Person", NULL), 3);
    BEGIN(reader);
    CHECK_INT(count_of(reader, "Person", NULL), 4);
    CHECK(atoll_realm_refresh(reader));
    CHECK(atoll_realm_deliver_notifications(reader)); /* delivers nothing inside a write */
    CHECK(atoll_realm_cancel_write(reader));

    /* A delivery refreshes. (Here with an observer: without any, the library does not refresh
     * in atoll_realm_deliver_notifications() today, which the header does not foresee.) */
    inbox_t in;
    inbox_init(&in);
    atoll_token_t *token = atoll_realm_observe(reader, on_change, &in, NULL);
    CHECK_INT(count_of(reader, "Person", NULL), 4);
    people(writer, 5, 5);
    CHECK_INT(count_of(reader, "Person", NULL), 4);
    DELIVER(reader);
    CHECK_INT(count_of(reader, "Person", NULL), 5);
    CHECK_INT(calls_of(&in), 1);
    atoll_token_free(token);
    inbox_destroy(&in);
    atoll_realm_close(writer);
    atoll_realm_close(reader);
}

/* MARK: - Thread delivery */

static void test_thread_delivery_from_another_handle(void) {
    const char *path = atoll_tmp_realm_path("thread-handle");
    atoll_realm_t *writer = open_realm(path, NULL);
    atoll_realm_t *reader = open_realm(path, "thread");
    if (!CHECK(writer && reader)) return;
    atoll_results_t *res = atoll_results_query(reader, "Person", NULL, NULL);
    inbox_t realm_in, results_in;
    INIT_INBOXES(&realm_in, &results_in);
    results_in.probe = res;
    atoll_token_t *t1 = atoll_realm_observe(reader, on_change, &realm_in, on_free);
    atoll_token_t *t2 = atoll_results_observe(res, NULL, on_change, &results_in, on_free);
    CHECK(t1 && t2);
    AWAIT_ONE(&results_in, initial_results(0));

    people(writer, 1, 2);
    AWAIT_ONE(&realm_in, "{'previousVersion': 0, 'version': 1, 'classes': ['Person']}");
    AWAIT_ONE(&results_in, results_change("[]", "[0, 1]", "[]", "[]", "[]", "[1, 2]", "[]", 2));
    CHECK_INT(results_in.probe_count, 2); /* the callback read the state the change describes */
    CHECK_INT(count_of(reader, "Person", NULL), 2); /* the delivery refreshed the reader */

    FREE_TOKENS(t1, t2);
    CHECK_INT(freed_of(&realm_in), 1);
    CHECK_INT(freed_of(&results_in), 1);
    atoll_results_free(res);
    atoll_realm_close(reader);
    atoll_realm_close(writer);
    DESTROY_INBOXES(&realm_in, &results_in);
}

typedef struct writer_args {
    const char *path;
    int first, last;
    bool ok;
} writer_args_t;

/* Opens its own handle and commits Person first..last, one transaction each. */
static void *writer_thread(void *arg) {
    writer_args_t *w = arg;
    atoll_realm_t *r = open_realm(w->path, NULL);
    w->ok = r != NULL;
    for (int i = w->first; r && i <= w->last; i++) {
        char obj[128];
        snprintf(obj, sizeof obj, "{\"id\": %d, \"name\": \"t\", \"age\": %d}", i, i);
        char *out = NULL;
        w->ok = w->ok && atoll_realm_begin_write(r) &&
                (out = atoll_object_create(r, "Person", obj, ATOLL_UPDATE_MODIFIED)) != NULL &&
                atoll_realm_commit(r);
        atoll_free(out);
    }
    atoll_realm_close(r);
    return NULL;
}

static void test_thread_delivery_from_another_thread(void) {
    const char *path = atoll_tmp_realm_path("thread-thread");
    atoll_realm_t *r = open_realm(path, "thread");
    if (!CHECK(r != NULL)) return;
    atoll_results_t *res = atoll_results_query(r, "Person", "TRUEPREDICATE SORT(id ASC)", NULL);
    inbox_t in;
    inbox_init(&in);
    atoll_token_t *token = atoll_results_observe(res, NULL, on_change, &in, on_free);
    CHECK(token != NULL);
    json_decref(take(&in, 1));
    writer_args_t w = { path, 1, 3, false };
    pthread_t t;
    pthread_create(&t, NULL, writer_thread, &w);
    pthread_join(t, NULL);
    CHECK(w.ok);
    json_t *inserted = collect_members(&in, "insertedKeys", 3);
    CHECK_JSON(inserted, "[1, 2, 3]");
    json_decref(inserted);
    atoll_token_free(token);
    CHECK_INT(freed_of(&in), 1);
    CHECK_INT(in.bad, 0);
    atoll_results_free(res);
    atoll_realm_close(r);
    inbox_destroy(&in);
}

static void test_thread_delivery_from_another_process(void) {
    const char *path = atoll_tmp_realm_path("thread-process");
    child_t child;
    if (!CHECK(fork_writer(&child, path, 1, 3))) return;
    atoll_realm_t *r = open_realm(path, "thread");
    if (!CHECK(r != NULL)) {
        finish_child(&child);
        return;
    }
    atoll_results_t *res = atoll_results_query(r, "Person", "TRUEPREDICATE SORT(id ASC)", NULL);
    inbox_t in;
    inbox_init(&in);
    atoll_token_t *token = atoll_results_observe(res, NULL, on_change, &in, on_free);
    CHECK(token != NULL);
    AWAIT_ONE(&in, initial_results(0));
    release_child(&child);
    json_t *inserted = collect_members(&in, "insertedKeys", 3);
    CHECK_INT(finish_child(&child), 0);
    CHECK_JSON(inserted, "[1, 2, 3]");
    json_decref(inserted);
    CHECK_INT(count_of(r, "Person", NULL), 3);
    atoll_token_free(token);
    CHECK_INT(freed_of(&in), 1);
    atoll_results_free(res);
    atoll_realm_close(r);
    inbox_destroy(&in);
}

static void test_host_delivery_from_another_process(void) {
    const char *path = atoll_tmp_realm_path("host-process");
    child_t child;
    if (!CHECK(fork_writer(&child, path, 1, 3))) return;
    atoll_realm_t *r = open_realm(path, "host");
    if (!CHECK(r != NULL)) {
        finish_child(&child);
        return;
    }
    inbox_t in;
    inbox_init(&in);
    atoll_token_t *token = atoll_realm_observe(r, on_change, &in, on_free);
    CHECK(token != NULL);
    int fd = atoll_realm_notification_fd(r);
    CHECK(fd >= 0);
    release_child(&child);
    /* The host's loop: wait for the descriptor, deliver, until the child's three commits are in. */
    double deadline = atoll_now() + WAIT_S;
    uint64_t version = 0;
    while (version < 3 && atoll_now() < deadline) {
        if (!readable_within(fd, deadline - atoll_now())) break;
        DELIVER(r);
        json_t *batch = take(&in, 0);
        size_t i;
        json_t *c;
        json_array_foreach(batch, i, c) {
            CHECK_INT(atoll_jint(c, "previousVersion"), (long long)version);
            CHECK_JSON(json_object_get(c, "classes"), "['Person']");
            version = (uint64_t)atoll_jint(c, "version");
        }
        json_decref(batch);
    }
    CHECK_INT(version, 3);
    CHECK_INT(finish_child(&child), 0);
    CHECK_INT(count_of(r, "Person", NULL), 3);
    atoll_token_free(token);
    CHECK_INT(freed_of(&in), 1);
    atoll_realm_close(r);
    inbox_destroy(&in);
}

static void test_in_memory_realms(void) {
    /* Two handles on one named in-memory database: the other handle's commits are delivered. */
    char config[4096];
    snprintf(config, sizeof config, "{\"inMemory\": true, \"path\": \"notify-mem-%ld\", \"schema\": %s}",
             (long)getpid(), SCHEMA);
    atoll_realm_t *a = atoll_realm_open(config);
    atoll_realm_t *b = atoll_realm_open(config);
    /* and an unnamed one, private to its handle, in host delivery */
    snprintf(config, sizeof config, "{\"inMemory\": true, \"schema\": %s, \"notifications\": \"host\"}", SCHEMA);
    atoll_realm_t *solo = atoll_realm_open(config);
    if (!CHECK(a && b && solo)) return;
    atoll_results_t *res = atoll_results_query(a, "Person", NULL, NULL);
    inbox_t in, solo_in;
    INIT_INBOXES(&in, &solo_in);
    atoll_token_t *token = atoll_results_observe(res, NULL, on_change, &in, NULL);
    atoll_token_t *solo_token = atoll_realm_observe(solo, on_change, &solo_in, NULL);
    CHECK(token && solo_token);
    json_decref(take(&in, 1));
    people(b, 1, 2);
    json_t *inserted = collect_members(&in, "insertedKeys", 2);
    CHECK_JSON(inserted, "[1, 2]");
    json_decref(inserted);
    people(solo, 1, 1);
    DELIVER(solo);
    EXPECT_ONE(&solo_in, "{'previousVersion': 0, 'version': 1, 'classes': ['Person']}");
    FREE_TOKENS(token, solo_token);
    atoll_results_free(res);
    atoll_realm_close(a);
    atoll_realm_close(b);
    atoll_realm_close(solo);
    DESTROY_INBOXES(&in, &solo_in);
}

/* MARK: - Tokens */

typedef struct self_freeing {
    inbox_t in;
    atoll_token_t *_Atomic token;
    atomic_int freed_inside; /* free_userdata calls seen from inside the callback, after the free */
} self_freeing_t;

static void free_own_token(void *userdata, const char *changes_json) {
    self_freeing_t *s = userdata;
    on_change(&s->in, changes_json);
    atoll_token_t *t = atomic_exchange(&s->token, NULL);
    if (t) {
        atoll_token_free(t);
        atomic_store(&s->freed_inside, freed_of(&s->in)); /* free_userdata waits for the return */
    }
}

static void test_token_freed_inside_its_callback(void) {
    atoll_realm_t *r = open_realm(atoll_tmp_realm_path("self-free"), "host");
    if (!CHECK(r != NULL)) return;
    atoll_results_t *res = atoll_results_query(r, "Person", NULL, NULL);
    self_freeing_t s;
    inbox_init(&s.in);
    atomic_init(&s.freed_inside, -1);
    inbox_t other;
    inbox_init(&other);
    atomic_init(&s.token, atoll_results_observe(res, NULL, free_own_token, &s, on_free));
    atoll_token_t *token = atoll_results_observe(res, NULL, on_change, &other, on_free);
    CHECK(atomic_load(&s.token) != NULL && token != NULL);
    DELIVER(r);
    people(r, 1, 1);
    DELIVER(r);
    CHECK_INT(calls_of(&s.in), 1); /* freed inside its first call */
    CHECK_INT(atomic_load(&s.freed_inside), 0);
    CHECK_INT(freed_of(&s.in), 1);
    EXPECT_CHANGES(&other, 2); /* the other observer still gets both */
    atoll_token_free(token);
    people(r, 2, 2);
    DELIVER(r);
    CHECK_INT(calls_of(&other), 2);
    CHECK_INT(freed_of(&other), 1);
    atoll_results_free(res);
    atoll_realm_close(r);
    DESTROY_INBOXES(&s.in, &other);
}

static void test_token_freed_inside_its_callback_on_the_notifier_thread(void) {
    const char *path = atoll_tmp_realm_path("self-free-thread");
    atoll_realm_t *r = open_realm(path, "thread");
    atoll_realm_t *writer = open_realm(path, NULL);
    if (!CHECK(r && writer)) return;
    self_freeing_t s;
    inbox_init(&s.in);
    atomic_init(&s.freed_inside, -1);
    inbox_t other;
    inbox_init(&other);
    /* Realm observers have no initial call: the token is stored before the first call. */
    atomic_init(&s.token, atoll_realm_observe(r, free_own_token, &s, on_free));
    atoll_token_t *token = atoll_realm_observe(r, on_change, &other, on_free);
    CHECK(atomic_load(&s.token) != NULL && token != NULL);
    people(writer, 1, 1);
    CHECK_INT(wait_freed(&s.in, 1), 1);
    CHECK_INT(atomic_load(&s.freed_inside), 0);
    json_decref(take(&other, 1));
    people(writer, 2, 2);
    AWAIT_CHANGES(&other, 1);
    CHECK_INT(calls_of(&s.in), 1);
    CHECK_INT(freed_of(&s.in), 1);
    atoll_token_free(token);
    CHECK_INT(freed_of(&other), 1);
    atoll_realm_close(writer);
    atoll_realm_close(r);
    DESTROY_INBOXES(&s.in, &other);
}

/* A slow callback: marks itself running for `sleep_ms`, and counts calls made after its token
 * was freed. */
typedef struct slow {
    atomic_int running;
    atomic_int calls;
    atomic_int after_free;
    atomic_int token_freed;
    atomic_int freed;
    unsigned sleep_ms;
} slow_t;

static void slow_callback(void *userdata, const char *changes_json) {
    (void)changes_json;
    slow_t *s = userdata;
    if (atomic_load(&s->token_freed)) atomic_fetch_add(&s->after_free, 1);
    atomic_store(&s->running, 1);
    atomic_fetch_add(&s->calls, 1);
    atoll_sleep_ms(s->sleep_ms);
    atomic_store(&s->running, 0);
}

static void slow_free(void *userdata) {
    slow_t *s = userdata;
    if (atomic_load(&s->running)) atomic_fetch_add(&s->after_free, 100); /* must not overlap */
    atomic_fetch_add(&s->freed, 1);
}

typedef struct busy_writer {
    const char *path;
    atomic_int stop;
    int commits;
    bool ok;
} busy_writer_t;

/* Commits small transactions on its own handle until told to stop. */
static void *busy_writer_thread(void *arg) {
    busy_writer_t *w = arg;
    atoll_realm_t *r = open_realm(w->path, NULL);
    w->ok = r != NULL;
    while (r && !atomic_load(&w->stop)) {
        char obj[96];
        snprintf(obj, sizeof obj, "{\"id\": 1, \"age\": %d}", w->commits);
        char *out = NULL;
        w->ok = w->ok && atoll_realm_begin_write(r) &&
                (out = atoll_object_create(r, "Person", obj, ATOLL_UPDATE_MODIFIED)) != NULL &&
                atoll_realm_commit(r);
        atoll_free(out);
        w->commits++;
        atoll_sleep_ms(1);
    }
    atoll_realm_close(r);
    return NULL;
}

static void test_no_call_after_token_free(void) {
    const char *path = atoll_tmp_realm_path("no-call-after-free");
    atoll_realm_t *r = open_realm(path, "thread");
    if (!CHECK(r != NULL)) return;
    busy_writer_t w = { .path = path };
    atomic_init(&w.stop, 0);
    pthread_t t;
    pthread_create(&t, NULL, busy_writer_thread, &w);

    /* Freed while the callback runs on the notifier thread: atoll_token_free waits for it. */
    slow_t s = { .sleep_ms = 30 };
    atoll_token_t *token = atoll_realm_observe(r, slow_callback, &s, slow_free);
    CHECK(token != NULL);
    double deadline = atoll_now() + WAIT_S;
    while (!(atomic_load(&s.calls) >= 2 && atomic_load(&s.running)) && atoll_now() < deadline)
        atoll_sleep_ms(1);
    CHECK(atomic_load(&s.running));
    atoll_token_free(token);
    atomic_store(&s.token_freed, 1);
    CHECK_INT(atomic_load(&s.running), 0);
    CHECK_INT(atomic_load(&s.freed), 1);
    int calls = atomic_load(&s.calls);
    atoll_sleep_ms(200); /* commits go on */
    CHECK_INT(atomic_load(&s.calls), calls);
    CHECK_INT(atomic_load(&s.after_free), 0);

    /* Registered and freed at once, many times, while commits go on: never a call after the
     * free returned, free_userdata once each. Results observers (their initial call races the
     * free). */
    enum { ROUNDS = 50 };
    static slow_t quick[ROUNDS];
    atoll_results_t *res = atoll_results_query(r, "Person", NULL, NULL);
    for (int i = 0; i < ROUNDS; i++) {
        memset(&quick[i], 0, sizeof quick[i]);
        atoll_token_t *tk = atoll_results_observe(res, NULL, slow_callback, &quick[i], slow_free);
        CHECK(tk != NULL);
        if (i % 3 == 1) atoll_sleep_ms(2);
        atoll_token_free(tk);
        atomic_store(&quick[i].token_freed, 1);
    }
    atoll_sleep_ms(100);
    int late = 0, freed = 0;
    for (int i = 0; i < ROUNDS; i++) {
        late += atomic_load(&quick[i].after_free);
        freed += atomic_load(&quick[i].freed) == 1;
    }
    CHECK_INT(late, 0);
    CHECK_INT(freed, ROUNDS);

    atomic_store(&w.stop, 1);
    pthread_join(t, NULL);
    CHECK(w.ok);
    CHECK(w.commits > 0);
    atoll_results_free(res);
    atoll_realm_close(r);
}

static void test_free_userdata_exactly_once(void) {
    const char *path = atoll_tmp_realm_path("free-userdata");
    atoll_realm_t *r = open_realm(path, "host");
    if (!CHECK(r != NULL)) return;
    people(r, 1, 1);
    atoll_results_t *res = atoll_results_query(r, "Person", NULL, NULL);
    inbox_t in;
    inbox_init(&in);

    /* Freed once, by the first atoll_token_free; a second free of the same pointer is a no-op. */
    atoll_token_t *token = atoll_realm_observe(r, on_change, &in, on_free);
    CHECK(token != NULL);
    CHECK_INT(freed_of(&in), 0);
    atoll_token_free(token);
    CHECK_INT(freed_of(&in), 1);
    atoll_token_free(token);
    CHECK_INT(freed_of(&in), 1);

    /* Registration fails: free_userdata runs at once, once. */
    int expected = 1;
#define FAILS(call, code)                                                                          \
    do {                                                                                           \
        CHECK((call) == NULL);                                                                     \
        CHECK_ERR((code), "");                                                                     \
        expected++;                                                                                \
        CHECK_INT(freed_of(&in), expected);                                                        \
    } while (0)
    FAILS(atoll_results_observe(res, NULL, NULL, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT);
    FAILS(atoll_results_observe(NULL, NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT);
    FAILS(atoll_results_observe(res, J("['nope']"), on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT);
    FAILS(atoll_results_observe(res, "[", on_change, &in, on_free), ATOLL_ERR_INVALID_JSON);
    FAILS(atoll_object_observe(r, "Person", "99", NULL, on_change, &in, on_free), ATOLL_ERR_NOT_FOUND);
    FAILS(atoll_object_observe(r, "Nope", "1", NULL, on_change, &in, on_free), ATOLL_ERR_NO_SUCH_CLASS);
    FAILS(atoll_collection_observe(r, "Person", "1", "name", NULL, on_change, &in, on_free),
          ATOLL_ERR_INVALID_ARGUMENT);
    FAILS(atoll_realm_observe(NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT);
    BEGIN(r);
    FAILS(atoll_realm_observe(r, on_change, &in, on_free), ATOLL_ERR_ALREADY_IN_WRITE);
    CHECK(atoll_realm_cancel_write(r));
#undef FAILS

    /* NULL free_userdata is fine. */
    token = atoll_realm_observe(r, on_change, &in, NULL);
    CHECK(token != NULL);
    atoll_token_free(token);
    CHECK_INT(freed_of(&in), expected);

    /* A token outlives its realm: freed after the close, free_userdata still runs once. */
    token = atoll_results_observe(res, NULL, on_change, &in, on_free);
    CHECK(token != NULL);
    atoll_results_free(res);
    atoll_realm_close(r);
    CHECK(freed_of(&in) <= expected + 1);
    atoll_token_free(token);
    CHECK_INT(freed_of(&in), expected + 1);
    atoll_token_free(token);
    CHECK_INT(freed_of(&in), expected + 1);
    inbox_destroy(&in);
}

/* MARK: - The callback uses the realm */

typedef struct writes_back {
    inbox_t in;
    atoll_realm_t *realm;
    atomic_int ok;
} writes_back_t;

/* On its first call, writes a Tag through the realm it observes, and reads it back. */
static void write_back(void *userdata, const char *changes_json) {
    writes_back_t *w = userdata;
    if (calls_of(&w->in) == 0) {
        char *out = NULL;
        bool ok = atoll_realm_begin_write(w->realm) &&
                  (out = atoll_object_create(w->realm, "Tag", "{\"name\": \"from-callback\"}",
                                             ATOLL_UPDATE_MODIFIED)) != NULL &&
                  atoll_realm_commit(w->realm);
        atoll_free(out);
        char *back = ok ? atoll_object_get(w->realm, "Tag", "\"from-callback\"") : NULL;
        atomic_store(&w->ok, back != NULL);
        atoll_free(back);
    }
    on_change(&w->in, changes_json);
}

static void test_callback_writes_to_its_realm(void) {
    const char *path = atoll_tmp_realm_path("write-back");
    atoll_realm_t *r = open_realm(path, "thread");
    if (!CHECK(r != NULL)) return;
    writes_back_t w = { .realm = r };
    inbox_init(&w.in);
    atomic_init(&w.ok, 0);
    atoll_token_t *token = atoll_realm_observe(r, write_back, &w, NULL);
    CHECK(token != NULL);
    people(r, 1, 1);
    /* The first call's own commit is delivered as the second. */
    json_t *all = json_array();
    double deadline = atoll_now() + WAIT_S;
    while (json_array_size(all) < 2 && atoll_now() < deadline) {
        json_t *batch = take(&w.in, 1);
        json_array_extend(all, batch);
        json_decref(batch);
    }
    CHECK(atomic_load(&w.ok));
    if (CHECK_INT(json_array_size(all), 2)) {
        CHECK_JSON(json_array_get(all, 0), "{'previousVersion': 0, 'version': 1, 'classes': ['Person']}");
        CHECK_JSON(json_array_get(all, 1), "{'previousVersion': 1, 'version': 2, 'classes': ['Tag']}");
    }
    json_decref(all);
    atoll_token_free(token);
    atoll_realm_close(r);
    inbox_destroy(&w.in);
}

typedef struct closes {
    atoll_realm_t *realm;
    atomic_int calls;
    atomic_int closed;
} closes_t;

static void close_realm_callback(void *userdata, const char *changes_json) {
    (void)changes_json;
    closes_t *c = userdata;
    atomic_fetch_add(&c->calls, 1);
    atoll_realm_close(c->realm);
    atomic_store(&c->closed, 1);
}

static void test_callback_closes_its_realm(void) {
    const char *path = atoll_tmp_realm_path("close-in-callback");
    atoll_realm_t *r = open_realm(path, "thread");
    atoll_realm_t *writer = open_realm(path, NULL);
    if (!CHECK(r && writer)) return;
    closes_t c = { .realm = r };
    atomic_init(&c.calls, 0);
    atomic_init(&c.closed, 0);
    inbox_t in;
    inbox_init(&in);
    atoll_token_t *token = atoll_realm_observe(r, close_realm_callback, &c, NULL);
    atoll_token_t *freed_later = atoll_realm_observe(r, on_change, &in, on_free);
    CHECK(token && freed_later);
    people(writer, 1, 1);
    double deadline = atoll_now() + WAIT_S;
    while (atomic_load(&c.closed) == 0 && atoll_now() < deadline) atoll_sleep_ms(2);
    CHECK_INT(atomic_load(&c.closed), 1);
    CHECK_INT(atomic_load(&c.calls), 1);
    CHECK(!atoll_realm_refresh(r));
    CHECK_ERR(ATOLL_ERR_CLOSED, "");
    people(writer, 2, 2);
    atoll_sleep_ms(100);
    CHECK_INT(atomic_load(&c.calls), 1);
    FREE_TOKENS(token, freed_later);
    CHECK_INT(freed_of(&in), 1);
    atoll_realm_close(writer);
    inbox_destroy(&in);
}

/* MARK: - Frozen results */

typedef struct frozen_read {
    atoll_results_t *frozen;
    size_t count;
    char *json;
} frozen_read_t;

static void *read_frozen(void *arg) {
    frozen_read_t *f = arg;
    if (!atoll_results_count(f->frozen, &f->count)) f->count = (size_t)-1;
    f->json = atoll_results_json(f->frozen, 0, 0);
    return NULL;
}

static const char *ids_of(atoll_results_t *res) {
    static char text[256];
    json_t *list = TAKE_JSON(atoll_results_json(res, 0, 0));
    size_t n = 0, i;
    json_t *one;
    text[0] = '\0';
    n += (size_t)snprintf(text + n, sizeof text - n, "[");
    json_array_foreach(list, i, one)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s%lld", i ? ", " : "", atoll_jint(one, "id"));
    snprintf(text + n, sizeof text - n, "]");
    json_decref(list);
    return text;
}

static void test_frozen_results(void) {
    const char *path = atoll_tmp_realm_path("frozen");
    atoll_realm_t *r = open_realm(path, NULL);
    atoll_realm_t *writer = open_realm(path, NULL);
    if (!CHECK(r && writer)) return;
    people(r, 1, 3);
    atoll_results_t *res = atoll_results_query(r, "Person", "age >= 2 SORT(id ASC)", NULL);
    size_t n = 0;
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 2);
    atoll_results_t *frozen = atoll_results_freeze(res);
    CHECK(frozen != NULL);
    CHECK_OK();

    /* Another handle commits: the frozen copy of this realm's snapshot is unchanged, before and
     * after the refresh, and after this realm's own writes. */
    people(writer, 4, 4);
    atoll_results_t *frozen_snapshot = atoll_results_freeze(res); /* the snapshot, not the newest */
    CHECK(atoll_results_count(frozen_snapshot, &n));
    CHECK_INT(n, 2);
    CHECK(atoll_realm_refresh(r));
    BEGIN(r);
    DEL(r, "Person", "2");
    PUT(r, "Person", "{'id': 5, 'age': 5}");
    COMMIT(r);
    CHECK_STR(ids_of(res), "[3, 4, 5]");
    CHECK(atoll_results_count(frozen, &n));
    CHECK_INT(n, 2);
    CHECK_STR(ids_of(frozen), "[2, 3]");
    CHECK_STR(ids_of(frozen_snapshot), "[2, 3]");
    json_t *page = TAKE_JSON(atoll_results_json(frozen, 1, 1));
    CHECK_INT(atoll_jint(json_array_get(page, 0), "id"), 3);
    CHECK_STR(atoll_jstr(json_array_get(page, 0), "name"), "p3");
    json_decref(page);

    /* Refused: observing, deleting from. A frozen copy of a frozen copy is fine. */
    inbox_t in;
    inbox_init(&in);
    CHECK(atoll_results_observe(frozen, NULL, on_change, &in, on_free) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "frozen");
    CHECK_INT(freed_of(&in), 1);
    BEGIN(r);
    CHECK(!atoll_results_delete_all(frozen, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "frozen");
    CHECK(atoll_realm_cancel_write(r));
    atoll_results_t *again = atoll_results_freeze(frozen);
    CHECK(again != NULL);
    CHECK_STR(ids_of(again), "[2, 3]");
    CHECK(atoll_results_freeze(NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "");

    /* Readable after the realm closes, from another thread. */
    atoll_results_t *live = atoll_results_query(r, "Person", NULL, NULL);
    atoll_realm_close(r);
    CHECK(atoll_results_freeze(live) == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "");
    CHECK(atoll_results_count(frozen, &n));
    CHECK_INT(n, 2);
    CHECK_STR(ids_of(frozen), "[2, 3]");
    frozen_read_t f = { .frozen = frozen };
    pthread_t t;
    pthread_create(&t, NULL, read_frozen, &f);
    pthread_join(t, NULL);
    CHECK_INT(f.count, 2);
    json_t *from_thread = TAKE_JSON(f.json);
    CHECK_INT(json_array_size(from_thread), 2);
    json_decref(from_thread);
    CHECK(!atoll_results_count(res, &n));
    CHECK_ERR(ATOLL_ERR_CLOSED, "");

    atoll_results_free(live);
    atoll_results_free(again);
    atoll_results_free(frozen_snapshot);
    atoll_results_free(frozen);
    atoll_results_free(res);
    atoll_realm_close(writer);
    inbox_destroy(&in);
}

/* MARK: - The change log behind observers */

static void test_change_log_pruned_behind_observers(void) {
    /* A log that keeps values: atoll_realm_changes() counts its entries. */
    char config[4096];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s, \"notifications\": \"host\", "
             "\"changeLogValues\": true}", atoll_tmp_realm_path("pruning"), SCHEMA);
    atoll_realm_t *r = atoll_realm_open(config);
    if (!CHECK(r != NULL)) return;
    atoll_results_t *res = atoll_results_query(r, "Person", NULL, NULL);
    inbox_t in;
    inbox_init(&in);
    atoll_token_t *token = atoll_results_observe(res, NULL, on_change, &in, NULL);
    DELIVER(r);
    EXPECT_ONE(&in, initial_results(0));
    people(r, 1, 1);
    /* 300 commits while the observer lags: nothing it needs is pruned. */
    for (int i = 0; i < 300; i++) {
        char obj[64];
        snprintf(obj, sizeof obj, "{'id': 1, 'age': %d}", 1000 + i);
        COMMIT_PUT(r, "Person", obj);
    }
    json_t *log = TAKE_JSON(atoll_realm_changes(r, 0, 0));
    CHECK_INT(json_array_size(log), 301);
    json_decref(log);
    DELIVER(r);
    EXPECT_ONE(&in, results_change("[]", "[0]", "[]", "[]", "[]", "[1]", "[]", 1));
    /* Once delivered, later commits prune what nobody needs. */
    for (int i = 0; i < 300; i++) {
        char obj[64];
        snprintf(obj, sizeof obj, "{'id': 1, 'age': %d}", i);
        COMMIT_PUT(r, "Person", obj);
        if (i % 10 == 0) DELIVER(r);
    }
    log = TAKE_JSON(atoll_realm_changes(r, 0, 0));
    CHECK(json_array_size(log) >= 64);
    CHECK(json_array_size(log) <= 128);
    json_decref(log);
    atoll_token_free(token);
    atoll_results_free(res);
    atoll_realm_close(r);
    inbox_destroy(&in);
}

/* MARK: - Fixed bugs: each failed once */

/* A commit of another process made right after atoll_realm_observe() returns must be delivered
 * (the observer was registered before it). */
static void test_commit_right_after_observe(void) {
    enum { ROUNDS = 5 };
    int delivered = 0;
    for (int round = 0; round < ROUNDS; round++) {
        const char *path = atoll_tmp_realm_path("right-after-observe");
        /* The child: opens the file when told (a byte), says so, commits when told again. */
        int cmd[2], ack[2];
        if (!CHECK(pipe(cmd) == 0 && pipe(ack) == 0)) return;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            char c;
            if (read(cmd[0], &c, 1) != 1) _exit(9);
            atoll_realm_t *w = open_realm(path, NULL);
            if (w == NULL || write(ack[1], &c, 1) != 1 || read(cmd[0], &c, 1) != 1) _exit(10);
            char *out = NULL;
            bool ok = atoll_realm_begin_write(w) &&
                      (out = atoll_object_create(w, "Tag", "{\"name\": \"t\"}", ATOLL_UPDATE_ERROR)) != NULL &&
                      atoll_realm_commit(w);
            atoll_free(out);
            atoll_realm_close(w);
            _exit(ok ? 0 : 11);
        }
        atoll_realm_t *r = open_realm(path, "thread");
        if (!CHECK(pid > 0 && r != NULL)) return;
        char c = 'o';
        CHECK(write(cmd[1], &c, 1) == 1 && read(ack[0], &c, 1) == 1);
        inbox_t in;
        inbox_init(&in);
        atoll_token_t *token = atoll_realm_observe(r, on_change, &in, NULL);
        CHECK(token != NULL);
        CHECK(write(cmd[1], &c, 1) == 1); /* commit now */
        json_t *batch = take(&in, 1);
        if (json_array_size(batch) == 1) delivered++;
        json_decref(batch);
        int status = 0;
        waitpid(pid, &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        atoll_token_free(token);
        atoll_realm_close(r);
        inbox_destroy(&in);
        close(cmd[0]), close(cmd[1]), close(ack[0]), close(ack[1]);
    }
    CHECK_INT(delivered, ROUNDS);
}

/* Reads see the data as of the handle's last refresh: a commit or a cancelled write is not a
 * refresh, so another handle's later commit stays unseen until one (the snapshot once started at
 * the first read after them). */
static void test_snapshot_after_commit_and_cancel(void) {
    const char *path = atoll_tmp_realm_path("snapshot-commit");
    atoll_realm_t *a = open_realm(path, NULL);
    atoll_realm_t *b = open_realm(path, NULL);
    if (!CHECK(a && b)) return;
    people(a, 1, 1); /* a: refreshed at its begin_write, then its own commit: 1 */
    people(b, 2, 2);
    CHECK_INT(count_of(a, "Person", NULL), 1);
    BEGIN(a); /* refreshed: 2 */
    CHECK(atoll_realm_cancel_write(a));
    people(b, 3, 3);
    CHECK_INT(count_of(a, "Person", NULL), 2);
    atoll_realm_close(a);
    atoll_realm_close(b);
}

/* atoll_realm_deliver_notifications() refreshes the realm, observers or not (it once did nothing
 * on a realm that had no observer and was never asked for its descriptor). */
static void test_deliver_without_observers_refreshes(void) {
    const char *path = atoll_tmp_realm_path("deliver-refreshes");
    atoll_realm_t *host = open_realm(path, "host");
    atoll_realm_t *writer = open_realm(path, NULL);
    if (!CHECK(host && writer)) return;
    CHECK_INT(count_of(host, "Person", NULL), 0);
    people(writer, 1, 1);
    CHECK_INT(count_of(host, "Person", NULL), 0);
    DELIVER(host);
    CHECK_INT(count_of(host, "Person", NULL), 1);
    atoll_realm_close(writer);
    atoll_realm_close(host);
}

/* MARK: - Bad input */

static void test_bad_input_fails_cleanly(void) {
    const char *path = atoll_tmp_realm_path("bad-input");
    atoll_realm_t *r = open_realm(path, "thread");
    atoll_realm_t *host = open_realm(path, "host");
    if (!CHECK(r && host)) return;
    BEGIN(r);
    PUT(r, "Person", "{'id': 1, 'name': 'Ann', 'numbers': [1]}");
    PUT(r, "Tag", "{'name': 't'}");
    COMMIT(r);
    atoll_results_t *res = atoll_results_query(r, "Person", NULL, NULL);
    inbox_t in;
    inbox_init(&in);
    int frees = 0;
#define REFUSED(call, code, text)                                                                  \
    do {                                                                                           \
        CHECK((call) == NULL);                                                                     \
        CHECK_ERR((code), (text));                                                                 \
        frees++;                                                                                   \
    } while (0)

    /* NULLs. */
    REFUSED(atoll_results_observe(NULL, NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "results");
    REFUSED(atoll_results_observe(res, NULL, NULL, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "fn");
    REFUSED(atoll_object_observe(NULL, "Person", "1", NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "realm");
    REFUSED(atoll_object_observe(r, NULL, "1", NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    REFUSED(atoll_object_observe(r, "Person", NULL, NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "primary_key");
    REFUSED(atoll_object_observe(r, "Person", "1", NULL, NULL, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "fn");
    REFUSED(atoll_collection_observe(NULL, "Person", "1", "numbers", NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "realm");
    REFUSED(atoll_collection_observe(r, NULL, "1", "numbers", NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    REFUSED(atoll_collection_observe(r, "Person", NULL, "numbers", NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "primary_key");
    REFUSED(atoll_collection_observe(r, "Person", "1", NULL, NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "property");
    REFUSED(atoll_collection_observe(r, "Person", "1", "numbers", NULL, NULL, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "fn");
    REFUSED(atoll_realm_observe(NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "realm");
    REFUSED(atoll_realm_observe(r, NULL, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "fn");
    CHECK(!atoll_realm_refresh(NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(!atoll_realm_deliver_notifications(NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK_INT(atoll_realm_notification_fd(NULL), -1);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    atoll_token_free(NULL);

    /* Key paths: not JSON, not an array, not strings, unknown properties, through a non-link. */
    REFUSED(atoll_results_observe(res, "[", on_change, &in, on_free), ATOLL_ERR_INVALID_JSON, "");
    REFUSED(atoll_results_observe(res, "", on_change, &in, on_free), ATOLL_ERR_INVALID_JSON, "");
    REFUSED(atoll_results_observe(res, J("'name'"), on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "array");
    REFUSED(atoll_results_observe(res, J("{'name': 1}"), on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "array");
    REFUSED(atoll_results_observe(res, "[1]", on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "string");
    REFUSED(atoll_results_observe(res, J("['name', null]"), on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "string");
    REFUSED(atoll_results_observe(res, J("['nope']"), on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "nope");
    REFUSED(atoll_results_observe(res, J("['name.x']"), on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "not a link");
    REFUSED(atoll_results_observe(res, J("['dogs.nope']"), on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "nope");
    REFUSED(atoll_results_observe(res, J("['']"), on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "");
    REFUSED(atoll_object_observe(r, "Person", "1", J("['age', 'nope']"), on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "nope");
    REFUSED(atoll_object_observe(r, "Person", "1", "{", on_change, &in, on_free), ATOLL_ERR_INVALID_JSON, "");
    REFUSED(atoll_collection_observe(r, "Person", "1", "dogs", J("['nope']"), on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "nope");
    REFUSED(atoll_collection_observe(r, "Person", "1", "numbers", J("['x']"), on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "");

    /* Unknown class, property, primary key; keys of the wrong type; not a collection. */
    REFUSED(atoll_object_observe(r, "Nope", "1", NULL, on_change, &in, on_free), ATOLL_ERR_NO_SUCH_CLASS, "Nope");
    REFUSED(atoll_object_observe(r, "Person", "99", NULL, on_change, &in, on_free), ATOLL_ERR_NOT_FOUND, "");
    REFUSED(atoll_object_observe(r, "Person", J("'x'"), NULL, on_change, &in, on_free), ATOLL_ERR_TYPE_MISMATCH, "");
    REFUSED(atoll_object_observe(r, "Person", "{", NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_JSON, "");
    REFUSED(atoll_object_observe(r, "Tag", "1", NULL, on_change, &in, on_free), ATOLL_ERR_TYPE_MISMATCH, "");
    REFUSED(atoll_object_observe(r, "Address", "1", NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "embedded");
    REFUSED(atoll_collection_observe(r, "Nope", "1", "numbers", NULL, on_change, &in, on_free), ATOLL_ERR_NO_SUCH_CLASS, "");
    REFUSED(atoll_collection_observe(r, "Person", "99", "numbers", NULL, on_change, &in, on_free), ATOLL_ERR_NOT_FOUND, "");
    REFUSED(atoll_collection_observe(r, "Person", "1", "nope", NULL, on_change, &in, on_free), ATOLL_ERR_NO_SUCH_PROPERTY, "nope");
    REFUSED(atoll_collection_observe(r, "Person", "1", "name", NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "");
    REFUSED(atoll_collection_observe(r, "Person", "1", "dog", NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "");
    CHECK_INT(freed_of(&in), frees);

    /* Inside a write transaction: every observe is refused. */
    BEGIN(r);
    REFUSED(atoll_results_observe(res, NULL, on_change, &in, on_free), ATOLL_ERR_ALREADY_IN_WRITE, "");
    REFUSED(atoll_object_observe(r, "Person", "1", NULL, on_change, &in, on_free), ATOLL_ERR_ALREADY_IN_WRITE, "");
    REFUSED(atoll_collection_observe(r, "Person", "1", "numbers", NULL, on_change, &in, on_free), ATOLL_ERR_ALREADY_IN_WRITE, "");
    REFUSED(atoll_realm_observe(r, on_change, &in, on_free), ATOLL_ERR_ALREADY_IN_WRITE, "");
    CHECK(atoll_realm_cancel_write(r));

    /* The descriptor is for host delivery only. */
    CHECK_INT(atoll_realm_notification_fd(r), -1);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "");
    int fd = atoll_realm_notification_fd(host);
    CHECK(fd >= 0);
    CHECK_OK();
    CHECK_INT(atoll_realm_notification_fd(host), fd);
    (void)atoll_realm_deliver_notifications(r); /* thread delivery: whatever it answers, no crash */

    /* Bad configuration values. */
    char config[4096];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"notifications\": \"sometimes\"}", path);
    CHECK(atoll_realm_open(config) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "notifications");
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"notifications\": 1}", path);
    CHECK(atoll_realm_open(config) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "notifications");

    /* Foreign pointers, and handles of the wrong kind. */
    int some_int = 7;
    char junk[64];
    memset(junk, 0xA5, sizeof junk);
    void *fakes[] = { &some_int, junk };
    atoll_token_t *token = atoll_realm_observe(r, on_change, &in, on_free);
    CHECK(token != NULL);
    for (size_t i = 0; i < sizeof fakes / sizeof fakes[0]; i++) {
        REFUSED(atoll_results_observe((atoll_results_t *)fakes[i], NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "");
        REFUSED(atoll_object_observe((atoll_realm_t *)fakes[i], "Person", "1", NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "");
        REFUSED(atoll_collection_observe((atoll_realm_t *)fakes[i], "Person", "1", "numbers", NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "");
        REFUSED(atoll_realm_observe((atoll_realm_t *)fakes[i], on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "");
        CHECK(!atoll_realm_refresh((atoll_realm_t *)fakes[i]));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "");
        CHECK(!atoll_realm_deliver_notifications((atoll_realm_t *)fakes[i]));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "");
        CHECK_INT(atoll_realm_notification_fd((atoll_realm_t *)fakes[i]), -1);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "");
        CHECK(atoll_results_freeze((atoll_results_t *)fakes[i]) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "");
        atoll_token_free((atoll_token_t *)fakes[i]); /* not a token: a no-op */
    }
    REFUSED(atoll_results_observe((atoll_results_t *)r, NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "");
    REFUSED(atoll_results_observe((atoll_results_t *)token, NULL, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "");
    REFUSED(atoll_realm_observe((atoll_realm_t *)res, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "");
    REFUSED(atoll_realm_observe((atoll_realm_t *)token, on_change, &in, on_free), ATOLL_ERR_INVALID_ARGUMENT, "token");
    CHECK(!atoll_realm_refresh((atoll_realm_t *)token));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "");
    CHECK(atoll_results_freeze((atoll_results_t *)token) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "");
    /* A realm or results passed as a token: ignored, they keep working. */
    atoll_token_free((atoll_token_t *)r);
    atoll_token_free((atoll_token_t *)res);
    size_t n = 0;
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 1);
    CHECK(atoll_realm_refresh(r));
    CHECK_INT(freed_of(&in), frees);

    /* atoll_token_free cannot fail: it leaves the last error as it is. */
    CHECK(!atoll_realm_refresh(NULL));
    atoll_token_free(token);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    frees++;
    CHECK_INT(freed_of(&in), frees);
    atoll_token_free(token); /* twice: a no-op */
    CHECK_INT(freed_of(&in), frees);

    /* After the close: ATOLL_ERR_CLOSED; tokens made before it are freed after it. */
    atoll_token_t *kept = atoll_object_observe(r, "Person", "1", NULL, on_change, &in, on_free);
    atoll_token_t *kept_host = atoll_realm_observe(host, on_change, &in, on_free);
    CHECK(kept && kept_host);
    atoll_realm_close(r);
    atoll_realm_close(host);
    REFUSED(atoll_results_observe(res, NULL, on_change, &in, on_free), ATOLL_ERR_CLOSED, "");
    REFUSED(atoll_object_observe(r, "Person", "1", NULL, on_change, &in, on_free), ATOLL_ERR_CLOSED, "");
    REFUSED(atoll_collection_observe(r, "Person", "1", "numbers", NULL, on_change, &in, on_free), ATOLL_ERR_CLOSED, "");
    REFUSED(atoll_realm_observe(r, on_change, &in, on_free), ATOLL_ERR_CLOSED, "");
    CHECK(!atoll_realm_refresh(r));
    CHECK_ERR(ATOLL_ERR_CLOSED, "");
    CHECK(!atoll_realm_deliver_notifications(host));
    CHECK_ERR(ATOLL_ERR_CLOSED, "");
    CHECK_INT(atoll_realm_notification_fd(host), -1);
    CHECK_ERR(ATOLL_ERR_CLOSED, "");
    CHECK(atoll_results_freeze(res) == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "");
    atoll_token_free(kept);
    atoll_token_free(kept_host);
    frees += 2;
    atoll_token_free(kept);
    CHECK_INT(freed_of(&in), frees);
    CHECK_INT(calls_of(&in), 0);
#undef REFUSED
    atoll_results_free(res);
    inbox_destroy(&in);
}

/* Another handle migrates the file so that the observed query no longer runs: the observer
 * gets one last change carrying the error, then nothing. */
static void test_error_after_another_handle_migrates(void) {
    const char *path = atoll_tmp_realm_path("migrated");
    atoll_realm_t *r = open_realm(path, "host");
    if (!CHECK(r != NULL)) return;
    people(r, 1, 10);
    atoll_results_t *res = atoll_results_query(r, "Person", "age > 5", NULL);
    inbox_t in;
    inbox_init(&in);
    atoll_token_t *token = atoll_results_observe(res, NULL, on_change, &in, on_free);
    CHECK(token != NULL);
    DELIVER(r);
    EXPECT_ONE(&in, initial_results(5));

    /* The same schema without Person.age (the first "age" of SCHEMA), at version 1. */
    char schema[4096];
    snprintf(schema, sizeof schema, "%s", SCHEMA);
    char *age = strstr(schema, "\"age\": \"int\", ");
    if (!CHECK(age != NULL)) return;
    memmove(age, age + strlen("\"age\": \"int\", "), strlen(age + strlen("\"age\": \"int\", ")) + 1);
    char config[8192];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s, \"schemaVersion\": 1}", path, schema);
    atoll_realm_t *migrated = atoll_realm_open(config);
    if (CHECK(migrated != NULL)) {
        COMMIT_PUT(migrated, "Person", "{'id': 11, 'name': 'new'}");
        DELIVER(r);
        json_t *change = TAKE_ONE(&in);
        json_t *error = json_object_get(change, "error");
        CHECK(json_integer_value(json_object_get(error, "code")) > 0);
        const char *message = json_string_value(json_object_get(error, "message"));
        CHECK(message != NULL && strstr(message, "age") != NULL);
        CHECK_JSON(json_object_get(change, "insertions"), "[]");
        json_decref(change);
        COMMIT_PUT(migrated, "Person", "{'id': 12, 'name': 'newer'}");
        DELIVER(r);
        EXPECT_NONE(&in); /* not called again */
        atoll_realm_close(migrated);
    }
    atoll_token_free(token);
    atoll_results_free(res);
    atoll_realm_close(r);
    inbox_destroy(&in);
}

int main(int argc, char **argv) {
    static const atoll_test_t tests[] = {
        ATOLL_TEST(test_results_insert_delete_modify),
        ATOLL_TEST(test_error_after_another_handle_migrates),
        ATOLL_TEST(test_sorted_results_report_moves),
        ATOLL_TEST(test_string_and_row_keys),
        ATOLL_TEST(test_key_path_filters),
        ATOLL_TEST(test_object_old_new_and_deletion),
        ATOLL_TEST(test_list_set_and_dictionary),
        ATOLL_TEST(test_list_of_links),
        ATOLL_TEST(test_realm_observer),
        ATOLL_TEST(test_reads_see_the_snapshot_until_refresh),
        ATOLL_TEST(test_thread_delivery_from_another_handle),
        ATOLL_TEST(test_thread_delivery_from_another_thread),
        ATOLL_TEST(test_thread_delivery_from_another_process),
        ATOLL_TEST(test_host_delivery_from_another_process),
        ATOLL_TEST(test_in_memory_realms),
        ATOLL_TEST(test_token_freed_inside_its_callback),
        ATOLL_TEST(test_token_freed_inside_its_callback_on_the_notifier_thread),
        ATOLL_TEST(test_no_call_after_token_free),
        ATOLL_TEST(test_free_userdata_exactly_once),
        ATOLL_TEST(test_callback_writes_to_its_realm),
        ATOLL_TEST(test_callback_closes_its_realm),
        ATOLL_TEST(test_frozen_results),
        ATOLL_TEST(test_change_log_pruned_behind_observers),
        ATOLL_TEST(test_bad_input_fails_cleanly),
        ATOLL_TEST(test_commit_right_after_observe),
        ATOLL_TEST(test_snapshot_after_commit_and_cancel),
        ATOLL_TEST(test_deliver_without_observers_refreshes),
    };
    return ATOLL_CHECK_MAIN(tests, argc, argv);
}

/* test_errors.c — bad input never crashes and always says what was wrong: NULL for every pointer
 * parameter, malformed JSON, text that is not UTF-8, write calls outside a transaction, use after
 * close (ATOLL_ERR_CLOSED), pointers that never were handles (ATOLL_ERR_INVALID_ARGUMENT).
 * The jansson (_j) functions are covered in test_jansson.c. */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

static const char *const DOG = "{\"_id\": 1, \"name\": \"Rex\"}";

/* A realm with Dog 1 committed, in a write transaction. */
static atoll_realm_t *open_in_write(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (r == NULL) return NULL;
    atoll_realm_begin_write(r);
    atoll_free(atoll_object_create(r, "Dog", DOG, ATOLL_UPDATE_ERROR));
    atoll_realm_commit(r);
    atoll_realm_begin_write(r);
    return r;
}

/* MARK: - NULL for every pointer parameter */

static void test_null_realm(void) {
    bool b = false;
    uint64_t v = 0;
    size_t n = 0;
    CHECK(!atoll_realm_begin_write(NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(!atoll_realm_commit(NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(!atoll_realm_cancel_write(NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(!atoll_realm_is_in_write(NULL, &b));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(atoll_realm_schema(NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(!atoll_realm_schema_version(NULL, &v));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(!atoll_realm_version(NULL, &v));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(atoll_realm_changes(NULL, 0, 0) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(atoll_object_create(NULL, "Dog", DOG, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(!atoll_objects_create_many(NULL, "Dog", "[]", ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(atoll_object_get(NULL, "Dog", "1") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(!atoll_object_delete(NULL, "Dog", "1"));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(atoll_results_query(NULL, "Dog", NULL, NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
}

static void test_null_realm_outputs(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    CHECK(!atoll_realm_is_in_write(r, NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "out_in_write");
    CHECK(!atoll_realm_schema_version(r, NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "out_version");
    CHECK(!atoll_realm_version(r, NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "out_version");
    atoll_realm_close(r);
}

static void test_null_object_arguments(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    size_t n = 0;
    CHECK(atoll_object_create(r, NULL, DOG, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    CHECK(atoll_object_create(r, "Dog", NULL, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "object_json");
    CHECK(!atoll_objects_create_many(r, NULL, "[]", ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    CHECK(!atoll_objects_create_many(r, "Dog", NULL, ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "array_json");
    CHECK(atoll_object_get(r, NULL, "1") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    CHECK(atoll_object_get(r, "Dog", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "primary_key_json");
    CHECK(!atoll_object_delete(r, NULL, "1"));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    CHECK(!atoll_object_delete(r, "Dog", NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "primary_key_json");
    CHECK(atoll_results_query(r, NULL, NULL, NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    /* Nothing changed and the transaction is still there. */
    bool in_write = false;
    CHECK(atoll_realm_is_in_write(r, &in_write));
    CHECK(in_write);
    CHECK(atoll_realm_commit(r));
    json_t *d = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(d, "name"), "Rex");
    json_decref(d);
    atoll_realm_close(r);
}

static void test_null_results(void) {
    size_t n = 0;
    CHECK(!atoll_results_count(NULL, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "results");
    CHECK(atoll_results_json(NULL, 0, 0) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "results");
    CHECK(!atoll_results_delete_all(NULL, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "results");
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    atoll_results_t *res = atoll_results_query(r, "Dog", NULL, NULL);
    CHECK(res != NULL);
    CHECK(!atoll_results_count(res, NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "out_count");
    atoll_results_free(res);
    atoll_realm_close(r);
}

/* MARK: - Malformed input */

static void test_malformed_json_everywhere(void) {
    static const char *const bad[] = {
        "", " ", "{", "}", "[", "{\"_id\": }", "{\"_id\": 1,}", "{'_id': 1}", "{\"_id\": 01}",
        "{\"_id\": 1} trailing", "nul", "{\"_id\": NaN}", "{\"_id\": 1, \"name\": \"\\x41\"}",
        "{\"_id\": 1, \"name\": \"tab\tin string\"}", "\xef\xbb\xbf{\"_id\": 1}",
    };
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(atoll_object_create(r, "Dog", bad[i], ATOLL_UPDATE_ERROR) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
        CHECK(!atoll_objects_create_many(r, "Dog", bad[i], ATOLL_UPDATE_ERROR, NULL));
        CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
        CHECK(atoll_results_query(r, "Dog", "_id == $0", bad[i]) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    }
    /* Keys: not JSON, or JSON of the wrong shape. */
    CHECK(atoll_object_get(r, "Dog", "1 2") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(!atoll_object_delete(r, "Dog", "[1"));
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    /* Deeply nested JSON is refused, not a stack overflow. */
    size_t depth = 100000;
    char *deep = malloc(2 * depth + 16);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = '\0';
    CHECK(atoll_object_create(r, "Dog", deep, ATOLL_UPDATE_ERROR) == NULL);
    CHECK(atoll_last_error(NULL));
    CHECK(!atoll_objects_create_many(r, "Dog", deep, ATOLL_UPDATE_ERROR, NULL));
    CHECK(atoll_last_error(NULL));
    free(deep);
    CHECK(atoll_realm_cancel_write(r));
    atoll_realm_close(r);
}

static void test_not_utf8(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    /* JSON text with bytes that are not UTF-8: a lone continuation byte, an overlong encoding,
     * a truncated sequence, a UTF-16 surrogate encoded in UTF-8. */
    static const char *const bad_json[] = {
        "{\"_id\": 1, \"name\": \"\x80\"}",
        "{\"_id\": 1, \"name\": \"\xc0\xaf\"}",
        "{\"_id\": 1, \"name\": \"\xe2\x82\"}",
        "{\"_id\": 1, \"name\": \"\xed\xa0\x80\"}",
        "{\"_id\": 1, \"n\xffme\": \"Rex\"}",
    };
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
        CHECK(atoll_object_create(r, "Dog", bad_json[i], ATOLL_UPDATE_MODIFIED) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    }
    CHECK(atoll_object_get(r, "Person", "\"\xfe\xff\"") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    /* A class name that is not UTF-8 cannot name a class: an unusable argument, or no such
     * class (the header allows reading it either way). */
    CHECK(atoll_object_create(r, "D\xffg", DOG, ATOLL_UPDATE_MODIFIED) == NULL);
    atoll_error_t e;
    CHECK(atoll_last_error(&e));
    CHECK(e.code == ATOLL_ERR_INVALID_ARGUMENT || e.code == ATOLL_ERR_NO_SUCH_CLASS);
    CHECK(atoll_object_get(r, "\xc3", "1") == NULL);
    CHECK(atoll_last_error(&e));
    CHECK(e.code == ATOLL_ERR_INVALID_ARGUMENT || e.code == ATOLL_ERR_NO_SUCH_CLASS);
    /* A query that is not UTF-8: a syntax error or an unusable argument. */
    CHECK(atoll_results_query(r, "Dog", "name == '\xff'", NULL) == NULL);
    CHECK(atoll_last_error(&e));
    CHECK(e.code == ATOLL_ERR_QUERY_SYNTAX || e.code == ATOLL_ERR_INVALID_ARGUMENT);
    /* The message is valid text even so (printable by the host). */
    CHECK(e.message != NULL);
    CHECK(atoll_realm_cancel_write(r));
    atoll_realm_close(r);
}

static void test_unknown_names(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_object_create(r, "Unicorn", "{}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Unicorn");
    CHECK(atoll_object_create(r, "", "{}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "");
    CHECK(atoll_object_create(r, "dog", DOG, ATOLL_UPDATE_ERROR) == NULL); /* case matters */
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "dog");
    /* Names that look like SQL or like the library's own tables. */
    CHECK(atoll_object_create(r, "Dog; DROP TABLE Dog", "{}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "DROP");
    CHECK(atoll_results_query(r, "_atoll_changes", NULL, NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "_atoll_changes");
    CHECK(atoll_results_query(r, "sqlite_master", NULL, NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "sqlite_master");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 2, \"Name\": \"x\"}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_PROPERTY, "Name");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 2, \"rowid\": 5}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_PROPERTY, "rowid");
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);
}

static void test_writes_outside_a_transaction(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_object_create(r, "Dog", DOG, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    CHECK(!atoll_objects_create_many(r, "Dog", "[{\"_id\": 1}]", ATOLL_UPDATE_ERROR, NULL));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    CHECK(!atoll_object_delete(r, "Dog", "1"));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    atoll_results_t *res = atoll_results_query(r, "Dog", NULL, NULL);
    CHECK(!atoll_results_delete_all(res, NULL));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    atoll_results_free(res);
    CHECK(!atoll_realm_commit(r));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    CHECK(!atoll_realm_cancel_write(r));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    CHECK(atoll_realm_begin_write(r));
    CHECK(!atoll_realm_begin_write(r));
    CHECK_ERR(ATOLL_ERR_ALREADY_IN_WRITE, "write");
    CHECK(atoll_realm_cancel_write(r));
    atoll_realm_close(r);
}

/* MARK: - Use after close */

static void test_use_after_close(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_commit(r));
    atoll_results_t *res = atoll_results_query(r, "Dog", NULL, NULL);
    CHECK(res != NULL);
    atoll_realm_close(r);

    bool b = false;
    uint64_t v = 0;
    size_t n = 0;
    CHECK(!atoll_realm_begin_write(r));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!atoll_realm_commit(r));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!atoll_realm_cancel_write(r));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!atoll_realm_is_in_write(r, &b));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(atoll_realm_schema(r) == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!atoll_realm_schema_version(r, &v));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!atoll_realm_version(r, &v));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(atoll_realm_changes(r, 0, 0) == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(atoll_object_create(r, "Dog", DOG, ATOLL_UPDATE_MODIFIED) == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!atoll_objects_create_many(r, "Dog", "[]", ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(atoll_object_get(r, "Dog", "1") == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!atoll_object_delete(r, "Dog", "1"));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(atoll_results_query(r, "Dog", NULL, NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");

    /* Results of a closed realm. */
    CHECK(!atoll_results_count(res, &n));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(atoll_results_json(res, 0, 0) == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!atoll_results_delete_all(res, &n));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    atoll_results_free(res); /* must still be freed */

    /* Closing again is a no-op; the library goes on working. */
    atoll_realm_close(r);
    atoll_realm_t *r2 = atoll_test_open(NULL, NULL);
    CHECK(r2 != NULL);
    CHECK(!atoll_realm_begin_write(r)); /* still recognised as closed */
    CHECK_ERR(ATOLL_ERR_CLOSED, "");
    atoll_realm_close(r2);
}

static void test_many_closed_handles_stay_recognisable(void) {
    /* Open and close many realms; every old pointer keeps failing with ATOLL_ERR_CLOSED, even
     * while new handles are made (the allocator may reuse memory). */
    enum { N = 64 };
    atoll_realm_t *old[N];
    for (int i = 0; i < N; i++) {
        old[i] = atoll_test_open(NULL, NULL);
        CHECK(old[i] != NULL);
        atoll_realm_close(old[i]);
    }
    atoll_realm_t *live = atoll_test_open(NULL, NULL);
    CHECK(live != NULL);
    for (int i = 0; i < N; i++) {
        if (old[i] == live) continue; /* the same address reused for the live one */
        bool b;
        CHECK(!atoll_realm_is_in_write(old[i], &b));
        CHECK_ERR(ATOLL_ERR_CLOSED, "");
    }
    bool b = true;
    CHECK(atoll_realm_is_in_write(live, &b));
    CHECK(!b);
    atoll_realm_close(live);
}

/* MARK: - Pointers that never were handles */

static void test_pointers_that_never_were_handles(void) {
    int some_int = 42;
    long long zeros[16] = { 0 };
    unsigned char *junk = malloc(256);
    memset(junk, 0xAB, 256);
    void *fakes[] = { &some_int, zeros, junk };
    bool b;
    uint64_t v;
    size_t n;
    for (size_t i = 0; i < sizeof fakes / sizeof fakes[0]; i++) {
        atoll_realm_t *fake = (atoll_realm_t *)fakes[i];
        atoll_results_t *fake_res = (atoll_results_t *)fakes[i];
        CHECK(!atoll_realm_begin_write(fake));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(!atoll_realm_commit(fake));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(!atoll_realm_cancel_write(fake));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(!atoll_realm_is_in_write(fake, &b));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(atoll_realm_schema(fake) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(!atoll_realm_schema_version(fake, &v));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(!atoll_realm_version(fake, &v));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(atoll_realm_changes(fake, 0, 0) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(atoll_object_create(fake, "Dog", DOG, ATOLL_UPDATE_ERROR) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(!atoll_objects_create_many(fake, "Dog", "[]", ATOLL_UPDATE_ERROR, &n));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(atoll_object_get(fake, "Dog", "1") == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(!atoll_object_delete(fake, "Dog", "1"));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(atoll_results_query(fake, "Dog", NULL, NULL) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(!atoll_results_count(fake_res, &n));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(atoll_results_json(fake_res, 0, 0) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        CHECK(!atoll_results_delete_all(fake_res, &n));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
        /* Destructors given a non-handle must not crash nor free it. */
        atoll_realm_close(fake);
        atoll_results_free(fake_res);
    }
    CHECK(some_int == 42);
    CHECK(zeros[3] == 0);
    CHECK(junk[100] == 0xAB);
    free(junk);
}

static void test_freed_results(void) {
    /* docs/abi.md: handle values are never reused, so freed results are recognised too. */
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    atoll_results_t *res = atoll_results_query(r, "Dog", NULL, NULL);
    CHECK(res != NULL);
    atoll_results_free(res);
    size_t n;
    CHECK(!atoll_results_count(res, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
    CHECK(atoll_results_json(res, 0, 0) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
    atoll_results_free(res); /* twice: nothing happens */
    atoll_realm_close(r);
}

static void test_handles_of_the_other_kind(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    atoll_results_t *res = atoll_results_query(r, "Dog", NULL, NULL);
    if (!CHECK(res != NULL)) return;
    size_t n;
    bool b;
    /* A results handle where a realm is expected, and the reverse. */
    CHECK(!atoll_realm_is_in_write((atoll_realm_t *)res, &b));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
    CHECK(!atoll_results_count((atoll_results_t *)r, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
    atoll_realm_close((atoll_realm_t *)res); /* not a realm: nothing happens */
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 0);
    atoll_results_free((atoll_results_t *)r); /* not results: nothing happens */
    CHECK(atoll_realm_is_in_write(r, &b));
    atoll_results_free(res);
    atoll_realm_close(r);
}


static bool known_failure(void);

/* MARK: - Dates */

static void test_odd_dates_never_crash(void) {
    atoll_realm_t *r = atoll_realm_open(
        "{\"inMemory\": true, \"schema\": [{\"name\": \"T\", \"primaryKey\": \"_id\","
        " \"properties\": {\"_id\": \"int\", \"when\": \"date?\"}}]}");
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    /* ISO 8601 allows any number of fraction digits; more than 3 must be read (to ms) or
     * refused, never trap. Also: out-of-range fields, odd offsets, huge years. */
    static const char *const dates[] = {
        "2024-01-02T03:04:05.6789Z", "2024-01-02T03:04:05.123456789Z", "2024-01-02T03:04:05.Z",
        "2024-02-30T00:00:00Z", "2024-01-02T24:00:00Z", "2024-01-02T03:04:05+99:99",
        "+275760-09-13T00:00:00Z", "-271821-04-20T00:00:00Z", "99999999999-01-01T00:00:00Z",
        "2024-01-02T03:04:05.000000000000000000000000000001Z", "", "T", "2024",
    };
    for (size_t i = 0; i < sizeof dates / sizeof dates[0]; i++) {
        char obj[256], query[256];
        snprintf(obj, sizeof obj, "{\"_id\": %zu, \"when\": {\"$date\": \"%s\"}}", i, dates[i]);
        char *out = atoll_object_create(r, "T", obj, ATOLL_UPDATE_MODIFIED);
        if (out) atoll_free(out);
        else CHECK(known_failure());
        snprintf(query, sizeof query, "when == %s", dates[i]);
        atoll_results_t *res = atoll_results_query(r, "T", query, NULL);
        if (res) atoll_results_free(res);
        else CHECK(known_failure());
    }
    /* RQL's T<seconds>:<nanoseconds> literal at the limits of a 64-bit integer. */
    static const char *const literals[] = {
        "T9223372036854775807:0", "T-9223372036854775808:0", "T1:9999999999999",
        "T99999999999999999999:0",
    };
    for (size_t i = 0; i < sizeof literals / sizeof literals[0]; i++) {
        char query[128];
        snprintf(query, sizeof query, "when > %s", literals[i]);
        atoll_results_t *res = atoll_results_query(r, "T", query, NULL);
        if (res) atoll_results_free(res);
        else CHECK(known_failure());
    }
    /* $date as milliseconds, at and beyond the limits of a 64-bit integer. */
    static const char *const numbers[] = {
        "9223372036854775807", "-9223372036854775808", "1e300", "{\"$numberLong\": \"99999999999999999999\"}",
    };
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++) {
        char obj[256];
        snprintf(obj, sizeof obj, "{\"_id\": %zu, \"when\": {\"$date\": %s}}", 100 + i, numbers[i]);
        char *out = atoll_object_create(r, "T", obj, ATOLL_UPDATE_MODIFIED);
        if (out) {
            atoll_free(out);
            char key[32];
            snprintf(key, sizeof key, "%zu", 100 + i);
            out = atoll_object_get(r, "T", key); /* and it reads back */
            CHECK(out != NULL);
            atoll_free(out);
        } else {
            CHECK(known_failure());
        }
    }
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);
}

/* MARK: - Random input */

static uint32_t rng_state = 0x9E3779B9u;
static uint32_t rnd(void) { /* xorshift32: the same sequence on every run */
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* A mutation of `seed` in buf: bytes flipped, dropped, duplicated or inserted, or a cut. */
static void mutate(const char *seed, char *buf, size_t cap) {
    size_t n = strlen(seed);
    if (n >= cap) n = cap - 1;
    memcpy(buf, seed, n);
    buf[n] = '\0';
    int edits = 1 + (int)(rnd() % 2);
    for (int e = 0; e < edits && n > 0; e++) {
        size_t at = rnd() % n;
        switch (rnd() % 5) {
        case 0: buf[at] = (char)(rnd() & 0xFF); if (buf[at] == '\0') buf[at] = '\x01'; break;
        case 1: memmove(buf + at, buf + at + 1, n - at); n--; break;
        case 2: if (n + 1 < cap) { memmove(buf + at + 1, buf + at, n - at + 1); n++; } break;
        case 3: buf[at] = "{}[]\",:\\'$@ 0-.eE"[rnd() % 17]; break;
        case 4: n = at; buf[n] = '\0'; break;
        }
    }
}

static bool known_failure(void) {
    atoll_error_t e;
    if (!atoll_last_error(&e)) return false;
    return e.code > ATOLL_OK && e.code <= ATOLL_ERR_MIGRATION && e.code != ATOLL_ERR_INTERNAL &&
           e.message != NULL && e.message[0] != '\0';
}

static void test_random_input_never_crashes(void) {
    static const char *const objects[] = {
        "{\"_id\": 1, \"name\": \"Rex\", \"age\": 3, \"owner\": \"Alice\"}",
        "{\"_id\": 2, \"owner\": {\"name\": \"Bob\", \"age\": 40, \"dogs\": [1]}}",
        "[{\"_id\": 3}, {\"_id\": 4, \"name\": \"\\u00e9\\ud83d\\udc15\"}]",
    };
    static const char *const queries[] = {
        "age > $0 AND name BEGINSWITH[c] 'r' SORT(age DESC) LIMIT(2)",
        "owner.name IN {'Alice', 'Bob'} OR NOT (age BETWEEN {1, 5})",
        "ANY dogs.age > 6 AND dogs.@count >= 1",
    };
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Person", "{\"name\": \"Alice\"}", ATOLL_UPDATE_ERROR));
    char buf[256];
    int unexpected = 0, created = 0, queried = 0;
    for (int i = 0; i < 3000; i++) {
        const char *seed = objects[i % 3];
        mutate(seed, buf, sizeof buf);
        const char *cls = (i & 1) ? "Dog" : "Person";
        char *out = atoll_object_create(r, cls, buf, ATOLL_UPDATE_MODIFIED);
        if (out) created++, atoll_free(out);
        else if (!known_failure()) unexpected++;
        if (!atoll_objects_create_many(r, cls, buf, ATOLL_UPDATE_MODIFIED, NULL) && !known_failure())
            unexpected++;
        out = atoll_object_get(r, cls, buf);
        if (out) atoll_free(out);
        else if (!known_failure()) unexpected++;

        mutate(queries[i % 3], buf, sizeof buf);
        atoll_results_t *res = atoll_results_query(r, (i & 1) ? "Dog" : "Person", buf, "[3]");
        if (res) {
            queried++;
            size_t n;
            if (!atoll_results_count(res, &n) && !known_failure()) unexpected++;
            char *page = atoll_results_json(res, 0, 3);
            if (page) atoll_free(page);
            else if (!known_failure()) unexpected++;
            atoll_results_free(res);
        } else if (!known_failure()) {
            unexpected++;
            if (unexpected < 5) {
                atoll_error_t e;
                atoll_last_error(&e);
                printf("    query %s -> %s: %s\n", buf, atoll_status_name(e.code), e.message);
            }
        }
    }
    printf("    3000 mutated objects and queries: %d creates and %d queries succeeded\n", created, queried);
    CHECK(created > 0 && queried > 0); /* the mutations are not all rejected up front */
    CHECK_INT(unexpected, 0); /* every failure had a specific code (not INTERNAL) and a message */
    bool in_write = false;
    CHECK(atoll_realm_is_in_write(r, &in_write));
    CHECK(in_write);
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);
}

static const atoll_test_t tests[] = {
    ATOLL_TEST(test_null_realm),
    ATOLL_TEST(test_null_realm_outputs),
    ATOLL_TEST(test_null_object_arguments),
    ATOLL_TEST(test_null_results),
    ATOLL_TEST(test_malformed_json_everywhere),
    ATOLL_TEST(test_not_utf8),
    ATOLL_TEST(test_unknown_names),
    ATOLL_TEST(test_writes_outside_a_transaction),
    ATOLL_TEST(test_use_after_close),
    ATOLL_TEST(test_many_closed_handles_stay_recognisable),
    ATOLL_TEST(test_pointers_that_never_were_handles),
    ATOLL_TEST(test_freed_results),
    ATOLL_TEST(test_handles_of_the_other_kind),
    ATOLL_TEST(test_odd_dates_never_crash),
    ATOLL_TEST(test_random_input_never_crashes),
};

int main(int argc, char **argv) { return ATOLL_CHECK_MAIN(tests, argc, argv); }

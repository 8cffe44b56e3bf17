/*
 * check.h — the little test harness of Atoll's C tests (tests/c/test_*.c).
 *
 * Each test file defines `static void test_x(void)` functions, lists them in a table and hands
 * the table to atoll_check_main():
 *
 *     static const atoll_test_t tests[] = { ATOLL_TEST(test_open_close), ... };
 *     int main(int argc, char **argv) { return ATOLL_CHECK_MAIN(tests, argc, argv); }
 *
 * CHECK(cond) records a pass or a failure; a failure prints file:line, the condition and the
 * calling thread's atoll_last_error() (code and message), and the program exits non-zero at the
 * end. CHECK_ERR(code, "substring") checks the last error's exact code and that its message
 * contains the substring (ASCII case-insensitive). CHECK_OK() checks that the last call
 * succeeded.
 *
 * Each test runs in a child process (fork) with a timeout, so that a crash or a hang in one test
 * is reported as that test's failure ("CRASHED: Segmentation fault") and the others still run.
 * ATOLL_TEST_NOFORK=1 runs them in-process (for a debugger); ATOLL_TEST_TIMEOUT=<seconds>
 * changes the timeout (default 60). Arguments name the tests to run (default: all).
 *
 * Only the public header (atoll.h) is used, plus jansson to read the JSON the library returns,
 * as a host would.
 */
#ifndef ATOLL_TESTS_CHECK_H
#define ATOLL_TESTS_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "atoll.h"

typedef void (*atoll_test_fn)(void);

typedef struct atoll_test {
    const char *name;
    atoll_test_fn fn;
} atoll_test_t;

#define ATOLL_TEST(fn) { #fn, fn }
#define ATOLL_CHECK_MAIN(tests, argc, argv)                                                        \
    atoll_check_main(__FILE__, (tests), sizeof(tests) / sizeof((tests)[0]), (argc), (argv))

int atoll_check_main(const char *file, const atoll_test_t *tests, size_t count, int argc,
                     char **argv);

/* MARK: - Checks */

/** Records a pass or a failure; returns cond, so a test can stop early: if (!CHECK(x)) return; */
#define CHECK(cond) atoll_check_((cond) ? true : false, #cond, __FILE__, __LINE__)

/** The last error is `code` and its message contains `substring` (case-insensitive; may be ""). */
#define CHECK_ERR(code, substring)                                                                 \
    atoll_check_err_((code), #code, (substring), __FILE__, __LINE__)

/** The last call on this thread succeeded: atoll_last_error() is false, ATOLL_OK, "". */
#define CHECK_OK() atoll_check_ok_(__FILE__, __LINE__)

/** Two C strings are equal (either may be NULL); prints both on failure. */
#define CHECK_STR(got, expected) atoll_check_str_((got), (expected), #got, __FILE__, __LINE__)

/** Two integers are equal; prints both on failure. */
#define CHECK_INT(got, expected)                                                                   \
    atoll_check_int_((long long)(got), (long long)(expected), #got " == " #expected, __FILE__,    \
                     __LINE__)

bool atoll_check_(bool ok, const char *expr, const char *file, int line);
bool atoll_check_err_(int code, const char *code_expr, const char *substring, const char *file,
                      int line);
bool atoll_check_ok_(const char *file, int line);
bool atoll_check_str_(const char *got, const char *expected, const char *expr, const char *file,
                      int line);
bool atoll_check_int_(long long got, long long expected, const char *expr, const char *file,
                      int line);

/** Passed and failed check counts of the running process (thread-safe). */
void atoll_check_counts(unsigned *passed, unsigned *failed);

/* MARK: - Helpers */

/** Case-insensitive (ASCII) substring search; NULL haystack never matches. */
bool atoll_contains_ci(const char *haystack, const char *needle);

/**
 * A fresh path "<tmpdir>/<name>-<n>.realm" in this process's temporary directory, which is
 * created on first use and removed with everything in it at exit. Returns a static buffer
 * rotated over 8 slots.
 */
const char *atoll_tmp_realm_path(const char *name);

/** The Dog/Person schema most tests use, as JSON text:
 *   Dog    { _id: int (primary key), name: string, age: int, owner: Person? }
 *   Person { name: string (primary key), age: int, dogs: Dog[] }
 *   Note   { text: string }            (no primary key)  */
extern const char *const ATOLL_TEST_SCHEMA;

/** Opens a realm on `path` (or in memory when NULL) with ATOLL_TEST_SCHEMA and the extra
 *  configuration members `extra` (e.g. "\"writeTimeoutMs\": 100"; may be NULL). */
atoll_realm_t *atoll_test_open(const char *path, const char *extra);

/** Parses JSON text the library returned, then frees it with atoll_free(); NULL in, NULL out.
 *  A text that does not parse is a failed check. */
json_t *atoll_take_json(char *text, const char *file, int line);
#define TAKE_JSON(text) atoll_take_json((text), __FILE__, __LINE__)

/** atoll_object_create() with the result parsed (NULL on failure, last error kept). */
#define CREATE(realm, cls, json, policy) TAKE_JSON(atoll_object_create((realm), (cls), (json), (policy)))
/** atoll_object_get() with the result parsed (NULL on failure, last error kept). */
#define GET(realm, cls, key) TAKE_JSON(atoll_object_get((realm), (cls), (key)))

/** Parses JSON text of the test itself (must parse). */
json_t *atoll_parse(const char *text);

/** `text` with every ' turned into ", so that JSON in tests reads as documented (a rotating
 *  thread-local buffer of 16 slots of 4 KB: use the result at once). */
const char *atoll_quotes(const char *text);
#define J(text) atoll_quotes(text)

/** Checks that a JSON value equals the expected text (' for "), object member order aside;
 *  prints both when not. */
bool atoll_check_json_(const json_t *got, const char *expected, const char *expr, const char *file, int line);
#define CHECK_JSON(got, expected) atoll_check_json_((got), (expected), #got, __FILE__, __LINE__)

/** The string member `key` of object `obj`, or NULL. */
const char *atoll_jstr(const json_t *obj, const char *key);
/** The integer member `key` of object `obj`, or -999999 when missing or not an integer. */
long long atoll_jint(const json_t *obj, const char *key);

/** Seconds on the monotonic clock. */
double atoll_now(void);
/** Sleeps for ms milliseconds. */
void atoll_sleep_ms(unsigned ms);

#endif /* ATOLL_TESTS_CHECK_H */

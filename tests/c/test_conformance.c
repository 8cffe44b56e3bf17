/* test_conformance.c — the query conformance suite (Tests/conformance/README.md) through the C
 * ABI: every case of Tests/conformance/queries.json runs on one in-memory realm holding the
 * file's data set; each failing case is printed with its name, query, expectation and result.
 *
 * The file is the ATOLL_CONFORMANCE_FILE environment variable when set, else the path CMake
 * compiles in (ATOLL_CONFORMANCE_DEFAULT_FILE). */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

#ifndef ATOLL_CONFORMANCE_DEFAULT_FILE
#error "build with -DATOLL_CONFORMANCE_DEFAULT_FILE=\"<path of Tests/conformance/queries.json>\""
#endif

static const char *suite_file(void) {
    const char *env = getenv("ATOLL_CONFORMANCE_FILE");
    return env && *env ? env : ATOLL_CONFORMANCE_DEFAULT_FILE;
}

/* An in-memory realm with the suite's schema and objects (inserted class by class, in file
 * order), or NULL after printing why. */
static atoll_realm_t *open_data_set(json_t *suite) {
    json_t *config = json_pack("{s:b, s:O}", "inMemory", 1, "schema", json_object_get(suite, "schema"));
    char *text = json_dumps(config, JSON_COMPACT);
    json_decref(config);
    atoll_realm_t *realm = atoll_realm_open(text);
    free(text);
    if (!CHECK(realm != NULL)) {
        printf("    the data set's schema does not load\n");
        return NULL;
    }
    CHECK(atoll_realm_begin_write(realm));
    const char *class_name;
    json_t *objects;
    json_object_foreach(json_object_get(suite, "objects"), class_name, objects) {
        if (!CHECK(atoll_objects_create_many_j(realm, class_name, objects, ATOLL_UPDATE_ERROR, NULL))) {
            printf("    the %s objects of the data set do not load\n", class_name);
            atoll_realm_close(realm);
            return NULL;
        }
    }
    if (!CHECK(atoll_realm_commit(realm))) {
        atoll_realm_close(realm);
        return NULL;
    }
    return realm;
}

/* The primary key property of a class of the suite's schema, or NULL. */
static const char *primary_key(json_t *suite, const char *class_name) {
    size_t i;
    json_t *cls;
    json_array_foreach(json_object_get(suite, "schema"), i, cls) {
        const char *name = json_string_value(json_object_get(cls, "name"));
        if (name && strcmp(name, class_name) == 0) return json_string_value(json_object_get(cls, "primaryKey"));
    }
    return NULL;
}

/* Whether two arrays hold the same values, in order or as multisets. */
static bool same_values(json_t *got, json_t *expected, bool ordered) {
    size_t n = json_array_size(got);
    if (n != json_array_size(expected)) return false;
    if (ordered) return json_equal(got, expected);
    bool *used = calloc(n ? n : 1, sizeof *used);
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        ok = false;
        for (size_t j = 0; j < n; j++) {
            if (!used[j] && json_equal(json_array_get(expected, i), json_array_get(got, j))) {
                used[j] = true;
                ok = true;
                break;
            }
        }
    }
    free(used);
    return ok;
}

static void print_failure(json_t *c, const char *problem, json_t *got) {
    json_t *expect_json = json_object_get(c, "expect");
    char *expect = expect_json ? json_dumps(expect_json, JSON_COMPACT) : NULL;
    char *result = got ? json_dumps(got, JSON_COMPACT) : NULL;
    atoll_error_t e = { 0, NULL };
    bool failed = atoll_last_error(&e);
    printf("    FAIL %s — %s: %s\n        %s", json_string_value(json_object_get(c, "name")),
           json_string_value(json_object_get(c, "class")), json_string_value(json_object_get(c, "query")), problem);
    if (expect) printf("; expected %s", expect);
    if (result) printf("; got %s", result);
    if (failed && !got) printf("; last error %s: %s", atoll_status_name(e.code), e.message);
    printf("\n");
    free(expect);
    free(result);
}

/* Runs one case; returns whether it passes (printing it when it does not). */
static bool run_case(atoll_realm_t *realm, json_t *suite, json_t *c) {
    const char *class_name = json_string_value(json_object_get(c, "class"));
    const char *query = json_string_value(json_object_get(c, "query"));
    const char *error = json_string_value(json_object_get(c, "error"));
    atoll_results_t *results = atoll_results_query_j(realm, class_name, query, json_object_get(c, "args"));
    json_t *got = NULL;
    if (results) got = atoll_results_json_j(results, 0, 0);

    if (error) {
        int wanted = strcmp(error, "querySyntax") == 0 ? ATOLL_ERR_QUERY_SYNTAX : ATOLL_ERR_QUERY_INVALID;
        atoll_error_t e = { 0, NULL };
        bool ok = !results && atoll_last_error(&e) && e.code == wanted;
        if (!ok) {
            char problem[128];
            snprintf(problem, sizeof problem, "expected error %s", atoll_status_name(wanted));
            print_failure(c, problem, got);
        }
        json_decref(got);
        atoll_results_free(results);
        return ok;
    }
    if (!got) {
        print_failure(c, "the query failed", NULL);
        atoll_results_free(results);
        return false;
    }
    const char *key = primary_key(suite, class_name);
    json_t *keys = json_array();
    size_t i;
    json_t *obj;
    json_array_foreach(got, i, obj) {
        json_t *k = key ? json_object_get(obj, key) : NULL;
        json_array_append(keys, k ? k : json_null());
    }
    size_t count = 0;
    bool counted = atoll_results_count(results, &count);
    bool ordered = json_is_true(json_object_get(c, "ordered"));
    bool ok = same_values(keys, json_object_get(c, "expect"), ordered);
    if (!ok) print_failure(c, "wrong objects", keys);
    else if (!counted || count != json_array_size(keys)) {
        print_failure(c, "atoll_results_count() differs from the objects read", keys);
        ok = false;
    }
    json_decref(keys);
    json_decref(got);
    atoll_results_free(results);
    return ok;
}

static void test_conformance(void) {
    json_error_t jerr;
    json_t *suite = json_load_file(suite_file(), 0, &jerr);
    if (!CHECK(suite != NULL)) {
        printf("    cannot read %s: %s (line %d)\n", suite_file(), jerr.text, jerr.line);
        return;
    }
    atoll_realm_t *realm = open_data_set(suite);
    if (realm) {
        json_t *cases = json_object_get(suite, "cases");
        size_t passed = 0, i;
        json_t *c;
        json_array_foreach(cases, i, c) {
            if (run_case(realm, suite, c)) passed++;
        }
        printf("    query conformance: %zu of %zu cases pass\n", passed, json_array_size(cases));
        CHECK(passed == json_array_size(cases));
        atoll_realm_close(realm);
    }
    json_decref(suite);
}

static const atoll_test_t tests[] = { ATOLL_TEST(test_conformance) };

int main(int argc, char **argv) { return ATOLL_CHECK_MAIN(tests, argc, argv); }

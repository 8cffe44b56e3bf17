/* Fuzz target "rql": Realm Query Language text and its arguments through the C ABI
 * (docs/testing.md). An input is
 *
 *     <class name>
 *     <query text, any number of lines>
 *     ---
 *     <the arguments: a JSON array, optional>
 *
 * run against a fixed in-memory realm: the query conformance suite's schema and objects
 * (Tests/conformance/queries.json, named by ATOLL_FUZZ_RQL_DATA or the path compiled in).
 * A query that is accepted is counted, read, frozen and counted again, and its objects
 * deleted in a write transaction that is then cancelled, so the realm stays the same. */
#include "fuzz_common.h"

#include <jansson.h>
#include <stdint.h>

#ifndef ATOLL_FUZZ_RQL_DATA
#define ATOLL_FUZZ_RQL_DATA "Tests/conformance/queries.json"
#endif

static atoll_realm_t *realm;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *path = getenv("ATOLL_FUZZ_RQL_DATA");
    if (path == NULL || *path == '\0') path = ATOLL_FUZZ_RQL_DATA;
    json_error_t error;
    json_t *suite = json_load_file(path, 0, &error);
    if (suite == NULL) {
        fprintf(stderr, "fuzz-rql: cannot read %s: %s (set ATOLL_FUZZ_RQL_DATA)\n", path, error.text);
        exit(1);
    }
    json_t *config = json_object();
    json_object_set_new(config, "inMemory", json_true());
    json_object_set(config, "schema", json_object_get(suite, "schema"));
    char *text = json_dumps(config, JSON_COMPACT);
    json_decref(config);
    realm = atoll_realm_open(text);
    free(text);
    atoll_error_t err;
    if (realm == NULL || !atoll_realm_begin_write(realm)) {
        atoll_last_error(&err);
        fprintf(stderr, "fuzz-rql: the data set does not open: %s\n", err.message);
        exit(1);
    }
    const char *class_name;
    json_t *objects;
    json_object_foreach(json_object_get(suite, "objects"), class_name, objects) {
        if (!atoll_objects_create_many_j(realm, class_name, objects, ATOLL_UPDATE_ERROR, NULL)) {
            atoll_last_error(&err);
            fprintf(stderr, "fuzz-rql: the %s objects do not load: %s\n", class_name, err.message);
            exit(1);
        }
    }
    if (!atoll_realm_commit(realm)) exit(1);
    json_decref(suite);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data, *end = text + size;
    const char *query_end;
    const char *args_start = fuzz_next_part(text, end, &query_end);
    const char *newline = memchr(text, '\n', (size_t)(query_end - text));
    char *class_name = fuzz_strndup(text, (size_t)((newline ? newline : query_end) - text));
    const char *query_start = newline ? newline + 1 : query_end;
    char *query = fuzz_strndup(query_start, (size_t)(query_end - query_start));
    char *args = args_start ? fuzz_strndup(args_start, (size_t)(end - args_start)) : NULL;

    atoll_results_t *results = atoll_results_query(realm, class_name, query, args);
    FUZZ_CHECK("atoll_results_query", results != NULL);
    if (results != NULL) {
        size_t count = 0, frozen_count = 0, deleted = 0;
        bool ok = atoll_results_count(results, &count);
        FUZZ_CHECK("atoll_results_count", ok);
        char *json = atoll_results_json(results, 0, 0);
        FUZZ_CHECK("atoll_results_json", json != NULL);
        atoll_free(json);
        atoll_results_t *frozen = atoll_results_freeze(results);
        FUZZ_CHECK("atoll_results_freeze", frozen != NULL);
        ok = atoll_results_count(frozen, &frozen_count);
        FUZZ_CHECK("atoll_results_count (frozen)", ok);
        if (frozen_count != count) {
            fprintf(stderr, "fuzz-rql: %zu objects match, %zu once frozen\n", count, frozen_count);
            abort();
        }
        atoll_results_free(frozen);
        ok = atoll_realm_begin_write(realm);
        FUZZ_CHECK("atoll_realm_begin_write", ok);
        ok = atoll_results_delete_all(results, &deleted);
        FUZZ_CHECK("atoll_results_delete_all", ok);
        if (deleted != count) {
            fprintf(stderr, "fuzz-rql: %zu objects match but %zu were deleted\n", count, deleted);
            abort();
        }
        ok = atoll_realm_cancel_write(realm);
        FUZZ_CHECK("atoll_realm_cancel_write", ok);
    }
    atoll_results_free(results);
    free(class_name);
    free(query);
    free(args);
    return 0;
}

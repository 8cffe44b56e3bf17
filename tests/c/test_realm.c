/* test_realm.c — versions, the last error, status names, opening, closing, reopening,
 * configuration, schemas and migrations, transactions and the realm version. */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

/* The property `prop` of class `cls` in a schema as atoll_realm_schema() returns it: properties
 * may be an object keyed by name or an array of objects with a "name". NULL when absent. */
static json_t *schema_property(json_t *schema, const char *cls, const char *prop) {
    size_t i;
    json_t *os;
    json_array_foreach(schema, i, os) {
        const char *name = atoll_jstr(os, "name");
        if (name == NULL || strcmp(name, cls) != 0) continue;
        json_t *props = json_object_get(os, "properties");
        if (json_is_object(props)) return json_object_get(props, prop);
        size_t j;
        json_t *p;
        json_array_foreach(props, j, p) {
            const char *pname = atoll_jstr(p, "name");
            if (pname && strcmp(pname, prop) == 0) return p;
        }
    }
    return NULL;
}

static json_t *schema_class(json_t *schema, const char *cls) {
    size_t i;
    json_t *os;
    json_array_foreach(schema, i, os) {
        const char *name = atoll_jstr(os, "name");
        if (name && strcmp(name, cls) == 0) return os;
    }
    return NULL;
}

static void open_file_realm_with(const char *path, const char *schema, const char *extra,
                                 atoll_realm_t **out) {
    char config[4096];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s%s%s}", path, schema,
             extra ? ", " : "", extra ? extra : "");
    *out = atoll_realm_open(config);
}

/* MARK: - Library */

static void test_version_functions(void) {
    CHECK_INT(atoll_libversion_number(), ATOLL_VERSION_NUMBER);
    CHECK_STR(atoll_libversion(), ATOLL_VERSION);
    /* The two spellings agree: "MAJOR.MINOR.PATCH" and MAJOR * 1000000 + MINOR * 1000 + PATCH. */
    int major = 0, minor = 0, patch = 0;
    CHECK(sscanf(atoll_libversion(), "%d.%d.%d", &major, &minor, &patch) == 3);
    CHECK_INT(major * 1000000 + minor * 1000 + patch, atoll_libversion_number());
    /* A static string: the same pointer every time. */
    CHECK(atoll_libversion() == atoll_libversion());
}

static void test_status_names(void) {
    static const char *const names[] = {
        "ATOLL_OK", "ATOLL_ERR_INVALID_ARGUMENT", "ATOLL_ERR_INVALID_JSON", "ATOLL_ERR_SCHEMA",
        "ATOLL_ERR_SCHEMA_MISMATCH", "ATOLL_ERR_NOT_FOUND", "ATOLL_ERR_DUPLICATE_PRIMARY_KEY",
        "ATOLL_ERR_QUERY_SYNTAX", "ATOLL_ERR_QUERY_INVALID", "ATOLL_ERR_NOT_IN_WRITE",
        "ATOLL_ERR_ALREADY_IN_WRITE", "ATOLL_ERR_FILE", "ATOLL_ERR_CLOSED", "ATOLL_ERR_READ_ONLY",
        "ATOLL_ERR_BUSY", "ATOLL_ERR_NO_SUCH_CLASS", "ATOLL_ERR_NO_SUCH_PROPERTY",
        "ATOLL_ERR_TYPE_MISMATCH", "ATOLL_ERR_MISSING_VALUE", "ATOLL_ERR_INTERNAL", "ATOLL_ERR_MIGRATION",
        "ATOLL_ERR_AUTH", "ATOLL_ERR_TIMEOUT", "ATOLL_ERR_NETWORK", "ATOLL_ERR_SUBSCRIPTION_EXISTS",
        "ATOLL_ERR_SUBSCRIPTION", "ATOLL_ERR_SYNC",
    };
    for (int code = 0; code <= ATOLL_ERR_SYNC; code++) CHECK_STR(atoll_status_name(code), names[code]);
    CHECK_STR(atoll_status_name(ATOLL_ERR_NOT_FOUND), "ATOLL_ERR_NOT_FOUND");
    CHECK(atoll_status_name(ATOLL_ERR_SYNC + 1) == NULL);
    CHECK(atoll_status_name(-1) == NULL);
    CHECK(atoll_status_name(1000000) == NULL);
}

static void test_last_error_set_and_cleared(void) {
    atoll_error_t e;
    /* A failure sets it... */
    CHECK(atoll_realm_open("this is not JSON") == NULL);
    CHECK(atoll_last_error(NULL));
    CHECK(atoll_last_error(&e));
    CHECK_INT(e.code, ATOLL_ERR_INVALID_JSON);
    CHECK(e.message != NULL && e.message[0] != '\0');
    /* ...asking does not clear it... */
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
    /* ...a success clears it. */
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    CHECK(r != NULL);
    CHECK(!atoll_last_error(NULL));
    e.code = -1;
    e.message = NULL;
    CHECK(!atoll_last_error(&e));
    CHECK_INT(e.code, ATOLL_OK);
    CHECK(e.message != NULL && e.message[0] == '\0');
    /* A second failure of another kind replaces it, and a success clears it again. */
    CHECK(!atoll_realm_commit(r));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    bool in_write = true;
    CHECK(atoll_realm_is_in_write(r, &in_write));
    CHECK_OK();
    CHECK(!in_write);
    atoll_realm_close(r);
}

static void test_destructors_accept_null(void) {
    atoll_realm_close(NULL);
    atoll_results_free(NULL);
    atoll_free(NULL);
    CHECK(!atoll_last_error(NULL));
    /* The library still works afterwards. */
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    CHECK(r != NULL);
    atoll_realm_close(r);
}

/* The calls that cannot fail leave the last error as it is, so that a host can read an error,
 * name it and free its own things before printing it. */
static void test_infallible_calls_keep_the_last_error(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    atoll_results_t *res = atoll_results_query(r, "Dog", NULL, NULL);
    char *schema = atoll_realm_schema(r);
    CHECK(res != NULL && schema != NULL);

    CHECK(atoll_object_get(r, "Dog", "42") == NULL);
    atoll_error_t before;
    CHECK(atoll_last_error(&before));
    char message[256];
    snprintf(message, sizeof message, "%s", before.message ? before.message : "");

    CHECK(atoll_last_error(NULL));
    CHECK_STR(atoll_status_name(before.code), "ATOLL_ERR_NOT_FOUND");
    CHECK(atoll_libversion() != NULL);
    CHECK_INT(atoll_libversion_number(), ATOLL_VERSION_NUMBER);
    atoll_free(NULL);
    atoll_free(schema);
    atoll_results_free(NULL);
    atoll_results_free(res);
    atoll_realm_close(NULL);
    atoll_realm_close(r);
    atoll_realm_close(r); /* closed already */

    atoll_error_t after;
    CHECK(atoll_last_error(&after));
    CHECK_INT(after.code, ATOLL_ERR_NOT_FOUND);
    CHECK_STR(after.message, message);

    /* A call that can fail clears it when it succeeds. */
    r = atoll_test_open(NULL, NULL);
    CHECK(r != NULL);
    CHECK_OK();
    atoll_realm_close(r);
}

/* MARK: - Open, close, reopen */

static void test_open_close_reopen_file(void) {
    const char *path = atoll_tmp_realm_path("reopen");
    atoll_realm_t *r = atoll_test_open(path, NULL);
    if (!CHECK(r != NULL)) return;
    CHECK_OK();
    uint64_t version = 99;
    CHECK(atoll_realm_version(r, &version));
    CHECK_INT(version, 0);
    CHECK(atoll_realm_begin_write(r));
    json_t *dog = CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\", \"age\": 3}", ATOLL_UPDATE_ERROR);
    CHECK(dog != NULL);
    json_decref(dog);
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);
    atoll_realm_close(r); /* a realm closed already: no-op */

    /* Reopen with the same schema. */
    r = atoll_test_open(path, NULL);
    if (!CHECK(r != NULL)) return;
    dog = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(dog, "name"), "Rex");
    CHECK_INT(atoll_jint(dog, "age"), 3);
    json_decref(dog);
    CHECK(atoll_realm_version(r, &version));
    CHECK_INT(version, 1);
    atoll_realm_close(r);

    /* Reopen without a schema: the stored one is used. */
    char config[1024];
    snprintf(config, sizeof config, "{\"path\": \"%s\"}", path);
    r = atoll_realm_open(config);
    if (!CHECK(r != NULL)) return;
    json_t *schema = TAKE_JSON(atoll_realm_schema(r));
    CHECK(json_is_array(schema));
    CHECK(schema_class(schema, "Dog") != NULL);
    CHECK(schema_class(schema, "Person") != NULL);
    CHECK(schema_property(schema, "Dog", "owner") != NULL);
    json_decref(schema);
    dog = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(dog, "name"), "Rex");
    json_decref(dog);
    atoll_realm_close(r);
}

static void test_open_new_file_without_schema(void) {
    char config[1024];
    snprintf(config, sizeof config, "{\"path\": \"%s\"}", atoll_tmp_realm_path("empty"));
    atoll_realm_t *r = atoll_realm_open(config);
    if (!CHECK(r != NULL)) return;
    json_t *schema = TAKE_JSON(atoll_realm_schema(r));
    CHECK(json_is_array(schema) && json_array_size(schema) == 0);
    json_decref(schema);
    CHECK(atoll_object_get(r, "Dog", "1") == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Dog");
    atoll_realm_close(r);
}

static void test_in_memory_private_and_shared(void) {
    /* Without a path: private to each handle. */
    atoll_realm_t *a = atoll_test_open(NULL, NULL);
    atoll_realm_t *b = atoll_test_open(NULL, NULL);
    if (!CHECK(a != NULL && b != NULL)) return;
    CHECK(atoll_realm_begin_write(a));
    json_decref(CREATE(a, "Dog", "{\"_id\": 1}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(a));
    CHECK(atoll_object_get(b, "Dog", "1") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    atoll_realm_close(a);
    atoll_realm_close(b);

    /* With a path: shared by this process's handles until the last one closes. */
    const char *path = atoll_tmp_realm_path("shared-mem");
    a = atoll_test_open(path, "\"inMemory\": true");
    b = atoll_test_open(path, "\"inMemory\": true");
    if (!CHECK(a != NULL && b != NULL)) return;
    CHECK(atoll_realm_begin_write(a));
    json_decref(CREATE(a, "Dog", "{\"_id\": 7, \"name\": \"Shared\"}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(a));
    json_t *dog = GET(b, "Dog", "7");
    CHECK_STR(atoll_jstr(dog, "name"), "Shared");
    json_decref(dog);
    atoll_realm_close(a);
    dog = GET(b, "Dog", "7"); /* b keeps it alive */
    CHECK(dog != NULL);
    json_decref(dog);
    atoll_realm_close(b);
    /* All closed: gone. */
    a = atoll_test_open(path, "\"inMemory\": true");
    if (!CHECK(a != NULL)) return;
    CHECK(atoll_object_get(a, "Dog", "7") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    atoll_realm_close(a);
    /* And nothing was written to disk at that path. */
    FILE *f = fopen(path, "rb");
    CHECK(f == NULL);
    if (f) fclose(f);
}

static void test_schema_json(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    json_t *schema = TAKE_JSON(atoll_realm_schema(r));
    CHECK(json_is_array(schema));
    CHECK_INT(json_array_size(schema), 3);
    json_t *dog = schema_class(schema, "Dog");
    CHECK(dog != NULL);
    CHECK_STR(atoll_jstr(dog, "primaryKey"), "_id");
    CHECK(schema_property(schema, "Dog", "_id") != NULL);
    CHECK(schema_property(schema, "Dog", "name") != NULL);
    CHECK(schema_property(schema, "Dog", "age") != NULL);
    CHECK(schema_property(schema, "Dog", "owner") != NULL);
    CHECK(schema_property(schema, "Person", "dogs") != NULL);
    CHECK(schema_property(schema, "Dog", "color") == NULL);
    json_t *note = schema_class(schema, "Note");
    CHECK(note != NULL && atoll_jstr(note, "primaryKey") == NULL);
    json_decref(schema);
    atoll_realm_close(r);
}

/* MARK: - Configuration errors */

static void test_open_bad_config(void) {
    CHECK(atoll_realm_open(NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "config_json");
    CHECK(atoll_realm_open("") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(atoll_realm_open("{\"path\": ") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(atoll_realm_open("[1, 2]") == NULL); /* JSON, but not an object */
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "object");
    CHECK(atoll_realm_open("{\"path\": \"\xff\xfe.realm\"}") == NULL); /* not UTF-8 */
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(atoll_realm_open("{}") == NULL); /* neither path nor inMemory */
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "path");
    CHECK(atoll_realm_open("{\"path\": 5}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "path");
    CHECK(atoll_realm_open("{\"inMemory\": \"yes\"}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "inMemory");
    CHECK(atoll_realm_open("{\"inMemory\": true, \"schemaVersion\": -1}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "schemaVersion");
    CHECK(atoll_realm_open("{\"inMemory\": true, \"writeTimeoutMs\": \"soon\"}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "writeTimeoutMs");
    CHECK(atoll_realm_open("{\"inMemory\": true, \"readOnly\": 1}") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "readOnly");
}

static void test_open_bad_schema(void) {
    CHECK(atoll_realm_open("{\"inMemory\": true, \"schema\": [{\"name\": \"A\", \"properties\": "
                           "{\"x\": \"nosuchtype\"}}]}") == NULL);
    CHECK_ERR(ATOLL_ERR_SCHEMA, "nosuchtype");
    CHECK(atoll_realm_open("{\"inMemory\": true, \"schema\": [{\"name\": \"A\", \"properties\": "
                           "{\"friend\": \"Ghost?\"}}]}") == NULL);
    CHECK_ERR(ATOLL_ERR_SCHEMA, "Ghost");
    CHECK(atoll_realm_open("{\"inMemory\": true, \"schema\": [{\"name\": \"A\", \"primaryKey\": "
                           "\"nope\", \"properties\": {\"x\": \"int\"}}]}") == NULL);
    CHECK_ERR(ATOLL_ERR_SCHEMA, "nope");
    CHECK(atoll_realm_open("{\"inMemory\": true, \"schema\": [{\"name\": \"A\", \"properties\": "
                           "{\"x\": \"int\"}}, {\"name\": \"A\", \"properties\": {}}]}") == NULL);
    CHECK_ERR(ATOLL_ERR_SCHEMA, "A");
}

static void test_open_file_errors(void) {
    CHECK(atoll_realm_open("{\"path\": \"/nonexistent-atoll-dir/sub/x.realm\"}") == NULL);
    CHECK_ERR(ATOLL_ERR_FILE, "/nonexistent-atoll-dir/sub/x.realm");
    char config[1024];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"readOnly\": true}",
             atoll_tmp_realm_path("missing"));
    CHECK(atoll_realm_open(config) == NULL); /* read-only: the file must exist */
    CHECK_ERR(ATOLL_ERR_FILE, "missing-");
}

static void test_read_only(void) {
    const char *path = atoll_tmp_realm_path("ro");
    atoll_realm_t *w = atoll_test_open(path, NULL);
    if (!CHECK(w != NULL)) return;
    CHECK(atoll_realm_begin_write(w));
    json_decref(CREATE(w, "Dog", "{\"_id\": 1, \"name\": \"Rex\"}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(w));
    atoll_realm_close(w);

    char config[1024];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"readOnly\": true}", path);
    atoll_realm_t *r = atoll_realm_open(config);
    if (!CHECK(r != NULL)) return;
    CHECK(!atoll_realm_begin_write(r));
    CHECK_ERR(ATOLL_ERR_READ_ONLY, "read");
    json_t *dog = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(dog, "name"), "Rex");
    json_decref(dog);
    atoll_realm_close(r);
}

/* MARK: - Schema versions and migrations */

static void test_schema_version(void) {
    const char *path = atoll_tmp_realm_path("schemaversion");
    atoll_realm_t *r = atoll_test_open(path, NULL);
    if (!CHECK(r != NULL)) return;
    uint64_t v = 99;
    CHECK(atoll_realm_schema_version(r, &v));
    CHECK_INT(v, 0);
    atoll_realm_close(r);

    r = atoll_test_open(path, "\"schemaVersion\": 3");
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_schema_version(r, &v));
    CHECK_INT(v, 3);
    atoll_realm_close(r);

    /* A lower version than the file's. */
    r = atoll_test_open(path, "\"schemaVersion\": 2");
    CHECK(r == NULL);
    CHECK_ERR(ATOLL_ERR_SCHEMA_MISMATCH, "version");
    atoll_realm_close(r);
}

static void test_additive_migration(void) {
    const char *path = atoll_tmp_realm_path("additive");
    atoll_realm_t *r = atoll_test_open(path, NULL);
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    json_decref(CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\"}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);

    const char *more =
        "["
        "{\"name\": \"Dog\", \"primaryKey\": \"_id\", \"properties\": {"
        "  \"_id\": \"int\", \"name\": \"string\", \"age\": \"int\", \"owner\": \"Person?\","
        "  \"color\": \"string?\"}},"
        "{\"name\": \"Person\", \"primaryKey\": \"name\", \"properties\": {"
        "  \"name\": \"string\", \"age\": \"int\", \"dogs\": \"Dog[]\"}},"
        "{\"name\": \"Note\", \"properties\": {\"text\": \"string\"}},"
        "{\"name\": \"Cat\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"int\"}}"
        "]";
    open_file_realm_with(path, more, NULL, &r);
    if (!CHECK(r != NULL)) return;
    json_t *dog = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(dog, "name"), "Rex");
    CHECK(dog && json_is_null(json_object_get(dog, "color")));
    json_decref(dog);
    json_t *schema = TAKE_JSON(atoll_realm_schema(r));
    CHECK(schema_class(schema, "Cat") != NULL);
    CHECK(schema_property(schema, "Dog", "color") != NULL);
    json_decref(schema);
    CHECK(atoll_realm_begin_write(r));
    dog = CREATE(r, "Cat", "{\"_id\": 1}", ATOLL_UPDATE_ERROR);
    CHECK(dog != NULL);
    json_decref(dog);
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);
}

static void test_schema_mismatch(void) {
    const char *path = atoll_tmp_realm_path("mismatch");
    atoll_realm_t *r = atoll_test_open(path, NULL);
    if (!CHECK(r != NULL)) return;
    atoll_realm_close(r);

    /* A property whose type changed. */
    const char *changed =
        "[{\"name\": \"Dog\", \"primaryKey\": \"_id\", \"properties\": {"
        "  \"_id\": \"int\", \"name\": \"string\", \"age\": \"string\", \"owner\": \"Person?\"}},"
        "{\"name\": \"Person\", \"primaryKey\": \"name\", \"properties\": {"
        "  \"name\": \"string\", \"age\": \"int\", \"dogs\": \"Dog[]\"}},"
        "{\"name\": \"Note\", \"properties\": {\"text\": \"string\"}}]";
    open_file_realm_with(path, changed, NULL, &r);
    CHECK(r == NULL);
    CHECK_ERR(ATOLL_ERR_SCHEMA_MISMATCH, "age");
    atoll_realm_close(r);

    /* A property that was removed. */
    const char *removed =
        "[{\"name\": \"Dog\", \"primaryKey\": \"_id\", \"properties\": {"
        "  \"_id\": \"int\", \"name\": \"string\", \"age\": \"int\", \"owner\": \"Person?\"}},"
        "{\"name\": \"Person\", \"primaryKey\": \"name\", \"properties\": {"
        "  \"name\": \"string\", \"age\": \"int\"}},"
        "{\"name\": \"Note\", \"properties\": {\"text\": \"string\"}}]";
    open_file_realm_with(path, removed, NULL, &r);
    CHECK(r == NULL);
    CHECK_ERR(ATOLL_ERR_SCHEMA_MISMATCH, "dogs");
    atoll_realm_close(r);

    /* The file is unharmed: the original schema still opens. */
    r = atoll_test_open(path, NULL);
    CHECK(r != NULL);
    atoll_realm_close(r);
}

/* MARK: - Transactions and versions */

static void test_transactions(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    bool in_write = true;
    CHECK(atoll_realm_is_in_write(r, &in_write));
    CHECK(!in_write);
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_realm_is_in_write(r, &in_write));
    CHECK(in_write);
    CHECK(!atoll_realm_begin_write(r));
    CHECK_ERR(ATOLL_ERR_ALREADY_IN_WRITE, "write");
    CHECK(atoll_realm_is_in_write(r, &in_write));
    CHECK(in_write); /* the failed begin left the transaction alone */
    json_t *dog = CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\"}", ATOLL_UPDATE_ERROR);
    CHECK(dog != NULL);
    json_decref(dog);
    /* The handle reads its own uncommitted writes. */
    dog = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(dog, "name"), "Rex");
    json_decref(dog);
    CHECK(atoll_realm_commit(r));
    CHECK(atoll_realm_is_in_write(r, &in_write));
    CHECK(!in_write);
    CHECK(!atoll_realm_commit(r));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    CHECK(!atoll_realm_cancel_write(r));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");

    /* Cancel keeps nothing. */
    CHECK(atoll_realm_begin_write(r));
    json_decref(CREATE(r, "Dog", "{\"_id\": 2, \"name\": \"Ghost\"}", ATOLL_UPDATE_ERROR));
    json_decref(CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Changed\"}", ATOLL_UPDATE_MODIFIED));
    CHECK(atoll_realm_cancel_write(r));
    CHECK(atoll_realm_is_in_write(r, &in_write));
    CHECK(!in_write);
    CHECK(atoll_object_get(r, "Dog", "2") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    dog = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(dog, "name"), "Rex");
    json_decref(dog);
    atoll_realm_close(r);
}

static void test_version_counts_commits_that_change_something(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    uint64_t v = 99;
    CHECK(atoll_realm_version(r, &v));
    CHECK_INT(v, 0);
    CHECK(atoll_realm_begin_write(r));
    json_decref(CREATE(r, "Dog", "{\"_id\": 1}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));
    CHECK(atoll_realm_version(r, &v));
    CHECK_INT(v, 1);
    /* A commit that changed nothing adds no entry. */
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_realm_commit(r));
    CHECK(atoll_realm_version(r, &v));
    CHECK_INT(v, 1);
    /* Neither does a cancelled one. */
    CHECK(atoll_realm_begin_write(r));
    json_decref(CREATE(r, "Dog", "{\"_id\": 2}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_cancel_write(r));
    CHECK(atoll_realm_version(r, &v));
    CHECK_INT(v, 1);
    CHECK(atoll_realm_begin_write(r));
    json_decref(CREATE(r, "Dog", "{\"_id\": 3}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));
    CHECK(atoll_realm_version(r, &v));
    CHECK_INT(v, 2);
    atoll_realm_close(r);
}

static void test_transaction_open_at_close_is_not_kept(void) {
    const char *path = atoll_tmp_realm_path("leftopen");
    atoll_realm_t *r = atoll_test_open(path, NULL);
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    json_decref(CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Lost\"}", ATOLL_UPDATE_ERROR));
    atoll_realm_close(r); /* no commit */

    r = atoll_test_open(path, "\"writeTimeoutMs\": 2000");
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_object_get(r, "Dog", "1") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    uint64_t v = 99;
    CHECK(atoll_realm_version(r, &v));
    CHECK_INT(v, 0);
    /* And the write lock was released with it. */
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_realm_cancel_write(r));
    atoll_realm_close(r);
}

static void test_write_timeout_gives_busy(void) {
    const char *path = atoll_tmp_realm_path("busy");
    atoll_realm_t *a = atoll_test_open(path, "\"writeTimeoutMs\": 200");
    atoll_realm_t *b = atoll_test_open(path, "\"writeTimeoutMs\": 200");
    if (!CHECK(a != NULL && b != NULL)) return;
    CHECK(atoll_realm_begin_write(a));
    double t0 = atoll_now();
    CHECK(!atoll_realm_begin_write(b));
    double waited = atoll_now() - t0;
    CHECK_ERR(ATOLL_ERR_BUSY, "lock");
    CHECK(waited >= 0.15);
    CHECK(waited < 5.0);
    bool in_write = true;
    CHECK(atoll_realm_is_in_write(b, &in_write));
    CHECK(!in_write);
    CHECK(atoll_realm_commit(a));
    CHECK(atoll_realm_begin_write(b));
    CHECK(atoll_realm_commit(b));
    atoll_realm_close(a);
    atoll_realm_close(b);
}

static const atoll_test_t tests[] = {
    ATOLL_TEST(test_version_functions),
    ATOLL_TEST(test_status_names),
    ATOLL_TEST(test_last_error_set_and_cleared),
    ATOLL_TEST(test_destructors_accept_null),
    ATOLL_TEST(test_infallible_calls_keep_the_last_error),
    ATOLL_TEST(test_open_close_reopen_file),
    ATOLL_TEST(test_open_new_file_without_schema),
    ATOLL_TEST(test_in_memory_private_and_shared),
    ATOLL_TEST(test_schema_json),
    ATOLL_TEST(test_open_bad_config),
    ATOLL_TEST(test_open_bad_schema),
    ATOLL_TEST(test_open_file_errors),
    ATOLL_TEST(test_read_only),
    ATOLL_TEST(test_schema_version),
    ATOLL_TEST(test_additive_migration),
    ATOLL_TEST(test_schema_mismatch),
    ATOLL_TEST(test_transactions),
    ATOLL_TEST(test_version_counts_commits_that_change_something),
    ATOLL_TEST(test_transaction_open_at_close_is_not_kept),
    ATOLL_TEST(test_write_timeout_gives_busy),
};

int main(int argc, char **argv) { return ATOLL_CHECK_MAIN(tests, argc, argv); }

/* test_migration.c — migrations through atoll_realm_open_with() and its migration callback:
 * renames and retypes with the data kept, a callback that fails (ATOLL_ERR_MIGRATION with its
 * last error, the file unchanged byte for byte), the migration's realm inside the callback,
 * handles kept past the callback, the first version's smaller options struct,
 * "deleteRealmIfMigrationNeeded", downgrades, and NULL or garbage arguments. */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* v0: Person {_id, name, age: string?, nicknames: string[]}, Dog {_id, owner, friends}, Old. */
static const char *const V0 =
    "[{\"name\": \"Person\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"int\", "
    "\"name\": \"string\", \"age\": \"string?\", \"nicknames\": \"string[]\"}},"
    "{\"name\": \"Dog\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"int\", "
    "\"owner\": \"Person?\", \"friends\": \"Person[]\"}},"
    "{\"name\": \"Old\", \"properties\": {\"text\": \"string\"}}]";

/* v1: name -> fullName (renamed), age string? -> int (retyped), Old left out, Toy added. */
static const char *const V1 =
    "[{\"name\": \"Person\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"int\", "
    "\"fullName\": \"string\", \"age\": \"int\", \"nicknames\": \"string[]\"}},"
    "{\"name\": \"Dog\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"int\", "
    "\"owner\": \"Person?\", \"friends\": \"Person[]\"}},"
    "{\"name\": \"Toy\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"string\"}}]";

/* A configuration for path with a schema and a version (extra: more members, or NULL). */
static const char *config_of(const char *path, const char *schema, int version, const char *extra) {
    static char config[8192];
    snprintf(config, sizeof config, "{\"path\": \"%s\", \"schema\": %s, \"schemaVersion\": %d%s%s}",
             path, schema, version, extra ? ", " : "", extra ? extra : "");
    return config;
}

/* A closed realm at a new path with Ann (31), Bob (no age), a Dog and an Old note. */
static const char *seed(const char *name) {
    const char *path = atoll_tmp_realm_path(name);
    atoll_realm_t *realm = atoll_realm_open(config_of(path, V0, 0, NULL));
    if (!CHECK(realm != NULL)) return path;
    CHECK(atoll_realm_begin_write(realm));
    atoll_free(atoll_object_create(realm, "Person",
                                   "{\"_id\": 1, \"name\": \"Ann\", \"age\": \"31\", \"nicknames\": [\"A\"]}",
                                   ATOLL_UPDATE_ERROR));
    atoll_free(atoll_object_create(realm, "Person", "{\"_id\": 2, \"name\": \"Bob\", \"age\": null}",
                                   ATOLL_UPDATE_ERROR));
    atoll_free(atoll_object_create(realm, "Dog", "{\"_id\": 1, \"owner\": 1, \"friends\": [2, 1]}",
                                   ATOLL_UPDATE_ERROR));
    atoll_free(atoll_object_create(realm, "Old", "{\"text\": \"bye\"}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(realm));
    atoll_realm_close(realm);
    return path;
}

static char *read_file(const char *path, long *size) {
    struct stat st;
    *size = stat(path, &st) == 0 ? (long)st.st_size : -1;
    if (*size < 0) return NULL;
    char *data = malloc((size_t)*size + 1);
    FILE *f = fopen(path, "rb");
    if (f == NULL || fread(data, 1, (size_t)*size, f) != (size_t)*size) *size = -1;
    if (f) fclose(f);
    return data;
}

static bool same_file(const char *path, const char *before, long before_size) {
    long size = 0;
    char *now = read_file(path, &size);
    bool same = now != NULL && size == before_size && memcmp(now, before, (size_t)size) == 0;
    free(now);
    return same;
}

static size_t count_of(atoll_realm_t *realm, const char *cls, const char *query) {
    atoll_results_t *r = atoll_results_query(realm, cls, query, NULL);
    size_t n = (size_t)-1;
    if (!atoll_results_count(r, &n)) n = (size_t)-1;
    atoll_results_free(r);
    return n;
}

/* MARK: - The callback */

/* What a test asks its callback to do, and what the callback saw and kept. */
typedef struct probe {
    bool answer;               /* what the callback returns */
    bool migrate;              /* rename name -> fullName and retype age */
    bool use_realm;            /* create, query, delete on the migration's realm */
    bool fail_with_error;      /* end with a failed atoll_ call (the open's message) */
    int calls;
    pthread_t thread;
    uint64_t old_version, new_version;
    json_t *old_schema, *new_schema, *old_objects;
    atoll_migration_t *migration;  /* kept past the callback, to call afterwards */
    atoll_realm_t *realm;
    atoll_results_t *results;
} probe_t;

static void probe_free(probe_t *p) {
    json_decref(p->old_schema);
    json_decref(p->new_schema);
    json_decref(p->old_objects);
    atoll_results_free(p->results);
}

/* Renames name -> fullName and sets each Person's age from the old string ("" or null: -1). */
static void migrate_people(atoll_migration_t *m, probe_t *p) {
    CHECK(atoll_migration_rename_property(m, "Person", "name", "fullName"));
    CHECK_OK();
    json_t *old = TAKE_JSON(atoll_migration_old_objects(m, "Person"));
    if (!CHECK(json_is_array(old))) return;
    size_t i;
    json_t *entry;
    json_array_foreach(old, i, entry) {
        const char *age = json_string_value(json_object_get(json_object_get(entry, "object"), "age"));
        char values[64];
        snprintf(values, sizeof values, "{\"age\": %d}", age ? atoi(age) : -1);
        CHECK(atoll_migration_set(m, "Person", (int64_t)atoll_jint(entry, "key"), values));
    }
    p->old_objects = old;
}

static bool on_migration(atoll_migration_t *m, void *userdata) {
    probe_t *p = userdata;
    p->calls++;
    p->thread = pthread_self();
    p->migration = m;
    CHECK(atoll_migration_versions(m, &p->old_version, &p->new_version));
    CHECK(atoll_migration_versions(m, NULL, NULL)); /* either may be NULL */
    p->old_schema = TAKE_JSON(atoll_migration_old_schema(m));
    p->new_schema = TAKE_JSON(atoll_migration_new_schema(m));
    p->realm = atoll_migration_realm(m);
    CHECK(p->realm != NULL);
    CHECK(atoll_migration_realm(m) == p->realm); /* the same handle each time */
    if (p->migrate) migrate_people(m, p);
    if (p->use_realm) p->results = atoll_results_query(p->realm, "Person", NULL, NULL);
    if (p->fail_with_error) {
        CHECK(atoll_migration_old_objects(m, "Nope") == NULL);
        CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "no class named 'Nope'");
    }
    return p->answer;
}

static atoll_realm_t *open_with_migration(const char *config, atoll_migration_fn fn, void *userdata) {
    atoll_open_options_t options;
    memset(&options, 0, sizeof options);
    options.size = sizeof options;
    options.migration = fn;
    options.migration_userdata = userdata;
    return atoll_realm_open_with(config, &options);
}

static atoll_realm_t *open_migrating(const char *config, probe_t *probe) {
    return open_with_migration(config, on_migration, probe);
}

/* Person `key` of the new schema has this fullName and age. */
static void check_person(atoll_realm_t *realm, const char *key, const char *full_name, long long age) {
    json_t *person = GET(realm, "Person", key);
    CHECK_STR(atoll_jstr(person, "fullName"), full_name);
    CHECK_INT(atoll_jint(person, "age"), age);
    json_decref(person);
}

/* MARK: - Migrating */

static void test_rename_and_retype_keep_the_data(void) {
    const char *path = seed("rename");
    probe_t p = { .answer = true, .migrate = true };
    atoll_realm_t *realm = open_migrating(config_of(path, V1, 1, NULL), &p);
    if (!CHECK(realm != NULL)) return;
    CHECK_OK();
    CHECK_INT(p.calls, 1);
    CHECK(pthread_equal(p.thread, pthread_self()));
    CHECK_INT(p.old_version, 0);
    CHECK_INT(p.new_version, 1);
    /* The schemas before and after, in the object form. */
    json_t *old_person = json_array_get(p.old_schema, 0);
    json_t *new_person = json_array_get(p.new_schema, 0);
    CHECK_STR(atoll_jstr(old_person, "name"), "Person");
    CHECK(json_object_get(json_object_get(old_person, "properties"), "name") != NULL);
    CHECK(json_object_get(json_object_get(new_person, "properties"), "fullName") != NULL);
    CHECK(json_object_get(json_object_get(new_person, "properties"), "name") == NULL);
    CHECK_INT(json_array_size(p.old_schema), 3);
    /* The old objects: the old schema's properties, and the keys of the new objects. */
    CHECK_INT(json_array_size(p.old_objects), 2);
    json_t *ann = json_array_get(p.old_objects, 0);
    CHECK_INT(atoll_jint(ann, "key"), 1);
    CHECK_STR(atoll_jstr(json_object_get(ann, "object"), "name"), "Ann");
    CHECK_STR(atoll_jstr(json_object_get(ann, "object"), "age"), "31");

    uint64_t version = 0;
    CHECK(atoll_realm_schema_version(realm, &version));
    CHECK_INT(version, 1);
    check_person(realm, "1", "Ann", 31);
    check_person(realm, "2", "Bob", -1);
    json_t *got = GET(realm, "Person", "1");
    CHECK_STR(json_string_value(json_array_get(json_object_get(got, "nicknames"), 0)), "A");
    json_decref(got);
    /* Links still point at the same objects. */
    got = GET(realm, "Dog", "1");
    CHECK_INT(atoll_jint(got, "owner"), 1);
    CHECK_INT(json_integer_value(json_array_get(json_object_get(got, "friends"), 0)), 2);
    CHECK_INT(json_integer_value(json_array_get(json_object_get(got, "friends"), 1)), 1);
    json_decref(got);
    CHECK_INT(count_of(realm, "Dog", "owner.fullName == 'Ann' AND ANY friends.age == -1"), 1);
    /* The class left out stays with its objects; the new one is usable. */
    CHECK_INT(count_of(realm, "Old", NULL), 1);
    CHECK(atoll_realm_begin_write(realm));
    CHECK(atoll_object_create(realm, "Toy", "{\"_id\": \"ball\"}", ATOLL_UPDATE_ERROR) != NULL);
    CHECK(atoll_realm_commit(realm));
    atoll_realm_close(realm);
    probe_free(&p);

    /* Reopened at version 1: no second migration. */
    probe_t again = { .answer = true };
    realm = open_migrating(config_of(path, V1, 1, NULL), &again);
    CHECK(realm != NULL);
    CHECK_INT(again.calls, 0);
    atoll_realm_close(realm);
}

static bool use_the_realm(atoll_migration_t *m, void *userdata) {
    probe_t *p = userdata;
    atoll_realm_t *r = atoll_migration_realm(m);
    if (!CHECK(r != NULL)) return false;
    p->calls++;
    bool in_write = false;
    CHECK(atoll_realm_is_in_write(r, &in_write));
    CHECK(in_write);
    /* Create, read, query and delete with the usual functions, on the new schema. */
    json_t *toy = CREATE(r, "Toy", "{\"_id\": \"made in the migration\"}", ATOLL_UPDATE_ERROR);
    CHECK_STR(atoll_jstr(toy, "_id"), "made in the migration");
    json_decref(toy);
    CHECK(atoll_migration_set(m, "Person", 1, "{\"age\": 31}"));
    CHECK_INT(count_of(r, "Person", "age >= 18"), 1);
    json_t *ann = GET(r, "Person", "1");
    CHECK_INT(atoll_jint(ann, "age"), 31);
    json_decref(ann);
    CHECK(atoll_object_delete(r, "Person", "2"));
    CHECK(atoll_migration_delete_data(m, "Old"));
    char *schema = atoll_realm_schema(r);
    CHECK(schema != NULL && strstr(schema, "\"Toy\"") != NULL && strstr(schema, "\"Old\"") == NULL);
    atoll_free(schema);
    /* The transaction is the migration's. */
    CHECK(!atoll_realm_begin_write(r));
    CHECK_ERR(ATOLL_ERR_ALREADY_IN_WRITE, "already");
    CHECK(!atoll_realm_commit(r));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "migration commits its own transaction");
    CHECK(!atoll_realm_cancel_write(r));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "fail its callback");
    /* Closing it does nothing: it stays usable. */
    atoll_realm_close(r);
    CHECK(atoll_realm_is_in_write(r, &in_write));
    CHECK_OK();
    CHECK_INT(count_of(r, "Toy", NULL), 1);
    return true;
}

static void test_create_query_delete_and_close_inside(void) {
    const char *path = seed("use-realm");
    probe_t p = { 0 };
    atoll_realm_t *realm = open_with_migration(config_of(path, V1, 1, NULL), use_the_realm, &p);
    if (!CHECK(realm != NULL)) return;
    CHECK_INT(p.calls, 1);
    json_t *toy = GET(realm, "Toy", "\"made in the migration\"");
    CHECK(toy != NULL);
    json_decref(toy);
    CHECK(atoll_object_get(realm, "Person", "2") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    json_t *dog = GET(realm, "Dog", "1");
    CHECK_INT(json_array_size(json_object_get(dog, "friends")), 1); /* the list dropped Bob */
    json_decref(dog);
    char *schema = atoll_realm_schema(realm);
    CHECK(schema != NULL && strstr(schema, "\"Old\"") == NULL);
    atoll_free(schema);
    atoll_realm_close(realm);
}

/* MARK: - Failing */

static void test_callback_false_fails_with_its_error_and_keeps_the_file(void) {
    const char *path = seed("false");
    long size = 0;
    char *before = read_file(path, &size);
    if (!CHECK(before != NULL && size > 0)) return;

    /* Real work first (all of it rolled back), then a failed call, then false. */
    probe_t p = { .answer = false, .migrate = true, .fail_with_error = true };
    CHECK(open_migrating(config_of(path, V1, 1, NULL), &p) == NULL);
    CHECK_ERR(ATOLL_ERR_MIGRATION, "no class named 'Nope'");
    CHECK_INT(p.calls, 1);
    CHECK(same_file(path, before, size));
    probe_free(&p);

    /* False without an error of its own. */
    probe_t q = { .answer = false };
    CHECK(open_migrating(config_of(path, V1, 1, NULL), &q) == NULL);
    CHECK_ERR(ATOLL_ERR_MIGRATION, "the migration callback returned false");
    CHECK(same_file(path, before, size));
    probe_free(&q);
    free(before);

    /* Reopened with the old schema: the old data, at version 0. */
    atoll_realm_t *realm = atoll_realm_open(config_of(path, V0, 0, NULL));
    if (!CHECK(realm != NULL)) return;
    uint64_t version = 99;
    CHECK(atoll_realm_schema_version(realm, &version));
    CHECK_INT(version, 0);
    json_t *ann = GET(realm, "Person", "1");
    CHECK_STR(atoll_jstr(ann, "name"), "Ann");
    CHECK_STR(atoll_jstr(ann, "age"), "31");
    json_decref(ann);
    CHECK_INT(count_of(realm, "Old", NULL), 1);
    CHECK_INT(count_of(realm, "Dog", "owner.name == 'Ann'"), 1);
    atoll_realm_close(realm);
}

/* MARK: - After the callback */

static void test_handles_kept_past_the_callback_report_closed(void) {
    for (int succeed = 0; succeed < 2; succeed++) {
        const char *path = seed(succeed ? "after-ok" : "after-failed");
        probe_t p = { .answer = succeed, .migrate = true, .use_realm = true };
        atoll_realm_t *realm = open_migrating(config_of(path, V1, 1, NULL), &p);
        CHECK((realm != NULL) == (bool)succeed);
        if (!CHECK(p.migration != NULL && p.realm != NULL && p.results != NULL)) return;

        atoll_migration_t *m = p.migration;
        CHECK(atoll_migration_realm(m) == NULL);
        CHECK_ERR(ATOLL_ERR_CLOSED, "the migration is over");
        CHECK(atoll_migration_old_schema(m) == NULL);
        CHECK_ERR(ATOLL_ERR_CLOSED, "the migration is over");
        CHECK(atoll_migration_new_schema(m) == NULL);
        CHECK_ERR(ATOLL_ERR_CLOSED, "");
        uint64_t v = 0;
        CHECK(!atoll_migration_versions(m, &v, &v));
        CHECK_ERR(ATOLL_ERR_CLOSED, "");
        CHECK(atoll_migration_old_objects(m, "Person") == NULL);
        CHECK_ERR(ATOLL_ERR_CLOSED, "");
        CHECK(!atoll_migration_set(m, "Person", 1, "{}"));
        CHECK_ERR(ATOLL_ERR_CLOSED, "");
        CHECK(!atoll_migration_rename_property(m, "Person", "name", "fullName"));
        CHECK_ERR(ATOLL_ERR_CLOSED, "");
        CHECK(!atoll_migration_delete_data(m, "Old"));
        CHECK_ERR(ATOLL_ERR_CLOSED, "");

        CHECK(atoll_object_get(p.realm, "Person", "1") == NULL);
        CHECK_ERR(ATOLL_ERR_CLOSED, "the realm is closed");
        CHECK(!atoll_realm_begin_write(p.realm));
        CHECK_ERR(ATOLL_ERR_CLOSED, "");
        atoll_realm_close(p.realm); /* a no-op, and it closes nothing else */
        /* Results made on the migration's realm are results of a realm that is closed now. */
        size_t n = 0;
        CHECK(!atoll_results_count(p.results, &n));
        CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
        probe_free(&p);

        if (realm != NULL) {
            check_person(realm, "1", "Ann", 31);
            atoll_realm_close(realm);
        }
    }
}

/* MARK: - Options */

/* atoll_open_options_t as the first version of the header declared it. */
typedef struct first_options {
    size_t size;
    atoll_should_compact_fn should_compact;
    void *should_compact_userdata;
} first_options_t;

static bool count_compact(uint64_t total, uint64_t used, void *userdata) {
    (void)total;
    (void)used;
    ++*(int *)userdata;
    return false;
}

static void test_the_first_versions_options_are_accepted(void) {
    const char *path = seed("first-options");
    int asked = 0;
    first_options_t first = { sizeof first, count_compact, &asked };
    /* Without a callback, the version bump applies the changes with defaults. */
    atoll_realm_t *realm = atoll_realm_open_with(config_of(path, V1, 1, NULL),
                                                 (const atoll_open_options_t *)(const void *)&first);
    if (!CHECK(realm != NULL)) return;
    CHECK_OK();
    CHECK_INT(asked, 1);
    check_person(realm, "1", "", 0);
    atoll_realm_close(realm);

    /* Fields past the size given are not read: a migration pointer there is never called. */
    path = seed("first-size");
    probe_t p = { .answer = false };
    atoll_open_options_t options;
    memset(&options, 0, sizeof options);
    options.size = sizeof(first_options_t);
    options.migration = on_migration;
    options.migration_userdata = &p;
    realm = atoll_realm_open_with(config_of(path, V1, 1, NULL), &options);
    CHECK(realm != NULL);
    CHECK_INT(p.calls, 0);
    atoll_realm_close(realm);

    /* A size between the two versions is refused. */
    options.size = sizeof(first_options_t) + sizeof(void *);
    CHECK(atoll_realm_open_with(config_of(path, V1, 2, NULL), &options) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "options->size");
    CHECK_INT(p.calls, 0);
}

static void test_delete_realm_if_migration_needed(void) {
    const char *path = seed("delete-if-needed");
    probe_t p = { .answer = true };
    atoll_realm_t *realm = open_migrating(config_of(path, V1, 0, "\"deleteRealmIfMigrationNeeded\": true"), &p);
    if (!CHECK(realm != NULL)) return;
    CHECK_INT(p.calls, 0);
    CHECK_INT(count_of(realm, "Person", NULL), 0);
    char *schema = atoll_realm_schema(realm);
    CHECK(schema != NULL && strstr(schema, "\"Old\"") == NULL && strstr(schema, "\"Toy\"") != NULL);
    atoll_free(schema);
    uint64_t version = 99;
    CHECK(atoll_realm_version(realm, &version));
    CHECK_INT(version, 0);
    atoll_realm_close(realm);

    CHECK(atoll_realm_open(config_of(path, V1, 0, "\"deleteRealmIfMigrationNeeded\": 1")) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "deleteRealmIfMigrationNeeded");
}

static void test_downgrades_and_changes_without_a_bump_are_refused(void) {
    const char *path = seed("downgrade");
    probe_t p = { .answer = true };
    CHECK(open_migrating(config_of(path, V1, 0, NULL), &p) == NULL);
    CHECK_ERR(ATOLL_ERR_SCHEMA_MISMATCH, "needs a migration");
    CHECK_INT(p.calls, 0);
    atoll_realm_t *realm = open_migrating(config_of(path, V1, 3, NULL), &p);
    CHECK(realm != NULL);
    CHECK_INT(p.calls, 1);
    atoll_realm_close(realm);
    probe_free(&p);
    probe_t q = { .answer = true };
    CHECK(open_migrating(config_of(path, V1, 2, NULL), &q) == NULL);
    CHECK_ERR(ATOLL_ERR_SCHEMA_MISMATCH, "downgrades are not supported");
    CHECK_INT(q.calls, 0);
}

/* MARK: - Bad arguments */

static bool bad_arguments(atoll_migration_t *m, void *userdata) {
    int *calls = userdata;
    ++*calls;
    CHECK(atoll_migration_old_objects(m, NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name is NULL");
    CHECK(atoll_migration_old_objects(m, "Per\xffson") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "UTF-8");
    CHECK(!atoll_migration_set(m, NULL, 1, "{}"));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name is NULL");
    CHECK(!atoll_migration_set(m, "Person", 1, NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "values_json is NULL");
    CHECK(!atoll_migration_set(m, "Person", 1, "{\"age\": "));
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
    CHECK(!atoll_migration_set(m, "Person", 1, "[1]"));
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
    CHECK(!atoll_migration_set(m, "Person", 1, "{\"age\": \"old\"}"));
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "age");
    CHECK(!atoll_migration_set(m, "Person", 99, "{\"age\": 1}"));
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "key 99");
    CHECK(!atoll_migration_set(m, "Cat", 1, "{}"));
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Cat");
    CHECK(!atoll_migration_rename_property(m, "Person", NULL, "fullName"));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "from is NULL");
    CHECK(!atoll_migration_rename_property(m, "Person", "name", NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "to is NULL");
    CHECK(!atoll_migration_rename_property(m, "Person", "nope", "fullName"));
    CHECK_ERR(ATOLL_ERR_NO_SUCH_PROPERTY, "nope");
    CHECK(!atoll_migration_rename_property(m, "Person", "nicknames", "fullName"));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "still in the new schema");
    CHECK(!atoll_migration_rename_property(m, "Person", "name", "age"));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "old schema already has");
    CHECK(!atoll_migration_delete_data(m, NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name is NULL");
    CHECK(!atoll_migration_delete_data(m, "Cat"));
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Cat");
    /* A migration handle is not a realm, and a realm handle is not a migration. */
    CHECK(atoll_object_get((atoll_realm_t *)(void *)m, "Person", "1") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "migration handle");
    CHECK(atoll_migration_old_schema((atoll_migration_t *)(void *)atoll_migration_realm(m)) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "not a migration handle");
    /* The failures changed nothing: the migration still works. */
    CHECK(atoll_migration_rename_property(m, "Person", "name", "fullName"));
    CHECK(atoll_migration_set(m, "Person", 1, "{\"age\": 31}"));
    return true;
}

static void test_null_and_garbage_arguments(void) {
    atoll_migration_t *garbage = (atoll_migration_t *)(uintptr_t)0x123450;
    atoll_migration_t *nulls[] = { NULL, garbage };
    for (int i = 0; i < 2; i++) {
        atoll_migration_t *m = nulls[i];
        const char *why = i == 0 ? "migration is NULL" : "not a migration handle";
        uint64_t v = 0;
        CHECK(atoll_migration_realm(m) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, why);
        CHECK(atoll_migration_old_schema(m) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, why);
        CHECK(atoll_migration_new_schema(m) == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, why);
        CHECK(!atoll_migration_versions(m, &v, &v));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, why);
        CHECK(atoll_migration_old_objects(m, "Person") == NULL);
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, why);
        CHECK(!atoll_migration_set(m, "Person", 1, "{}"));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, why);
        CHECK(!atoll_migration_rename_property(m, "Person", "a", "b"));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, why);
        CHECK(!atoll_migration_delete_data(m, "Person"));
        CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, why);
    }
    /* A realm handle is not a migration handle. */
    atoll_realm_t *memory = atoll_realm_open("{\"inMemory\": true}");
    CHECK(atoll_migration_old_schema((atoll_migration_t *)(void *)memory) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "not a migration handle");
    atoll_realm_close(memory);

    /* Bad arguments inside the callback fail the call, not the migration. */
    const char *path = seed("bad-arguments");
    int calls = 0;
    atoll_realm_t *realm = open_with_migration(config_of(path, V1, 1, NULL), bad_arguments, &calls);
    if (!CHECK(realm != NULL)) return;
    CHECK_OK();
    CHECK_INT(calls, 1);
    check_person(realm, "1", "Ann", 31);
    atoll_realm_close(realm);
}

int main(int argc, char **argv) {
    static const atoll_test_t tests[] = {
        ATOLL_TEST(test_rename_and_retype_keep_the_data),
        ATOLL_TEST(test_create_query_delete_and_close_inside),
        ATOLL_TEST(test_callback_false_fails_with_its_error_and_keeps_the_file),
        ATOLL_TEST(test_handles_kept_past_the_callback_report_closed),
        ATOLL_TEST(test_the_first_versions_options_are_accepted),
        ATOLL_TEST(test_delete_realm_if_migration_needed),
        ATOLL_TEST(test_downgrades_and_changes_without_a_bump_are_refused),
        ATOLL_TEST(test_null_and_garbage_arguments),
    };
    return ATOLL_CHECK_MAIN(tests, argc, argv);
}

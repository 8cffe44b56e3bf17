/* test_changes.c — the change log (atoll_realm_changes): one entry per commit that changed
 * something, holding exactly the instructions of that transaction. */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

/* The entries after `after`, parsed. */
static json_t *changes(atoll_realm_t *r, uint64_t after, size_t max) {
    json_t *c = TAKE_JSON(atoll_realm_changes(r, after, max));
    CHECK(json_is_array(c));
    return c;
}

/* What these tests open with: a change log that keeps values (without, it keeps only what
 * changed, and atoll_realm_changes() refuses its entries; see test_a_log_without_values). */
static const char *const VALUES = "\"changeLogValues\": true";

static const char *op_of(json_t *ins) { return atoll_jstr(ins, "op"); }

/* The path of an instruction as "name" or "dogs/0" (compact). */
static char *path_of(json_t *ins) {
    json_t *p = json_object_get(ins, "path");
    if (!json_is_array(p)) return NULL;
    char *out = calloc(1, 256);
    size_t i;
    json_t *part;
    json_array_foreach(p, i, part) {
        char buf[64];
        if (json_is_string(part)) snprintf(buf, sizeof buf, "%s%s", i ? "/" : "", json_string_value(part));
        else if (json_is_integer(part)) snprintf(buf, sizeof buf, "%s%lld", i ? "/" : "", (long long)json_integer_value(part));
        else snprintf(buf, sizeof buf, "%s?", i ? "/" : "");
        strncat(out, buf, 255 - strlen(out));
    }
    return out;
}

/* Whether instruction `ins` is a `set` of property `prop` on Dog `id`. */
static bool is_set_of(json_t *ins, const char *cls, long long id, const char *prop) {
    if (op_of(ins) == NULL || strcmp(op_of(ins), "set") != 0) return false;
    if (atoll_jstr(ins, "class") == NULL || strcmp(atoll_jstr(ins, "class"), cls) != 0) return false;
    if (atoll_jint(ins, "primaryKey") != id) return false;
    char *p = path_of(ins);
    bool ok = p && strcmp(p, prop) == 0;
    free(p);
    return ok;
}

static atoll_realm_t *open_with_rex(void) {
    atoll_realm_t *r = atoll_test_open(NULL, VALUES);
    if (r == NULL) return NULL;
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\", \"age\": 3}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));
    return r;
}

static void test_empty_realm_has_no_changes(void) {
    atoll_realm_t *r = atoll_test_open(NULL, VALUES);
    if (!CHECK(r != NULL)) return;
    char *text = atoll_realm_changes(r, 0, 0);
    CHECK_OK();
    CHECK_STR(text, "[]");
    atoll_free(text);
    atoll_realm_close(r);
}

static void test_create_entry(void) {
    atoll_realm_t *r = open_with_rex();
    if (!CHECK(r != NULL)) return;
    json_t *c = changes(r, 0, 0);
    CHECK_INT(json_array_size(c), 1);
    json_t *entry = json_array_get(c, 0);
    CHECK_INT(atoll_jint(entry, "version"), 1);
    const char *date = atoll_jstr(json_object_get(entry, "timestamp"), "$date");
    CHECK(date != NULL && strlen(date) >= 20 && date[4] == '-' && date[10] == 'T');
    /* docs/changelog.md: `create`, then a `set` for every property but the primary key (the
     * object's complete state, defaults included). */
    json_t *ins = json_object_get(entry, "instructions");
    CHECK_INT(json_array_size(ins), 4);
    json_t *first = json_array_get(ins, 0);
    CHECK_STR(op_of(first), "create");
    CHECK_STR(atoll_jstr(first, "class"), "Dog");
    CHECK_INT(atoll_jint(first, "primaryKey"), 1);
    bool name = false, age = false, owner = false;
    size_t i;
    json_t *one;
    json_array_foreach(ins, i, one) {
        if (i == 0) continue;
        if (is_set_of(one, "Dog", 1, "name"))
            name = atoll_jstr(one, "value") && strcmp(atoll_jstr(one, "value"), "Rex") == 0;
        else if (is_set_of(one, "Dog", 1, "age"))
            age = atoll_jint(one, "value") == 3;
        else if (is_set_of(one, "Dog", 1, "owner"))
            owner = json_is_null(json_object_get(one, "value"));
    }
    CHECK(name);
    CHECK(age);
    CHECK(owner);
    json_decref(c);
    atoll_realm_close(r);
}

static void test_list_instructions(void) {
    atoll_realm_t *r = open_with_rex();
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Dog", "{\"_id\": 2}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));
    /* v3: a Person with a list: create, set age, listInsert per element. */
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Person", "{\"name\": \"Carol\", \"dogs\": [2, 1]}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));
    /* v4: the list given whole and different: listClear, then listInserts. */
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Person", "{\"name\": \"Carol\", \"dogs\": [1]}", ATOLL_UPDATE_MODIFIED));
    CHECK(atoll_realm_commit(r));
    /* the same list again: nothing */
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Person", "{\"name\": \"Carol\", \"dogs\": [1]}", ATOLL_UPDATE_MODIFIED));
    CHECK(atoll_realm_commit(r));

    json_t *c = changes(r, 2, 0);
    if (CHECK_INT(json_array_size(c), 2)) {
        json_t *v3 = json_object_get(json_array_get(c, 0), "instructions");
        CHECK_INT(json_array_size(v3), 4);
        CHECK_STR(op_of(json_array_get(v3, 0)), "create");
        CHECK_STR(atoll_jstr(json_array_get(v3, 0), "primaryKey"), "Carol");
        int inserts = 0;
        size_t i;
        json_t *one;
        json_array_foreach(v3, i, one) {
            if (op_of(one) && strcmp(op_of(one), "listInsert") == 0) {
                char *p = path_of(one);
                CHECK_STR(p, "dogs");
                free(p);
                CHECK_INT(atoll_jint(one, "index"), inserts);
                /* A link in the log is {"$ref": class, "$id": primary key}. */
                json_t *link = json_object_get(one, "value");
                CHECK_STR(atoll_jstr(link, "$ref"), "Dog");
                CHECK_INT(atoll_jint(link, "$id"), inserts == 0 ? 2 : 1);
                inserts++;
            }
        }
        CHECK_INT(inserts, 2);
        json_t *v4 = json_object_get(json_array_get(c, 1), "instructions");
        CHECK_INT(json_array_size(v4), 2);
        CHECK_STR(op_of(json_array_get(v4, 0)), "listClear");
        CHECK_STR(op_of(json_array_get(v4, 1)), "listInsert");
        CHECK_INT(atoll_jint(json_array_get(v4, 1), "index"), 0);
        CHECK_INT(atoll_jint(json_object_get(json_array_get(v4, 1), "value"), "$id"), 1);
    }
    json_decref(c);
    atoll_realm_close(r);
}

static void test_update_modified_records_only_changes(void) {
    atoll_realm_t *r = open_with_rex();
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    /* name unchanged, age changed */
    atoll_free(atoll_object_create(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\", \"age\": 4}", ATOLL_UPDATE_MODIFIED));
    CHECK(atoll_realm_commit(r));
    json_t *c = changes(r, 1, 0);
    CHECK_INT(json_array_size(c), 1);
    json_t *entry = json_array_get(c, 0);
    CHECK_INT(atoll_jint(entry, "version"), 2);
    json_t *ins = json_object_get(entry, "instructions");
    CHECK_INT(json_array_size(ins), 1);
    json_t *set = json_array_get(ins, 0);
    CHECK(is_set_of(set, "Dog", 1, "age"));
    CHECK_INT(json_integer_value(json_object_get(set, "value")), 4);
    json_decref(c);

    /* Nothing changed at all: no entry. */
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\", \"age\": 4}", ATOLL_UPDATE_MODIFIED));
    CHECK(atoll_realm_commit(r));
    uint64_t v = 0;
    CHECK(atoll_realm_version(r, &v));
    CHECK_INT(v, 2);
    atoll_realm_close(r);
}

static void test_update_all_records_every_given_property(void) {
    atoll_realm_t *r = open_with_rex();
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\", \"age\": 4}", ATOLL_UPDATE_ALL));
    CHECK(atoll_realm_commit(r));
    json_t *c = changes(r, 1, 0);
    CHECK_INT(json_array_size(c), 1);
    json_t *ins = json_object_get(json_array_get(c, 0), "instructions");
    bool saw_name = false, saw_age = false, other = false;
    size_t i;
    json_t *one;
    json_array_foreach(ins, i, one) {
        if (is_set_of(one, "Dog", 1, "name")) saw_name = true;
        else if (is_set_of(one, "Dog", 1, "age")) saw_age = true;
        else if (!is_set_of(one, "Dog", 1, "_id")) other = true;
    }
    CHECK(saw_name); /* unchanged, but given: recorded with ATOLL_UPDATE_ALL */
    CHECK(saw_age);
    CHECK(!other);
    json_decref(c);
    atoll_realm_close(r);
}

static void test_erase_entry(void) {
    atoll_realm_t *r = open_with_rex();
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_object_delete(r, "Dog", "1"));
    CHECK(atoll_realm_commit(r));
    json_t *c = changes(r, 1, 0);
    CHECK_INT(json_array_size(c), 1);
    json_t *ins = json_object_get(json_array_get(c, 0), "instructions");
    CHECK_INT(json_array_size(ins), 1);
    CHECK_STR(op_of(json_array_get(ins, 0)), "erase");
    CHECK_STR(atoll_jstr(json_array_get(ins, 0), "class"), "Dog");
    CHECK_INT(atoll_jint(json_array_get(ins, 0), "primaryKey"), 1);
    json_decref(c);
    atoll_realm_close(r);
}

static void test_one_entry_per_transaction_in_order(void) {
    atoll_realm_t *r = atoll_test_open(NULL, VALUES);
    if (!CHECK(r != NULL)) return;
    /* v1: two creates */
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Dog", "{\"_id\": 1}", ATOLL_UPDATE_ERROR));
    atoll_free(atoll_object_create(r, "Dog", "{\"_id\": 2}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));
    /* cancelled: nothing */
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Dog", "{\"_id\": 3}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_cancel_write(r));
    /* a failed call inside a transaction records nothing: v2 holds only the set of name */
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK(!atoll_objects_create_many(r, "Dog", "[{\"_id\": 4}, {\"_id\": 4}]", ATOLL_UPDATE_ERROR, NULL));
    atoll_free(atoll_object_create(r, "Dog", "{\"_id\": 2, \"name\": \"Two\"}", ATOLL_UPDATE_MODIFIED));
    CHECK(atoll_realm_commit(r));
    /* v3: erase */
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_object_delete(r, "Dog", "1"));
    CHECK(atoll_realm_commit(r));

    json_t *c = changes(r, 0, 0);
    if (CHECK_INT(json_array_size(c), 3)) {
        for (size_t i = 0; i < 3; i++) CHECK_INT(atoll_jint(json_array_get(c, i), "version"), i + 1);
        json_t *v1 = json_object_get(json_array_get(c, 0), "instructions");
        int creates = 0;
        size_t i;
        json_t *one;
        json_array_foreach(v1, i, one) {
            if (op_of(one) && strcmp(op_of(one), "create") == 0) {
                creates++;
                CHECK(atoll_jint(one, "primaryKey") == 1 || atoll_jint(one, "primaryKey") == 2);
            }
        }
        CHECK_INT(creates, 2);
        json_t *v2 = json_object_get(json_array_get(c, 1), "instructions");
        CHECK_INT(json_array_size(v2), 1);
        CHECK(is_set_of(json_array_get(v2, 0), "Dog", 2, "name"));
        CHECK_STR(json_string_value(json_object_get(json_array_get(v2, 0), "value")), "Two");
        json_t *v3 = json_object_get(json_array_get(c, 2), "instructions");
        CHECK_INT(json_array_size(v3), 1);
        CHECK_STR(op_of(json_array_get(v3, 0)), "erase");
    }
    json_decref(c);

    /* after_version and max_entries */
    c = changes(r, 1, 0);
    CHECK_INT(json_array_size(c), 2);
    CHECK_INT(atoll_jint(json_array_get(c, 0), "version"), 2);
    json_decref(c);
    c = changes(r, 0, 2);
    CHECK_INT(json_array_size(c), 2);
    CHECK_INT(atoll_jint(json_array_get(c, 1), "version"), 2);
    json_decref(c);
    c = changes(r, 1, 1);
    CHECK_INT(json_array_size(c), 1);
    CHECK_INT(atoll_jint(json_array_get(c, 0), "version"), 2);
    json_decref(c);
    c = changes(r, 3, 0);
    CHECK_INT(json_array_size(c), 0);
    json_decref(c);
    c = changes(r, 1000, 0);
    CHECK_INT(json_array_size(c), 0);
    json_decref(c);
    atoll_realm_close(r);
}

static void test_changes_survive_reopen(void) {
    const char *path = atoll_tmp_realm_path("changes");
    atoll_realm_t *r = atoll_test_open(path, VALUES);
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    atoll_free(atoll_object_create(r, "Person", "{\"name\": \"Alice\"}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));
    json_t *before = changes(r, 0, 0);
    atoll_realm_close(r);
    r = atoll_test_open(path, VALUES);
    if (!CHECK(r != NULL)) return;
    json_t *after = changes(r, 0, 0);
    CHECK(json_equal(before, after));
    json_t *first = json_array_get(json_object_get(json_array_get(after, 0), "instructions"), 0);
    CHECK_STR(op_of(first), "create");
    CHECK_STR(atoll_jstr(first, "class"), "Person");
    CHECK_STR(atoll_jstr(first, "primaryKey"), "Alice");
    json_decref(before);
    json_decref(after);
    atoll_realm_close(r);
}

/* Without "changeLogValues" the log keeps only what changed: atoll_realm_changes() refuses
 * such entries by version; a handle that asks makes the file keep values from the next commit,
 * for every handle. */
static void test_a_log_without_values(void) {
    const char *path = atoll_tmp_realm_path("without-values");
    atoll_realm_t *plain = atoll_test_open(path, NULL);
    if (!CHECK(plain != NULL)) return;
    CHECK(atoll_realm_begin_write(plain));
    atoll_free(atoll_object_create(plain, "Person", "{\"name\": \"Alice\"}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(plain));
    CHECK(atoll_realm_changes(plain, 0, 0) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "change-log entry 1 was recorded without values");

    CHECK(atoll_test_open(path, "\"changeLogValues\": 1") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "changeLogValues");

    atoll_realm_t *asking = atoll_test_open(path, VALUES);
    if (!CHECK(asking != NULL)) { atoll_realm_close(plain); return; }
    CHECK(atoll_realm_begin_write(plain));
    atoll_free(atoll_object_create(plain, "Person", "{\"name\": \"Alice\", \"age\": 31}", ATOLL_UPDATE_MODIFIED));
    CHECK(atoll_realm_commit(plain));
    CHECK(atoll_realm_refresh(asking));
    json_t *c = changes(asking, 1, 0);
    CHECK_INT(json_array_size(c), 1);
    json_t *ins = json_array_get(json_object_get(json_array_get(c, 0), "instructions"), 0);
    CHECK_STR(op_of(ins), "set");
    CHECK_STR(atoll_jstr(ins, "primaryKey"), "Alice");
    char *p = path_of(ins);
    CHECK_STR(p, "age");
    free(p);
    CHECK_INT(atoll_jint(ins, "value"), 31);
    json_decref(c);
    atoll_realm_close(asking);
    atoll_realm_close(plain);
}

static const atoll_test_t tests[] = {
    ATOLL_TEST(test_a_log_without_values),
    ATOLL_TEST(test_empty_realm_has_no_changes),
    ATOLL_TEST(test_create_entry),
    ATOLL_TEST(test_list_instructions),
    ATOLL_TEST(test_update_modified_records_only_changes),
    ATOLL_TEST(test_update_all_records_every_given_property),
    ATOLL_TEST(test_erase_entry),
    ATOLL_TEST(test_one_entry_per_transaction_in_order),
    ATOLL_TEST(test_changes_survive_reopen),
};

int main(int argc, char **argv) { return ATOLL_CHECK_MAIN(tests, argc, argv); }

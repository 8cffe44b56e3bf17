/* test_objects.c — create, get, delete, update policies, links and lists, create_many (all or
 * nothing), Extended JSON values. */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

static atoll_realm_t *open_in_write(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (r && !atoll_realm_begin_write(r)) {
        atoll_realm_close(r);
        return NULL;
    }
    return r;
}

static size_t count_of(atoll_realm_t *r, const char *cls) {
    atoll_results_t *res = atoll_results_query(r, cls, NULL, NULL);
    size_t n = (size_t)-1;
    if (!CHECK(res != NULL) || !CHECK(atoll_results_count(res, &n))) n = (size_t)-1;
    atoll_results_free(res);
    return n;
}

/* An array member as a compact JSON string, for comparing lists: "[1, 2]" -> "[1,2]". */
static char *member_dump(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* MARK: - Create and get */

static void test_create_returns_the_stored_object(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    json_t *dog = CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\", \"age\": 3}", ATOLL_UPDATE_ERROR);
    CHECK_OK();
    CHECK_INT(atoll_jint(dog, "_id"), 1);
    CHECK_STR(atoll_jstr(dog, "name"), "Rex");
    CHECK_INT(atoll_jint(dog, "age"), 3);
    CHECK(dog && json_is_null(json_object_get(dog, "owner")));
    json_decref(dog);

    /* Left-out properties take the default of their type. */
    dog = CREATE(r, "Dog", "{\"_id\": 2}", ATOLL_UPDATE_ERROR);
    CHECK_INT(atoll_jint(dog, "_id"), 2);
    CHECK_STR(atoll_jstr(dog, "name"), "");
    CHECK_INT(atoll_jint(dog, "age"), 0);
    CHECK(dog && json_is_null(json_object_get(dog, "owner")));
    json_decref(dog);
    json_t *person = CREATE(r, "Person", "{\"name\": \"Ann\"}", ATOLL_UPDATE_ERROR);
    char *dogs = member_dump(person, "dogs");
    CHECK_STR(dogs, "[]");
    free(dogs);
    json_decref(person);

    /* A class without a primary key. */
    json_t *note = CREATE(r, "Note", "{\"text\": \"hello\"}", ATOLL_UPDATE_ERROR);
    CHECK_STR(atoll_jstr(note, "text"), "hello");
    json_decref(note);
    note = CREATE(r, "Note", "{\"text\": \"hello\"}", ATOLL_UPDATE_ERROR);
    CHECK(note != NULL); /* no key, so no duplicate */
    json_decref(note);
    CHECK(atoll_realm_commit(r));
    CHECK_INT(count_of(r, "Note"), 2);

    /* Read back after commit. */
    dog = GET(r, "Dog", "1");
    CHECK_OK();
    CHECK_INT(atoll_jint(dog, "_id"), 1);
    CHECK_STR(atoll_jstr(dog, "name"), "Rex");
    CHECK_INT(atoll_jint(dog, "age"), 3);
    json_decref(dog);
    person = GET(r, "Person", "\"Ann\"");
    CHECK_STR(atoll_jstr(person, "name"), "Ann");
    json_decref(person);
    atoll_realm_close(r);
}

static void test_unicode_round_trip(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    /* "Zoë 🐕" written both raw (UTF-8) and as \u escapes; names are keys too. */
    json_decref(CREATE(r, "Person", "{\"name\": \"Zo\xc3\xab \xf0\x9f\x90\x95\", \"age\": 1}",
                       ATOLL_UPDATE_ERROR));
    json_t *p = GET(r, "Person", "\"Zo\\u00eb \\ud83d\\udc15\"");
    CHECK_STR(atoll_jstr(p, "name"), "Zo\xc3\xab \xf0\x9f\x90\x95");
    json_decref(p);
    /* A string with an embedded quote, backslash and newline. */
    json_decref(CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"a\\\"b\\\\c\\nd\"}", ATOLL_UPDATE_ERROR));
    json_t *d = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(d, "name"), "a\"b\\c\nd");
    json_decref(d);
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);
}

static void test_get_errors(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    json_decref(CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\"}", ATOLL_UPDATE_ERROR));
    json_decref(CREATE(r, "Note", "{\"text\": \"x\"}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));

    CHECK(atoll_object_get(r, "Dog", "42") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "42");
    CHECK(atoll_object_get(r, "Dog", "\"1\"") == NULL); /* a string key for an int key */
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "Dog");
    CHECK(atoll_object_get(r, "Person", "5") == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "Person");
    CHECK(atoll_object_get(r, "Note", "1") == NULL); /* no primary key */
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "Note");
    CHECK(atoll_object_get(r, "Cat", "1") == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Cat");
    CHECK(atoll_object_get(r, "Dog", "{") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(atoll_object_get(r, "Dog", "") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(atoll_object_get(r, "Person", "\"\xff\"") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    /* Still fine afterwards. */
    json_t *d = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(d, "name"), "Rex");
    json_decref(d);
    atoll_realm_close(r);
}

/* MARK: - Create errors */

static void test_create_errors(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    CHECK(atoll_realm_begin_write(r));
    json_decref(CREATE(r, "Person", "{\"name\": \"Alice\"}", ATOLL_UPDATE_ERROR));

    CHECK(atoll_object_create(r, "Cat", "{\"_id\": 1}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Cat");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1, \"color\": \"red\"}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_PROPERTY, "color");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1, \"name\": 5}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "name");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1, \"age\": \"old\"}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "age");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1, \"age\": 1.5}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "age");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1, \"name\": true}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "name");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": \"one\"}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "_id");
    CHECK(atoll_object_create(r, "Person", "{\"name\": \"Bo\", \"dogs\": 5}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "dogs");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1, \"owner\": 5}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "owner");
    CHECK(atoll_object_create(r, "Dog", "{\"name\": \"Keyless\"}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_MISSING_VALUE, "_id");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": null}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_MISSING_VALUE, "_id");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1, \"name\": null}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_MISSING_VALUE, "name");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1, \"owner\": \"Nobody\"}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "Nobody");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1,", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(atoll_object_create(r, "Dog", "[{\"_id\": 1}]", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "object");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1, \"name\": \"\xc3\x28\"}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1}", 7) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "policy");
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1}", -1) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "policy");

    /* A failed call changes nothing: the inline Person is not created either. */
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 9, \"owner\": {\"name\": \"Zed\"}, \"age\": \"old\"}",
                              ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "age");
    CHECK(atoll_object_get(r, "Person", "\"Zed\"") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    CHECK(atoll_object_get(r, "Dog", "9") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    CHECK_INT(count_of(r, "Dog"), 0);

    /* The transaction is still usable and commits what succeeded. */
    json_t *dog = CREATE(r, "Dog", "{\"_id\": 1, \"owner\": \"Alice\"}", ATOLL_UPDATE_ERROR);
    CHECK_STR(atoll_jstr(dog, "owner"), "Alice");
    json_decref(dog);
    CHECK(atoll_realm_commit(r));
    CHECK_INT(count_of(r, "Dog"), 1);
    CHECK_INT(count_of(r, "Person"), 1);
    atoll_realm_close(r);
}

/* MARK: - Links and lists */

static void test_links_and_lists(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    json_decref(CREATE(r, "Person", "{\"name\": \"Alice\", \"age\": 30}", ATOLL_UPDATE_ERROR));
    /* A link by primary key. */
    json_t *dog = CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\", \"owner\": \"Alice\"}", ATOLL_UPDATE_ERROR);
    CHECK_STR(atoll_jstr(dog, "owner"), "Alice");
    json_decref(dog);
    /* A link given as a whole object: created with the same policy. */
    dog = CREATE(r, "Dog", "{\"_id\": 2, \"name\": \"Fido\", \"owner\": {\"name\": \"Bob\", \"age\": 40}}",
                 ATOLL_UPDATE_ERROR);
    CHECK_STR(atoll_jstr(dog, "owner"), "Bob");
    json_decref(dog);
    json_t *bob = GET(r, "Person", "\"Bob\"");
    CHECK_INT(atoll_jint(bob, "age"), 40);
    json_decref(bob);
    /* ... and with ATOLL_UPDATE_ERROR, an inline object whose key exists is a duplicate. */
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 3, \"owner\": {\"name\": \"Bob\"}}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_DUPLICATE_PRIMARY_KEY, "Bob");
    /* ... while with ATOLL_UPDATE_MODIFIED it updates Bob. */
    dog = CREATE(r, "Dog", "{\"_id\": 3, \"owner\": {\"name\": \"Bob\", \"age\": 41}}", ATOLL_UPDATE_MODIFIED);
    CHECK_STR(atoll_jstr(dog, "owner"), "Bob");
    json_decref(dog);
    bob = GET(r, "Person", "\"Bob\"");
    CHECK_INT(atoll_jint(bob, "age"), 41);
    json_decref(bob);

    /* A list of links, in order, duplicates allowed. */
    json_t *carol = CREATE(r, "Person", "{\"name\": \"Carol\", \"dogs\": [2, 1, 2]}", ATOLL_UPDATE_ERROR);
    char *dogs = member_dump(carol, "dogs");
    CHECK_STR(dogs, "[2,1,2]");
    free(dogs);
    json_decref(carol);
    CHECK(atoll_object_create(r, "Person", "{\"name\": \"Dan\", \"dogs\": [1, 99]}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "99");
    CHECK(atoll_object_get(r, "Person", "\"Dan\"") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    CHECK(atoll_realm_commit(r));

    /* Deleting an object nulls the links to it and drops it from lists. */
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_object_delete(r, "Person", "\"Alice\""));
    CHECK_OK();
    CHECK(atoll_object_delete(r, "Dog", "2"));
    CHECK(atoll_realm_commit(r));
    dog = GET(r, "Dog", "1");
    CHECK(dog && json_is_null(json_object_get(dog, "owner")));
    json_decref(dog);
    carol = GET(r, "Person", "\"Carol\"");
    dogs = member_dump(carol, "dogs");
    CHECK_STR(dogs, "[1]");
    free(dogs);
    json_decref(carol);
    atoll_realm_close(r);
}

static void test_nested_inline_objects(void) {
    /* Person p0 -> dogs[Dog 0 -> owner Person p1 -> dogs[Dog 1]]: four new objects, each
     * given once, inline; with ATOLL_UPDATE_ERROR none of them exists before. */
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    json_t *p0 = CREATE(r, "Person",
                        "{\"name\": \"p0\", \"dogs\": [{\"_id\": 0, \"owner\": "
                        "{\"name\": \"p1\", \"dogs\": [{\"_id\": 1, \"owner\": null}]}}]}",
                        ATOLL_UPDATE_ERROR);
    if (!CHECK(p0 != NULL)) {
        atoll_realm_close(r);
        return;
    }
    char *dogs = member_dump(p0, "dogs");
    CHECK_STR(dogs, "[0]");
    free(dogs);
    json_decref(p0);
    json_t *d0 = GET(r, "Dog", "0");
    CHECK_STR(atoll_jstr(d0, "owner"), "p1");
    json_decref(d0);
    json_t *p1 = GET(r, "Person", "\"p1\"");
    dogs = member_dump(p1, "dogs");
    CHECK_STR(dogs, "[1]");
    free(dogs);
    json_decref(p1);
    CHECK_INT(count_of(r, "Dog"), 2);
    CHECK_INT(count_of(r, "Person"), 2);
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);
}

/* MARK: - Delete */

static void test_delete(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    json_decref(CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\"}", ATOLL_UPDATE_ERROR));
    json_decref(CREATE(r, "Dog", "{\"_id\": 2, \"name\": \"Fido\"}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));

    CHECK(!atoll_object_delete(r, "Dog", "1"));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_object_delete(r, "Dog", "1"));
    CHECK_OK();
    CHECK(atoll_object_get(r, "Dog", "1") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    CHECK(!atoll_object_delete(r, "Dog", "1"));
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "1");
    CHECK(!atoll_object_delete(r, "Cat", "1"));
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Cat");
    CHECK(!atoll_object_delete(r, "Dog", "\"x\""));
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "Dog");
    CHECK(!atoll_object_delete(r, "Dog", "{{"));
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(atoll_realm_commit(r));
    CHECK_INT(count_of(r, "Dog"), 1);
    json_t *d = GET(r, "Dog", "2");
    CHECK_STR(atoll_jstr(d, "name"), "Fido");
    json_decref(d);

    /* Deleted and created again in one transaction. */
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_object_delete(r, "Dog", "2"));
    d = CREATE(r, "Dog", "{\"_id\": 2, \"name\": \"Fido II\"}", ATOLL_UPDATE_ERROR);
    CHECK(d != NULL);
    json_decref(d);
    CHECK(atoll_realm_commit(r));
    d = GET(r, "Dog", "2");
    CHECK_STR(atoll_jstr(d, "name"), "Fido II");
    CHECK_INT(atoll_jint(d, "age"), 0);
    json_decref(d);
    atoll_realm_close(r);
}

/* MARK: - Update policies */

static void test_update_policies(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    json_decref(CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\", \"age\": 3}", ATOLL_UPDATE_ERROR));

    /* ERROR: a duplicate fails and changes nothing. */
    CHECK(atoll_object_create(r, "Dog", "{\"_id\": 1, \"name\": \"Max\"}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_DUPLICATE_PRIMARY_KEY, "Dog");
    json_t *d = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(d, "name"), "Rex");
    json_decref(d);

    /* MODIFIED: the properties given are updated, the others left as they were. */
    d = CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Max\"}", ATOLL_UPDATE_MODIFIED);
    CHECK_STR(atoll_jstr(d, "name"), "Max");
    CHECK_INT(atoll_jint(d, "age"), 3);
    json_decref(d);

    /* ALL: the same, as far as the stored object goes. */
    d = CREATE(r, "Dog", "{\"_id\": 1, \"age\": 4}", ATOLL_UPDATE_ALL);
    CHECK_STR(atoll_jstr(d, "name"), "Max");
    CHECK_INT(atoll_jint(d, "age"), 4);
    json_decref(d);

    /* Both create when the key is new. */
    d = CREATE(r, "Dog", "{\"_id\": 2, \"name\": \"New\"}", ATOLL_UPDATE_MODIFIED);
    CHECK_STR(atoll_jstr(d, "name"), "New");
    json_decref(d);
    d = CREATE(r, "Dog", "{\"_id\": 3, \"name\": \"Newer\"}", ATOLL_UPDATE_ALL);
    CHECK_STR(atoll_jstr(d, "name"), "Newer");
    json_decref(d);
    CHECK(atoll_realm_commit(r));

    d = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(d, "name"), "Max");
    CHECK_INT(atoll_jint(d, "age"), 4);
    json_decref(d);
    CHECK_INT(count_of(r, "Dog"), 3);
    atoll_realm_close(r);
}

/* MARK: - create_many */

static void test_create_many(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    size_t n = 99;
    CHECK(atoll_objects_create_many(r, "Dog",
                                    "[{\"_id\": 1, \"name\": \"A\"}, {\"_id\": 2, \"name\": \"B\"},"
                                    " {\"_id\": 3, \"name\": \"C\"}]",
                                    ATOLL_UPDATE_ERROR, &n));
    CHECK_OK();
    CHECK_INT(n, 3);
    CHECK_INT(count_of(r, "Dog"), 3);
    /* out_count may be NULL; an empty array writes nothing. */
    CHECK(atoll_objects_create_many(r, "Dog", "[{\"_id\": 4}]", ATOLL_UPDATE_ERROR, NULL));
    n = 99;
    CHECK(atoll_objects_create_many(r, "Dog", "[]", ATOLL_UPDATE_ERROR, &n));
    CHECK_INT(n, 0);
    /* Updates with a policy. */
    n = 99;
    CHECK(atoll_objects_create_many(r, "Dog", "[{\"_id\": 1, \"age\": 10}, {\"_id\": 5}]",
                                    ATOLL_UPDATE_MODIFIED, &n));
    CHECK_INT(n, 2);
    json_t *d = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(d, "name"), "A");
    CHECK_INT(atoll_jint(d, "age"), 10);
    json_decref(d);
    CHECK_INT(count_of(r, "Dog"), 5);
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);
}

static void test_create_many_is_all_or_nothing(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (!CHECK(r != NULL)) return;
    size_t n = 99;
    CHECK(!atoll_objects_create_many(r, "Dog", "[{\"_id\": 1}]", ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    CHECK(atoll_realm_begin_write(r));
    json_decref(CREATE(r, "Dog", "{\"_id\": 1, \"name\": \"Rex\"}", ATOLL_UPDATE_ERROR));

    /* The third one is a duplicate of an existing object: none of the three is kept. */
    CHECK(!atoll_objects_create_many(r, "Dog", "[{\"_id\": 10}, {\"_id\": 11}, {\"_id\": 1}]",
                                     ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_DUPLICATE_PRIMARY_KEY, "2");
    CHECK(atoll_object_get(r, "Dog", "10") == NULL);
    CHECK(atoll_object_get(r, "Dog", "11") == NULL);
    /* A duplicate inside the array itself: index 1. */
    CHECK(!atoll_objects_create_many(r, "Dog", "[{\"_id\": 20}, {\"_id\": 20}]", ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_DUPLICATE_PRIMARY_KEY, "1");
    /* A type error in the second one. */
    CHECK(!atoll_objects_create_many(r, "Dog", "[{\"_id\": 30}, {\"_id\": 31, \"age\": \"x\"}]",
                                     ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "1");
    /* An update that would have changed Rex, then a failure: Rex unchanged. */
    CHECK(!atoll_objects_create_many(r, "Dog", "[{\"_id\": 1, \"name\": \"Changed\"}, {\"_id\": 40, \"color\": 1}]",
                                     ATOLL_UPDATE_MODIFIED, &n));
    CHECK_ERR(ATOLL_ERR_NO_SUCH_PROPERTY, "color");
    /* Not an array, not objects, not JSON. */
    CHECK(!atoll_objects_create_many(r, "Dog", "{\"_id\": 50}", ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "array");
    CHECK(!atoll_objects_create_many(r, "Dog", "[{\"_id\": 51}, 5]", ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "1");
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "object");
    CHECK(!atoll_objects_create_many(r, "Dog", "[{\"_id\": 52}", ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(!atoll_objects_create_many(r, "Cat", "[{\"_id\": 1}]", ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Cat");

    /* Only Rex, unchanged; the transaction still commits. */
    CHECK_INT(count_of(r, "Dog"), 1);
    json_t *d = GET(r, "Dog", "1");
    CHECK_STR(atoll_jstr(d, "name"), "Rex");
    json_decref(d);
    CHECK(atoll_realm_commit(r));
    CHECK_INT(count_of(r, "Dog"), 1);
    atoll_realm_close(r);
}

/* MARK: - Extended JSON */

static void test_extended_json_values(void) {
    atoll_realm_t *r = atoll_realm_open(
        "{\"inMemory\": true, \"schema\": [{\"name\": \"Thing\", \"primaryKey\": \"_id\", "
        "\"properties\": {\"_id\": \"objectId\", \"when\": \"date\", \"uid\": \"uuid\", "
        "\"price\": \"decimal128\", \"blob\": \"data\", \"ratio\": \"double\", \"flag\": \"bool\", "
        "\"maybe\": \"int?\", \"tags\": \"string[]\"}}]}");
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    json_t *t = CREATE(r, "Thing",
                       "{\"_id\": {\"$oid\": \"65a1b2c3d4e5f60718293a4b\"},"
                       " \"when\": {\"$date\": \"2024-01-02T03:04:05.678Z\"},"
                       " \"uid\": {\"$uuid\": \"123e4567-e89b-12d3-a456-426614174000\"},"
                       " \"price\": {\"$numberDecimal\": \"12.5\"},"
                       " \"blob\": {\"$binary\": {\"base64\": \"AQID\", \"subType\": \"00\"}},"
                       " \"ratio\": 0.25, \"flag\": true, \"maybe\": null, \"tags\": [\"a\", \"b\"]}",
                       ATOLL_UPDATE_ERROR);
    CHECK(t != NULL);
    json_decref(t);
    CHECK(atoll_realm_commit(r));

    t = GET(r, "Thing", "{\"$oid\": \"65a1b2c3d4e5f60718293a4b\"}");
    if (CHECK(t != NULL)) {
        CHECK_STR(atoll_jstr(json_object_get(t, "_id"), "$oid"), "65a1b2c3d4e5f60718293a4b");
        const char *when = atoll_jstr(json_object_get(t, "when"), "$date");
        CHECK(when != NULL && strncmp(when, "2024-01-02T03:04:05.678", 23) == 0);
        CHECK_STR(atoll_jstr(json_object_get(t, "uid"), "$uuid"), "123e4567-e89b-12d3-a456-426614174000");
        const char *price = atoll_jstr(json_object_get(t, "price"), "$numberDecimal");
        CHECK(price != NULL && strncmp(price, "12.5", 4) == 0);
        json_t *binary = json_object_get(json_object_get(t, "blob"), "$binary");
        CHECK_STR(atoll_jstr(binary, "base64"), "AQID");
        CHECK(json_is_real(json_object_get(t, "ratio")) &&
              json_real_value(json_object_get(t, "ratio")) == 0.25);
        CHECK(json_is_true(json_object_get(t, "flag")));
        CHECK(json_is_null(json_object_get(t, "maybe")));
        char *tags = member_dump(t, "tags");
        CHECK_STR(tags, "[\"a\",\"b\"]");
        free(tags);
    }
    json_decref(t);
    /* A key of the wrong type: an $oid that is not 24 hex digits. */
    CHECK(atoll_object_get(r, "Thing", "{\"$oid\": \"xyz\"}") == NULL);
    CHECK(atoll_last_error(NULL));
    atoll_realm_close(r);
}

static const atoll_test_t tests[] = {
    ATOLL_TEST(test_create_returns_the_stored_object),
    ATOLL_TEST(test_unicode_round_trip),
    ATOLL_TEST(test_get_errors),
    ATOLL_TEST(test_create_errors),
    ATOLL_TEST(test_links_and_lists),
    ATOLL_TEST(test_nested_inline_objects),
    ATOLL_TEST(test_delete),
    ATOLL_TEST(test_update_policies),
    ATOLL_TEST(test_create_many),
    ATOLL_TEST(test_create_many_is_all_or_nothing),
    ATOLL_TEST(test_extended_json_values),
};

int main(int argc, char **argv) { return ATOLL_CHECK_MAIN(tests, argc, argv); }

/* test_jansson.c — the _j twins for jansson hosts: borrowed arguments are not modified nor
 * kept, results are new references, and the same errors as the text functions. */
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

static void test_create_get_delete_j(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    json_t *obj = json_pack("{s:i, s:s, s:i}", "_id", 1, "name", "Rex", "age", 3);
    char *before = json_dumps(obj, JSON_SORT_KEYS);
    json_t *stored = atoll_object_create_j(r, "Dog", obj, ATOLL_UPDATE_ERROR);
    CHECK_OK();
    CHECK(stored != NULL);
    CHECK(stored != obj);
    CHECK(stored && stored->refcount == 1);       /* a new reference: ours alone */
    CHECK(obj->refcount == 1);                    /* the argument was borrowed, not kept */
    char *after = json_dumps(obj, JSON_SORT_KEYS);
    CHECK_STR(after, before);                     /* ...and not modified */
    free(before);
    free(after);
    CHECK_STR(atoll_jstr(stored, "name"), "Rex");
    CHECK_INT(atoll_jint(stored, "age"), 3);
    CHECK(json_is_null(json_object_get(stored, "owner")));
    json_decref(stored);
    json_decref(obj);

    json_t *key = json_integer(1);
    json_t *got = atoll_object_get_j(r, "Dog", key);
    CHECK(got && got->refcount == 1);
    CHECK_STR(atoll_jstr(got, "name"), "Rex");
    CHECK(key->refcount == 1 && json_integer_value(key) == 1);
    /* The text and the jansson twins agree. */
    json_t *via_text = GET(r, "Dog", "1");
    CHECK(got && via_text && json_equal(got, via_text));
    json_decref(via_text);
    json_decref(got);

    CHECK(atoll_object_delete_j(r, "Dog", key));
    CHECK_OK();
    CHECK(atoll_object_get_j(r, "Dog", key) == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    CHECK(!atoll_object_delete_j(r, "Dog", key));
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    json_decref(key);

    /* A string key, links and lists. */
    json_t *alice = json_pack("{s:s, s:i}", "name", "Alice", "age", 30);
    json_decref(atoll_object_create_j(r, "Person", alice, ATOLL_UPDATE_ERROR));
    json_decref(alice);
    json_t *dog = json_pack("{s:i, s:s, s:s}", "_id", 2, "name", "Fido", "owner", "Alice");
    json_t *fido = atoll_object_create_j(r, "Dog", dog, ATOLL_UPDATE_ERROR);
    CHECK_STR(atoll_jstr(fido, "owner"), "Alice");
    json_decref(fido);
    json_decref(dog);
    json_t *pk = json_string("Alice");
    json_t *p = atoll_object_get_j(r, "Person", pk);
    CHECK_INT(atoll_jint(p, "age"), 30);
    json_decref(p);
    json_decref(pk);
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);
}

static void test_create_many_j(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    json_t *arr = json_pack("[{s:i, s:s}, {s:i, s:s}, {s:i}]", "_id", 1, "name", "A", "_id", 2,
                            "name", "B", "_id", 3);
    size_t n = 0;
    CHECK(atoll_objects_create_many_j(r, "Dog", arr, ATOLL_UPDATE_ERROR, &n));
    CHECK_INT(n, 3);
    CHECK(arr->refcount == 1 && json_array_size(arr) == 3);
    /* All or nothing: index 1 is a duplicate of an existing object. */
    json_t *bad = json_pack("[{s:i}, {s:i}]", "_id", 10, "_id", 2);
    CHECK(!atoll_objects_create_many_j(r, "Dog", bad, ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_DUPLICATE_PRIMARY_KEY, "1");
    json_t *ten = json_integer(10);
    CHECK(atoll_object_get_j(r, "Dog", ten) == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    json_decref(ten);
    json_decref(bad);
    /* Not an array. */
    json_t *obj = json_pack("{s:i}", "_id", 11);
    CHECK(!atoll_objects_create_many_j(r, "Dog", obj, ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
    json_decref(obj);
    CHECK(atoll_objects_create_many_j(r, "Dog", arr, ATOLL_UPDATE_MODIFIED, NULL));
    json_decref(arr);
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);
}

static void test_query_and_results_j(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    for (int i = 1; i <= 5; i++) {
        json_t *d = json_pack("{s:i, s:s, s:i}", "_id", i, "name", "dog", "age", i * 2);
        json_decref(atoll_object_create_j(r, "Dog", d, ATOLL_UPDATE_ERROR));
        json_decref(d);
    }
    CHECK(atoll_realm_commit(r));
    json_t *args = json_pack("[i]", 4);
    atoll_results_t *res = atoll_results_query_j(r, "Dog", "age > $0 SORT(_id ASC)", args);
    CHECK(res != NULL);
    CHECK(args->refcount == 1);
    json_decref(args);
    size_t n = 0;
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 3);
    json_t *page = atoll_results_json_j(res, 1, 1);
    CHECK(json_is_array(page) && page->refcount == 1);
    CHECK_INT(json_array_size(page), 1);
    CHECK_INT(atoll_jint(json_array_get(page, 0), "_id"), 4);
    json_decref(page);
    page = atoll_results_json_j(res, 0, 0);
    CHECK_INT(json_array_size(page), 3);
    json_t *text = TAKE_JSON(atoll_results_json(res, 0, 0));
    CHECK(page && text && json_equal(page, text));
    json_decref(text);
    json_decref(page);
    page = atoll_results_json_j(res, 3, 0);
    CHECK(json_is_array(page) && json_array_size(page) == 0);
    json_decref(page);
    atoll_results_free(res);

    res = atoll_results_query_j(r, "Dog", NULL, NULL);
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 5);
    atoll_results_free(res);
    /* args must be an array */
    json_t *notarray = json_integer(4);
    CHECK(atoll_results_query_j(r, "Dog", "age > $0", notarray) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
    json_decref(notarray);
    atoll_realm_close(r);
}

static void test_errors_j(void) {
    atoll_realm_t *r = open_in_write();
    if (!CHECK(r != NULL)) return;
    json_t *dog = json_pack("{s:i}", "_id", 1);
    json_t *arr = json_pack("[{s:i}]", "_id", 2);
    json_t *key = json_integer(1);
    size_t n;

    /* NULL for every pointer parameter. */
    CHECK(atoll_object_create_j(NULL, "Dog", dog, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(atoll_object_create_j(r, NULL, dog, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    CHECK(atoll_object_create_j(r, "Dog", NULL, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "object");
    CHECK(!atoll_objects_create_many_j(NULL, "Dog", arr, ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(!atoll_objects_create_many_j(r, NULL, arr, ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    CHECK(!atoll_objects_create_many_j(r, "Dog", NULL, ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "array");
    CHECK(atoll_object_get_j(NULL, "Dog", key) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(atoll_object_get_j(r, NULL, key) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    CHECK(atoll_object_get_j(r, "Dog", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "primary_key");
    CHECK(!atoll_object_delete_j(NULL, "Dog", key));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(!atoll_object_delete_j(r, NULL, key));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    CHECK(!atoll_object_delete_j(r, "Dog", NULL));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "primary_key");
    CHECK(atoll_results_query_j(NULL, "Dog", NULL, NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "realm");
    CHECK(atoll_results_query_j(r, NULL, NULL, NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    CHECK(atoll_results_json_j(NULL, 0, 0) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "results");

    /* Values of the wrong shape or type. */
    json_t *num = json_integer(5);
    CHECK(atoll_object_create_j(r, "Dog", num, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
    json_decref(num);
    json_t *wrong = json_pack("{s:i, s:i}", "_id", 1, "name", 5);
    CHECK(atoll_object_create_j(r, "Dog", wrong, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "name");
    json_decref(wrong);
    json_t *unknown = json_pack("{s:i, s:s}", "_id", 1, "color", "red");
    CHECK(atoll_object_create_j(r, "Dog", unknown, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_PROPERTY, "color");
    json_decref(unknown);
    CHECK(atoll_object_create_j(r, "Cat", dog, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Cat");
    json_t *skey = json_string("one");
    CHECK(atoll_object_get_j(r, "Dog", skey) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "");
    json_decref(skey);
    /* jansson lets a host build strings that are not UTF-8 (json_string_nocheck). */
    json_t *bytes = json_pack("{s:i}", "_id", 3);
    json_object_set_new(bytes, "name", json_string_nocheck("\xff\xfe"));
    json_t *accepted = atoll_object_create_j(r, "Dog", bytes, ATOLL_UPDATE_ERROR);
    CHECK(accepted == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
    json_decref(accepted);
    json_decref(bytes);

    /* Write outside a transaction. */
    CHECK(atoll_realm_cancel_write(r));
    CHECK(atoll_object_create_j(r, "Dog", dog, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    CHECK(!atoll_objects_create_many_j(r, "Dog", arr, ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    CHECK(!atoll_object_delete_j(r, "Dog", key));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");

    /* Pointers that never were handles. */
    int some_int = 7;
    CHECK(atoll_object_create_j((atoll_realm_t *)&some_int, "Dog", dog, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
    CHECK(atoll_object_get_j((atoll_realm_t *)&some_int, "Dog", key) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");
    CHECK(atoll_results_json_j((atoll_results_t *)&some_int, 0, 0) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "handle");

    /* Use after close. */
    atoll_results_t *res = atoll_results_query_j(r, "Dog", NULL, NULL);
    CHECK(res != NULL);
    atoll_realm_close(r);
    CHECK(atoll_object_create_j(r, "Dog", dog, ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!atoll_objects_create_many_j(r, "Dog", arr, ATOLL_UPDATE_ERROR, &n));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(atoll_object_get_j(r, "Dog", key) == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(!atoll_object_delete_j(r, "Dog", key));
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(atoll_results_query_j(r, "Dog", NULL, NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    CHECK(atoll_results_json_j(res, 0, 0) == NULL);
    CHECK_ERR(ATOLL_ERR_CLOSED, "closed");
    atoll_results_free(res);

    /* None of the borrowed values was kept. */
    CHECK(dog->refcount == 1 && arr->refcount == 1 && key->refcount == 1);
    json_decref(dog);
    json_decref(arr);
    json_decref(key);
}

static void test_extended_json_j(void) {
    atoll_realm_t *r = atoll_realm_open(
        "{\"inMemory\": true, \"schema\": [{\"name\": \"Thing\", \"primaryKey\": \"_id\", "
        "\"properties\": {\"_id\": \"uuid\", \"when\": \"date\", \"ratio\": \"double\"}}]}");
    if (!CHECK(r != NULL)) return;
    CHECK(atoll_realm_begin_write(r));
    json_t *t = json_pack("{s:{s:s}, s:{s:s}, s:f}", "_id", "$uuid",
                          "123e4567-e89b-12d3-a456-426614174000", "when", "$date",
                          "2020-02-29T12:00:00Z", "ratio", 1.5);
    json_t *stored = atoll_object_create_j(r, "Thing", t, ATOLL_UPDATE_ERROR);
    CHECK(stored != NULL);
    CHECK(json_real_value(json_object_get(stored, "ratio")) == 1.5);
    const char *when = atoll_jstr(json_object_get(stored, "when"), "$date");
    CHECK(when && strncmp(when, "2020-02-29T12:00:00", 19) == 0);
    json_decref(stored);
    CHECK(atoll_realm_commit(r));
    json_t *key = json_pack("{s:s}", "$uuid", "123e4567-e89b-12d3-a456-426614174000");
    json_t *got = atoll_object_get_j(r, "Thing", key);
    CHECK_STR(atoll_jstr(json_object_get(got, "_id"), "$uuid"), "123e4567-e89b-12d3-a456-426614174000");
    json_decref(got);
    json_decref(key);
    json_decref(t);
    atoll_realm_close(r);
}

static const atoll_test_t tests[] = {
    ATOLL_TEST(test_create_get_delete_j),
    ATOLL_TEST(test_create_many_j),
    ATOLL_TEST(test_query_and_results_j),
    ATOLL_TEST(test_errors_j),
    ATOLL_TEST(test_extended_json_j),
};

int main(int argc, char **argv) { return ATOLL_CHECK_MAIN(tests, argc, argv); }

/* test_query.c — queries (RQL subset), arguments, sorting and limits, results_json paging,
 * live results, delete_all, and query errors. */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

/* Five dogs and two owners:
 *   Dog 1 Rex   3 Alice | Dog 2 Fido 5 Bob | Dog 3 rover 1 - | Dog 4 Buddy 8 Alice | Dog 5 Max 5 -
 *   Alice 30 dogs [1, 4] | Bob 40 dogs [2] */
static void fill(atoll_realm_t *r) {
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_objects_create_many(r, "Person",
                                    "[{\"name\": \"Alice\", \"age\": 30}, {\"name\": \"Bob\", \"age\": 40}]",
                                    ATOLL_UPDATE_ERROR, NULL));
    CHECK(atoll_objects_create_many(r, "Dog",
                                    "[{\"_id\": 1, \"name\": \"Rex\", \"age\": 3, \"owner\": \"Alice\"},"
                                    " {\"_id\": 2, \"name\": \"Fido\", \"age\": 5, \"owner\": \"Bob\"},"
                                    " {\"_id\": 3, \"name\": \"rover\", \"age\": 1},"
                                    " {\"_id\": 4, \"name\": \"Buddy\", \"age\": 8, \"owner\": \"Alice\"},"
                                    " {\"_id\": 5, \"name\": \"Max\", \"age\": 5}]",
                                    ATOLL_UPDATE_ERROR, NULL));
    CHECK(atoll_objects_create_many(r, "Person",
                                    "[{\"name\": \"Alice\", \"dogs\": [1, 4]}, {\"name\": \"Bob\", \"dogs\": [2]}]",
                                    ATOLL_UPDATE_MODIFIED, NULL));
    CHECK(atoll_realm_commit(r));
}

static atoll_realm_t *open_filled(void) {
    atoll_realm_t *r = atoll_test_open(NULL, NULL);
    if (r) fill(r);
    return r;
}

/* The count of a query, or -1 on failure (the last error is kept). */
static long long count_q(atoll_realm_t *r, const char *cls, const char *rql, const char *args) {
    atoll_results_t *res = atoll_results_query(r, cls, rql, args);
    if (res == NULL) return -1;
    size_t n = 0;
    bool ok = atoll_results_count(res, &n);
    atoll_results_free(res);
    return ok ? (long long)n : -1;
}

/* The "_id"s (or "name"s for Person) of results_json(offset, limit), as "1,2,3". */
static char *ids(atoll_results_t *res, size_t offset, size_t limit) {
    json_t *arr = TAKE_JSON(atoll_results_json(res, offset, limit));
    if (!json_is_array(arr)) {
        json_decref(arr);
        return NULL;
    }
    char *out = calloc(1, 1024);
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o) {
        char part[64];
        if (atoll_jstr(o, "_id") == NULL && json_object_get(o, "_id"))
            snprintf(part, sizeof part, "%s%lld", i ? "," : "", atoll_jint(o, "_id"));
        else
            snprintf(part, sizeof part, "%s%s", i ? "," : "",
                     atoll_jstr(o, "name") ? atoll_jstr(o, "name") : "?");
        strncat(out, part, 1023 - strlen(out));
    }
    json_decref(arr);
    return out;
}

#define CHECK_IDS(res, offset, limit, expected)                                                    \
    do {                                                                                           \
        char *got_ = ids((res), (offset), (limit));                                                \
        CHECK_STR(got_, (expected));                                                               \
        free(got_);                                                                                \
    } while (0)

/* MARK: - Queries */

static void test_query_all(void) {
    atoll_realm_t *r = open_filled();
    if (!CHECK(r != NULL)) return;
    CHECK_INT(count_q(r, "Dog", NULL, NULL), 5);
    CHECK_OK();
    CHECK_INT(count_q(r, "Dog", "", NULL), 5);
    CHECK_INT(count_q(r, "Dog", "TRUEPREDICATE", NULL), 5);
    CHECK_INT(count_q(r, "Dog", "FALSEPREDICATE", NULL), 0);
    CHECK_INT(count_q(r, "Person", NULL, NULL), 2);
    CHECK_INT(count_q(r, "Note", NULL, NULL), 0);
    atoll_realm_close(r);
}

static void test_query_predicates(void) {
    atoll_realm_t *r = open_filled();
    if (!CHECK(r != NULL)) return;
    CHECK_INT(count_q(r, "Dog", "age == 5", NULL), 2);
    CHECK_INT(count_q(r, "Dog", "age > $0", "[3]"), 3);
    CHECK_INT(count_q(r, "Dog", "age >= $0 AND age <= $1", "[3, 5]"), 3);
    CHECK_INT(count_q(r, "Dog", "name == $0", "[\"Fido\"]"), 1);
    CHECK_INT(count_q(r, "Dog", "name == 'rex'", NULL), 0);
    CHECK_INT(count_q(r, "Dog", "name ==[c] 'rex'", NULL), 1);
    CHECK_INT(count_q(r, "Dog", "name BEGINSWITH[c] 'r'", NULL), 2);
    CHECK_INT(count_q(r, "Dog", "name BEGINSWITH 'r'", NULL), 1);
    CHECK_INT(count_q(r, "Dog", "name CONTAINS 'u'", NULL), 1);
    CHECK_INT(count_q(r, "Dog", "name == 'Rex' OR age >= 8", NULL), 2);
    CHECK_INT(count_q(r, "Dog", "NOT (age > 2)", NULL), 1);
    CHECK_INT(count_q(r, "Dog", "age BETWEEN {2, 5}", NULL), 3);
    CHECK_INT(count_q(r, "Dog", "age IN {1, 8}", NULL), 2);
    CHECK_INT(count_q(r, "Dog", "owner.name == 'Alice'", NULL), 2);
    CHECK_INT(count_q(r, "Dog", "owner == nil", NULL), 2);
    CHECK_INT(count_q(r, "Dog", "owner.age > $0", "[35]"), 1);
    CHECK_INT(count_q(r, "Person", "dogs.@count >= 2", NULL), 1);
    CHECK_INT(count_q(r, "Person", "ANY dogs.age > 6", NULL), 1);
    CHECK_INT(count_q(r, "Person", "ALL dogs.age > 4", NULL), 1);
    CHECK_OK();
    atoll_realm_close(r);
}

static void test_query_arguments_are_values_not_code(void) {
    atoll_realm_t *r = open_filled();
    if (!CHECK(r != NULL)) return;
    CHECK_INT(count_q(r, "Dog", "name == $0", "[\"x' OR 1=1 --\"]"), 0);
    CHECK_INT(count_q(r, "Dog", "name == $0", "[\"Rex\\\"; DROP TABLE Dog; --\"]"), 0);
    CHECK_INT(count_q(r, "Dog", "name == 'a; DROP TABLE Dog; --'", NULL), 0);
    CHECK_INT(count_q(r, "Dog", NULL, NULL), 5);
    atoll_realm_close(r);
}

static void test_sort_and_limit(void) {
    atoll_realm_t *r = open_filled();
    if (!CHECK(r != NULL)) return;
    atoll_results_t *res = atoll_results_query(r, "Dog", "TRUEPREDICATE SORT(age DESC, _id ASC)", NULL);
    CHECK(res != NULL);
    CHECK_IDS(res, 0, 0, "4,2,5,1,3");
    atoll_results_free(res);
    res = atoll_results_query(r, "Dog", "age > 0 SORT(age ASC) LIMIT(2)", NULL);
    CHECK(res != NULL);
    CHECK_IDS(res, 0, 0, "3,1");
    size_t n = 0;
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 2);
    atoll_results_free(res);
    res = atoll_results_query(r, "Person", "TRUEPREDICATE SORT(name DESC)", NULL);
    CHECK_IDS(res, 0, 0, "Bob,Alice");
    atoll_results_free(res);
    atoll_realm_close(r);
}

static void test_results_json_paging(void) {
    atoll_realm_t *r = open_filled();
    if (!CHECK(r != NULL)) return;
    atoll_results_t *res = atoll_results_query(r, "Dog", "TRUEPREDICATE SORT(_id ASC)", NULL);
    if (!CHECK(res != NULL)) return;
    CHECK_IDS(res, 0, 0, "1,2,3,4,5");
    CHECK_IDS(res, 0, 2, "1,2");
    CHECK_IDS(res, 2, 2, "3,4");
    CHECK_IDS(res, 4, 2, "5");
    CHECK_IDS(res, 1, 0, "2,3,4,5");
    CHECK_IDS(res, 4, 100, "5");
    /* Past the end: an empty array, not an error. */
    char *text = atoll_results_json(res, 5, 2);
    CHECK_OK();
    CHECK_STR(text, "[]");
    atoll_free(text);
    text = atoll_results_json(res, 1000, 0);
    CHECK_STR(text, "[]");
    atoll_free(text);
    text = atoll_results_json(res, (size_t)-1, (size_t)-1);
    CHECK_STR(text, "[]");
    atoll_free(text);

    /* The objects are whole objects, as atoll_object_get() gives them. */
    json_t *arr = TAKE_JSON(atoll_results_json(res, 0, 1));
    json_t *first = json_array_get(arr, 0);
    CHECK_STR(atoll_jstr(first, "name"), "Rex");
    CHECK_INT(atoll_jint(first, "age"), 3);
    CHECK_STR(atoll_jstr(first, "owner"), "Alice");
    json_t *got = GET(r, "Dog", "1");
    CHECK(got && first && json_equal(got, first));
    json_decref(got);
    json_decref(arr);
    atoll_results_free(res);
    atoll_realm_close(r);
}

static void test_results_are_live(void) {
    const char *path = atoll_tmp_realm_path("live");
    atoll_realm_t *r = atoll_test_open(path, NULL);
    atoll_realm_t *other = atoll_test_open(path, NULL);
    if (!CHECK(r != NULL && other != NULL)) return;
    fill(r);
    atoll_results_t *res = atoll_results_query(r, "Dog", "age >= 5", NULL);
    size_t n = 0;
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 3);
    /* Inside a write transaction: its uncommitted writes are seen. */
    CHECK(atoll_realm_begin_write(r));
    json_decref(CREATE(r, "Dog", "{\"_id\": 6, \"age\": 9}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 4);
    /* ... but not by another handle, even once it refreshes. */
    CHECK(atoll_realm_refresh(other));
    CHECK_INT(count_q(other, "Dog", "age >= 5", NULL), 3);
    CHECK(atoll_realm_cancel_write(r));
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 3);
    /* A commit by another handle is seen once this handle refreshes: until then its results
     * read its snapshot. */
    CHECK(atoll_realm_begin_write(other));
    json_decref(CREATE(other, "Dog", "{\"_id\": 7, \"age\": 7}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(other));
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 3);
    CHECK(atoll_realm_refresh(r));
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 4);
    CHECK_IDS(res, 3, 0, "7");
    atoll_results_free(res);
    atoll_realm_close(other);
    atoll_realm_close(r);
}

static void test_delete_all(void) {
    atoll_realm_t *r = open_filled();
    if (!CHECK(r != NULL)) return;
    atoll_results_t *res = atoll_results_query(r, "Dog", "age == 5", NULL);
    size_t n = 99;
    CHECK(!atoll_results_delete_all(res, &n));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "write");
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_results_delete_all(res, &n));
    CHECK_OK();
    CHECK_INT(n, 2);
    CHECK(atoll_results_count(res, &n));
    CHECK_INT(n, 0);
    n = 99;
    CHECK(atoll_results_delete_all(res, &n)); /* nothing left: fine, 0 */
    CHECK_INT(n, 0);
    CHECK(atoll_realm_commit(r));
    CHECK_INT(count_q(r, "Dog", NULL, NULL), 3);
    /* Bob's list dropped Fido. */
    json_t *bob = GET(r, "Person", "\"Bob\"");
    json_t *dogs = json_object_get(bob, "dogs");
    CHECK(json_is_array(dogs) && json_array_size(dogs) == 0);
    json_decref(bob);
    atoll_results_free(res);

    /* out_count may be NULL. */
    res = atoll_results_query(r, "Dog", NULL, NULL);
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_results_delete_all(res, NULL));
    CHECK(atoll_realm_commit(r));
    CHECK_INT(count_q(r, "Dog", NULL, NULL), 0);
    atoll_results_free(res);
    atoll_realm_close(r);
}

/* MARK: - Errors */

static void test_query_errors(void) {
    atoll_realm_t *r = open_filled();
    if (!CHECK(r != NULL)) return;
    /* The message gives the position: an offset into the query, or its end. */
    CHECK(atoll_results_query(r, "Dog", "age >", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_SYNTAX, "end");
    CHECK(atoll_results_query(r, "Dog", "age >> 3", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_SYNTAX, "position 5");
    CHECK(atoll_results_query(r, "Dog", "name == 'unterminated", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_SYNTAX, "position 8");
    CHECK(atoll_results_query(r, "Dog", "age == 1 extra", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_SYNTAX, "position 9");
    CHECK(atoll_results_query(r, "Dog", "(age > 1", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_SYNTAX, "end");
    CHECK(atoll_results_query(r, "Dog", "color == 1", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_INVALID, "color");
    CHECK(atoll_results_query(r, "Dog", "owner.height > 1", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_INVALID, "height");
    CHECK(atoll_results_query(r, "Dog", "age > $1", "[1]") == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_INVALID, "$1");
    CHECK(atoll_results_query(r, "Dog", "age > $0", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_INVALID, "$0");
    CHECK(atoll_results_query(r, "Dog", "age > $0", "[\"x\"]") == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_INVALID, "age");
    CHECK(atoll_results_query(r, "Dog", "age > 'five'", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_INVALID, "age");
    CHECK(atoll_results_query(r, "Dog", "age > $0", "5") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "array");
    CHECK(atoll_results_query(r, "Dog", "age > $0", "[") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(atoll_results_query(r, "Dog", "name == $0", "[\"\xff\"]") == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "json");
    CHECK(atoll_results_query(r, "Cat", NULL, NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Cat");
    /* Still fine afterwards. */
    CHECK_INT(count_q(r, "Dog", "age > 1", NULL), 4);
    atoll_realm_close(r);
}

static const atoll_test_t tests[] = {
    ATOLL_TEST(test_query_all),
    ATOLL_TEST(test_query_predicates),
    ATOLL_TEST(test_query_arguments_are_values_not_code),
    ATOLL_TEST(test_sort_and_limit),
    ATOLL_TEST(test_results_json_paging),
    ATOLL_TEST(test_results_are_live),
    ATOLL_TEST(test_delete_all),
    ATOLL_TEST(test_query_errors),
};

int main(int argc, char **argv) { return ATOLL_CHECK_MAIN(tests, argc, argv); }

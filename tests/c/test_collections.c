/* test_collections.c — element operations on collection properties through the C ABI:
 * atoll_list_insert/set/erase/move, atoll_set_insert/erase, atoll_dictionary_set/erase.
 *
 * For each operation: the exact contents read back with atoll_object_get() and the exact
 * change-log instructions (atoll_realm_changes()); embedded elements (owned: a replaced or erased
 * one is deleted), links by primary key or given whole (created; an existing primary key given
 * whole is ATOLL_ERR_DUPLICATE_PRIMARY_KEY), mixed lists with nested values; the out parameters
 * (and NULL for them); every error (index out of range, wrong kind of collection, unknown names,
 * bad dictionary keys, wrong values, invalid JSON, NULL arguments, outside a write, closed and
 * foreign handles) failing cleanly and changing nothing — the whole realm is compared before and
 * after each one; and list observers in host delivery: exact change sets for element operations,
 * and a seeded random loop in which every delivered change, applied to the old list, gives the
 * new one. The Swift equivalents are in Tests/AtollStoreTests/CollectionOperationsTests.swift.
 *
 * JSON written by the test uses single quotes ('), turned into double quotes by J(). */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

static const char *const SCHEMA =
    "["
    "{'name': 'Person', 'primaryKey': 'id', 'properties': {"
    "  'id': 'int', 'name': 'string', 'numbers': 'int[]', 'maybe': 'int?[]', 'dogs': 'Dog[]',"
    "  'addresses': 'Address[]', 'tags': 'string<>', 'favorites': 'Dog<>', 'scores': 'int{}',"
    "  'pets': 'Dog{}', 'homes': 'Address{}', 'anything': 'mixed[]'}},"
    "{'name': 'Dog', 'primaryKey': 'id', 'properties': {'id': 'int', 'name': 'string?',"
    "  'owners': {'type': 'linkingObjects', 'objectType': 'Person', 'property': 'dogs'}}},"
    "{'name': 'Address', 'embedded': true, 'properties': {'city': 'string', 'lines': 'string[]'}},"
    "{'name': 'Note', 'properties': {'text': 'string', 'items': 'int[]'}}"
    "]";

/* The classes whose objects make up a realm's state (see state_of()). */
static const char *const CLASSES[] = { "Person", "Dog", "Address", "Note" };

/* MARK: - Helpers */

/* Opens a realm with SCHEMA: on `path`, or in memory when NULL; `mode` "host" or NULL. */
static atoll_realm_t *open_realm(const char *path, const char *mode) {
    char config[4096], where[1024], notify[64] = "";
    if (path) snprintf(where, sizeof where, "'path': '%s'", path);
    else snprintf(where, sizeof where, "'inMemory': true");
    if (mode) snprintf(notify, sizeof notify, ", 'notifications': '%s'", mode);
    /* The log keeps values: these tests read the instructions of each operation. */
    snprintf(config, sizeof config, "{%s, 'schema': %s%s, 'changeLogValues': true}", where, SCHEMA, notify);
    return atoll_realm_open(J(config));
}

/* Person 1 (Ann, numbers [1, 2, 3]) and Dog 5 (Rex), committed: the realm is at version 1. */
static bool seed(atoll_realm_t *r) {
    bool ok = atoll_realm_begin_write(r);
    char *p = atoll_object_create(r, "Person", J("{'id': 1, 'name': 'Ann', 'numbers': [1, 2, 3]}"),
                                  ATOLL_UPDATE_ERROR);
    char *d = atoll_object_create(r, "Dog", J("{'id': 5, 'name': 'Rex'}"), ATOLL_UPDATE_ERROR);
    ok = ok && p && d;
    atoll_free(p);
    atoll_free(d);
    ok = atoll_realm_commit(r) && ok;
    return CHECK(ok);
}

/* An in-memory realm, seeded; NULL (and a failed check) when that fails. */
static atoll_realm_t *open_seeded(void) {
    atoll_realm_t *r = open_realm(NULL, NULL);
    if (!CHECK(r != NULL)) return NULL;
    if (!seed(r)) {
        atoll_realm_close(r);
        return NULL;
    }
    return r;
}

static uint64_t version_of(atoll_realm_t *r) {
    uint64_t v = UINT64_MAX;
    if (!atoll_realm_version(r, &v)) v = UINT64_MAX;
    return v;
}

static size_t count_of(atoll_realm_t *r, const char *cls) {
    atoll_results_t *res = atoll_results_query(r, cls, NULL, NULL);
    size_t n = (size_t)-1;
    if (res == NULL || !atoll_results_count(res, &n)) n = (size_t)-1;
    atoll_results_free(res);
    return n;
}

/* Everything in the realm as one compact JSON text (free() it): every object of every class
 * (embedded ones included), in order, Person 1 as atoll_object_get() reads it, and the
 * change-log version. */
static char *state_of(atoll_realm_t *r) {
    json_t *all = json_object();
    for (size_t i = 0; i < sizeof CLASSES / sizeof CLASSES[0]; i++) {
        atoll_results_t *res = atoll_results_query(r, CLASSES[i], NULL, NULL);
        json_t *objects = res ? TAKE_JSON(atoll_results_json(res, 0, 0)) : NULL;
        atoll_results_free(res);
        json_object_set_new(all, CLASSES[i], objects ? objects : json_string("unreadable"));
    }
    json_t *person = GET(r, "Person", "1");
    json_object_set_new(all, "Person 1", person ? person : json_string("unreadable"));
    json_object_set_new(all, "version", json_integer((json_int_t)version_of(r)));
    char *text = json_dumps(all, JSON_COMPACT);
    json_decref(all);
    return text;
}

/* Property `prop` of object `pk` of `cls` as compact JSON (free() it); NULL when unreadable. */
static char *prop_text(atoll_realm_t *r, const char *cls, const char *pk, const char *prop) {
    json_t *obj = GET(r, cls, pk);
    json_t *v = json_object_get(obj, prop);
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(obj);
    return text;
}

/* Property `prop` of Person `pk` reads exactly as `expected` (compact JSON, ' for "; member and
 * key order count). */
#define CHECK_PROP(r, pk, prop, expected)                                                          \
    do {                                                                                           \
        char *got_ = prop_text((r), "Person", (pk), (prop));                                      \
        CHECK_STR(got_, J(expected));                                                              \
        free(got_);                                                                                \
    } while (0)


/* The change log after `after` is one entry, version after + 1, whose instructions equal
 * `expected` (a JSON array, ' for "). */
static void check_log_(atoll_realm_t *r, uint64_t after, const char *expected, const char *file,
                       int line) {
    json_t *log = TAKE_JSON(atoll_realm_changes(r, after, 0));
    json_t *entry = json_array_get(log, 0);
    char what[96];
    snprintf(what, sizeof what, "one change-log entry after version %llu, numbered %llu",
             (unsigned long long)after, (unsigned long long)after + 1);
    atoll_check_(json_array_size(log) == 1 && atoll_jint(entry, "version") == (long long)after + 1,
                 what, file, line);
    atoll_check_json_(json_object_get(entry, "instructions"), expected, "the instructions", file, line);
    json_decref(log);
}
#define CHECK_LOG(r, after, expected) check_log_((r), (after), (expected), __FILE__, __LINE__)

/* Nothing in the change log after `after`, and the version is still `after`. */
#define CHECK_NO_LOG(r, after)                                                                     \
    do {                                                                                           \
        char *log_ = atoll_realm_changes((r), (after), 0);                                         \
        CHECK_STR(log_, "[]");                                                                     \
        atoll_free(log_);                                                                          \
        CHECK_INT(version_of(r), (after));                                                         \
    } while (0)

/* `call` fails with `code` (message containing `substring`), and the realm is as it was: every
 * object of every class and the change-log version. */
#define FAILS(r, call, code, substring)                                                            \
    do {                                                                                           \
        char *before_ = state_of(r);                                                               \
        bool ok_ = (call);                                                                         \
        atoll_check_(!ok_, "fails: " #call, __FILE__, __LINE__);                                   \
        atoll_check_err_((code), #code, (substring), __FILE__, __LINE__);                          \
        char *after_ = state_of(r);                                                                \
        atoll_check_str_(after_, before_, "the realm after " #call, __FILE__, __LINE__);           \
        free(before_);                                                                             \
        free(after_);                                                                              \
    } while (0)

/* `call` succeeds and clears the last error. */
#define OK(call)                                                                                   \
    do {                                                                                           \
        atoll_check_((call), #call, __FILE__, __LINE__);                                           \
        CHECK_OK();                                                                                \
    } while (0)

#define BEGIN(r) CHECK(atoll_realm_begin_write(r))
#define COMMIT(r) CHECK(atoll_realm_commit(r))

/* MARK: - The eight operations, table-driven (for the argument and handle errors) */

typedef enum op_kind {
    LIST_INSERT, LIST_SET, LIST_ERASE, LIST_MOVE, SET_INSERT, SET_ERASE, DICT_SET, DICT_ERASE, OP_COUNT
} op_kind;

static const char *const OP_NAMES[OP_COUNT] = {
    "atoll_list_insert", "atoll_list_set", "atoll_list_erase", "atoll_list_move",
    "atoll_set_insert", "atoll_set_erase", "atoll_dictionary_set", "atoll_dictionary_erase",
};

typedef struct op_args {
    atoll_realm_t *realm;
    const char *cls, *pk, *prop, *key, *value;
    size_t index, to;
    bool *out;
} op_args;

/* A call of each operation that succeeds on a seeded realm in a write transaction: lists on
 * Person 1's numbers, sets on its tags, dictionaries on its scores. */
static op_args valid_args(op_kind k, atoll_realm_t *r) {
    op_args a = { r, "Person", "1", "numbers", NULL, "7", 0, 1, NULL };
    if (k == SET_INSERT || k == SET_ERASE) {
        a.prop = "tags";
        a.value = "\"t\"";
    } else if (k == DICT_SET || k == DICT_ERASE) {
        a.prop = "scores";
        a.key = "k";
        a.value = "1";
    }
    return a;
}

static bool run_op(op_kind k, const op_args *a) {
    switch (k) {
    case LIST_INSERT: return atoll_list_insert(a->realm, a->cls, a->pk, a->prop, a->index, a->value);
    case LIST_SET: return atoll_list_set(a->realm, a->cls, a->pk, a->prop, a->index, a->value);
    case LIST_ERASE: return atoll_list_erase(a->realm, a->cls, a->pk, a->prop, a->index);
    case LIST_MOVE: return atoll_list_move(a->realm, a->cls, a->pk, a->prop, a->index, a->to);
    case SET_INSERT: return atoll_set_insert(a->realm, a->cls, a->pk, a->prop, a->value, a->out);
    case SET_ERASE: return atoll_set_erase(a->realm, a->cls, a->pk, a->prop, a->value, a->out);
    case DICT_SET: return atoll_dictionary_set(a->realm, a->cls, a->pk, a->prop, a->key, a->value);
    case DICT_ERASE: return atoll_dictionary_erase(a->realm, a->cls, a->pk, a->prop, a->key, a->out);
    default: return false;
    }
}

static bool takes_value(op_kind k) {
    return k == LIST_INSERT || k == LIST_SET || k == SET_INSERT || k == SET_ERASE || k == DICT_SET;
}

static bool takes_key(op_kind k) { return k == DICT_SET || k == DICT_ERASE; }

/* Runs operation `k` with `a`; it must fail with `code` (message containing `substring`) and
 * change nothing of `observed` (the same realm, or another handle on its file). */
static void fails_op_(atoll_realm_t *observed, op_kind k, const op_args *a, int code,
                      const char *substring, const char *what, const char *file, int line) {
    char expr[160];
    snprintf(expr, sizeof expr, "%s fails (%s)", OP_NAMES[k], what);
    char *before = state_of(observed);
    bool ok = run_op(k, a);
    atoll_check_(!ok, expr, file, line);
    if (!atoll_check_err_(code, "the expected code", substring, file, line))
        printf("        call: %s\n", expr);
    char *after = state_of(observed);
    atoll_check_str_(after, before, expr, file, line);
    free(before);
    free(after);
}
#define FAILS_OP(observed, k, args, code, substring, what)                                         \
    fails_op_((observed), (k), (args), (code), (substring), (what), __FILE__, __LINE__)

/* MARK: - Lists */

static void test_list_insert_set_erase_move(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    OK(atoll_list_insert(r, "Person", "1", "numbers", 0, "0"));
    CHECK_PROP(r, "1", "numbers", "[0,1,2,3]");
    OK(atoll_list_insert(r, "Person", "1", "numbers", 4, "9")); /* at count: appends */
    CHECK_PROP(r, "1", "numbers", "[0,1,2,3,9]");
    OK(atoll_list_insert(r, "Person", "1", "numbers", 2, "5"));
    CHECK_PROP(r, "1", "numbers", "[0,1,5,2,3,9]");
    OK(atoll_list_set(r, "Person", "1", "numbers", 2, "50"));
    CHECK_PROP(r, "1", "numbers", "[0,1,50,2,3,9]");
    OK(atoll_list_erase(r, "Person", "1", "numbers", 0));
    CHECK_PROP(r, "1", "numbers", "[1,50,2,3,9]");
    OK(atoll_list_move(r, "Person", "1", "numbers", 4, 0));
    CHECK_PROP(r, "1", "numbers", "[9,1,50,2,3]");
    OK(atoll_list_move(r, "Person", "1", "numbers", 1, 3));
    CHECK_PROP(r, "1", "numbers", "[9,50,2,1,3]");
    COMMIT(r);
    CHECK_PROP(r, "1", "numbers", "[9,50,2,1,3]");
    CHECK_LOG(r, 1,
              "[{'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 0, 'value': 0},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 4, 'value': 9},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 2, 'value': 5},"
              " {'op': 'listSet', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 2, 'value': 50},"
              " {'op': 'listErase', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 0},"
              " {'op': 'listMove', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 4, 'toIndex': 0, 'value': 9},"
              " {'op': 'listMove', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 1, 'toIndex': 3, 'value': 1}]");

    /* Queries see the new order. */
    atoll_results_t *res = atoll_results_query(r, "Person", "numbers[FIRST] == 9 AND numbers.@count == 5", NULL);
    size_t n = 0;
    CHECK(res != NULL && atoll_results_count(res, &n));
    CHECK_INT(n, 1);
    atoll_results_free(res);

    /* Erasing down to nothing, then inserting into the empty list; an optional list holds null. */
    BEGIN(r);
    for (int i = 0; i < 5; i++) OK(atoll_list_erase(r, "Person", "1", "numbers", 0));
    CHECK_PROP(r, "1", "numbers", "[]");
    OK(atoll_list_insert(r, "Person", "1", "numbers", 0, "42"));
    OK(atoll_list_insert(r, "Person", "1", "maybe", 0, "null"));
    OK(atoll_list_insert(r, "Person", "1", "maybe", 1, "3"));
    OK(atoll_list_set(r, "Person", "1", "maybe", 1, "null"));
    OK(atoll_list_set(r, "Person", "1", "maybe", 0, "4"));
    COMMIT(r);
    CHECK_PROP(r, "1", "numbers", "[42]");
    CHECK_PROP(r, "1", "maybe", "[4,null]");
    CHECK_LOG(r, 2,
              "[{'op': 'listErase', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 0},"
              " {'op': 'listErase', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 0},"
              " {'op': 'listErase', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 0},"
              " {'op': 'listErase', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 0},"
              " {'op': 'listErase', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 0},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 0, 'value': 42},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['maybe'], 'index': 0, 'value': null},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['maybe'], 'index': 1, 'value': 3},"
              " {'op': 'listSet', 'class': 'Person', 'primaryKey': 1, 'path': ['maybe'], 'index': 1, 'value': null},"
              " {'op': 'listSet', 'class': 'Person', 'primaryKey': 1, 'path': ['maybe'], 'index': 0, 'value': 4}]");

    /* Cancelled: nothing of it stays. */
    BEGIN(r);
    OK(atoll_list_insert(r, "Person", "1", "numbers", 1, "43"));
    OK(atoll_list_move(r, "Person", "1", "numbers", 1, 0));
    CHECK_PROP(r, "1", "numbers", "[43,42]");
    CHECK(atoll_realm_cancel_write(r));
    CHECK_PROP(r, "1", "numbers", "[42]");
    CHECK_NO_LOG(r, 3);
    atoll_realm_close(r);
}

static void test_list_moves_in_both_directions(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    OK(atoll_list_insert(r, "Person", "1", "numbers", 3, "4"));
    OK(atoll_list_insert(r, "Person", "1", "numbers", 4, "5")); /* 1 2 3 4 5 */
    OK(atoll_list_move(r, "Person", "1", "numbers", 0, 4));     /* 2 3 4 5 1 */
    CHECK_PROP(r, "1", "numbers", "[2,3,4,5,1]");
    OK(atoll_list_move(r, "Person", "1", "numbers", 4, 0));     /* 1 2 3 4 5 */
    CHECK_PROP(r, "1", "numbers", "[1,2,3,4,5]");
    OK(atoll_list_move(r, "Person", "1", "numbers", 1, 2));     /* 1 3 2 4 5: neighbours */
    CHECK_PROP(r, "1", "numbers", "[1,3,2,4,5]");
    OK(atoll_list_move(r, "Person", "1", "numbers", 3, 2));     /* 1 3 4 2 5 */
    CHECK_PROP(r, "1", "numbers", "[1,3,4,2,5]");
    COMMIT(r);
    CHECK_LOG(r, 1,
              "[{'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 3, 'value': 4},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 4, 'value': 5},"
              " {'op': 'listMove', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 0, 'toIndex': 4, 'value': 1},"
              " {'op': 'listMove', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 4, 'toIndex': 0, 'value': 1},"
              " {'op': 'listMove', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 1, 'toIndex': 2, 'value': 2},"
              " {'op': 'listMove', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 3, 'toIndex': 2, 'value': 4}]");

    /* A move onto itself succeeds and changes nothing. */
    BEGIN(r);
    OK(atoll_list_move(r, "Person", "1", "numbers", 2, 2));
    OK(atoll_list_move(r, "Person", "1", "numbers", 4, 4));
    COMMIT(r);
    CHECK_PROP(r, "1", "numbers", "[1,3,4,2,5]");
    atoll_realm_close(r);
}

/* MARK: - Sets */

static void test_sets_insert_and_erase(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    bool b;
    BEGIN(r);
    b = false;
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"a\"", &b));
    CHECK(b);
    b = false;
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"b\"", &b));
    CHECK(b);
    b = true;
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"a\"", &b)); /* there already */
    CHECK(!b);
    CHECK_PROP(r, "1", "tags", "['a','b']");
    b = false;
    OK(atoll_set_erase(r, "Person", "1", "tags", "\"a\"", &b));
    CHECK(b);
    b = true;
    OK(atoll_set_erase(r, "Person", "1", "tags", "\"zz\"", &b)); /* never there */
    CHECK(!b);
    b = true;
    OK(atoll_set_erase(r, "Person", "1", "tags", "\"a\"", &b)); /* not any more */
    CHECK(!b);
    b = false;
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"c\"", &b));
    CHECK(b);
    b = false;
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"\"", &b)); /* the empty string is a value */
    CHECK(b);
    CHECK_PROP(r, "1", "tags", "['b','c','']");
    COMMIT(r);
    CHECK_PROP(r, "1", "tags", "['b','c','']");
    /* An insert of an element the set holds, or an erase of one it does not, records nothing. */
    CHECK_LOG(r, 1,
              "[{'op': 'setInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['tags'], 'value': 'a'},"
              " {'op': 'setInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['tags'], 'value': 'b'},"
              " {'op': 'setErase', 'class': 'Person', 'primaryKey': 1, 'path': ['tags'], 'value': 'a'},"
              " {'op': 'setInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['tags'], 'value': 'c'},"
              " {'op': 'setInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['tags'], 'value': ''}]");

    /* A transaction of such no-ops changes nothing, so its commit adds no version. */
    BEGIN(r);
    b = true;
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"b\"", &b));
    CHECK(!b);
    b = true;
    OK(atoll_set_erase(r, "Person", "1", "tags", "\"nope\"", &b));
    CHECK(!b);
    COMMIT(r);
    CHECK_NO_LOG(r, 2);
    CHECK_PROP(r, "1", "tags", "['b','c','']");

    /* Order: the order first given; an erased element re-inserted goes last. */
    BEGIN(r);
    OK(atoll_set_erase(r, "Person", "1", "tags", "\"b\"", NULL));
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"b\"", NULL));
    COMMIT(r);
    CHECK_PROP(r, "1", "tags", "['c','','b']");
    atoll_realm_close(r);
}

/* MARK: - Dictionaries */

static void test_dictionaries_set_and_erase(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    bool b;
    BEGIN(r);
    OK(atoll_dictionary_set(r, "Person", "1", "scores", "x", "1"));
    OK(atoll_dictionary_set(r, "Person", "1", "scores", "x", "2")); /* replaced */
    OK(atoll_dictionary_set(r, "Person", "1", "scores", "b", "3"));
    OK(atoll_dictionary_set(r, "Person", "1", "scores", "a", "-4"));
    OK(atoll_dictionary_set(r, "Person", "1", "scores", "with space", "5"));
    CHECK_PROP(r, "1", "scores", "{'a':-4,'b':3,'with space':5,'x':2}"); /* in key order */
    b = false;
    OK(atoll_dictionary_erase(r, "Person", "1", "scores", "x", &b));
    CHECK(b);
    b = true;
    OK(atoll_dictionary_erase(r, "Person", "1", "scores", "x", &b));
    CHECK(!b);
    b = true;
    OK(atoll_dictionary_erase(r, "Person", "1", "scores", "never", &b));
    CHECK(!b);
    OK(atoll_dictionary_erase(r, "Person", "1", "scores", "with space", NULL));
    CHECK_PROP(r, "1", "scores", "{'a':-4,'b':3}");
    COMMIT(r);
    CHECK_PROP(r, "1", "scores", "{'a':-4,'b':3}");
    CHECK_LOG(r, 1,
              "[{'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['scores', 'x'], 'value': 1},"
              " {'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['scores', 'x'], 'value': 2},"
              " {'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['scores', 'b'], 'value': 3},"
              " {'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['scores', 'a'], 'value': -4},"
              " {'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['scores', 'with space'], 'value': 5},"
              " {'op': 'dictionaryErase', 'class': 'Person', 'primaryKey': 1, 'path': ['scores', 'x']},"
              " {'op': 'dictionaryErase', 'class': 'Person', 'primaryKey': 1, 'path': ['scores', 'with space']}]");

    /* An erase of a missing key alone: nothing to commit. */
    BEGIN(r);
    OK(atoll_dictionary_erase(r, "Person", "1", "scores", "x", NULL));
    COMMIT(r);
    CHECK_NO_LOG(r, 2);
    atoll_realm_close(r);
}

/* MARK: - Out parameters */

static void test_out_parameters_report_and_may_be_null(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    /* Each answer is written over a value of the other truth. */
    static const struct { const char *value; bool expected; } inserts[] = {
        { "\"p\"", true }, { "\"q\"", true }, { "\"p\"", false }, { "\"q\"", false }, { "\"r\"", true },
    };
    for (size_t i = 0; i < sizeof inserts / sizeof inserts[0]; i++) {
        bool b = !inserts[i].expected;
        OK(atoll_set_insert(r, "Person", "1", "tags", inserts[i].value, &b));
        CHECK(b == inserts[i].expected);
    }
    static const struct { const char *value; bool expected; } erases[] = {
        { "\"q\"", true }, { "\"q\"", false }, { "\"zz\"", false }, { "\"p\"", true },
    };
    for (size_t i = 0; i < sizeof erases / sizeof erases[0]; i++) {
        bool b = !erases[i].expected;
        OK(atoll_set_erase(r, "Person", "1", "tags", erases[i].value, &b));
        CHECK(b == erases[i].expected);
    }
    CHECK_PROP(r, "1", "tags", "['r']");
    OK(atoll_dictionary_set(r, "Person", "1", "scores", "k", "1"));
    bool b = false;
    OK(atoll_dictionary_erase(r, "Person", "1", "scores", "k", &b));
    CHECK(b);
    b = true;
    OK(atoll_dictionary_erase(r, "Person", "1", "scores", "k", &b));
    CHECK(!b);

    /* NULL out pointers: the same effects, both when something changes and when not. */
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"s\"", NULL));
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"s\"", NULL));
    CHECK_PROP(r, "1", "tags", "['r','s']");
    OK(atoll_set_erase(r, "Person", "1", "tags", "\"r\"", NULL));
    OK(atoll_set_erase(r, "Person", "1", "tags", "\"r\"", NULL));
    CHECK_PROP(r, "1", "tags", "['s']");
    OK(atoll_dictionary_set(r, "Person", "1", "scores", "m", "2"));
    OK(atoll_dictionary_erase(r, "Person", "1", "scores", "m", NULL));
    OK(atoll_dictionary_erase(r, "Person", "1", "scores", "m", NULL));
    CHECK_PROP(r, "1", "scores", "{}");
    /* A link to an object that does not exist is in no set: false, not an error. */
    b = true;
    OK(atoll_set_erase(r, "Person", "1", "favorites", "99", &b));
    CHECK(!b);
    OK(atoll_set_erase(r, "Person", "1", "favorites", "99", NULL));
    COMMIT(r);
    CHECK_PROP(r, "1", "tags", "['s']");
    atoll_realm_close(r);
}

/* MARK: - Embedded elements */

static void test_embedded_elements_are_owned(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    OK(atoll_list_insert(r, "Person", "1", "addresses", 0, J("{'city': 'Oslo'}")));
    OK(atoll_list_insert(r, "Person", "1", "addresses", 1, J("{'city': 'Rome', 'lines': ['Via Appia']}")));
    CHECK_INT(count_of(r, "Address"), 2);
    OK(atoll_list_set(r, "Person", "1", "addresses", 0, J("{'city': 'Bern'}")));
    CHECK_INT(count_of(r, "Address"), 2); /* Oslo is gone */
    OK(atoll_dictionary_set(r, "Person", "1", "homes", "h", J("{'city': 'Kyiv'}")));
    OK(atoll_dictionary_set(r, "Person", "1", "homes", "h", J("{'city': 'Lima'}")));
    OK(atoll_dictionary_set(r, "Person", "1", "homes", "g", J("{'city': 'Graz'}")));
    COMMIT(r);
    CHECK_INT(count_of(r, "Address"), 4); /* Bern, Rome, Lima, Graz: Oslo and Kyiv were replaced */
    CHECK_PROP(r, "1", "addresses", "[{'city':'Bern','lines':[]},{'city':'Rome','lines':['Via Appia']}]");
    CHECK_PROP(r, "1", "homes", "{'g':{'city':'Graz','lines':[]},'h':{'city':'Lima','lines':[]}}");
    /* Embedded elements travel whole in the log. */
    CHECK_LOG(r, 1,
              "[{'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['addresses'], 'index': 0,"
              "  'value': {'city': 'Oslo', 'lines': []}},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['addresses'], 'index': 1,"
              "  'value': {'city': 'Rome', 'lines': ['Via Appia']}},"
              " {'op': 'listSet', 'class': 'Person', 'primaryKey': 1, 'path': ['addresses'], 'index': 0,"
              "  'value': {'city': 'Bern', 'lines': []}},"
              " {'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['homes', 'h'], 'value': {'city': 'Kyiv', 'lines': []}},"
              " {'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['homes', 'h'], 'value': {'city': 'Lima', 'lines': []}},"
              " {'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['homes', 'g'], 'value': {'city': 'Graz', 'lines': []}}]");

    /* A failed replacement keeps the element it would have replaced (the old one is deleted
     * only when the new one is stored). */
    BEGIN(r);
    FAILS(r, atoll_list_set(r, "Person", "1", "addresses", 0, J("{'city': 5}")), ATOLL_ERR_TYPE_MISMATCH, "city");
    FAILS(r, atoll_list_set(r, "Person", "1", "addresses", 1, J("{'zip': '0150'}")), ATOLL_ERR_NO_SUCH_PROPERTY, "zip");
    FAILS(r, atoll_list_set(r, "Person", "1", "addresses", 0, "5"), ATOLL_ERR_TYPE_MISMATCH, "");
    FAILS(r, atoll_list_set(r, "Person", "1", "addresses", 0, "null"), ATOLL_ERR_MISSING_VALUE, "");
    FAILS(r, atoll_dictionary_set(r, "Person", "1", "homes", "h", J("{'city': ['x']}")), ATOLL_ERR_TYPE_MISMATCH, "city");
    FAILS(r, atoll_dictionary_set(r, "Person", "1", "homes", "h", "[]"), ATOLL_ERR_TYPE_MISMATCH, "");
    FAILS(r, atoll_list_insert(r, "Person", "1", "addresses", 0, J("{'lines': [1]}")), ATOLL_ERR_TYPE_MISMATCH, "lines");
    CHECK_INT(count_of(r, "Address"), 4);

    /* Erased elements are deleted with them; a dictionary value set to null drops its object. */
    OK(atoll_list_erase(r, "Person", "1", "addresses", 1));
    CHECK_INT(count_of(r, "Address"), 3);
    bool b = false;
    OK(atoll_dictionary_erase(r, "Person", "1", "homes", "h", &b));
    CHECK(b);
    b = true;
    OK(atoll_dictionary_erase(r, "Person", "1", "homes", "h", &b));
    CHECK(!b);
    CHECK_INT(count_of(r, "Address"), 2);
    OK(atoll_dictionary_set(r, "Person", "1", "homes", "g", "null"));
    CHECK_INT(count_of(r, "Address"), 1);
    /* Moving an embedded element keeps it (and its object). */
    OK(atoll_list_insert(r, "Person", "1", "addresses", 1, J("{'city': 'Nice'}")));
    OK(atoll_list_move(r, "Person", "1", "addresses", 1, 0));
    CHECK_INT(count_of(r, "Address"), 2);
    COMMIT(r);
    CHECK_INT(count_of(r, "Address"), 2);
    CHECK_PROP(r, "1", "addresses", "[{'city':'Nice','lines':[]},{'city':'Bern','lines':[]}]");
    CHECK_PROP(r, "1", "homes", "{'g':null}");
    CHECK_LOG(r, 2,
              "[{'op': 'listErase', 'class': 'Person', 'primaryKey': 1, 'path': ['addresses'], 'index': 1},"
              " {'op': 'dictionaryErase', 'class': 'Person', 'primaryKey': 1, 'path': ['homes', 'h']},"
              " {'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['homes', 'g'], 'value': null},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['addresses'], 'index': 1,"
              "  'value': {'city': 'Nice', 'lines': []}},"
              " {'op': 'listMove', 'class': 'Person', 'primaryKey': 1, 'path': ['addresses'], 'index': 1, 'toIndex': 0, 'value': {'city': 'Nice', 'lines': []}}]");

    /* The last one erased: none left. */
    BEGIN(r);
    OK(atoll_list_erase(r, "Person", "1", "addresses", 0));
    OK(atoll_list_erase(r, "Person", "1", "addresses", 0));
    COMMIT(r);
    CHECK_INT(count_of(r, "Address"), 0);
    CHECK_PROP(r, "1", "addresses", "[]");

    /* An embedded object's own collections are changed through its owner, not directly. */
    BEGIN(r);
    FAILS(r, atoll_list_insert(r, "Address", "1", "lines", 0, "\"x\""), ATOLL_ERR_INVALID_ARGUMENT, "embedded");
    CHECK(atoll_realm_cancel_write(r));
    atoll_realm_close(r);
}

/* MARK: - Links */

static void test_links_by_primary_key_or_whole(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    OK(atoll_list_insert(r, "Person", "1", "dogs", 0, "5"));
    OK(atoll_list_insert(r, "Person", "1", "dogs", 0, J("{'id': 6, 'name': 'new'}"))); /* created */
    OK(atoll_list_insert(r, "Person", "1", "dogs", 2, "5"));                          /* twice: lists may */
    OK(atoll_list_set(r, "Person", "1", "dogs", 2, J("{'id': 7}")));
    CHECK_PROP(r, "1", "dogs", "[6,5,7]");
    bool b = false;
    OK(atoll_set_insert(r, "Person", "1", "favorites", J("{'id': 8, 'name': 'Ace'}"), &b));
    CHECK(b);
    b = true;
    OK(atoll_set_insert(r, "Person", "1", "favorites", "8", &b)); /* the same object by key */
    CHECK(!b);
    OK(atoll_set_insert(r, "Person", "1", "favorites", "5", &b));
    CHECK(b);
    OK(atoll_dictionary_set(r, "Person", "1", "pets", "best", "5"));
    OK(atoll_dictionary_set(r, "Person", "1", "pets", "next", J("{'id': 9}")));
    OK(atoll_dictionary_set(r, "Person", "1", "pets", "none", "null")); /* a dictionary of links holds null */
    COMMIT(r);
    CHECK_PROP(r, "1", "dogs", "[6,5,7]");
    CHECK_PROP(r, "1", "favorites", "[8,5]");
    CHECK_PROP(r, "1", "pets", "{'best':5,'next':9,'none':null}");
    char *dog = prop_text(r, "Dog", "6", "name");
    CHECK_STR(dog, "\"new\"");
    free(dog);
    dog = prop_text(r, "Dog", "8", "name");
    CHECK_STR(dog, "\"Ace\"");
    free(dog);
    dog = prop_text(r, "Dog", "7", "name");
    CHECK_STR(dog, "null");
    free(dog);
    CHECK_INT(count_of(r, "Dog"), 5); /* 5, 6, 7, 8, 9 */
    /* Objects given whole are created first: a create and its sets, then the element. */
    CHECK_LOG(r, 1,
              "[{'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['dogs'], 'index': 0, 'value': {'$ref': 'Dog', '$id': 5}},"
              " {'op': 'create', 'class': 'Dog', 'primaryKey': 6, 'path': []},"
              " {'op': 'set', 'class': 'Dog', 'primaryKey': 6, 'path': ['name'], 'value': 'new'},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['dogs'], 'index': 0, 'value': {'$ref': 'Dog', '$id': 6}},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['dogs'], 'index': 2, 'value': {'$ref': 'Dog', '$id': 5}},"
              " {'op': 'create', 'class': 'Dog', 'primaryKey': 7, 'path': []},"
              " {'op': 'set', 'class': 'Dog', 'primaryKey': 7, 'path': ['name'], 'value': null},"
              " {'op': 'listSet', 'class': 'Person', 'primaryKey': 1, 'path': ['dogs'], 'index': 2, 'value': {'$ref': 'Dog', '$id': 7}},"
              " {'op': 'create', 'class': 'Dog', 'primaryKey': 8, 'path': []},"
              " {'op': 'set', 'class': 'Dog', 'primaryKey': 8, 'path': ['name'], 'value': 'Ace'},"
              " {'op': 'setInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['favorites'], 'value': {'$ref': 'Dog', '$id': 8}},"
              " {'op': 'setInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['favorites'], 'value': {'$ref': 'Dog', '$id': 5}},"
              " {'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['pets', 'best'], 'value': {'$ref': 'Dog', '$id': 5}},"
              " {'op': 'create', 'class': 'Dog', 'primaryKey': 9, 'path': []},"
              " {'op': 'set', 'class': 'Dog', 'primaryKey': 9, 'path': ['name'], 'value': null},"
              " {'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['pets', 'next'], 'value': {'$ref': 'Dog', '$id': 9}},"
              " {'op': 'dictionarySet', 'class': 'Person', 'primaryKey': 1, 'path': ['pets', 'none'], 'value': null}]");

    /* An existing primary key given whole: ATOLL_ERR_DUPLICATE_PRIMARY_KEY, and the existing
     * object is not updated either. Missing targets: ATOLL_ERR_NOT_FOUND. */
    BEGIN(r);
    FAILS(r, atoll_list_insert(r, "Person", "1", "dogs", 0, J("{'id': 5, 'name': 'Max'}")), ATOLL_ERR_DUPLICATE_PRIMARY_KEY, "");
    FAILS(r, atoll_list_set(r, "Person", "1", "dogs", 0, J("{'id': 5}")), ATOLL_ERR_DUPLICATE_PRIMARY_KEY, "");
    FAILS(r, atoll_set_insert(r, "Person", "1", "favorites", J("{'id': 6, 'name': 'Max'}"), &b), ATOLL_ERR_DUPLICATE_PRIMARY_KEY, "");
    FAILS(r, atoll_dictionary_set(r, "Person", "1", "pets", "best", J("{'id': 9}")), ATOLL_ERR_DUPLICATE_PRIMARY_KEY, "");
    FAILS(r, atoll_list_insert(r, "Person", "1", "dogs", 0, "99"), ATOLL_ERR_NOT_FOUND, "Dog");
    FAILS(r, atoll_list_set(r, "Person", "1", "dogs", 1, "99"), ATOLL_ERR_NOT_FOUND, "Dog");
    FAILS(r, atoll_set_insert(r, "Person", "1", "favorites", "99", &b), ATOLL_ERR_NOT_FOUND, "Dog");
    FAILS(r, atoll_dictionary_set(r, "Person", "1", "pets", "x", "99"), ATOLL_ERR_NOT_FOUND, "Dog");
    FAILS(r, atoll_list_insert(r, "Person", "1", "dogs", 0, "\"five\""), ATOLL_ERR_TYPE_MISMATCH, "");
    FAILS(r, atoll_set_insert(r, "Person", "1", "favorites", "\"five\"", &b), ATOLL_ERR_TYPE_MISMATCH, "");
    FAILS(r, atoll_list_insert(r, "Person", "1", "dogs", 0, J("{'id': 10, 'name': 3}")), ATOLL_ERR_TYPE_MISMATCH, "name");
    FAILS(r, atoll_list_insert(r, "Person", "1", "dogs", 0, J("{'name': 'no key'}")), ATOLL_ERR_MISSING_VALUE, "");
    COMMIT(r);
    CHECK_NO_LOG(r, 2);
    CHECK_INT(count_of(r, "Dog"), 5);

    /* A deleted target leaves lists and sets; erase by key then finds nothing. */
    BEGIN(r);
    CHECK(atoll_object_delete(r, "Dog", "5"));
    b = true;
    OK(atoll_set_erase(r, "Person", "1", "favorites", "5", &b));
    CHECK(!b);
    OK(atoll_set_erase(r, "Person", "1", "favorites", "8", &b));
    CHECK(b);
    COMMIT(r);
    CHECK_PROP(r, "1", "dogs", "[6,7]");
    CHECK_PROP(r, "1", "favorites", "[]");
    atoll_realm_close(r);
}

/* MARK: - Mixed */

static void test_mixed_lists_hold_links_and_nested_values(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    OK(atoll_list_insert(r, "Person", "1", "anything", 0, J("{'$ref': 'Dog', '$id': 5}")));
    OK(atoll_list_insert(r, "Person", "1", "anything", 1, J("[1, 'two', [3.5, null]]")));
    OK(atoll_list_insert(r, "Person", "1", "anything", 2, J("{'k': {'a': [true]}}")));
    OK(atoll_list_insert(r, "Person", "1", "anything", 3, "null"));
    OK(atoll_list_insert(r, "Person", "1", "anything", 4, J("{'$date': '2024-05-01T12:00:00Z'}")));
    OK(atoll_list_set(r, "Person", "1", "anything", 3, J("'s'")));
    OK(atoll_list_move(r, "Person", "1", "anything", 1, 4));
    CHECK_PROP(r, "1", "anything",
               "[{'$ref':'Dog','$id':5},{'k':{'a':[true]}},'s',{'$date':'2024-05-01T12:00:00.000Z'},[1,'two',[3.5,null]]]");
    COMMIT(r);
    CHECK_PROP(r, "1", "anything",
               "[{'$ref':'Dog','$id':5},{'k':{'a':[true]}},'s',{'$date':'2024-05-01T12:00:00.000Z'},[1,'two',[3.5,null]]]");
    CHECK_LOG(r, 1,
              "[{'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['anything'], 'index': 0, 'value': {'$ref': 'Dog', '$id': 5}},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['anything'], 'index': 1, 'value': [1, 'two', [3.5, null]]},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['anything'], 'index': 2, 'value': {'k': {'a': [true]}}},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['anything'], 'index': 3, 'value': null},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['anything'], 'index': 4, 'value': {'$date': '2024-05-01T12:00:00.000Z'}},"
              " {'op': 'listSet', 'class': 'Person', 'primaryKey': 1, 'path': ['anything'], 'index': 3, 'value': 's'},"
              " {'op': 'listMove', 'class': 'Person', 'primaryKey': 1, 'path': ['anything'], 'index': 1, 'toIndex': 4, 'value': [1, 'two', [3.5, null]]}]");

    BEGIN(r);
    FAILS(r, atoll_list_insert(r, "Person", "1", "anything", 0, J("{'$ref': 'Dog', '$id': 99}")), ATOLL_ERR_NOT_FOUND, "99");
    FAILS(r, atoll_list_insert(r, "Person", "1", "anything", 0, J("{'$ref': 'Cat', '$id': 1}")), ATOLL_ERR_NO_SUCH_CLASS, "Cat");
    FAILS(r, atoll_list_insert(r, "Person", "1", "anything", 0, J("{'$ref': 'Address', '$id': 1}")), ATOLL_ERR_TYPE_MISMATCH, "embedded");
    FAILS(r, atoll_list_insert(r, "Person", "1", "anything", 0, J("[{'a.b': 1}]")), ATOLL_ERR_INVALID_ARGUMENT, "a.b");
    FAILS(r, atoll_list_set(r, "Person", "1", "anything", 0, J("{'$x': 1}")), ATOLL_ERR_INVALID_JSON, "$x");
    /* A nested list is a value of mixed lists only. */
    FAILS(r, atoll_list_insert(r, "Person", "1", "numbers", 0, "[1]"), ATOLL_ERR_TYPE_MISMATCH, "list");
    FAILS(r, atoll_list_set(r, "Person", "1", "numbers", 0, "[]"), ATOLL_ERR_TYPE_MISMATCH, "list");
    FAILS(r, atoll_set_insert(r, "Person", "1", "tags", J("['a']"), NULL), ATOLL_ERR_TYPE_MISMATCH, "");
    FAILS(r, atoll_dictionary_set(r, "Person", "1", "scores", "k", "[1]"), ATOLL_ERR_TYPE_MISMATCH, "");
    COMMIT(r);
    CHECK_NO_LOG(r, 2);

    /* A linked object deleted: the mixed element becomes null. */
    BEGIN(r);
    CHECK(atoll_object_delete(r, "Dog", "5"));
    COMMIT(r);
    CHECK_PROP(r, "1", "anything",
               "[null,{'k':{'a':[true]}},'s',{'$date':'2024-05-01T12:00:00.000Z'},[1,'two',[3.5,null]]]");
    atoll_realm_close(r);
}

/* MARK: - Objects without a primary key */

static void test_objects_without_primary_key_by_row_key(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    char *memo = atoll_object_create(r, "Note", J("{'_atoll_key': 40, 'text': 'forty'}"), ATOLL_UPDATE_ERROR);
    CHECK(memo != NULL);
    atoll_free(memo);
    COMMIT(r);
    BEGIN(r);
    OK(atoll_list_insert(r, "Note", "40", "items", 0, "1"));
    OK(atoll_list_insert(r, "Note", "40", "items", 0, "2"));
    OK(atoll_list_move(r, "Note", "40", "items", 0, 1));
    FAILS(r, atoll_list_insert(r, "Note", "41", "items", 0, "1"), ATOLL_ERR_NOT_FOUND, "");
    FAILS(r, atoll_list_insert(r, "Note", "\"forty\"", "items", 0, "1"), ATOLL_ERR_TYPE_MISMATCH, "");
    COMMIT(r);
    atoll_results_t *res = atoll_results_query(r, "Note", NULL, NULL);
    json_t *notes = res ? TAKE_JSON(atoll_results_json(res, 0, 0)) : NULL;
    atoll_results_free(res);
    CHECK_JSON(notes, "[{'text': 'forty', 'items': [1, 2]}]");
    json_decref(notes);
    CHECK_LOG(r, 2,
              "[{'op': 'listInsert', 'class': 'Note', 'primaryKey': 40, 'path': ['items'], 'index': 0, 'value': 1},"
              " {'op': 'listInsert', 'class': 'Note', 'primaryKey': 40, 'path': ['items'], 'index': 0, 'value': 2},"
              " {'op': 'listMove', 'class': 'Note', 'primaryKey': 40, 'path': ['items'], 'index': 0, 'toIndex': 1, 'value': 2}]");
    atoll_realm_close(r);
}

/* MARK: - Errors change nothing */

static void test_index_out_of_range(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    static const size_t bad[] = { 4, 5, 1000, (size_t)-1, (size_t)-2, SIZE_MAX / 2, SIZE_MAX / 2 + 1 };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t at = bad[i];
        FAILS(r, atoll_list_insert(r, "Person", "1", "numbers", at, "7"), ATOLL_ERR_INVALID_ARGUMENT, "out of range");
        FAILS(r, atoll_list_set(r, "Person", "1", "numbers", at, "7"), ATOLL_ERR_INVALID_ARGUMENT, "out of range");
        FAILS(r, atoll_list_erase(r, "Person", "1", "numbers", at), ATOLL_ERR_INVALID_ARGUMENT, "out of range");
        FAILS(r, atoll_list_move(r, "Person", "1", "numbers", at, 0), ATOLL_ERR_INVALID_ARGUMENT, "out of range");
        FAILS(r, atoll_list_move(r, "Person", "1", "numbers", 0, at), ATOLL_ERR_INVALID_ARGUMENT, "out of range");
        FAILS(r, atoll_list_move(r, "Person", "1", "numbers", at, at), ATOLL_ERR_INVALID_ARGUMENT, "out of range");
    }
    /* Exactly at the end: insert may (0...count), the others may not (0..count-1). */
    FAILS(r, atoll_list_set(r, "Person", "1", "numbers", 3, "7"), ATOLL_ERR_INVALID_ARGUMENT, "0...2");
    FAILS(r, atoll_list_erase(r, "Person", "1", "numbers", 3), ATOLL_ERR_INVALID_ARGUMENT, "0...2");
    FAILS(r, atoll_list_move(r, "Person", "1", "numbers", 3, 0), ATOLL_ERR_INVALID_ARGUMENT, "0...2");
    FAILS(r, atoll_list_move(r, "Person", "1", "numbers", 0, 3), ATOLL_ERR_INVALID_ARGUMENT, "0...2");
    FAILS(r, atoll_list_insert(r, "Person", "1", "numbers", 4, "7"), ATOLL_ERR_INVALID_ARGUMENT, "0...3");
    /* An empty list. */
    FAILS(r, atoll_list_erase(r, "Person", "1", "dogs", 0), ATOLL_ERR_INVALID_ARGUMENT, "it is empty");
    FAILS(r, atoll_list_set(r, "Person", "1", "dogs", 0, "5"), ATOLL_ERR_INVALID_ARGUMENT, "it is empty");
    FAILS(r, atoll_list_move(r, "Person", "1", "dogs", 0, 0), ATOLL_ERR_INVALID_ARGUMENT, "it is empty");
    FAILS(r, atoll_list_insert(r, "Person", "1", "dogs", 1, "5"), ATOLL_ERR_INVALID_ARGUMENT, "out of range");
    FAILS(r, atoll_list_insert(r, "Person", "1", "addresses", 1, J("{'city': 'Oslo'}")), ATOLL_ERR_INVALID_ARGUMENT, "out of range");
    CHECK_INT(count_of(r, "Address"), 0);
    COMMIT(r);
    CHECK_NO_LOG(r, 1);
    CHECK_PROP(r, "1", "numbers", "[1,2,3]");
    atoll_realm_close(r);
}

static void test_wrong_kind_of_collection(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    /* List operations on a set, a dictionary, a plain property, a backlink property. */
    static const char *const not_lists[] = { "tags", "favorites", "scores", "pets", "homes", "name", "id" };
    for (size_t i = 0; i < sizeof not_lists / sizeof not_lists[0]; i++) {
        const char *p = not_lists[i];
        FAILS(r, atoll_list_insert(r, "Person", "1", p, 0, "\"a\""), ATOLL_ERR_INVALID_ARGUMENT, "not a list");
        FAILS(r, atoll_list_set(r, "Person", "1", p, 0, "\"a\""), ATOLL_ERR_INVALID_ARGUMENT, "not a list");
        FAILS(r, atoll_list_erase(r, "Person", "1", p, 0), ATOLL_ERR_INVALID_ARGUMENT, "not a list");
        FAILS(r, atoll_list_move(r, "Person", "1", p, 0, 0), ATOLL_ERR_INVALID_ARGUMENT, "not a list");
    }
    FAILS(r, atoll_list_insert(r, "Dog", "5", "owners", 0, "1"), ATOLL_ERR_INVALID_ARGUMENT, "not a list");
    FAILS(r, atoll_list_erase(r, "Dog", "5", "owners", 0), ATOLL_ERR_INVALID_ARGUMENT, "not a list");
    static const char *const not_sets[] = { "numbers", "dogs", "addresses", "anything", "scores", "pets", "name" };
    for (size_t i = 0; i < sizeof not_sets / sizeof not_sets[0]; i++) {
        const char *p = not_sets[i];
        FAILS(r, atoll_set_insert(r, "Person", "1", p, "1", NULL), ATOLL_ERR_INVALID_ARGUMENT, "not a set");
        FAILS(r, atoll_set_erase(r, "Person", "1", p, "1", NULL), ATOLL_ERR_INVALID_ARGUMENT, "not a set");
    }
    FAILS(r, atoll_set_insert(r, "Dog", "5", "owners", "1", NULL), ATOLL_ERR_INVALID_ARGUMENT, "not a set");
    static const char *const not_dictionaries[] = { "numbers", "dogs", "addresses", "anything", "tags", "favorites", "name" };
    for (size_t i = 0; i < sizeof not_dictionaries / sizeof not_dictionaries[0]; i++) {
        const char *p = not_dictionaries[i];
        FAILS(r, atoll_dictionary_set(r, "Person", "1", p, "k", "1"), ATOLL_ERR_INVALID_ARGUMENT, "not a dictionary");
        FAILS(r, atoll_dictionary_erase(r, "Person", "1", p, "k", NULL), ATOLL_ERR_INVALID_ARGUMENT, "not a dictionary");
    }
    FAILS(r, atoll_dictionary_set(r, "Dog", "5", "owners", "k", "1"), ATOLL_ERR_INVALID_ARGUMENT, "not a dictionary");
    COMMIT(r);
    CHECK_NO_LOG(r, 1);
    atoll_realm_close(r);
}

static void test_unknown_class_property_and_object(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    for (op_kind k = 0; k < OP_COUNT; k++) {
        op_args a = valid_args(k, r);
        a.cls = "Cat";
        FAILS_OP(r, k, &a, ATOLL_ERR_NO_SUCH_CLASS, "Cat", "unknown class");
        a.cls = "";
        FAILS_OP(r, k, &a, ATOLL_ERR_NO_SUCH_CLASS, "", "empty class name");
        a = valid_args(k, r);
        a.prop = "nope";
        FAILS_OP(r, k, &a, ATOLL_ERR_NO_SUCH_PROPERTY, "nope", "unknown property");
        a.prop = "";
        FAILS_OP(r, k, &a, ATOLL_ERR_NO_SUCH_PROPERTY, "", "empty property name");
        a = valid_args(k, r);
        a.pk = "2";
        FAILS_OP(r, k, &a, ATOLL_ERR_NOT_FOUND, "", "unknown object");
        a.pk = "\"1\"";
        FAILS_OP(r, k, &a, ATOLL_ERR_TYPE_MISMATCH, "", "primary key of the wrong type");
        a.pk = "null";
        FAILS_OP(r, k, &a, ATOLL_ERR_TYPE_MISMATCH, "", "null primary key");
    }
    COMMIT(r);
    CHECK_NO_LOG(r, 1);
    atoll_realm_close(r);
}

static void test_bad_values_and_json(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    bool b = true;
    BEGIN(r);
    /* Values of the wrong type. */
    FAILS(r, atoll_list_insert(r, "Person", "1", "numbers", 0, "\"x\""), ATOLL_ERR_TYPE_MISMATCH, "numbers");
    FAILS(r, atoll_list_insert(r, "Person", "1", "numbers", 0, "1.5"), ATOLL_ERR_TYPE_MISMATCH, "numbers");
    FAILS(r, atoll_list_insert(r, "Person", "1", "numbers", 0, "true"), ATOLL_ERR_TYPE_MISMATCH, "numbers");
    FAILS(r, atoll_list_insert(r, "Person", "1", "numbers", 0, J("{'a': 1}")), ATOLL_ERR_TYPE_MISMATCH, "numbers");
    FAILS(r, atoll_list_set(r, "Person", "1", "numbers", 1, "\"x\""), ATOLL_ERR_TYPE_MISMATCH, "numbers");
    FAILS(r, atoll_set_insert(r, "Person", "1", "tags", "5", &b), ATOLL_ERR_TYPE_MISMATCH, "tags");
    FAILS(r, atoll_set_erase(r, "Person", "1", "tags", "5", &b), ATOLL_ERR_TYPE_MISMATCH, "tags");
    FAILS(r, atoll_dictionary_set(r, "Person", "1", "scores", "k", "\"five\""), ATOLL_ERR_TYPE_MISMATCH, "scores");
    FAILS(r, atoll_list_insert(r, "Person", "1", "addresses", 0, "\"Oslo\""), ATOLL_ERR_TYPE_MISMATCH, "");
    /* Null where the collection cannot hold it. */
    FAILS(r, atoll_list_insert(r, "Person", "1", "numbers", 0, "null"), ATOLL_ERR_MISSING_VALUE, "null");
    FAILS(r, atoll_list_set(r, "Person", "1", "numbers", 0, "null"), ATOLL_ERR_MISSING_VALUE, "null");
    FAILS(r, atoll_list_insert(r, "Person", "1", "dogs", 0, "null"), ATOLL_ERR_MISSING_VALUE, "null");
    FAILS(r, atoll_list_insert(r, "Person", "1", "addresses", 0, "null"), ATOLL_ERR_MISSING_VALUE, "");
    FAILS(r, atoll_set_insert(r, "Person", "1", "tags", "null", &b), ATOLL_ERR_MISSING_VALUE, "null");
    FAILS(r, atoll_set_insert(r, "Person", "1", "favorites", "null", &b), ATOLL_ERR_MISSING_VALUE, "null");
    FAILS(r, atoll_dictionary_set(r, "Person", "1", "scores", "k", "null"), ATOLL_ERR_MISSING_VALUE, "");
    /* Bad dictionary keys. */
    static const char *const keys[] = { "", "a.b", ".", "a.", "$x", "$" };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char expected[64];
        snprintf(expected, sizeof expected, "dictionary key '%s' is not allowed", keys[i]);
        FAILS(r, atoll_dictionary_set(r, "Person", "1", "scores", keys[i], "1"), ATOLL_ERR_INVALID_ARGUMENT, expected);
        FAILS(r, atoll_dictionary_set(r, "Person", "1", "homes", keys[i], J("{'city': 'x'}")), ATOLL_ERR_INVALID_ARGUMENT, expected);
        FAILS(r, atoll_dictionary_set(r, "Person", "1", "pets", keys[i], "5"), ATOLL_ERR_INVALID_ARGUMENT, expected);
        FAILS(r, atoll_dictionary_erase(r, "Person", "1", "scores", keys[i], &b), ATOLL_ERR_INVALID_ARGUMENT, expected);
    }
    /* Not JSON, or not one JSON value. */
    static const char *const junk[] = { "", "nul", "{", "[1,", "1 2", "'x'", "\"unterminated", "{\"a\": }" };
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        const char *v = junk[i];
        FAILS(r, atoll_list_insert(r, "Person", "1", "anything", 0, v), ATOLL_ERR_INVALID_JSON, "");
        FAILS(r, atoll_list_set(r, "Person", "1", "anything", 0, v), ATOLL_ERR_INVALID_JSON, "");
        FAILS(r, atoll_set_insert(r, "Person", "1", "tags", v, &b), ATOLL_ERR_INVALID_JSON, "");
        FAILS(r, atoll_set_erase(r, "Person", "1", "tags", v, &b), ATOLL_ERR_INVALID_JSON, "");
        FAILS(r, atoll_dictionary_set(r, "Person", "1", "scores", "k", v), ATOLL_ERR_INVALID_JSON, "");
        /* ... as the primary key. */
        FAILS(r, atoll_list_insert(r, "Person", v, "numbers", 0, "1"), ATOLL_ERR_INVALID_JSON, "");
        FAILS(r, atoll_list_erase(r, "Person", v, "numbers", 0), ATOLL_ERR_INVALID_JSON, "");
        FAILS(r, atoll_list_move(r, "Person", v, "numbers", 0, 1), ATOLL_ERR_INVALID_JSON, "");
        FAILS(r, atoll_dictionary_erase(r, "Person", v, "scores", "k", &b), ATOLL_ERR_INVALID_JSON, "");
    }
    FAILS(r, atoll_dictionary_set(r, "Person", "1", "scores", "k", J("{'$numberInt': 'x'}")), ATOLL_ERR_INVALID_JSON, "");
    COMMIT(r);
    CHECK_NO_LOG(r, 1);
    CHECK_PROP(r, "1", "numbers", "[1,2,3]");
    atoll_realm_close(r);
}

static void test_text_that_is_not_utf8(void) {
    /* JSON arguments that are not UTF-8 are ATOLL_ERR_INVALID_JSON, as for atoll_object_create()
     * (they once were ATOLL_ERR_INVALID_ARGUMENT here). Names and keys are not JSON: a class or
     * property that is not UTF-8 is an invalid argument, a key a bad key. */
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    static const char *const not_utf8[] = { "\xff", "\"\xc3\x28\"", "\"\xed\xa0\x80\"", "[\"\xf8\x88\x80\x80\x80\"]" };
    for (op_kind k = 0; k < OP_COUNT; k++) {
        for (size_t i = 0; i < sizeof not_utf8 / sizeof not_utf8[0]; i++) {
            op_args a = valid_args(k, r);
            a.pk = not_utf8[i];
            FAILS_OP(r, k, &a, ATOLL_ERR_INVALID_JSON, "primary_key_json", "primary key not UTF-8");
            if (takes_value(k)) {
                a = valid_args(k, r);
                a.value = not_utf8[i];
                FAILS_OP(r, k, &a, ATOLL_ERR_INVALID_JSON, "value_json", "value not UTF-8");
            }
        }
        op_args a = valid_args(k, r);
        a.cls = "Pers\xffon";
        FAILS_OP(r, k, &a, ATOLL_ERR_INVALID_ARGUMENT, "class_name", "class name not UTF-8");
        a = valid_args(k, r);
        a.prop = "\xff";
        FAILS_OP(r, k, &a, ATOLL_ERR_INVALID_ARGUMENT, "property", "property not UTF-8");
        if (takes_key(k)) {
            a = valid_args(k, r);
            a.key = "\xff";
            FAILS_OP(r, k, &a, ATOLL_ERR_INVALID_ARGUMENT, "key", "key not UTF-8");
        }
    }
    COMMIT(r);
    CHECK_NO_LOG(r, 1);
    atoll_realm_close(r);
}

static void test_null_arguments(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    for (op_kind k = 0; k < OP_COUNT; k++) {
        op_args a = valid_args(k, r);
        a.realm = NULL;
        FAILS_OP(r, k, &a, ATOLL_ERR_INVALID_ARGUMENT, "realm", "NULL realm");
        a = valid_args(k, r);
        a.cls = NULL;
        FAILS_OP(r, k, &a, ATOLL_ERR_INVALID_ARGUMENT, "class_name", "NULL class_name");
        a = valid_args(k, r);
        a.pk = NULL;
        FAILS_OP(r, k, &a, ATOLL_ERR_INVALID_ARGUMENT, "primary_key_json", "NULL primary_key_json");
        a = valid_args(k, r);
        a.prop = NULL;
        FAILS_OP(r, k, &a, ATOLL_ERR_INVALID_ARGUMENT, "property", "NULL property");
        if (takes_value(k)) {
            a = valid_args(k, r);
            a.value = NULL;
            FAILS_OP(r, k, &a, ATOLL_ERR_INVALID_ARGUMENT, "value_json", "NULL value_json");
        }
        if (takes_key(k)) {
            a = valid_args(k, r);
            a.key = NULL;
            FAILS_OP(r, k, &a, ATOLL_ERR_INVALID_ARGUMENT, "key", "NULL key");
        }
        /* All of them at once. */
        op_args none = { NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL };
        FAILS_OP(r, k, &none, ATOLL_ERR_INVALID_ARGUMENT, "", "every argument NULL");
    }
    COMMIT(r);
    CHECK_NO_LOG(r, 1);

    /* The same calls with their arguments given do succeed. */
    BEGIN(r);
    for (op_kind k = 0; k < OP_COUNT; k++) {
        op_args a = valid_args(k, r);
        bool ok = run_op(k, &a);
        if (!CHECK(ok)) printf("        %s\n", OP_NAMES[k]);
    }
    COMMIT(r);
    CHECK_PROP(r, "1", "numbers", "[2,1,3]"); /* insert 7, set 7, erase, move 0 -> 1 */
    CHECK_PROP(r, "1", "tags", "[]");
    CHECK_PROP(r, "1", "scores", "{}");
    atoll_realm_close(r);
}

static void test_outside_a_write_transaction(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    bool b = true;
    for (int round = 0; round < 2; round++) {
        /* Never in a write; then after a write that was cancelled. */
        for (op_kind k = 0; k < OP_COUNT; k++) {
            op_args a = valid_args(k, r);
            a.out = &b;
            FAILS_OP(r, k, &a, ATOLL_ERR_NOT_IN_WRITE, "write transaction", "outside a write");
            /* Even with arguments that are wrong in other ways. */
            a.prop = "nope";
            FAILS_OP(r, k, &a, ATOLL_ERR_NOT_IN_WRITE, "", "outside a write, unknown property");
        }
        BEGIN(r);
        OK(atoll_list_insert(r, "Person", "1", "numbers", 0, "0"));
        CHECK(atoll_realm_cancel_write(r));
    }
    /* After a commit too. */
    BEGIN(r);
    OK(atoll_list_insert(r, "Person", "1", "numbers", 0, "0"));
    COMMIT(r);
    for (op_kind k = 0; k < OP_COUNT; k++) {
        op_args a = valid_args(k, r);
        FAILS_OP(r, k, &a, ATOLL_ERR_NOT_IN_WRITE, "", "after a commit");
    }
    CHECK_INT(version_of(r), 2);
    CHECK_PROP(r, "1", "numbers", "[0,1,2,3]");
    atoll_realm_close(r);
}

static void test_closed_realm_and_foreign_pointers(void) {
    const char *path = atoll_tmp_realm_path("closed");
    atoll_realm_t *r = open_realm(path, NULL);
    atoll_realm_t *other = open_realm(path, NULL);
    if (!CHECK(r != NULL && other != NULL)) return;
    seed(r);
    CHECK(atoll_realm_refresh(other));
    bool b = true;

    /* Closed while in a write transaction (which is cancelled), then called: ATOLL_ERR_CLOSED;
     * the file, seen through another handle, is unchanged. */
    BEGIN(r);
    OK(atoll_list_insert(r, "Person", "1", "numbers", 0, "0"));
    atoll_realm_close(r);
    for (op_kind k = 0; k < OP_COUNT; k++) {
        op_args a = valid_args(k, r);
        a.out = &b;
        FAILS_OP(other, k, &a, ATOLL_ERR_CLOSED, "closed", "closed realm");
    }
    CHECK_PROP(other, "1", "numbers", "[1,2,3]");
    CHECK_INT(version_of(other), 1);
    atoll_realm_close(r); /* again: a no-op */

    /* Pointers that never were realms: memory of the host, and handles of other kinds. */
    int some_int = 42;
    long long zeros[16] = { 0 };
    unsigned char *junk = malloc(256);
    if (!CHECK(junk != NULL)) return;
    memset(junk, 0xAB, 256);
    atoll_results_t *results = atoll_results_query(other, "Person", NULL, NULL);
    atoll_results_t *frozen = atoll_results_freeze(results);
    CHECK(results != NULL && frozen != NULL);
    void *fakes[] = { &some_int, zeros, junk, results, frozen };
    CHECK(atoll_realm_begin_write(other));
    for (size_t i = 0; i < sizeof fakes / sizeof fakes[0]; i++) {
        for (op_kind k = 0; k < OP_COUNT; k++) {
            op_args a = valid_args(k, (atoll_realm_t *)fakes[i]);
            a.out = &b;
            FAILS_OP(other, k, &a, ATOLL_ERR_INVALID_ARGUMENT, "", "a pointer that is not a realm");
        }
    }
    CHECK(atoll_realm_commit(other));
    CHECK_INT(version_of(other), 1);
    CHECK(some_int == 42);
    CHECK(zeros[0] == 0 && zeros[15] == 0);
    bool intact = true;
    for (int i = 0; i < 256; i++) intact = intact && junk[i] == 0xAB;
    CHECK(intact);
    free(junk);
    /* The results still work. */
    size_t n = 0;
    CHECK(atoll_results_count(results, &n));
    CHECK_INT(n, 1);
    atoll_results_free(frozen);
    atoll_results_free(results);
    atoll_realm_close(other);
}

static void test_errors_between_successes_record_only_the_successes(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    BEGIN(r);
    OK(atoll_list_insert(r, "Person", "1", "numbers", 3, "4"));
    FAILS(r, atoll_list_insert(r, "Person", "1", "numbers", 9, "5"), ATOLL_ERR_INVALID_ARGUMENT, "out of range");
    FAILS(r, atoll_list_insert(r, "Person", "1", "dogs", 0, J("{'id': 5}")), ATOLL_ERR_DUPLICATE_PRIMARY_KEY, "");
    FAILS(r, atoll_list_insert(r, "Person", "1", "dogs", 0, "77"), ATOLL_ERR_NOT_FOUND, "");
    FAILS(r, atoll_list_set(r, "Person", "1", "addresses", 0, J("{'city': 'x'}")), ATOLL_ERR_INVALID_ARGUMENT, "empty");
    OK(atoll_list_insert(r, "Person", "1", "addresses", 0, J("{'city': 'Oslo'}")));
    FAILS(r, atoll_list_set(r, "Person", "1", "addresses", 0, J("{'city': 1}")), ATOLL_ERR_TYPE_MISMATCH, "");
    FAILS(r, atoll_dictionary_set(r, "Person", "1", "scores", "a.b", "1"), ATOLL_ERR_INVALID_ARGUMENT, "a.b");
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"t\"", NULL));
    FAILS(r, atoll_set_insert(r, "Person", "1", "tags", "null", NULL), ATOLL_ERR_MISSING_VALUE, "");
    COMMIT(r);
    CHECK_PROP(r, "1", "numbers", "[1,2,3,4]");
    CHECK_PROP(r, "1", "addresses", "[{'city':'Oslo','lines':[]}]");
    CHECK_PROP(r, "1", "tags", "['t']");
    CHECK_INT(count_of(r, "Address"), 1);
    CHECK_INT(count_of(r, "Dog"), 1);
    CHECK_LOG(r, 1,
              "[{'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['numbers'], 'index': 3, 'value': 4},"
              " {'op': 'listInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['addresses'], 'index': 0, 'value': {'city': 'Oslo', 'lines': []}},"
              " {'op': 'setInsert', 'class': 'Person', 'primaryKey': 1, 'path': ['tags'], 'value': 't'}]");
    atoll_realm_close(r);
}

/* MARK: - Observers (host delivery) */

typedef struct inbox {
    json_t *items; /* the changes received and not taken yet */
    int calls;
    int freed;
    int bad; /* calls with NULL or non-JSON text */
} inbox_t;

static void inbox_init(inbox_t *in) {
    memset(in, 0, sizeof *in);
    in->items = json_array();
}

static void on_change(void *userdata, const char *changes_json) {
    inbox_t *in = userdata;
    json_t *value = changes_json ? json_loads(changes_json, 0, NULL) : NULL;
    in->calls++;
    if (value) json_array_append_new(in->items, value);
    else in->bad++;
}

static void on_free(void *userdata) { ((inbox_t *)userdata)->freed++; }

/* What arrived since the last take (a new reference to an array). */
static json_t *take(inbox_t *in) {
    json_t *taken = in->items;
    in->items = json_array();
    return taken;
}

/* Exactly one change arrived, and it equals `expected`. */
static void expect_one_(inbox_t *in, const char *expected, const char *file, int line) {
    json_t *batch = take(in);
    char expr[64];
    snprintf(expr, sizeof expr, "exactly one change (got %zu)", json_array_size(batch));
    atoll_check_(json_array_size(batch) == 1, expr, file, line);
    if (json_array_size(batch) == 1)
        atoll_check_json_(json_array_get(batch, 0), expected, "the change", file, line);
    json_decref(batch);
}
#define EXPECT_ONE(in, expected) expect_one_((in), (expected), __FILE__, __LINE__)
#define EXPECT_NONE(in)                                                                            \
    do {                                                                                           \
        json_t *batch_ = take(in);                                                                 \
        CHECK_INT(json_array_size(batch_), 0);                                                     \
        json_decref(batch_);                                                                       \
    } while (0)

#define DELIVER(r) CHECK(atoll_realm_deliver_notifications(r))

/* A collection change with the given members (JSON texts, ' for "). */
static const char *change(const char *deletions, const char *insertions, const char *modifications,
                          const char *moves, const char *deleted_keys, const char *inserted_keys,
                          const char *modified_keys, int count) {
    static char text[2048];
    snprintf(text, sizeof text,
             "{'initial': false, 'deleted': false, 'deletions': %s, 'insertions': %s,"
             " 'modifications': %s, 'moves': %s, 'deletedKeys': %s, 'insertedKeys': %s,"
             " 'modifiedKeys': %s, 'count': %d}",
             deletions, insertions, modifications, moves, deleted_keys, inserted_keys, modified_keys,
             count);
    return text;
}

/* A host-delivery realm, seeded, with an observer of Person 1's `prop` whose initial call has
 * been taken; NULL on failure. */
static atoll_realm_t *observed_realm(const char *name, const char *prop, inbox_t *in,
                                     atoll_token_t **token) {
    atoll_realm_t *r = open_realm(atoll_tmp_realm_path(name), "host");
    if (!CHECK(r != NULL)) return NULL;
    seed(r);
    *token = atoll_collection_observe(r, "Person", "1", prop, NULL, on_change, in, on_free);
    CHECK(*token != NULL);
    DELIVER(r);
    json_t *initial = take(in);
    CHECK_INT(json_array_size(initial), 1);
    CHECK(json_is_true(json_object_get(json_array_get(initial, 0), "initial")));
    json_decref(initial);
    return r;
}

static void test_list_observer_gets_exact_element_changes(void) {
    inbox_t in;
    inbox_init(&in);
    atoll_token_t *token = NULL;
    atoll_realm_t *r = observed_realm("observer", "numbers", &in, &token);
    if (r == NULL) {
        json_decref(in.items);
        return;
    }

    /* On [1, 2, 3]: set at 1, move 2 -> 0, insert 7 at 3, erase at 1: [3, 2, 7]. The old 1 left,
     * 3 moved from 2 to 0, 2 was set in place (now at 1), 7 entered at 2. */
    BEGIN(r);
    OK(atoll_list_set(r, "Person", "1", "numbers", 1, "2"));
    OK(atoll_list_move(r, "Person", "1", "numbers", 2, 0));
    OK(atoll_list_insert(r, "Person", "1", "numbers", 3, "7"));
    OK(atoll_list_erase(r, "Person", "1", "numbers", 1));
    COMMIT(r);
    CHECK_INT(in.calls, 1); /* nothing before the host delivers */
    DELIVER(r);
    CHECK_PROP(r, "1", "numbers", "[3,2,7]");
    EXPECT_ONE(&in, change("[0, 2]", "[0, 2]", "[1]", "[{'from': 2, 'to': 0}]", "[1]", "[7]", "[2]", 3));

    /* One operation at a time, on [3, 2, 7]. */
    BEGIN(r);
    OK(atoll_list_insert(r, "Person", "1", "numbers", 1, "8")); /* 3 8 2 7 */
    COMMIT(r);
    DELIVER(r);
    EXPECT_ONE(&in, change("[]", "[1]", "[]", "[]", "[]", "[8]", "[]", 4));

    BEGIN(r);
    OK(atoll_list_erase(r, "Person", "1", "numbers", 3)); /* 3 8 2 */
    COMMIT(r);
    DELIVER(r);
    EXPECT_ONE(&in, change("[3]", "[]", "[]", "[]", "[7]", "[]", "[]", 3));

    BEGIN(r);
    OK(atoll_list_set(r, "Person", "1", "numbers", 2, "20")); /* 3 8 20 */
    COMMIT(r);
    DELIVER(r);
    EXPECT_ONE(&in, change("[]", "[]", "[2]", "[]", "[]", "[]", "[20]", 3));

    BEGIN(r);
    OK(atoll_list_move(r, "Person", "1", "numbers", 0, 2)); /* 8 20 3 */
    COMMIT(r);
    DELIVER(r);
    EXPECT_ONE(&in, change("[0]", "[2]", "[]", "[{'from': 0, 'to': 2}]", "[]", "[]", "[]", 3));

    /* A transaction of failed operations (and a move onto itself) calls nothing. */
    BEGIN(r);
    CHECK(!atoll_list_insert(r, "Person", "1", "numbers", 9, "1"));
    CHECK(!atoll_list_set(r, "Person", "1", "numbers", 0, "\"x\""));
    CHECK(!atoll_list_erase(r, "Person", "1", "numbers", (size_t)-1));
    OK(atoll_list_move(r, "Person", "1", "numbers", 1, 1));
    COMMIT(r);
    DELIVER(r);
    EXPECT_NONE(&in);

    /* Failed operations between others change nothing of the change. */
    BEGIN(r);
    CHECK(!atoll_list_move(r, "Person", "1", "numbers", 0, 3));
    OK(atoll_list_insert(r, "Person", "1", "numbers", 0, "1")); /* 1 8 20 3 */
    CHECK(!atoll_list_insert(r, "Person", "1", "numbers", 0, "null"));
    COMMIT(r);
    DELIVER(r);
    EXPECT_ONE(&in, change("[]", "[0]", "[]", "[]", "[]", "[1]", "[]", 4));

    /* A cancelled write calls nothing. */
    BEGIN(r);
    OK(atoll_list_erase(r, "Person", "1", "numbers", 0));
    CHECK(atoll_realm_cancel_write(r));
    DELIVER(r);
    EXPECT_NONE(&in);

    CHECK_INT(in.bad, 0);
    atoll_token_free(token);
    CHECK_INT(in.freed, 1);
    atoll_realm_close(r);
    json_decref(in.items);
}

static void test_set_and_dictionary_observers_get_element_changes(void) {
    inbox_t tags, scores;
    inbox_init(&tags);
    inbox_init(&scores);
    atoll_token_t *tags_token = NULL;
    atoll_realm_t *r = observed_realm("observer-set", "tags", &tags, &tags_token);
    if (r == NULL) {
        json_decref(tags.items);
        json_decref(scores.items);
        return;
    }
    atoll_token_t *scores_token =
        atoll_collection_observe(r, "Person", "1", "scores", NULL, on_change, &scores, on_free);
    CHECK(scores_token != NULL);
    DELIVER(r);
    json_decref(take(&scores));

    BEGIN(r);
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"a\"", NULL));
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"b\"", NULL));
    OK(atoll_dictionary_set(r, "Person", "1", "scores", "m", "1"));
    OK(atoll_dictionary_set(r, "Person", "1", "scores", "c", "2"));
    COMMIT(r);
    DELIVER(r);
    EXPECT_ONE(&tags, change("[]", "[0, 1]", "[]", "[]", "[]", "['a', 'b']", "[]", 2));
    EXPECT_ONE(&scores, change("[]", "[0, 1]", "[]", "[]", "[]", "['c', 'm']", "[]", 2));

    /* Set: erase a, insert c, a no-op insert of b. Dictionary (key order c, m -> c, m, z):
     * m replaced, z added. */
    BEGIN(r);
    OK(atoll_set_erase(r, "Person", "1", "tags", "\"a\"", NULL));
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"c\"", NULL));
    OK(atoll_set_insert(r, "Person", "1", "tags", "\"b\"", NULL));
    OK(atoll_dictionary_set(r, "Person", "1", "scores", "m", "10"));
    OK(atoll_dictionary_set(r, "Person", "1", "scores", "z", "3"));
    COMMIT(r);
    DELIVER(r);
    CHECK_PROP(r, "1", "tags", "['b','c']");
    CHECK_PROP(r, "1", "scores", "{'c':2,'m':10,'z':3}");
    EXPECT_ONE(&tags, change("[0]", "[1]", "[]", "[]", "['a']", "['c']", "[]", 2));
    EXPECT_ONE(&scores, change("[]", "[2]", "[1]", "[]", "[]", "['z']", "['m']", 3));

    /* Dictionary erase of c; an erase of a missing key calls nothing more. */
    BEGIN(r);
    OK(atoll_dictionary_erase(r, "Person", "1", "scores", "c", NULL));
    OK(atoll_dictionary_erase(r, "Person", "1", "scores", "nope", NULL));
    COMMIT(r);
    DELIVER(r);
    EXPECT_NONE(&tags);
    EXPECT_ONE(&scores, change("[0]", "[]", "[]", "[]", "['c']", "[]", "[]", 2));

    CHECK_INT(tags.bad + scores.bad, 0);
    atoll_token_free(tags_token);
    atoll_token_free(scores_token);
    CHECK_INT(tags.freed + scores.freed, 2);
    atoll_realm_close(r);
    json_decref(tags.items);
    json_decref(scores.items);
}

/* MARK: - Randomized: changes rebuild the list */

static uint64_t rng;

/* SplitMix64: the same sequence on every platform. */
static uint64_t next_random(void) {
    uint64_t z = (rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static size_t below(size_t n) { return (size_t)(next_random() % n); }

enum { MAX_ELEMENTS = 1024 };

typedef struct int_list {
    long long v[MAX_ELEMENTS];
    size_t n;
} int_list;

static void list_insert_at(int_list *l, size_t at, long long value) {
    memmove(&l->v[at + 1], &l->v[at], (l->n - at) * sizeof l->v[0]);
    l->v[at] = value;
    l->n++;
}

static void list_erase_at(int_list *l, size_t at) {
    memmove(&l->v[at], &l->v[at + 1], (l->n - at - 1) * sizeof l->v[0]);
    l->n--;
}

static bool list_equal(const int_list *a, const int_list *b) {
    return a->n == b->n && memcmp(a->v, b->v, a->n * sizeof a->v[0]) == 0;
}

static void list_print(const char *label, const int_list *l) {
    printf("        %s [", label);
    for (size_t i = 0; i < l->n; i++) printf("%s%lld", i ? ", " : "", l->v[i]);
    printf("]\n");
}

/* Person 1's numbers as read from the realm (false when unreadable). */
static bool read_numbers(atoll_realm_t *r, int_list *out) {
    json_t *obj = GET(r, "Person", "1");
    json_t *arr = json_object_get(obj, "numbers");
    bool ok = json_is_array(arr) && json_array_size(arr) <= MAX_ELEMENTS;
    out->n = 0;
    size_t i;
    json_t *v;
    if (ok) {
        json_array_foreach(arr, i, v) {
            ok = ok && json_is_integer(v);
            out->v[out->n++] = json_integer_value(v);
        }
    }
    json_decref(obj);
    return ok;
}

/* Indices of a change member, checked ascending and below `limit`. */
static bool indices(const json_t *change, const char *member, size_t limit, size_t *out, size_t *n) {
    json_t *arr = json_object_get(change, member);
    *n = 0;
    if (!json_is_array(arr) || json_array_size(arr) > MAX_ELEMENTS) return false;
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || (size_t)json_integer_value(v) >= limit) return false;
        out[*n] = (size_t)json_integer_value(v);
        if (*n > 0 && out[*n] <= out[*n - 1]) return false;
        (*n)++;
    }
    return true;
}

/* Applies `change` to `old` as a host would: deletions from the highest, then insertions (taking
 * the new list's values), then modifications. False when the change is malformed. */
static bool apply_change(const json_t *change, const int_list *old, const int_list *now, int_list *out) {
    static size_t del[MAX_ELEMENTS], ins[MAX_ELEMENTS], mod[MAX_ELEMENTS];
    size_t nd, ni, nm;
    *out = *old;
    if (!indices(change, "deletions", old->n, del, &nd)) return false;
    if (!indices(change, "insertions", now->n, ins, &ni)) return false;
    if (!indices(change, "modifications", now->n, mod, &nm)) return false;
    for (size_t i = nd; i-- > 0;) list_erase_at(out, del[i]);
    for (size_t i = 0; i < ni; i++) {
        if (ins[i] > out->n) return false;
        list_insert_at(out, ins[i], now->v[ins[i]]);
    }
    for (size_t i = 0; i < nm; i++) {
        if (mod[i] >= out->n) return false;
        out->v[mod[i]] = now->v[mod[i]];
    }
    return true;
}

static void random_rounds(uint64_t seed_value, int rounds) {
    inbox_t in;
    inbox_init(&in);
    atoll_token_t *token = NULL;
    atoll_realm_t *r = observed_realm("random", "numbers", &in, &token);
    if (r == NULL) {
        json_decref(in.items);
        return;
    }
    rng = seed_value;
    static int_list model, old, now, rebuilt;
    if (!CHECK(read_numbers(r, &model))) rounds = 0;
    old = model;
    long long next = 100;
    unsigned failures = 0, calls = 0, ops = 0;
    for (int round = 0; round < rounds && failures < 5; round++) {
        bool ok = atoll_realm_begin_write(r);
        size_t count_ops = 1 + below(5);
        for (size_t i = 0; i < count_ops && ok; i++) {
            size_t n = model.n;
            size_t kind = below(5);
            if (n == 0 || n >= MAX_ELEMENTS - 8) kind = n == 0 ? 0 : 1; /* insert into empty, erase from full */
            char value[32];
            ops++;
            switch (kind) {
            case 0: { /* a fresh value */
                size_t at = below(n + 1);
                snprintf(value, sizeof value, "%lld", ++next);
                ok = atoll_list_insert(r, "Person", "1", "numbers", at, value);
                list_insert_at(&model, at, next);
                break;
            }
            case 1: {
                size_t at = below(n);
                ok = atoll_list_erase(r, "Person", "1", "numbers", at);
                list_erase_at(&model, at);
                break;
            }
            case 2: {
                size_t from = below(n), to = below(n);
                ok = atoll_list_move(r, "Person", "1", "numbers", from, to);
                long long moved = model.v[from];
                list_erase_at(&model, from);
                list_insert_at(&model, to, moved);
                break;
            }
            case 3: { /* a fresh value, or one the list holds */
                size_t at = below(n);
                long long v = below(3) == 0 ? model.v[below(n)] : ++next;
                snprintf(value, sizeof value, "%lld", v);
                ok = atoll_list_set(r, "Person", "1", "numbers", at, value);
                model.v[at] = v;
                break;
            }
            default: { /* a duplicate of an element */
                size_t at = below(n + 1);
                long long v = model.v[below(n)];
                snprintf(value, sizeof value, "%lld", v);
                ok = atoll_list_insert(r, "Person", "1", "numbers", at, value);
                list_insert_at(&model, at, v);
                break;
            }
            }
        }
        ok = atoll_realm_commit(r) && ok;
        if (!CHECK(ok)) {
            printf("        round %d: an operation or the commit failed\n", round);
            failures++;
            continue;
        }
        /* The list is what the operations made... */
        if (!CHECK(read_numbers(r, &now) && list_equal(&now, &model))) {
            printf("        round %d (seed %llu)\n", round, (unsigned long long)seed_value);
            list_print("expected", &model);
            list_print("read    ", &now);
            failures++;
            model = now;
        }
        /* ...and the change delivered, applied to the old list, gives it. */
        DELIVER(r);
        json_t *batch = take(&in);
        size_t got = json_array_size(batch);
        calls += (unsigned)got;
        bool changed = !list_equal(&old, &now);
        if (!CHECK(got <= 1 && (!changed || got == 1))) {
            printf("        round %d: %zu changes delivered for a list that %s\n", round, got,
                   changed ? "changed" : "did not change");
            failures++;
        }
        rebuilt = old;
        bool well_formed = true;
        size_t i;
        json_t *c;
        json_array_foreach(batch, i, c) {
            well_formed = well_formed && json_is_false(json_object_get(c, "initial")) &&
                          json_is_false(json_object_get(c, "deleted")) &&
                          atoll_jint(c, "count") == (long long)now.n;
            int_list from = rebuilt;
            well_formed = apply_change(c, &from, &now, &rebuilt) && well_formed;
        }
        if (!CHECK(well_formed && list_equal(&rebuilt, &now))) {
            char *text = json_dumps(batch, JSON_COMPACT);
            printf("        round %d (seed %llu): change %s\n", round, (unsigned long long)seed_value, text);
            free(text);
            list_print("old    ", &old);
            list_print("new    ", &now);
            list_print("rebuilt", &rebuilt);
            failures++;
        }
        json_decref(batch);
        old = now;
    }
    CHECK(calls > (unsigned)rounds / 2); /* most rounds changed the list */
    CHECK(ops >= (unsigned)rounds);
    CHECK_INT(in.bad, 0);
    atoll_token_free(token);
    CHECK_INT(in.freed, 1);
    atoll_realm_close(r);
    json_decref(in.items);
}

static void test_random_list_operations_give_changes_that_rebuild_the_list(void) {
    random_rounds(4242, 60);
    random_rounds(7, 60);
}

/* atoll_object_add_integer on what is not an int property, outside a write, with bad handles:
 * clear errors, nothing changed (the counter case itself is in test_sync.c). */
static void test_add_integer_refuses_what_is_not_a_counter(void) {
    atoll_realm_t *r = open_seeded();
    if (r == NULL) return;
    CHECK(!atoll_object_add_integer(r, "Person", "1", "numbers", 1));
    CHECK_ERR(ATOLL_ERR_NOT_IN_WRITE, "");
    BEGIN(r);
    CHECK(!atoll_object_add_integer(r, "Person", "1", "id", 1));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "not an int property");
    CHECK(!atoll_object_add_integer(r, "Person", "1", "name", 1));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "not an int property");
    CHECK(!atoll_object_add_integer(r, "Person", "1", "numbers", 1));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "not an int property");
    CHECK(!atoll_object_add_integer(r, "Person", "2", "numbers", 1));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "");
    CHECK(!atoll_object_add_integer(r, "Person", "1", "nope", 1));
    CHECK_ERR(ATOLL_ERR_NO_SUCH_PROPERTY, "nope");
    CHECK(!atoll_object_add_integer(r, "Cat", "1", "n", 1));
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Cat");
    CHECK(!atoll_object_add_integer(r, NULL, "1", "n", 1));
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "class_name");
    CHECK(!atoll_object_add_integer(r, "Person", "{", "n", 1));
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "");
    COMMIT(r);
    CHECK_NO_LOG(r, 1);
    atoll_realm_close(r);
    CHECK(!atoll_object_add_integer(r, "Person", "1", "id", 1));
    CHECK_ERR(ATOLL_ERR_CLOSED, "");
}

int main(int argc, char **argv) {
    static const atoll_test_t tests[] = {
        ATOLL_TEST(test_list_insert_set_erase_move),
        ATOLL_TEST(test_list_moves_in_both_directions),
        ATOLL_TEST(test_sets_insert_and_erase),
        ATOLL_TEST(test_dictionaries_set_and_erase),
        ATOLL_TEST(test_out_parameters_report_and_may_be_null),
        ATOLL_TEST(test_embedded_elements_are_owned),
        ATOLL_TEST(test_links_by_primary_key_or_whole),
        ATOLL_TEST(test_mixed_lists_hold_links_and_nested_values),
        ATOLL_TEST(test_objects_without_primary_key_by_row_key),
        ATOLL_TEST(test_index_out_of_range),
        ATOLL_TEST(test_wrong_kind_of_collection),
        ATOLL_TEST(test_unknown_class_property_and_object),
        ATOLL_TEST(test_bad_values_and_json),
        ATOLL_TEST(test_text_that_is_not_utf8),
        ATOLL_TEST(test_null_arguments),
        ATOLL_TEST(test_outside_a_write_transaction),
        ATOLL_TEST(test_closed_realm_and_foreign_pointers),
        ATOLL_TEST(test_errors_between_successes_record_only_the_successes),
        ATOLL_TEST(test_list_observer_gets_exact_element_changes),
        ATOLL_TEST(test_set_and_dictionary_observers_get_element_changes),
        ATOLL_TEST(test_random_list_operations_give_changes_that_rebuild_the_list),
        ATOLL_TEST(test_add_integer_refuses_what_is_not_a_counter),
    };
    return ATOLL_CHECK_MAIN(tests, argc, argv);
}

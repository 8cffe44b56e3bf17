/* test_types.c — sets, dictionaries, mixed values, backlinks (linkingObjects) and objects
 * without a primary key, through the C ABI and its JSON: what is stored and read back, the
 * errors for bad values and dictionary keys, links in mixed values and in the change log, and
 * queries on each. */
#define _XOPEN_SOURCE 700
#include "support/check.h"

#include <stdlib.h>
#include <string.h>

static const char *const SCHEMA =
    "[{\"name\": \"Owner\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"int\", "
    "\"name\": \"string\", \"dogs\": \"Pup[]\", \"best\": \"Pup?\", \"scores\": \"int[]\", "
    "\"tags\": \"string<>\", \"favorites\": \"Pup<>\", \"prices\": \"int{}\", \"pets\": \"Pup{}\", "
    "\"notes\": \"string?{}\", \"anything\": \"mixed\", \"bag\": \"mixed[]\", \"map\": \"mixed{}\"}},"
    "{\"name\": \"Pup\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"int\", "
    "\"name\": \"string\", \"age\": \"int\", "
    "\"owners\": {\"type\": \"linkingObjects\", \"objectType\": \"Owner\", \"property\": \"dogs\"}}},"
    "{\"name\": \"Place\", \"embedded\": true, \"properties\": {\"city\": \"string\"}},"
    "{\"name\": \"Memo\", \"properties\": {\"text\": \"string\"}},"
    "{\"name\": \"Crate\", \"primaryKey\": \"_id\", \"properties\": {\"_id\": \"int\", "
    "\"memo\": \"Memo?\", \"memos\": \"Memo[]\", \"held\": \"mixed\", \"home\": \"Place?\"}}]";

/* An in-memory realm with the schema and four pups (Rex 3, Fido 7, Ace 10, Bo 1), in a write
 * transaction. */
static atoll_realm_t *open_with_pups(void) {
    char config[4096];
    snprintf(config, sizeof config, "{\"inMemory\": true, \"changeLogValues\": true, \"schema\": %s}", SCHEMA);
    atoll_realm_t *r = atoll_realm_open(config);
    if (!CHECK(r != NULL)) return NULL;
    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_objects_create_many(r, "Pup",
                                    "[{\"_id\": 1, \"name\": \"Rex\", \"age\": 3},"
                                    " {\"_id\": 2, \"name\": \"Fido\", \"age\": 7},"
                                    " {\"_id\": 3, \"name\": \"Ace\", \"age\": 10},"
                                    " {\"_id\": 4, \"name\": \"Bo\", \"age\": 1}]",
                                    ATOLL_UPDATE_ERROR, NULL));
    return r;
}

/* A member of an object as compact JSON text (caller frees with free()); NULL when missing. */
static char *member(const json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

/* Checks that member `key` of `obj` reads as `expected` (compact JSON, keys in stored order). */
#define CHECK_MEMBER(obj, key, expected)                                                           \
    do {                                                                                           \
        char *got_ = member((obj), (key));                                                         \
        CHECK_STR(got_, (expected));                                                               \
        free(got_);                                                                                \
    } while (0)

/* The _id of every object of cls matching query, as compact JSON ("[1,2]"); free() it. */
static char *ids_of(atoll_realm_t *r, const char *cls, const char *query, const char *args) {
    atoll_results_t *res = atoll_results_query(r, cls, query, args);
    if (res == NULL) return NULL;
    json_t *all = TAKE_JSON(atoll_results_json(res, 0, 0));
    atoll_results_free(res);
    json_t *ids = json_array();
    size_t i;
    json_t *one;
    json_array_foreach(all, i, one) json_array_append(ids, json_object_get(one, "_id"));
    char *text = json_dumps(ids, JSON_COMPACT);
    json_decref(ids);
    json_decref(all);
    return text;
}

#define CHECK_IDS(r, cls, query, args, expected)                                                   \
    do {                                                                                           \
        char *got_ = ids_of((r), (cls), (query), (args));                                          \
        if (!CHECK_STR(got_, (expected))) printf("        query: %s\n", (query));                  \
        free(got_);                                                                                \
    } while (0)

/* MARK: - Sets */

static void test_sets_keep_distinct_elements_in_the_order_first_given(void) {
    atoll_realm_t *r = open_with_pups();
    if (r == NULL) return;
    json_t *ann = CREATE(r, "Owner",
                         "{\"_id\": 1, \"name\": \"Ann\", \"tags\": [\"b\", \"a\", \"b\", \"\"], "
                         "\"favorites\": [2, 1, 2]}", ATOLL_UPDATE_ERROR);
    CHECK_MEMBER(ann, "tags", "[\"b\",\"a\",\"\"]");
    CHECK_MEMBER(ann, "favorites", "[2,1]");
    json_decref(ann);

    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 2, \"favorites\": [null]}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_MISSING_VALUE, "cannot hold null");
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 2, \"tags\": \"abc\"}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "is a set");
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 2, \"tags\": [1]}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "tags");
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 2, \"favorites\": [99]}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "99");

    /* Given whole again: replaced; a deleted target leaves the set. */
    json_decref(CREATE(r, "Owner", "{\"_id\": 1, \"tags\": [\"z\", \"z\"]}", ATOLL_UPDATE_MODIFIED));
    CHECK(atoll_object_delete(r, "Pup", "2"));
    CHECK(atoll_realm_commit(r));
    ann = GET(r, "Owner", "1");
    CHECK_MEMBER(ann, "tags", "[\"z\"]");
    CHECK_MEMBER(ann, "favorites", "[1]");
    json_decref(ann);
    CHECK(atoll_object_get(r, "Owner", "2") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    atoll_realm_close(r);
}

/* MARK: - Dictionaries */

static void test_dictionaries_read_in_key_order(void) {
    atoll_realm_t *r = open_with_pups();
    if (r == NULL) return;
    json_t *ann = CREATE(r, "Owner",
                         "{\"_id\": 1, \"prices\": {\"pear\": 2, \"apple\": 5}, "
                         "\"pets\": {\"b\": 2, \"a\": null}, \"notes\": {\"x\": null}}",
                         ATOLL_UPDATE_ERROR);
    CHECK_MEMBER(ann, "prices", "{\"apple\":5,\"pear\":2}");
    CHECK_MEMBER(ann, "pets", "{\"a\":null,\"b\":2}");
    CHECK_MEMBER(ann, "notes", "{\"x\":null}");
    json_decref(ann);

    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 2, \"prices\": {\"a\": null}}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_MISSING_VALUE, "");
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 2, \"prices\": [1]}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "is a dictionary");
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 2, \"prices\": {\"a\": \"five\"}}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "prices");

    /* A deleted target stays in a dictionary of links as null. */
    CHECK(atoll_object_delete(r, "Pup", "2"));
    CHECK(atoll_realm_commit(r));
    ann = GET(r, "Owner", "1");
    CHECK_MEMBER(ann, "pets", "{\"a\":null,\"b\":null}");
    json_decref(ann);
    atoll_realm_close(r);
}

static void test_bad_dictionary_keys(void) {
    atoll_realm_t *r = open_with_pups();
    if (r == NULL) return;
    static const char *const properties[] = { "prices", "map", "anything" };
    static const char *const keys[] = { "", "a.b", ".", "$x" };
    char json[256], expected[64];
    for (size_t p = 0; p < 3; p++) {
        for (size_t k = 0; k < 4; k++) {
            /* Beside another key, the dictionary rule refuses it and names it. */
            snprintf(json, sizeof json, "{\"_id\": 1, \"%s\": {\"ok\": 1, \"%s\": 2}}", properties[p], keys[k]);
            CHECK(atoll_object_create(r, "Owner", json, ATOLL_UPDATE_ERROR) == NULL);
            snprintf(expected, sizeof expected, "dictionary key '%s' is not allowed", keys[k]);
            CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, expected);
        }
    }
    /* Nested inside a mixed list. */
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 1, \"bag\": [{\"k\": {\"a.b\": 1}}]}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "dictionary key 'a.b' is not allowed");
    /* An object whose first key starts with '$' is an Extended JSON value to the parser: an
     * unknown one is invalid JSON, a known one a value the dictionary refuses. */
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 1, \"prices\": {\"$x\": 1}}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "unknown Extended JSON type '$x'");
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 1, \"map\": {\"$date\": 0}}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "is a dictionary");
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 1, \"prices\": {\"a\\u0000b\": 1}}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "NUL");
    CHECK(atoll_object_get(r, "Owner", "1") == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    atoll_realm_close(r);
}

/* MARK: - Mixed */

static void test_mixed_holds_every_kind_of_value(void) {
    static const char *const values[] = {
        "null", "true", "false", "0", "-7", "9223372036854775807", "1.5", "1.0", "\"\"", "\"s\"",
        "{\"$binary\": {\"base64\": \"AAE=\", \"subType\": \"00\"}}",
        "{\"$date\": \"2024-05-01T12:00:00.123Z\"}",
        "{\"$date\": {\"$numberLong\": \"-446061900000\"}}",
        "{\"$oid\": \"65f0a1b2c3d4e5f60718293a\"}",
        "{\"$uuid\": \"f81d4fae-7dec-11d0-a765-00a0c91e6bf6\"}",
        "{\"$numberDecimal\": \"1.25\"}",
        "{\"$numberDouble\": \"NaN\"}",
        "{\"$ref\": \"Pup\", \"$id\": 2}",
        "[]",
        "[1, \"x\", null, [false], {\"k\": 2}, {\"$ref\": \"Pup\", \"$id\": 3}]",
        "{}",
        "{\"z\": 1, \"a\": {\"deep\": [{\"$ref\": \"Pup\", \"$id\": 1}]}}",
    };
    atoll_realm_t *r = open_with_pups();
    if (r == NULL) return;
    char json[512];
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        snprintf(json, sizeof json, "{\"_id\": %zu, \"anything\": %s, \"bag\": [%s], \"map\": {\"k\": %s}}",
                 i + 1, values[i], values[i], values[i]);
        json_t *stored = CREATE(r, "Owner", json, ATOLL_UPDATE_ERROR);
        if (!CHECK(stored != NULL)) {
            printf("        value: %s\n", values[i]);
            continue;
        }
        json_t *expected = atoll_parse(values[i]);
        char key[32];
        snprintf(key, sizeof key, "%zu", i + 1);
        json_t *got = GET(r, "Owner", key);
        json_t *read[] = { stored, got };
        for (int k = 0; k < 2; k++) {
            json_t *anything = json_object_get(read[k], "anything");
            /* The same JSON value, of the same JSON type: an integer stays an integer (1.0
             * a real, true a boolean), dates and links keep their Extended JSON form. */
            bool same = json_equal(anything, expected) ||
                        (json_is_real(expected) && json_is_real(anything) &&
                         json_real_value(anything) == json_real_value(expected));
            if (!CHECK(same && json_typeof(anything) == json_typeof(expected))) {
                char *text = json_dumps(anything, JSON_COMPACT | JSON_ENCODE_ANY);
                printf("        wrote %s, read %s\n", values[i], text);
                free(text);
            }
            CHECK(json_equal(json_array_get(json_object_get(read[k], "bag"), 0), anything));
            CHECK(json_equal(json_object_get(json_object_get(read[k], "map"), "k"), anything));
        }
        json_decref(expected);
        json_decref(got);
        json_decref(stored);
    }
    /* A dictionary in a mixed value reads in key order. */
    json_t *last = GET(r, "Owner", "22");
    CHECK_MEMBER(last, "anything", "{\"a\":{\"deep\":[{\"$ref\":\"Pup\",\"$id\":1}]},\"z\":1}");
    json_decref(last);

    /* Links that cannot be. */
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 99, \"anything\": {\"$ref\": \"Pup\", \"$id\": 99}}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 99, \"anything\": {\"$ref\": \"Cat\", \"$id\": 1}}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NO_SUCH_CLASS, "Cat");
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 99, \"anything\": {\"$ref\": \"Place\", \"$id\": 1}}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "embedded");
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 99, \"anything\": {\"$ref\": \"Pup\"}}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "\"$ref\"");
    CHECK(atoll_object_create(r, "Owner", "{\"_id\": 99, \"anything\": {\"$ref\": 1, \"$id\": 1}}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_JSON, "\"$ref\"");
    CHECK(atoll_realm_commit(r));
    atoll_realm_close(r);
}

static void test_links_in_mixed_values_follow_deletes_and_reach_the_change_log(void) {
    atoll_realm_t *r = open_with_pups();
    if (r == NULL) return;
    CHECK(atoll_realm_commit(r));
    uint64_t before = 0;
    CHECK(atoll_realm_version(r, &before));
    CHECK(atoll_realm_begin_write(r));
    json_decref(CREATE(r, "Owner",
                       "{\"_id\": 1, \"anything\": {\"$ref\": \"Pup\", \"$id\": 1}, "
                       "\"bag\": [{\"$ref\": \"Pup\", \"$id\": 1}, 5], "
                       "\"map\": {\"a\": {\"$ref\": \"Pup\", \"$id\": 2}}, \"dogs\": [1, 2], \"best\": 2}",
                       ATOLL_UPDATE_ERROR));
    CHECK(atoll_realm_commit(r));

    /* In the change log every link is {"$ref", "$id"}, ordinary link properties too. */
    json_t *log = TAKE_JSON(atoll_realm_changes(r, before, 0));
    json_t *instructions = json_object_get(json_array_get(log, 0), "instructions");
    int links = 0;
    size_t i;
    json_t *one;
    json_array_foreach(instructions, i, one) {
        json_t *value = json_object_get(one, "value");
        const char *prop = json_string_value(json_array_get(json_object_get(one, "path"), 0));
        if (prop == NULL || strcmp(atoll_jstr(one, "class"), "Owner") != 0) continue;
        if (strcmp(prop, "anything") == 0 || strcmp(prop, "best") == 0 || strcmp(prop, "dogs") == 0 ||
            strcmp(prop, "map") == 0 || (strcmp(prop, "bag") == 0 && atoll_jint(one, "index") == 0)) {
            CHECK_STR(atoll_jstr(value, "$ref"), "Pup");
            CHECK(json_is_integer(json_object_get(value, "$id")));
            links++;
        }
    }
    CHECK_INT(links, 6); /* anything, best, dogs x2, map.a, bag[0] */
    json_decref(log);

    /* An ordinary link property still reads as the target's primary key. */
    json_t *ann = GET(r, "Owner", "1");
    CHECK_MEMBER(ann, "best", "2");
    json_decref(ann);

    CHECK(atoll_realm_begin_write(r));
    CHECK(atoll_object_delete(r, "Pup", "1"));
    CHECK(atoll_realm_commit(r));
    ann = GET(r, "Owner", "1");
    CHECK_MEMBER(ann, "anything", "null");
    CHECK_MEMBER(ann, "bag", "[null,5]");
    CHECK_MEMBER(ann, "dogs", "[2]");
    CHECK_MEMBER(ann, "map", "{\"a\":{\"$ref\":\"Pup\",\"$id\":2}}");
    json_decref(ann);
    atoll_realm_close(r);
}

/* MARK: - Backlinks and keys */

static void test_backlinks_are_computed_queryable_and_not_in_objects(void) {
    atoll_realm_t *r = open_with_pups();
    if (r == NULL) return;
    json_decref(CREATE(r, "Owner", "{\"_id\": 1, \"name\": \"Ann\", \"dogs\": [1, 2]}", ATOLL_UPDATE_ERROR));
    json_decref(CREATE(r, "Owner", "{\"_id\": 2, \"name\": \"Bob\", \"dogs\": [1, 1]}", ATOLL_UPDATE_ERROR));
    CHECK(atoll_object_create(r, "Pup", "{\"_id\": 9, \"owners\": []}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_INVALID_ARGUMENT, "linkingObjects");
    CHECK(atoll_realm_commit(r));

    json_t *rex = GET(r, "Pup", "1");
    CHECK(rex != NULL && json_object_get(rex, "owners") == NULL);
    CHECK_INT(json_object_size(rex), 3);
    json_decref(rex);
    json_t *schema = TAKE_JSON(atoll_realm_schema(r));
    json_t *owners = json_object_get(json_object_get(json_array_get(schema, 1), "properties"), "owners");
    CHECK_STR(atoll_jstr(owners, "type"), "linkingObjects");
    CHECK_STR(atoll_jstr(owners, "objectType"), "Owner");
    CHECK_STR(atoll_jstr(owners, "property"), "dogs");
    json_decref(schema);

    CHECK_IDS(r, "Pup", "owners.@count > 0", NULL, "[1,2]");
    CHECK_IDS(r, "Pup", "owners.@count == 2", NULL, "[1]");
    CHECK_IDS(r, "Pup", "@links.Owner.dogs.name == $0", "[\"Bob\"]", "[1]");
    CHECK_IDS(r, "Pup", "@links.@count == 0", NULL, "[3,4]");
    CHECK_IDS(r, "Pup", "SUBQUERY(owners, $o, $o.name == 'Ann').@count == 1", NULL, "[1,2]");
    CHECK(atoll_results_query(r, "Pup", "@links.Owner.name.@count > 0", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_INVALID, "not a link to 'Pup'");
    atoll_realm_close(r);
}

static void test_objects_without_primary_key_are_named_by_their_key(void) {
    atoll_realm_t *r = open_with_pups();
    if (r == NULL) return;
    json_t *memo = CREATE(r, "Memo", "{\"_atoll_key\": 40, \"text\": \"forty\"}", ATOLL_UPDATE_ERROR);
    CHECK_STR(atoll_jstr(memo, "text"), "forty");
    CHECK(json_object_get(memo, "_atoll_key") == NULL); /* the key is not a property */
    json_decref(memo);
    json_t *crate = CREATE(r, "Crate",
                           "{\"_id\": 1, \"memo\": 40, \"memos\": [40], \"held\": {\"$ref\": \"Memo\", \"$id\": 40}}",
                           ATOLL_UPDATE_ERROR);
    CHECK_MEMBER(crate, "memo", "40");
    CHECK_MEMBER(crate, "memos", "[40]");
    CHECK_MEMBER(crate, "held", "{\"$ref\":\"Memo\",\"$id\":40}");
    json_decref(crate);
    CHECK(atoll_object_create(r, "Memo", "{\"_atoll_key\": 40}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_DUPLICATE_PRIMARY_KEY, "");
    json_decref(CREATE(r, "Memo", "{\"_atoll_key\": 40, \"text\": \"forty!\"}", ATOLL_UPDATE_MODIFIED));
    CHECK(atoll_object_create(r, "Crate", "{\"_id\": 2, \"memo\": 41}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_NOT_FOUND, "");
    CHECK(atoll_object_create(r, "Memo", "{\"_atoll_key\": \"x\"}", ATOLL_UPDATE_ERROR) == NULL);
    CHECK_ERR(ATOLL_ERR_TYPE_MISMATCH, "");
    CHECK(atoll_realm_commit(r));
    CHECK_IDS(r, "Crate", "memo.text == 'forty!'", NULL, "[1]");
    CHECK_IDS(r, "Crate", "held == $0", "[{\"$ref\": \"Memo\", \"$id\": 40}]", "[1]");
    atoll_realm_close(r);
}

/* MARK: - Queries */

static void test_queries_on_collections_and_mixed(void) {
    atoll_realm_t *r = open_with_pups();
    if (r == NULL) return;
    CHECK(atoll_objects_create_many(r, "Owner",
        "[{\"_id\": 1, \"name\": \"Ann\", \"dogs\": [1, 2], \"best\": 2, \"scores\": [1, 2, 3],"
        "  \"tags\": [\"a\", \"b\"], \"prices\": {\"apple\": 5, \"pear\": 2}, \"pets\": {\"first\": 3},"
        "  \"anything\": 5, \"bag\": [1, \"x\"]},"
        " {\"_id\": 2, \"name\": \"Bob\", \"dogs\": [3], \"scores\": [10], \"tags\": [\"c\"],"
        "  \"prices\": {\"apple\": 9}, \"anything\": \"5\", \"bag\": [1.0]},"
        " {\"_id\": 3, \"name\": \"Cid\", \"anything\": [1, {\"k\": \"v\"}], \"bag\": [{\"$ref\": \"Pup\", \"$id\": 4}]},"
        " {\"_id\": 4, \"name\": \"Dee\", \"anything\": 5.0, \"prices\": {\"kiwi\": 1}},"
        " {\"_id\": 5, \"name\": \"Eve\", \"anything\": true},"
        " {\"_id\": 6, \"name\": \"Fay\", \"anything\": {\"$ref\": \"Pup\", \"$id\": 1}}]",
        ATOLL_UPDATE_ERROR, NULL));
    CHECK(atoll_realm_commit(r));
    static const struct { const char *query, *args, *expected; } cases[] = {
        { "tags == 'a'", NULL, "[1]" },
        { "ANY tags IN $0", "[[\"c\", \"z\"]]", "[2]" },
        { "NONE tags == 'a'", NULL, "[2,3,4,5,6]" },
        { "{1, 10} IN scores", NULL, "[1,2]" },
        { "scores == ANY {3, 10}", NULL, "[1,2]" },
        { "scores.@sum > 5", NULL, "[1,2]" },
        { "scores.@avg == 2", NULL, "[1]" },
        { "scores.@sum * 2 > 10", NULL, "[1,2]" },
        { "dogs.@avg.age == 5", NULL, "[1]" },
        { "SUBQUERY(dogs, $d, $d.age > 2).@count == 2", NULL, "[1]" },
        { "prices.@keys == $0", "[\"kiwi\"]", "[4]" },
        { "prices.@values > 4", NULL, "[1,2]" },
        { "prices['apple'] > 6", NULL, "[2]" },
        { "pets['first'].name == 'Ace'", NULL, "[1]" },
        { "anything == 5", NULL, "[1,4]" },
        { "anything == '5'", NULL, "[2]" },
        { "anything == $0", "[true]", "[5]" },
        { "anything == $0", "[{\"$ref\": \"Pup\", \"$id\": 1}]", "[6]" },
        { "anything.@type == 'numeric'", NULL, "[1,4]" },
        { "anything.@type IN {'bool', 'list'}", NULL, "[3,5]" },
        { "anything[1]['k'] == 'v'", NULL, "[3]" },
        { "bag == $0", "[{\"$ref\": \"Pup\", \"$id\": 4}]", "[3]" },
        { "ANY bag.@type == 'string'", NULL, "[1]" },
        { "best.@type == 'link'", NULL, "[1]" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_IDS(r, "Owner", cases[i].query, cases[i].args, cases[i].expected);
    CHECK(atoll_results_query(r, "Owner", "tags.@sum > 1", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_INVALID, "'@sum' needs numbers");
    CHECK(atoll_results_query(r, "Owner", "anything.@type == 'colour'", NULL) == NULL);
    CHECK_ERR(ATOLL_ERR_QUERY_INVALID, "unknown type name");
    atoll_realm_close(r);
}

int main(int argc, char **argv) {
    static const atoll_test_t tests[] = {
        ATOLL_TEST(test_sets_keep_distinct_elements_in_the_order_first_given),
        ATOLL_TEST(test_dictionaries_read_in_key_order),
        ATOLL_TEST(test_bad_dictionary_keys),
        ATOLL_TEST(test_mixed_holds_every_kind_of_value),
        ATOLL_TEST(test_links_in_mixed_values_follow_deletes_and_reach_the_change_log),
        ATOLL_TEST(test_backlinks_are_computed_queryable_and_not_in_objects),
        ATOLL_TEST(test_objects_without_primary_key_are_named_by_their_key),
        ATOLL_TEST(test_queries_on_collections_and_mixed),
    };
    return ATOLL_CHECK_MAIN(tests, argc, argv);
}

/*
 * cabi.c — the benchmark workloads through Atoll's C ABI (include/atoll.h), objects crossing as
 * JSON text, as a C host without a JSON library would write it.
 *
 *   usage: cabi DBFILE N
 *
 * Prints "<name> <seconds>" lines, "check <name> <value>" lines and "#" comments. Main figures:
 * W1 W2 W3 W4 W5. Details: W1_json (the part of W1 spent formatting JSON text), W5_read (the
 * part of W5 spent reading the batches), W5_json (parsing pages and formatting batches).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "atoll.h"
#include "file_bytes.h"

#define BATCH 10000
#define BENCH_SEED 20240601ULL
#define W4_READS 100000

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Prints the figure and, as a comment, the CLOCK_MONOTONIC span it covers (to cut a profile
 * recorded with `perf record -k mono` into workloads). */
static void emit(const char *name, double t0, double t1) {
    printf("%s %.6f\n# span %s %.6f %.6f\n", name, t1 - t0, name, t0, t1);
}

static void die(const char *what) {
    atoll_error_t e;
    atoll_last_error(&e);
    fprintf(stderr, "cabi: %s: %s (%s)\n", what, e.message, atoll_status_name(e.code));
    exit(1);
}

/* The benchmark's shared random keys (same generator as bench/raw_sqlite.c). */
static uint64_t rng_state;
static uint64_t splitmix64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A growable text buffer. */
typedef struct { char *p; size_t len, cap; } buf_t;
static void buf_reserve(buf_t *b, size_t more) {
    if (b->len + more + 1 <= b->cap) return;
    while (b->len + more + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 1 << 16;
    b->p = realloc(b->p, b->cap);
    if (!b->p) { fprintf(stderr, "cabi: out of memory\n"); exit(1); }
}
static void buf_char(buf_t *b, char c) { buf_reserve(b, 1); b->p[b->len++] = c; b->p[b->len] = 0; }

/* The value of the first integer member "key" after p (keys of these objects are unique). */
static const char *int_member(const char *p, const char *quoted_key, int64_t *out) {
    const char *at = strstr(p, quoted_key);
    if (!at) return NULL;
    at += strlen(quoted_key);
    while (*at == ' ' || *at == ':') at++;
    char *end;
    *out = strtoll(at, &end, 10);
    return end == at ? NULL : end;
}

static size_t count(atoll_realm_t *realm, const char *rql, const char *args) {
    atoll_results_t *r = atoll_results_query(realm, "Item", rql, args);
    if (!r) die("atoll_results_query");
    size_t c = 0;
    if (!atoll_results_count(r, &c)) die("atoll_results_count");
    atoll_results_free(r);
    return c;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: cabi DBFILE N\n"); return 2; }
    const char *path = argv[1];
    int64_t n = strtoll(argv[2], NULL, 10);
    if (n < 1000) { fprintf(stderr, "cabi: N must be >= 1000\n"); return 2; }
    if (atoll_libversion_number() != ATOLL_VERSION_NUMBER) {
        fprintf(stderr, "cabi: header %s, library %s\n", ATOLL_VERSION, atoll_libversion());
        return 1;
    }

    char config[4096];
    snprintf(config, sizeof config,
             "{\"path\": \"%s\", \"schema\": [{\"name\": \"Item\", \"primaryKey\": \"_id\", \"properties\": {"
             "\"_id\": \"int\", \"name\": \"string\", \"age\": {\"type\": \"int\", \"indexed\": true},"
             " \"owner\": \"string\"}}]}", path);
    atoll_realm_t *realm = atoll_realm_open(config);
    if (!realm) die("atoll_realm_open");
    printf("# C ABI (libatoll %s), JSON text, batches of %d, N=%" PRId64 "\n", atoll_libversion(), BATCH, n);

    buf_t b = {0};

    /* W1: n objects in batches of BATCH, each batch one atoll_objects_create_many call, all in
     * one write transaction; formatting the JSON text is part of the time. */
    {
        double json_time = 0;
        double t0 = now();
        if (!atoll_realm_begin_write(realm)) die("begin_write");
        for (int64_t start = 0; start < n; start += BATCH) {
            int64_t end = start + BATCH < n ? start + BATCH : n;
            double j0 = now();
            b.len = 0;
            buf_char(&b, '[');
            for (int64_t i = start; i < end; i++) {
                buf_reserve(&b, 128);
                b.len += (size_t)snprintf(b.p + b.len, 128,
                                          "%s{\"_id\":%" PRId64 ",\"name\":\"name-%" PRId64 "\",\"age\":%" PRId64
                                          ",\"owner\":\"owner-%" PRId64 "\"}",
                                          i == start ? "" : ",", i, i, i % 100, i % 1000);
            }
            buf_char(&b, ']');
            json_time += now() - j0;
            size_t written = 0;
            if (!atoll_objects_create_many(realm, "Item", b.p, ATOLL_UPDATE_ERROR, &written)) die("create_many");
            if ((int64_t)written != end - start) { fprintf(stderr, "cabi: W1 wrote %zu\n", written); return 1; }
        }
        if (!atoll_realm_commit(realm)) die("commit");
        emit("W1", t0, now());
        printf("W1_json %.6f\n", json_time);
        printf("W1_file %lld\n", file_bytes(path));
    }

    /* W2: count age == 42, 100 times (query + count each time). */
    {
        size_t c = 0;
        double t0 = now();
        for (int r = 0; r < 100; r++) c = count(realm, "age == $0", "[42]");
        emit("W2", t0, now());
        printf("check W2 %zu\n", c);
    }

    /* W3: count owner == 'owner-7' AND age > 50, 10 times. */
    {
        size_t c = 0;
        double t0 = now();
        for (int r = 0; r < 10; r++) c = count(realm, "owner == $0 AND age > $1", "[\"owner-7\", 50]");
        emit("W3", t0, now());
        printf("check W3 %zu\n", c);
    }

    /* W4: 100,000 primary-key reads of name with atoll_object_get (the name is taken out of the
     * returned object's JSON text). */
    {
        int64_t *keys = malloc(sizeof(int64_t) * W4_READS);
        rng_state = BENCH_SEED;
        for (int i = 0; i < W4_READS; i++) keys[i] = (int64_t)(splitmix64() % (uint64_t)n);
        uint64_t total_len = 0;
        char key[32];
        double t0 = now();
        for (int i = 0; i < W4_READS; i++) {
            snprintf(key, sizeof key, "%" PRId64, keys[i]);
            char *obj = atoll_object_get(realm, "Item", key);
            if (!obj) die("atoll_object_get");
            const char *name = strstr(obj, "\"name\"");
            if (!name || !(name = strchr(name + 6, '"'))) { fprintf(stderr, "cabi: no name in %s\n", obj); return 1; }
            const char *end = strchr(name + 1, '"');
            total_len += (uint64_t)(end - name - 1);
            atoll_free(obj);
        }
        emit("W4", t0, now());
        printf("check W4 %" PRIu64 "\n", total_len);
        free(keys);
    }

    /* W5: age = age + 1 on every object, in one write transaction: batches of BATCH objects read
     * with a primary-key range query ("_id >= $0 AND _id < $1", as raw SQLite reads by key) and
     * atoll_results_json, each batch's modified objects {"_id": .., "age": ..} written with one
     * atoll_objects_create_many(..., ATOLL_UPDATE_MODIFIED). */
    {
        atoll_results_t *all = atoll_results_query(realm, "Item", NULL, NULL);
        if (!all) die("atoll_results_query");
        double read_time = 0, json_time = 0;
        int64_t updated = 0;
        double t0 = now();
        if (!atoll_realm_begin_write(realm)) die("begin_write");
        for (size_t offset = 0;; offset += BATCH) {
            double r0 = now();
            char range[64];
            snprintf(range, sizeof range, "[%zu, %zu]", offset, offset + BATCH);
            atoll_results_t *batch = atoll_results_query(realm, "Item", "_id >= $0 AND _id < $1", range);
            if (!batch) die("atoll_results_query");
            char *page = atoll_results_json(batch, 0, 0);
            atoll_results_free(batch);
            if (!page) die("atoll_results_json");
            double j0 = now();
            read_time += j0 - r0;
            b.len = 0;
            buf_char(&b, '[');
            int64_t in_page = 0, id, age;
            const char *p = page;
            while ((p = int_member(p, "\"_id\"", &id)) && (p = int_member(p, "\"age\"", &age))) {
                buf_reserve(&b, 64);
                b.len += (size_t)snprintf(b.p + b.len, 64, "%s{\"_id\":%" PRId64 ",\"age\":%" PRId64 "}",
                                          in_page ? "," : "", id, age + 1);
                in_page++;
            }
            buf_char(&b, ']');
            atoll_free(page);
            json_time += now() - j0;
            if (in_page == 0) break;
            size_t written = 0;
            if (!atoll_objects_create_many(realm, "Item", b.p, ATOLL_UPDATE_MODIFIED, &written)) die("create_many");
            updated += (int64_t)written;
            if (in_page < BATCH) break;
        }
        if (!atoll_realm_commit(realm)) die("commit");
        emit("W5", t0, now());
        printf("W5_read %.6f\n", read_time);
        printf("W5_json %.6f\n", json_time);
        if (updated != n) { fprintf(stderr, "cabi: W5 updated %" PRId64 "\n", updated); return 1; }
        atoll_results_free(all);
    }

    /* check W5: sum of ages, through the ABI (pages of all objects). */
    {
        atoll_results_t *all = atoll_results_query(realm, "Item", NULL, NULL);
        int64_t sum = 0, id, age;
        for (size_t offset = 0;; offset += BATCH) {
            char *page = atoll_results_json(all, offset, BATCH);
            if (!page) die("atoll_results_json");
            const char *p = page;
            int64_t in_page = 0;
            while ((p = int_member(p, "\"_id\"", &id)) && (p = int_member(p, "\"age\"", &age))) { sum += age; in_page++; }
            atoll_free(page);
            if (in_page < BATCH) break;
        }
        printf("check W5 %" PRId64 "\n", sum);
        atoll_results_free(all);
    }

    free(b.p);
    atoll_realm_close(realm);
    return 0;
}

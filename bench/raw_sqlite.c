/*
 * raw_sqlite.c — the limit: the benchmark workloads written directly against SQLite's C API,
 * as a careful engineer would (prepared statements reused, INTEGER PRIMARY KEY, an index on
 * age, one transaction per write workload, WAL, synchronous=NORMAL).
 *
 *   usage: raw_sqlite DBFILE N
 *
 * Prints one line per measurement, "<name> <seconds>", plus "#"-comment lines and
 * "check <name> <value>" lines (results, so that contenders can be compared for agreement).
 * Main figures: W1 W2 W3 W4 W5. Details: W3_index W3_scan (W3 is the better of the two),
 * W4_txn (W4's reads inside one read transaction, for reference), W5_single (one UPDATE ...
 * SET age = age + 1, for reference). Then D1..D4, the data-model workloads (see data_model()).
 */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "file_bytes.h"

static sqlite3 *db;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "raw_sqlite: %s: %s\n", what, sqlite3_errmsg(db));
    exit(1);
}

static void exec(const char *sql) {
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "raw_sqlite: %s: %s\n", sql, err ? err : "?");
        exit(1);
    }
}

static sqlite3_stmt *prepare(const char *sql) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL) != SQLITE_OK) die(sql);
    return s;
}

/* The benchmark's shared random keys: splitmix64 from a fixed seed, key = next % n.
 * bench/swift/main.swift, bench/cabi.c and bench/python_bench.py use the same generator. */
static uint64_t rng_state;
static uint64_t splitmix64(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
#define BENCH_SEED 20240601ULL
#define W4_READS 100000

static int64_t count_query(sqlite3_stmt *s) {
    if (sqlite3_step(s) != SQLITE_ROW) die("count");
    int64_t n = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    return n;
}

/* Runs a count query `times` times, with `param` bound to its parameter when it has one, and
 * prints "<name> <seconds>" and "check <name> <count>". */
static void timed_count(const char *name, const char *sql, int times, int64_t param) {
    sqlite3_stmt *s = prepare(sql);
    int64_t c = 0;
    double t0 = now();
    for (int r = 0; r < times; r++) {
        if (sqlite3_bind_parameter_count(s) > 0) sqlite3_bind_int64(s, 1, param);
        c = count_query(s);
    }
    printf("%s %.6f\n", name, now() - t0);
    printf("check %s %" PRId64 "\n", name, c);
    sqlite3_finalize(s);
}

/*
 * D1..D4, the data-model workloads, on a second file (DBFILE.dm) with M = N / 10 owners: the
 * tables Atoll makes for Owner {_id, name, tags: int[]} and Pet {_id, name, owner: Owner?},
 * written by hand (a side table for the list keyed by (owner, position), an index on the link).
 *   D1 insert M owners with 10 list items each, one transaction
 *   D2 count pets whose owner's name is 'owner-k', for 100 values of k (a query through a link)
 *   D3 count owners with two or more pets, 10 times (a backlink count)
 *   D4 count owners whose tags hold 7, 10 times (a query on a list)
 * The M pets (pet j belongs to owner j % (M / 2)) are written before D2, untimed.
 */
static void data_model(const char *main_path, int64_t m) {
    char path[4096];
    snprintf(path, sizeof path, "%s.dm", main_path);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        die("open dm");
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=NORMAL");
    exec("CREATE TABLE owner (_id INTEGER PRIMARY KEY, name TEXT NOT NULL) STRICT;"
         "CREATE TABLE owner_tags (owner INTEGER NOT NULL, position INTEGER NOT NULL, value INTEGER NOT NULL,"
         " PRIMARY KEY (owner, position)) STRICT, WITHOUT ROWID;"
         "CREATE TABLE pet (_id INTEGER PRIMARY KEY, name TEXT NOT NULL, owner INTEGER) STRICT;"
         "CREATE INDEX pet_owner ON pet (owner);");
    {
        sqlite3_stmt *o = prepare("INSERT INTO owner (_id, name) VALUES (?, ?)");
        sqlite3_stmt *t = prepare("INSERT INTO owner_tags (owner, position, value) VALUES (?, ?, ?)");
        char name[64];
        double t0 = now();
        exec("BEGIN");
        for (int64_t i = 0; i < m; i++) {
            int len = snprintf(name, sizeof name, "owner-%" PRId64, i);
            sqlite3_bind_int64(o, 1, i);
            sqlite3_bind_text(o, 2, name, len, SQLITE_STATIC);
            if (sqlite3_step(o) != SQLITE_DONE) die("D1 owner");
            sqlite3_reset(o);
            for (int k = 0; k < 10; k++) {
                sqlite3_bind_int64(t, 1, i);
                sqlite3_bind_int64(t, 2, k);
                sqlite3_bind_int64(t, 3, (i + k) % 1000);
                if (sqlite3_step(t) != SQLITE_DONE) die("D1 tag");
                sqlite3_reset(t);
            }
        }
        exec("COMMIT");
        printf("D1 %.6f\n", now() - t0);
        sqlite3_finalize(o);
        sqlite3_finalize(t);
    }
    {
        sqlite3_stmt *p = prepare("INSERT INTO pet (_id, name, owner) VALUES (?, ?, ?)");
        char name[64];
        exec("BEGIN");
        for (int64_t j = 0; j < m; j++) {
            int len = snprintf(name, sizeof name, "pet-%" PRId64, j);
            sqlite3_bind_int64(p, 1, j);
            sqlite3_bind_text(p, 2, name, len, SQLITE_STATIC);
            sqlite3_bind_int64(p, 3, j % (m / 2));
            if (sqlite3_step(p) != SQLITE_DONE) die("pets");
            sqlite3_reset(p);
        }
        exec("COMMIT");
        sqlite3_finalize(p);
    }
    {
        sqlite3_stmt *s = prepare("SELECT count(*) FROM pet AS p JOIN owner AS o ON o._id = p.owner WHERE o.name = ?");
        char name[64];
        int64_t total = 0;
        double t0 = now();
        for (int64_t k = 0; k < 100; k++) {
            int len = snprintf(name, sizeof name, "owner-%" PRId64, k * 7);
            sqlite3_bind_text(s, 1, name, len, SQLITE_STATIC);
            total += count_query(s);
        }
        printf("D2 %.6f\n", now() - t0);
        printf("check D2 %" PRId64 "\n", total);
        sqlite3_finalize(s);
    }
    timed_count("D3", "SELECT count(*) FROM owner AS o WHERE (SELECT count(*) FROM pet AS p WHERE p.owner = o._id) >= 2",
                10, 0);
    timed_count("D4", "SELECT count(*) FROM owner AS o WHERE EXISTS (SELECT 1 FROM owner_tags AS t WHERE t.owner = o._id AND t.value = ?)",
                10, 7);
    sqlite3_close(db);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: raw_sqlite DBFILE N\n");
        return 2;
    }
    const char *path = argv[1];
    int64_t n = strtoll(argv[2], NULL, 10);
    if (n < 1000) { fprintf(stderr, "raw_sqlite: N must be >= 1000\n"); return 2; }

    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
        die("open");
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=NORMAL");
    exec("CREATE TABLE item (_id INTEGER PRIMARY KEY, name TEXT NOT NULL, age INTEGER NOT NULL,"
         " owner TEXT NOT NULL)");
    exec("CREATE INDEX item_age ON item (age)");
    printf("# raw SQLite %s, N=%" PRId64 "\n", sqlite3_libversion(), n);

    /* W1: insert n rows in one transaction. */
    {
        sqlite3_stmt *ins = prepare("INSERT INTO item (_id, name, age, owner) VALUES (?, ?, ?, ?)");
        char name[32], owner[32];
        double t0 = now();
        exec("BEGIN");
        for (int64_t i = 0; i < n; i++) {
            int nl = snprintf(name, sizeof name, "name-%" PRId64, i);
            int ol = snprintf(owner, sizeof owner, "owner-%" PRId64, i % 1000);
            sqlite3_bind_int64(ins, 1, i);
            sqlite3_bind_text(ins, 2, name, nl, SQLITE_STATIC);
            sqlite3_bind_int64(ins, 3, i % 100);
            sqlite3_bind_text(ins, 4, owner, ol, SQLITE_STATIC);
            if (sqlite3_step(ins) != SQLITE_DONE) die("insert");
            sqlite3_reset(ins);
        }
        exec("COMMIT");
        printf("W1 %.6f\n", now() - t0);
        sqlite3_finalize(ins);
        printf("W1_file %lld\n", file_bytes(path));
    }

    /* W2: count age == 42, 100 times (the index answers it). */
    timed_count("W2", "SELECT count(*) FROM item WHERE age = ?", 100, 42);

    /* W3: count owner == 'owner-7' AND age > 50, 10 times: with the planner's choice (the age
     * index, which selects half the table) and with the index hidden (+age: a table scan). */
    {
        sqlite3_stmt *ix = prepare("SELECT count(*) FROM item WHERE owner = ? AND age > ?");
        sqlite3_stmt *scan = prepare("SELECT count(*) FROM item WHERE owner = ? AND +age > ?");
        int64_t c1 = 0, c2 = 0;
        double t0 = now();
        for (int r = 0; r < 10; r++) {
            sqlite3_bind_text(ix, 1, "owner-7", -1, SQLITE_STATIC);
            sqlite3_bind_int64(ix, 2, 50);
            c1 = count_query(ix);
        }
        double t_index = now() - t0;
        t0 = now();
        for (int r = 0; r < 10; r++) {
            sqlite3_bind_text(scan, 1, "owner-7", -1, SQLITE_STATIC);
            sqlite3_bind_int64(scan, 2, 50);
            c2 = count_query(scan);
        }
        double t_scan = now() - t0;
        if (c1 != c2) { fprintf(stderr, "raw_sqlite: W3 plans disagree: %" PRId64 " vs %" PRId64 "\n", c1, c2); return 1; }
        printf("W3_index %.6f\n", t_index);
        printf("W3_scan %.6f\n", t_scan);
        printf("W3 %.6f\n", t_index < t_scan ? t_index : t_scan);
        printf("check W3 %" PRId64 "\n", c1);
        sqlite3_finalize(ix);
        sqlite3_finalize(scan);
    }

    /* W4: 100,000 primary-key reads of name, same seeded random keys as every contender. */
    {
        int64_t *keys = malloc(sizeof(int64_t) * W4_READS);
        rng_state = BENCH_SEED;
        for (int i = 0; i < W4_READS; i++) keys[i] = (int64_t)(splitmix64() % (uint64_t)n);
        sqlite3_stmt *s = prepare("SELECT name FROM item WHERE _id = ?");
        uint64_t total_len = 0;
        double t0 = now();
        for (int i = 0; i < W4_READS; i++) {
            sqlite3_bind_int64(s, 1, keys[i]);
            if (sqlite3_step(s) != SQLITE_ROW) die("W4 read");
            const unsigned char *name = sqlite3_column_text(s, 0);
            total_len += (uint64_t)sqlite3_column_bytes(s, 0);
            (void)name;
            sqlite3_reset(s);
        }
        printf("W4 %.6f\n", now() - t0);
        printf("check W4 %" PRIu64 "\n", total_len);
        /* For reference: the same reads inside one read transaction (one lock and WAL snapshot
         * for all of them, instead of one per read as in autocommit, which is what Atoll does). */
        t0 = now();
        exec("BEGIN");
        for (int i = 0; i < W4_READS; i++) {
            sqlite3_bind_int64(s, 1, keys[i]);
            if (sqlite3_step(s) != SQLITE_ROW) die("W4 read");
            total_len += (uint64_t)sqlite3_column_bytes(s, 0);
            sqlite3_reset(s);
        }
        exec("COMMIT");
        printf("W4_txn %.6f\n", now() - t0);
        sqlite3_finalize(s);
        free(keys);
    }

    /* W5: age = age + 1 on every row, row by row (read it, write it back), one transaction. */
    {
        sqlite3_stmt *sel = prepare("SELECT age FROM item WHERE _id = ?");
        sqlite3_stmt *upd = prepare("UPDATE item SET age = ? WHERE _id = ?");
        double t0 = now();
        exec("BEGIN");
        for (int64_t i = 0; i < n; i++) {
            sqlite3_bind_int64(sel, 1, i);
            if (sqlite3_step(sel) != SQLITE_ROW) die("W5 read");
            int64_t age = sqlite3_column_int64(sel, 0);
            sqlite3_reset(sel);
            sqlite3_bind_int64(upd, 1, age + 1);
            sqlite3_bind_int64(upd, 2, i);
            if (sqlite3_step(upd) != SQLITE_DONE) die("W5 update");
            sqlite3_reset(upd);
        }
        exec("COMMIT");
        printf("W5 %.6f\n", now() - t0);
        sqlite3_finalize(sel);
        sqlite3_finalize(upd);

        sqlite3_stmt *chk = prepare("SELECT sum(age) FROM item");
        printf("check W5 %" PRId64 "\n", count_query(chk));
        sqlite3_finalize(chk);

        /* For reference: the whole update as one statement (ages end +2; W5 is the last). */
        t0 = now();
        exec("BEGIN");
        exec("UPDATE item SET age = age + 1");
        exec("COMMIT");
        printf("W5_single %.6f\n", now() - t0);
    }

    sqlite3_close(db);
    data_model(path, n / 10);
    return 0;
}

/* file_bytes.h — the size of a database as SQLite sees it (page count x page size, the WAL's
 * committed pages included), read on a connection of its own: the "file after W1" figure of
 * raw_sqlite.c and cabi.c. */
#ifndef BENCH_FILE_BYTES_H
#define BENCH_FILE_BYTES_H

#include <sqlite3.h>

static long long pragma_integer(sqlite3 *db, const char *sql) {
    sqlite3_stmt *s = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* The database's bytes, or -1 when it cannot be read. */
static long long file_bytes(const char *path) {
    sqlite3 *db = NULL;
    long long bytes = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK)
        bytes = pragma_integer(db, "PRAGMA page_count") * pragma_integer(db, "PRAGMA page_size");
    sqlite3_close(db);
    return bytes;
}

#endif

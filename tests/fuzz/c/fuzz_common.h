/* Shared by the C fuzz targets (docs/testing.md, "Fuzzing"): the contract every call keeps,
 * checked on every call a fuzz input makes. A broken contract aborts, which libFuzzer reports
 * as a crash and saves the input. */
#ifndef ATOLL_FUZZ_COMMON_H
#define ATOLL_FUZZ_COMMON_H

#include "atoll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* After a call that failed (returned false or NULL): the thread's last error has a known
 * non-zero code and a non-empty message, and the code is not ATOLL_ERR_INTERNAL (bad input must
 * be named as such, not taken for a failure of the library). After a call that succeeded:
 * there is no last error. */
static void fuzz_check(const char *call, int ok) {
    atoll_error_t err;
    bool has = atoll_last_error(&err);
    if (ok) {
        if (has) {
            fprintf(stderr, "fuzz: %s succeeded but left the last error %d (%s)\n", call, err.code,
                    err.message ? err.message : "(null)");
            abort();
        }
        return;
    }
    if (!has || err.code == ATOLL_OK) {
        fprintf(stderr, "fuzz: %s failed without a last error\n", call);
        abort();
    }
    if (atoll_status_name(err.code) == NULL) {
        fprintf(stderr, "fuzz: %s failed with an unknown code %d\n", call, err.code);
        abort();
    }
    if (err.message == NULL || err.message[0] == '\0') {
        fprintf(stderr, "fuzz: %s failed with %s and no message\n", call, atoll_status_name(err.code));
        abort();
    }
    if (err.code == ATOLL_ERR_INTERNAL) {
        fprintf(stderr, "fuzz: %s failed with ATOLL_ERR_INTERNAL: %s\n", call, err.message);
        abort();
    }
}

#define FUZZ_CHECK(call, ok) fuzz_check(call, (ok))

/* A NUL-terminated copy of data[0..<size] (the ABI takes C strings); caller frees. */
static char *fuzz_strndup(const char *data, size_t size) {
    char *s = malloc(size + 1);
    if (s == NULL) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

/* Splits text at the next "\n---\n": returns the start of what follows (NULL when there is no
 * separator) and ends the part before it at *part_end. */
static const char *fuzz_next_part(const char *text, const char *end, const char **part_end) {
    static const char sep[] = "\n---\n";
    for (const char *p = text; p + 5 <= end; p++) {
        if (memcmp(p, sep, 5) == 0) {
            *part_end = p;
            return p + 5;
        }
    }
    *part_end = end;
    return NULL;
}

#endif

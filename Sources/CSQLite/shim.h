#include <sqlite3.h>
#include <stddef.h>

// The C library's substring search (two-way: linear time), for the store's CONTAINS. Declared
// only under _GNU_SOURCE, which would change other structures from what the other C modules
// of the program see: declared alone.
extern void *memmem(const void *haystack, size_t haystack_length, const void *needle, size_t needle_length);

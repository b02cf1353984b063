/* Shared by the libFuzzer targets: invariant checks that abort (libFuzzer
 * then keeps the input as a crash) and input helpers. */
#ifndef RL_FUZZ_H
#define RL_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

/* The input as a C string (bytes after a NUL are not seen, as in every caller). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    FUZZ_CHECK(s != NULL);
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

#endif

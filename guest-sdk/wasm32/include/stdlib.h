/* berm guest SDK, wasm32: allocation, sorting and parsing (src/berm_libc.c). malloc carves from
 * the SDK's heap (berm_alloc, which grows the module's memory); free releases nothing: an
 * instance lives for one call. */
#ifndef BERM_WASM32_STDLIB_H
#define BERM_WASM32_STDLIB_H
#include <stddef.h>
void *malloc(size_t n);
void *calloc(size_t n, size_t size);
void *realloc(void *p, size_t n);
void free(void *p);
void qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
long strtol(const char *s, char **end, int base);
unsigned long long strtoull(const char *s, char **end, int base);
_Noreturn void abort(void);
#endif

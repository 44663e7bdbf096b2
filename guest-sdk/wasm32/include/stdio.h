/* berm guest SDK, wasm32: formatted output into buffers (src/berm_libc.c): %d %i %u %x %X %o %c
 * %s %p %% with the l, ll, z, h, hh length modifiers, width, precision, '-' and '0'; no floating
 * point conversions (they print '?'). */
#ifndef BERM_WASM32_STDIO_H
#define BERM_WASM32_STDIO_H
#include <stdarg.h>
#include <stddef.h>
int vsnprintf(char *restrict buf, size_t size, const char *restrict fmt, va_list ap);
int snprintf(char *restrict buf, size_t size, const char *restrict fmt, ...)
    __attribute__((format(printf, 3, 4)));
#endif

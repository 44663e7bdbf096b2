/* berm guest SDK, wasm32: the small C library a harness built for WebAssembly links (Debian has
 * no wasm32 libc). Only what the SDK and small harnesses use; see include/ for the contracts. */
#include <berm.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the compiler must not turn these loops back into calls to themselves */
#define NB __attribute__((no_builtin))

NB void *memcpy(void *restrict dst, const void *restrict src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  while (n--) *d++ = *s++;
  return dst;
}

NB void *memmove(void *dst, const void *src, size_t n) {
  unsigned char *d = dst;
  const unsigned char *s = src;
  if (d < s) {
    while (n--) *d++ = *s++;
  } else {
    while (n--) d[n] = s[n];
  }
  return dst;
}

NB void *memset(void *dst, int c, size_t n) {
  unsigned char *d = dst;
  while (n--) *d++ = (unsigned char)c;
  return dst;
}

int memcmp(const void *a, const void *b, size_t n) {
  const unsigned char *x = a, *y = b;
  for (size_t i = 0; i < n; i++)
    if (x[i] != y[i]) return x[i] - y[i];
  return 0;
}

void *memchr(const void *s, int c, size_t n) {
  const unsigned char *p = s;
  for (size_t i = 0; i < n; i++)
    if (p[i] == (unsigned char)c) return (void *)(p + i);
  return NULL;
}

NB size_t strlen(const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  return n;
}

int strcmp(const char *a, const char *b) {
  while (*a && *a == *b) a++, b++;
  return (unsigned char)*a - (unsigned char)*b;
}

int strncmp(const char *a, const char *b, size_t n) {
  for (; n; n--, a++, b++) {
    if (*a != *b) return (unsigned char)*a - (unsigned char)*b;
    if (!*a) return 0;
  }
  return 0;
}

char *strchr(const char *s, int c) {
  for (;; s++) {
    if (*s == (char)c) return (char *)s;
    if (!*s) return NULL;
  }
}

/* ---- allocation: a size header before each block, so realloc knows what to copy ------------ */
void *malloc(size_t n) {
  size_t *p = berm_alloc(n + 16);
  if (!p) return NULL;
  *p = n;
  return (unsigned char *)p + 16;
}

void *calloc(size_t n, size_t size) {
  if (size && n > SIZE_MAX / size) return NULL;
  return malloc(n * size); /* berm_alloc memory is zeroed (fresh instance, grown pages) */
}

void *realloc(void *p, size_t n) {
  if (!p) return malloc(n);
  size_t old = *(size_t *)((unsigned char *)p - 16);
  void *q = malloc(n);
  if (q) memcpy(q, p, old < n ? old : n);
  return q;
}

void free(void *p) { (void)p; }

_Noreturn void abort(void) { __builtin_trap(); }

/* ---- qsort: introsort-free quicksort (median of three, insertion sort below 12) ------------ */
static void swap_bytes(unsigned char *a, unsigned char *b, size_t size) {
  while (size--) {
    unsigned char t = *a;
    *a++ = *b;
    *b++ = t;
  }
}

void qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  unsigned char *b = base;
  while (n > 12) {
    unsigned char *lo = b, *mid = b + (n / 2) * size, *hi = b + (n - 1) * size;
    if (cmp(mid, lo) < 0) swap_bytes(mid, lo, size);
    if (cmp(hi, mid) < 0) {
      swap_bytes(hi, mid, size);
      if (cmp(mid, lo) < 0) swap_bytes(mid, lo, size);
    }
    swap_bytes(mid, hi - size, size); /* pivot kept at hi - size */
    unsigned char *pivot = hi - size, *i = lo, *j = pivot;
    for (;;) {
      do i += size; while (cmp(i, pivot) < 0);
      do j -= size; while (j > lo && cmp(pivot, j) < 0);
      if (i >= j) break;
      swap_bytes(i, j, size);
    }
    swap_bytes(i, pivot, size);
    size_t left = (size_t)(i - b) / size, right = n - left - 1;
    /* recurse into the smaller side, loop on the larger: O(log n) stack */
    if (left < right) {
      qsort(b, left, size, cmp);
      b = i + size;
      n = right;
    } else {
      qsort(i + size, right, size, cmp);
      n = left;
    }
  }
  for (size_t k = 1; k < n; k++)
    for (unsigned char *p = b + k * size; p > b && cmp(p - size, p) > 0; p -= size)
      swap_bytes(p - size, p, size);
}

/* ---- number parsing ----------------------------------------------------------------------- */
unsigned long long strtoull(const char *s, char **end, int base) {
  while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
  if (*s == '+') s++;
  if ((base == 0 || base == 16) && s[0] == '0' && (s[1] | 32) == 'x') s += 2, base = 16;
  else if (base == 0) base = s[0] == '0' ? 8 : 10;
  unsigned long long v = 0;
  for (;; s++) {
    int d = *s >= '0' && *s <= '9' ? *s - '0' : (*s | 32) >= 'a' && (*s | 32) <= 'z' ? (*s | 32) - 'a' + 10 : 99;
    if (d >= base) break;
    v = v * (unsigned)base + (unsigned)d;
  }
  if (end) *end = (char *)s;
  return v;
}

long strtol(const char *s, char **end, int base) {
  while (*s == ' ' || (*s >= '\t' && *s <= '\r')) s++;
  int neg = *s == '-';
  if (neg) s++;
  unsigned long long v = strtoull(s, end, base);
  return neg ? -(long)v : (long)v;
}

/* ---- vsnprintf ---------------------------------------------------------------------------- */
typedef struct {
  char *buf;
  size_t size, n;
} out_t;

static void put(out_t *o, char c) {
  if (o->n + 1 < o->size) o->buf[o->n] = c;
  o->n++;
}

static void pad(out_t *o, char c, int k) {
  while (k-- > 0) put(o, c);
}

int vsnprintf(char *restrict buf, size_t size, const char *restrict fmt, va_list ap) {
  out_t o = {buf, size, 0};
  for (; *fmt; fmt++) {
    if (*fmt != '%') {
      put(&o, *fmt);
      continue;
    }
    fmt++;
    int left = 0, zero = 0, width = 0, prec = -1, len = 0;
    for (;; fmt++) {
      if (*fmt == '-') left = 1;
      else if (*fmt == '0') zero = 1;
      else if (*fmt == '+' || *fmt == ' ' || *fmt == '#') continue;
      else break;
    }
    if (*fmt == '*') width = va_arg(ap, int), fmt++;
    else
      while (*fmt >= '0' && *fmt <= '9') width = width * 10 + (*fmt++ - '0');
    if (*fmt == '.') {
      fmt++, prec = 0;
      if (*fmt == '*') prec = va_arg(ap, int), fmt++;
      else
        while (*fmt >= '0' && *fmt <= '9') prec = prec * 10 + (*fmt++ - '0');
    }
    for (;; fmt++) {
      if (*fmt == 'l') len++;
      else if (*fmt == 'z' || *fmt == 'j' || *fmt == 't') len = 2;
      else if (*fmt == 'h') continue;
      else break;
    }
    char tmp[24];
    const char *s = tmp;
    int k = 0, neg = 0;
    char c = *fmt;
    if (c == 'd' || c == 'i' || c == 'u' || c == 'x' || c == 'X' || c == 'o' || c == 'p') {
      unsigned long long v;
      if (c == 'p') v = (uintptr_t)va_arg(ap, void *), c = 'x', put(&o, '0'), put(&o, 'x');
      else if (c == 'd' || c == 'i') {
        long long x = len >= 2 ? va_arg(ap, long long) : len == 1 ? va_arg(ap, long) : va_arg(ap, int);
        neg = x < 0;
        v = neg ? 0ull - (unsigned long long)x : (unsigned long long)x;
      } else
        v = len >= 2 ? va_arg(ap, unsigned long long) : len == 1 ? va_arg(ap, unsigned long) : va_arg(ap, unsigned);
      unsigned b = c == 'o' ? 8 : c == 'x' || c == 'X' ? 16 : 10;
      const char *digits = c == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
      do tmp[sizeof tmp - 1 - k++] = digits[v % b], v /= b;
      while (v);
      s = tmp + sizeof tmp - k;
    } else if (c == 'c') {
      tmp[0] = (char)va_arg(ap, int), k = 1;
    } else if (c == 's') {
      s = va_arg(ap, const char *);
      if (!s) s = "(null)";
      while (s[k] && (prec < 0 || k < prec)) k++;
    } else if (c == '%') {
      tmp[0] = '%', k = 1;
    } else if (c == 'e' || c == 'f' || c == 'g' || c == 'E' || c == 'G' || c == 'a') {
      (void)va_arg(ap, double);
      tmp[0] = '?', k = 1;
    } else {
      if (!c) break;
      tmp[0] = c, k = 1;
    }
    int total = k + neg;
    if (!left && !(zero && neg == 0 && c != 's')) pad(&o, ' ', width - total);
    if (neg) put(&o, '-');
    if (!left && zero && c != 's') pad(&o, '0', width - total);
    for (int i = 0; i < k; i++) put(&o, s[i]);
    if (left) pad(&o, ' ', width - total);
  }
  if (size) buf[o.n < size ? o.n : size - 1] = 0;
  return (int)o.n;
}

int snprintf(char *restrict buf, size_t size, const char *restrict fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, size, fmt, ap);
  va_end(ap);
  return n;
}

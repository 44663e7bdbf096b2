/*
 * berm guest SDK: a minimal JSON helper for tool arguments and replies (header-only, no libc
 * allocation: results live in berm_alloc memory). `#include <berm_json.h>` after <berm.h>.
 * It reads top-level members of one JSON object and writes JSON string literals. Not a general
 * parser: enough for arguments such as {"path": "...", "limit": 10}.
 *   json_member(json, key)              -> pointer to the member's value text, or NULL
 *   json_string(json, key, &out, &len)  -> 1 decoded string, 0 absent/null, -1 wrong type/malformed
 *   json_uint(json, key, &out)          -> 1 non-negative integer, 0 absent/null, -1 otherwise
 *   json_is_utf8(p, n)                  -> 1 when valid UTF-8
 *   json_put_string(&o, s, n) / json_put_raw(&o, s)  append a string literal / raw text at o
 */
#ifndef BERM_EXAMPLE_JSON_H
#define BERM_EXAMPLE_JSON_H

#include <berm.h>
#include <stdint.h>
#include <string.h>

#define JSON_FN static __attribute__((unused))

JSON_FN const char *json__ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
  return p;
}

/* Skip a string starting at the opening quote; returns the byte after the closing quote or NULL. */
JSON_FN const char *json__skip_string(const char *p) {
  for (p++; *p; p++) {
    if (*p == '\\') {
      if (!*++p) return NULL;
    } else if (*p == '"') {
      return p + 1;
    }
  }
  return NULL;
}

/* Skip any value; returns the byte after it or NULL when malformed. */
JSON_FN const char *json__skip_value(const char *p) {
  p = json__ws(p);
  if (*p == '"') return json__skip_string(p);
  if (*p == '{' || *p == '[') {
    int depth = 0;
    while (*p) {
      if (*p == '"') {
        p = json__skip_string(p);
        if (!p) return NULL;
        continue;
      }
      if (*p == '{' || *p == '[') depth++;
      if (*p == '}' || *p == ']') {
        if (--depth == 0) return p + 1;
      }
      p++;
    }
    return NULL;
  }
  const char *s = p;
  while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n' && *p != '\t' &&
         *p != '\r')
    p++;
  return p == s ? NULL : p;
}

/* Find the value of top-level member `key` of the object `json`: pointer to its first byte, or NULL. */
JSON_FN const char *json_member(const char *json, const char *key) {
  const char *p = json__ws(json);
  size_t klen = strlen(key);
  if (*p != '{') return NULL;
  p = json__ws(p + 1);
  while (*p == '"') {
    const char *k = p + 1;
    const char *end = json__skip_string(p);
    if (!end) return NULL;
    int match = (size_t)(end - 1 - k) == klen && memcmp(k, key, klen) == 0;
    p = json__ws(end);
    if (*p != ':') return NULL;
    p = json__ws(p + 1);
    if (match) return p;
    p = json__skip_value(p);
    if (!p) return NULL;
    p = json__ws(p);
    if (*p != ',') return NULL;
    p = json__ws(p + 1);
  }
  return NULL;
}

JSON_FN void json__utf8(char **o, uint32_t c) {
  char *q = *o;
  if (c < 0x80) {
    *q++ = (char)c;
  } else if (c < 0x800) {
    *q++ = (char)(0xc0 | (c >> 6));
    *q++ = (char)(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    *q++ = (char)(0xe0 | (c >> 12));
    *q++ = (char)(0x80 | ((c >> 6) & 0x3f));
    *q++ = (char)(0x80 | (c & 0x3f));
  } else {
    *q++ = (char)(0xf0 | (c >> 18));
    *q++ = (char)(0x80 | ((c >> 12) & 0x3f));
    *q++ = (char)(0x80 | ((c >> 6) & 0x3f));
    *q++ = (char)(0x80 | (c & 0x3f));
  }
  *o = q;
}

JSON_FN int json__hex4(const char *p, uint32_t *out) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

/*
 * Decode the string member `key`: 1 with *out (NUL-terminated, berm_alloc) and *len, 0 when absent
 * or null, -1 when it is not a string or malformed.
 */
JSON_FN int json_string(const char *json, const char *key, char **out, size_t *len) {
  const char *p = json_member(json, key);
  if (!p || strncmp(p, "null", 4) == 0) return 0;
  if (*p != '"') return -1;
  const char *end = json__skip_string(p);
  if (!end) return -1;
  char *buf = berm_alloc((size_t)(end - p) + 1);
  if (!buf) return -1;
  char *o = buf;
  for (p++; p < end - 1; p++) {
    if ((unsigned char)*p < 0x20) return -1;
    if (*p != '\\') {
      *o++ = *p;
      continue;
    }
    switch (*++p) {
      case '"': *o++ = '"'; break;
      case '\\': *o++ = '\\'; break;
      case '/': *o++ = '/'; break;
      case 'b': *o++ = '\b'; break;
      case 'f': *o++ = '\f'; break;
      case 'n': *o++ = '\n'; break;
      case 'r': *o++ = '\r'; break;
      case 't': *o++ = '\t'; break;
      case 'u': {
        uint32_t c, lo;
        if (end - 1 - p < 5 || json__hex4(p + 1, &c)) return -1;
        p += 4;
        if (c >= 0xd800 && c < 0xdc00 && p[1] == '\\' && p[2] == 'u' && !json__hex4(p + 3, &lo) &&
            lo >= 0xdc00 && lo < 0xe000) {
          c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
          p += 6;
        }
        json__utf8(&o, c);
        break;
      }
      default: return -1;
    }
  }
  *o = 0;
  *out = buf;
  if (len) *len = (size_t)(o - buf);
  return 1;
}

/* Read the non-negative integer member `key`: 1 with *out, 0 when absent or null, -1 otherwise. */
JSON_FN int json_uint(const char *json, const char *key, uint64_t *out) {
  const char *p = json_member(json, key);
  if (!p || strncmp(p, "null", 4) == 0) return 0;
  if (*p < '0' || *p > '9') return -1;
  uint64_t v = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (UINT64_MAX - 9) / 10) return -1;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  if (*p == '.' || *p == 'e' || *p == 'E') return -1;
  *out = v;
  return 1;
}

/* 1 when [p, p+n) is valid UTF-8 (no overlongs, no surrogates), else 0. */
JSON_FN int json_is_utf8(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    size_t k;
    uint32_t v, min;
    if (c < 0x80) { i++; continue; }
    if ((c & 0xe0) == 0xc0) { k = 1; v = c & 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { k = 2; v = c & 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { k = 3; v = c & 0x07; min = 0x10000; }
    else return 0;
    for (size_t j = 1; j <= k; j++) {
      if (i + j >= n || (p[i + j] & 0xc0) != 0x80) return 0;
      v = (v << 6) | (p[i + j] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v < 0xe000)) return 0;
    i += k + 1;
  }
  return 1;
}

/* Append `s` (n bytes) as a JSON string literal at *o; the caller reserves 6 * n + 2 bytes. */
JSON_FN void json_put_string(char **o, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  char *q = *o;
  *q++ = '"';
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      *q++ = '\\';
      *q++ = (char)c;
    } else if (c == '\n') {
      *q++ = '\\';
      *q++ = 'n';
    } else if (c == '\t') {
      *q++ = '\\';
      *q++ = 't';
    } else if (c == '\r') {
      *q++ = '\\';
      *q++ = 'r';
    } else if (c < 0x20) {
      *q++ = '\\';
      *q++ = 'u';
      *q++ = '0';
      *q++ = '0';
      *q++ = hex[c >> 4];
      *q++ = hex[c & 15];
    } else {
      *q++ = (char)c;
    }
  }
  *q++ = '"';
  *o = q;
}

/* Append the NUL-terminated text `s` at *o. */
JSON_FN void json_put_raw(char **o, const char *s) {
  size_t n = strlen(s);
  memcpy(*o, s, n);
  *o += n;
}

#endif

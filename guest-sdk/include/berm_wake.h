/*
 * berm guest SDK: wakes and notifications (included by berm.h; docs/wakes.md).
 *
 * Everything here is static inline on purpose: a harness that never uses wakes links none of it,
 * so its bytes are exactly what they were before this support existed (string literals and
 * 64-bit constants of a source file live in merged sections that --gc-sections keeps whole).
 * src/berm_rt.c is unchanged by it for the same reason.
 */
#ifndef BERM_WAKE_H
#define BERM_WAKE_H

#include <string.h>

BERM__INLINE berm_bytes berm__wstr(const char *s) {
  berm_bytes b;
  b.ptr = s ? s : "";
  b.len = s ? strlen(s) : 0;
  return b;
}

/* ---- wake and notify records ------------------------------------------------------------
 * A minimal reader for the records the runtime hands to on_wake / on_notify: one JSON object whose
 * members are strings and integers (docs/wakes.md). Unknown members of any type are skipped, so
 * the runtime may add fields without breaking built harnesses. */
BERM__INLINE const char *berm__ws(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

BERM__INLINE int berm__hex4(const char *p, const char *e, uint32_t *out) {
  uint32_t v = 0;
  if (e - p < 4) return -1;
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

/* Decode the string starting at its opening quote. With out == NULL only skips it. Returns the
 * byte after the closing quote, or NULL when malformed (or out of heap). */
BERM__INLINE const char *berm__string(const char *p, const char *e, char **out, size_t *outlen) {
  if (p >= e || *p != '"') return NULL;
  const char *q = p + 1;
  while (q < e && *q != '"') q += (*q == '\\') ? 2 : 1;
  if (q >= e) return NULL;
  if (!out) return q + 1;
  char *buf = (char *)berm_alloc((size_t)(q - p) + 1), *o = buf;
  if (!buf) return NULL;
  for (p++; p < q; p++) {
    unsigned char c = (unsigned char)*p;
    if (c < 0x20) return NULL;
    if (c != '\\') {
      *o++ = (char)c;
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
      uint32_t u, lo;
      if (berm__hex4(p + 1, q, &u)) return NULL;
      p += 4;
      if (u >= 0xd800 && u < 0xdc00 && q - p >= 7 && p[1] == '\\' && p[2] == 'u' &&
          !berm__hex4(p + 3, q, &lo) && lo >= 0xdc00 && lo < 0xe000) {
        u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
        p += 6;
      }
      if (u < 0x80) {
        *o++ = (char)u;
      } else if (u < 0x800) {
        *o++ = (char)(0xc0 | (u >> 6));
        *o++ = (char)(0x80 | (u & 0x3f));
      } else if (u < 0x10000) {
        *o++ = (char)(0xe0 | (u >> 12));
        *o++ = (char)(0x80 | ((u >> 6) & 0x3f));
        *o++ = (char)(0x80 | (u & 0x3f));
      } else {
        *o++ = (char)(0xf0 | (u >> 18));
        *o++ = (char)(0x80 | ((u >> 12) & 0x3f));
        *o++ = (char)(0x80 | ((u >> 6) & 0x3f));
        *o++ = (char)(0x80 | (u & 0x3f));
      }
      break;
    }
    default: return NULL;
    }
  }
  *o = 0;
  *out = buf;
  *outlen = (size_t)(o - buf);
  return q + 1;
}

/* An integer (a fraction, if any, is truncated; an exponent is refused). */
BERM__INLINE const char *berm__integer(const char *p, const char *e, int64_t *out) {
  const char *s = p;
  if (p < e && *p == '-') p++;
  const char *d = p;
  while (p < e && *p >= '0' && *p <= '9') p++;
  if (p == d || berm_dec_to_i64(s, (size_t)(p - s), out)) return NULL;
  if (p < e && *p == '.') {
    for (p++; p < e && *p >= '0' && *p <= '9'; p++) {
    }
  }
  if (p < e && (*p == 'e' || *p == 'E')) return NULL;
  return p;
}

/* Skip any JSON value; the byte after it, or NULL. */
BERM__INLINE const char *berm__skip(const char *p, const char *e) {
  if (p >= e) return NULL;
  if (*p == '"') return berm__string(p, e, NULL, NULL);
  if (*p == '{' || *p == '[') {
    int depth = 0;
    while (p < e) {
      if (*p == '"') {
        if (!(p = berm__string(p, e, NULL, NULL))) return NULL;
        continue;
      }
      if (*p == '{' || *p == '[') depth++;
      if ((*p == '}' || *p == ']') && --depth == 0) return p + 1;
      p++;
    }
    return NULL;
  }
  const char *s = p;
  while (p < e && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' && *p != '\n' &&
         *p != '\r')
    p++;
  return p == s ? NULL : p;
}

/* One member the caller wants: a string (str/len) or an integer (num). */
typedef struct berm__field {
  const char *key;
  const char **str;
  size_t *len;
  int64_t *num;
  int seen;
} berm__field;

BERM__INLINE int berm__object(const char *json, size_t len, berm__field *f, size_t nf) {
  const char *p = json, *e = json + len;
  p = berm__ws(p, e);
  if (p >= e || *p != '{') return -1;
  p = berm__ws(p + 1, e);
  if (p < e && *p == '}') p++;
  else
    for (;;) {
      char *key;
      size_t klen;
      if (!(p = berm__string(p, e, &key, &klen))) return -1;
      p = berm__ws(p, e);
      if (p >= e || *p != ':') return -1;
      p = berm__ws(p + 1, e);
      berm__field *m = NULL;
      for (size_t i = 0; i < nf; i++)
        if (strlen(f[i].key) == klen && memcmp(f[i].key, key, klen) == 0) m = &f[i];
      if (m && m->seen) return -1; /* a member given twice is ambiguous */
      if (m && m->str) {
        char *v;
        if (!(p = berm__string(p, e, &v, m->len))) return -1;
        *m->str = v;
      } else if (m) {
        if (!(p = berm__integer(p, e, m->num))) return -1;
      } else if (!(p = berm__skip(p, e))) {
        return -1;
      }
      if (m) m->seen = 1;
      p = berm__ws(p, e);
      if (p < e && *p == ',') {
        p = berm__ws(p + 1, e);
        continue;
      }
      if (p < e && *p == '}') {
        p++;
        break;
      }
      return -1;
    }
  if (berm__ws(p, e) != e) return -1;
  for (size_t i = 0; i < nf; i++)
    if (!f[i].seen) return -1;
  return 0;
}

BERM__INLINE int berm_wake_parse(const char *json, size_t len, berm_wake *out) {
  int64_t attempt = 0;
  memset(out, 0, sizeof *out);
  berm__field f[] = {
      {"id", &out->id, &out->id_len, NULL, 0},
      {"scheduled_at", NULL, NULL, &out->scheduled_at, 0},
      {"now", NULL, NULL, &out->now, 0},
      {"attempt", NULL, NULL, &attempt, 0},
      {"payload", &out->payload, &out->payload_len, NULL, 0},
  };
  if (!json || berm__object(json, len, f, sizeof f / sizeof f[0]) || attempt < 1) return -1;
  out->attempt = (uint64_t)attempt;
  return 0;
}

BERM__INLINE int berm_notify_parse(const char *json, size_t len, berm_notify *out) {
  int64_t attempt = 0;
  memset(out, 0, sizeof *out);
  berm__field f[] = {
      {"id", &out->id, &out->id_len, NULL, 0},
      {"source", &out->source, &out->source_len, NULL, 0},
      {"payload", &out->payload, &out->payload_len, NULL, 0},
      {"now", NULL, NULL, &out->now, 0},
      {"attempt", NULL, NULL, &attempt, 0},
  };
  if (!json || berm__object(json, len, f, sizeof f / sizeof f[0]) || attempt < 1) return -1;
  out->attempt = (uint64_t)attempt;
  return 0;
}

BERM__INLINE void berm__bad_record(const char *entry, const char *json, size_t n) {
  if (!json) return berm_failf("%s: the record could not be read (out of heap)", entry);
  berm_failf("%s: malformed record (want the fields of docs/wakes.md): %.*s", entry,
             (int)(n > 200 ? 200 : n), json);
}

BERM__INLINE int berm__wake_record(berm_wake *out) {
  size_t n;
  const char *json = berm_args(&n);
  if (berm_wake_parse(json, n, out) == 0) return 1;
  berm__bad_record("on_wake", json, n);
  return 0;
}

BERM__INLINE int berm__notify_record(berm_notify *out) {
  size_t n;
  const char *json = berm_args(&n);
  if (berm_notify_parse(json, n, out) == 0) return 1;
  berm__bad_record("on_notify", json, n);
  return 0;
}

/* An entry that returns without berm_done/berm_fail is ok: say so explicitly with an empty
 * result, so the outcome does not depend on how the runtime reads a silent return. berm_done is
 * ignored when the body already finished the call. */
BERM__INLINE void berm__leave_entry(void) { berm_done("", 0); }

BERM__INLINE berm_pair berm__leave_entry0(void) {
  berm_done("", 0);
  return berm__leave0("entry"); /* finished now, so this only returns the ABI 0 pair */
}

/* ---- scheduling host calls ------------------------------------------------------------------ */
BERM__INLINE berm_reply berm_wake_arm_n(uint64_t delay_ms, const void *payload, size_t payload_len,
                                        const char *id) {
  char d[21];
  berm_bytes f[3];
  f[0].ptr = d;
  f[0].len = berm_u64_to_dec(delay_ms, d);
  f[1].ptr = payload ? payload : "";
  f[1].len = payload ? payload_len : 0;
  f[2] = berm__wstr(id);
  size_t n = (id && *id) ? 3 : payload ? 2 : 1;
  return berm_cap_call(BERM_CAP_WAKE_ARM, f, n);
}

BERM__INLINE berm_reply berm_wake_arm(uint64_t delay_ms, const char *payload, const char *id) {
  return berm_wake_arm_n(delay_ms, payload, payload ? strlen(payload) : 0, id);
}

BERM__INLINE berm_reply berm_wake_cancel(const char *id) {
  berm_bytes f[1] = {berm__wstr(id)};
  return berm_cap_call(BERM_CAP_WAKE_CANCEL, f, 1);
}

BERM__INLINE berm_reply berm_call_after(uint64_t delay_ms, const char *harness, const char *tool,
                           const char *args_json) {
  char d[21];
  berm_bytes f[4] = {{d, berm_u64_to_dec(delay_ms, d)}, berm__wstr(harness), berm__wstr(tool),
                     berm__wstr(args_json && *args_json ? args_json : "{}")};
  return berm_cap_call(BERM_CAP_CALL_AFTER, f, 4);
}

/* ---- recurring schedules -------------------------------------------------------------------- */
BERM__INLINE int berm_every(const berm_wake *w, uint64_t period_ms, const char *payload) {
  if (period_ms == 0) {
    berm_log_str("berm_every: period 0 ms: the schedule is not re-armed");
    return -1;
  }
  /* Keep the phase: the next occurrence is due at scheduled_at + k * period, the first such
   * instant after now. Lateness (and downtime) then never shifts the schedule. */
  uint64_t late = w->now > w->scheduled_at ? (uint64_t)(w->now - w->scheduled_at) : 0;
  uint64_t delay = period_ms - late % period_ms;
  berm_reply r = payload ? berm_wake_arm(delay, payload, w->id)
                         : berm_wake_arm_n(delay, w->payload, w->payload_len, w->id);
  if (!r.ok) {
    berm_logf("berm_every: re-arming wake %s %s: %.300s", w->id,
              r.refused ? "was refused" : "failed", r.data);
    return -1;
  }
  return 0;
}

BERM__INLINE int berm_wake_late(const berm_wake *w, int64_t max_late_ms) {
  int64_t late = w->now - w->scheduled_at;
  if (late <= max_late_ms) return 0;
  berm_logf("wake %s: %lld ms late (limit %lld ms): skipped", w->id, (long long)late,
            (long long)max_late_ms);
  return 1;
}

#endif /* BERM_WAKE_H */

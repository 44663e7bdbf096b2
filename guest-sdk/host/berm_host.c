/* Stand-in host for native (x86-64) builds of a harness. See berm_host.h. */
#define _GNU_SOURCE
#include "berm_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void berm__reset(void);

int berm_host_failures;

typedef struct {
  unsigned char *p;
  size_t len, cap;
} buf_t;

static void buf_put(buf_t *b, const void *p, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t c = b->cap ? b->cap : 64;
    while (c < b->len + n + 1) c *= 2;
    b->p = (unsigned char *)realloc(b->p, c);
    if (!b->p) abort();
    b->cap = c;
  }
  if (n) memcpy(b->p + b->len, p, n);
  b->len += n;
  b->p[b->len] = 0;
}

static struct {
  unsigned char *args;
  size_t args_len;
  unsigned char *heap;
  uint64_t heap_size;
  unsigned heap_queries;
  buf_t staged;
  uint64_t staged_word;
  buf_t logs;
  unsigned nlogs;
  unsigned wakes;
  uint64_t last_wake;
  int done, failed;
  buf_t result;
} H = {.heap_size = 32u << 20};

struct stub {
  uint64_t cap;
  berm_host_cap_fn fn;
  void *ctx;
};
static struct stub stubs[64];
static size_t nstubs;

struct berm_host_reply {
  buf_t fields[32];
  size_t n;
  int error, refused;
  buf_t msg;
};

static const char *cap_name(uint64_t n) {
#define X(ID, NAME)                                                                              \
  if (n == BERM_CAP_##ID) return NAME;
  BERM_CAP_LIST(X)
#undef X
  return NULL;
}

static void die(const char *fmt, const char *a, unsigned long long n) {
  fprintf(stderr, "berm host-test: ");
  fprintf(stderr, fmt, a, n);
  fprintf(stderr, "\n");
  abort();
}

/* ---- schedule stand-ins: state ------------------------------------------------------------- */
static berm_host_sched *calls; /* since the last begin */
static size_t ncalls;
static berm_host_sched *pending; /* the in-memory due-set (arms not cancelled) */
static size_t npending;
static berm_host_sched after_slot;
static int after_pending;
static unsigned long long wake_seq;

static char *dupn(const void *p, size_t n) {
  char *d = (char *)malloc(n + 1);
  if (!d) abort();
  if (n) memcpy(d, p, n);
  d[n] = 0;
  return d;
}

static void sched_free(berm_host_sched *e) {
  free(e->id), free(e->payload), free(e->harness), free(e->tool), free(e->args);
  memset(e, 0, sizeof *e);
}

static berm_host_sched sched_copy(const berm_host_sched *e) {
  berm_host_sched c = *e;
  c.id = e->id ? dupn(e->id, strlen(e->id)) : NULL;
  c.payload = e->payload ? dupn(e->payload, e->payload_len) : NULL;
  c.harness = e->harness ? dupn(e->harness, strlen(e->harness)) : NULL;
  c.tool = e->tool ? dupn(e->tool, strlen(e->tool)) : NULL;
  c.args = e->args ? dupn(e->args, strlen(e->args)) : NULL;
  return c;
}

static void sched_reset_calls(void) {
  for (size_t i = 0; i < ncalls; i++) sched_free(&calls[i]);
  ncalls = 0;
}

static void sched_record(const berm_host_sched *e) {
  calls = (berm_host_sched *)realloc(calls, (ncalls + 1) * sizeof *calls);
  if (!calls) abort();
  calls[ncalls++] = sched_copy(e);
}

void berm_host_set_heap_size(uint64_t bytes) {
  free(H.heap);
  H.heap = NULL;
  H.heap_size = bytes;
}

void berm_host_begin(const void *args, size_t len) {
  berm__reset();
  free(H.args);
  H.args = (unsigned char *)malloc(len ? len : 1);
  if (len) memcpy(H.args, args, len);
  H.args_len = len;
  if (!H.heap) {
    H.heap = (unsigned char *)aligned_alloc(4096, (H.heap_size + 4095) & ~(uint64_t)4095);
    if (!H.heap) die("%scannot allocate a %llu-byte heap", "", (unsigned long long)H.heap_size);
  }
  memset(H.heap, 0, H.heap_size);
  H.heap_queries = 0;
  H.staged.len = 0;
  H.staged_word = 0;
  H.logs.len = 0;
  if (H.logs.p) H.logs.p[0] = 0;
  H.nlogs = 0;
  H.wakes = 0;
  H.last_wake = 0;
  sched_reset_calls();
  H.done = H.failed = 0;
  H.result.len = 0;
  buf_put(&H.result, "", 0);
}

static void stage(berm_host_reply *r) {
  H.staged.len = 0;
  if (r->error || r->refused) {
    buf_put(&H.staged, r->msg.p, r->msg.len);
    H.staged_word = (r->error ? BERM_STAGED_ERROR : 0) | (r->refused ? BERM_STAGED_REFUSED : 0);
  } else if (r->n == 1) {
    buf_put(&H.staged, r->fields[0].p, r->fields[0].len);
    H.staged_word = 0;
  } else {
    for (size_t i = 0; i < r->n; i++) {
      uint32_t l = (uint32_t)r->fields[i].len;
      unsigned char h[4] = {(unsigned char)l, (unsigned char)(l >> 8), (unsigned char)(l >> 16),
                            (unsigned char)(l >> 24)};
      buf_put(&H.staged, h, 4);
      buf_put(&H.staged, r->fields[i].p, l);
    }
    H.staged_word = 0;
  }
  H.staged_word |= (uint64_t)H.staged.len;
  buf_put(&H.staged, "", 0);
}

/* The stand-in registered for call number `n`, or NULL. */
static struct stub *stub_for(uint64_t n) {
  for (size_t i = 0; i < nstubs; i++)
    if (stubs[i].cap == n && stubs[i].fn) return &stubs[i];
  return NULL;
}

static uint64_t capability(uint64_t n, const unsigned char *req, uint64_t len) {
  struct stub *s = stub_for(n);
  /* a number the SDK does not name is an embedder's own capability (docs/embedding.md): it
   * reaches its stand-in like any other */
  const char *name = cap_name(n) ? cap_name(n) : "(an embedder's capability)";
  if (!s) die("capability %s has no stand-in (register one with berm_host_stub)", name, 0);
  berm_bytes fields[64];
  size_t nf = 0, o = 0;
  while (o < len) {
    if (len - o < 4 || nf == 64) die("%s: malformed request framing (len %llu)", name, len);
    uint32_t l = (uint32_t)req[o] | (uint32_t)req[o + 1] << 8 | (uint32_t)req[o + 2] << 16 |
                 (uint32_t)req[o + 3] << 24;
    o += 4;
    if (len - o < l) die("%s: request field runs past the end (len %llu)", name, len);
    fields[nf].ptr = req + o;
    fields[nf].len = l;
    nf++;
    o += l;
  }
  berm_host_reply *r = (berm_host_reply *)calloc(1, sizeof *r);
  s->fn(fields, nf, r, s->ctx);
  stage(r);
  for (size_t i = 0; i < 32; i++) free(r->fields[i].p);
  free(r->msg.p);
  free(r);
  return H.staged_word;
}

uint64_t berm_host_dispatch(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                            uint64_t a4, uint64_t a5) {
  (void)a2, (void)a3, (void)a4, (void)a5;
  switch (n) {
  case BERM_CAP_ARGS_LEN:
    return H.args_len;
  case BERM_CAP_ARGS_READ: {
    uint64_t c = a1 < H.args_len ? a1 : H.args_len;
    if (c) memcpy((void *)(uintptr_t)a0, H.args, c);
    return H.args_len;
  }
  case BERM_CAP_RESULT_READ: {
    uint64_t c = a1 < H.staged.len ? a1 : H.staged.len;
    if (c) memcpy((void *)(uintptr_t)a0, H.staged.p, c);
    return H.staged.len;
  }
  case BERM_CAP_HEAP_START:
    H.heap_queries++;
    return (uint64_t)(uintptr_t)H.heap;
  case BERM_CAP_HEAP_SIZE:
    H.heap_queries++;
    return H.heap_size;
  case BERM_CAP_LOG:
    if (H.nlogs++) buf_put(&H.logs, "\n", 1);
    buf_put(&H.logs, (const void *)(uintptr_t)a0, a1);
    if (getenv("BERM_HOST_VERBOSE"))
      fprintf(stderr, "[berm.log] %.*s\n", (int)a1, (const char *)(uintptr_t)a0);
    return 0;
  case BERM_CAP_DONE:
  case BERM_CAP_FAIL:
    if (H.done || H.failed) die("%s called twice in one call%llu", cap_name(n), 0);
    H.result.len = 0;
    buf_put(&H.result, (const void *)(uintptr_t)a0, a1);
    if (n == BERM_CAP_DONE)
      H.done = 1;
    else
      H.failed = 1;
    return 0;
  default:
    if (!cap_name(n) && !stub_for(n)) die("unknown host call%s 0x%016llx", "", (unsigned long long)n);
    return capability(n, (const unsigned char *)(uintptr_t)a0, a1);
  }
}

/* ---- records ----------------------------------------------------------------------------- */
extern const berm_record __start_berm_tools[] __attribute__((weak));
extern const berm_record __stop_berm_tools[] __attribute__((weak));

const berm_record *berm_host_records(size_t *count) {
  *count = (size_t)(__stop_berm_tools - __start_berm_tools);
  return __start_berm_tools;
}

static const berm_record *find_record(uint64_t kind, const char *name) {
  size_t n;
  const berm_record *recs = berm_host_records(&n);
  for (size_t i = 0; i < n; i++)
    if (recs[i].kind == kind && strcmp(recs[i].a, name) == 0) return &recs[i];
  return NULL;
}

/* Call an export as the runtime does: a fresh "instance" with these argument bytes. */
static berm_host_result run_record(const berm_record *rec, const char *name, const void *args,
                                   size_t len) {
  berm_host_begin(args, len);
#if BERM_ABI == 1
  rec->fn();
#else
  berm_pair p = ((berm_pair(*)(void))rec->fn)();
  if (!H.failed) {
    H.done = 1;
    H.result.len = 0;
    buf_put(&H.result, (const void *)(uintptr_t)p.a0, p.a1);
  } else if (p.a0 || p.a1) {
    die("%s failed but returned a non-zero pair%llu", name, 0);
  }
#endif
  berm_host_result r = {H.done, H.failed, (char *)H.result.p, H.result.len};
  return r;
}

berm_host_result berm_host_run_n(const char *name, const void *args, size_t len) {
  const berm_record *rec = find_record(BERM_REC_TOOL, name);
  if (!rec) die("no tool named %s in this harness%llu", name, 0);
  return run_record(rec, name, args, len);
}

berm_host_result berm_host_run(const char *name, const char *args_json) {
  return berm_host_run_n(name, args_json, strlen(args_json));
}

int berm_host_has_entry(const char *entry) { return find_record(BERM_REC_ENTRY, entry) != NULL; }

berm_host_result berm_host_run_entry(const char *entry, const void *record, size_t len) {
  const berm_record *rec = find_record(BERM_REC_ENTRY, entry);
  if (!rec) die("this harness defines no %s (BERM_ON_WAKE / BERM_ON_NOTIFY)%llu", entry, 0);
  return run_record(rec, entry, record, len);
}

/* Append s as a JSON string literal. */
static void put_json_string(buf_t *b, const char *s) {
  buf_put(b, "\"", 1);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    char esc[8];
    if (*p == '"' || *p == '\\') {
      esc[0] = '\\', esc[1] = (char)*p;
      buf_put(b, esc, 2);
    } else if (*p < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", *p);
      buf_put(b, esc, 6);
    } else {
      buf_put(b, p, 1);
    }
  }
  buf_put(b, "\"", 1);
}

static void put_int(buf_t *b, long long v) {
  char t[24];
  int n = snprintf(t, sizeof t, "%lld", v);
  buf_put(b, t, (size_t)n);
}

berm_host_result berm_host_wake(const char *id, int64_t scheduled_at, int64_t now, uint64_t attempt,
                                const char *payload) {
  buf_t b = {0};
  buf_put(&b, "{\"id\":", sizeof "{\"id\":" - 1);
  put_json_string(&b, id);
  buf_put(&b, ",\"scheduled_at\":", sizeof ",\"scheduled_at\":" - 1);
  put_int(&b, scheduled_at);
  buf_put(&b, ",\"now\":", sizeof ",\"now\":" - 1);
  put_int(&b, now);
  buf_put(&b, ",\"attempt\":", sizeof ",\"attempt\":" - 1);
  put_int(&b, (long long)attempt);
  buf_put(&b, ",\"payload\":", sizeof ",\"payload\":" - 1);
  put_json_string(&b, payload ? payload : "");
  buf_put(&b, "}", sizeof "}" - 1);
  berm_host_result r = berm_host_run_entry("on_wake", b.p, b.len);
  free(b.p);
  return r;
}

berm_host_result berm_host_notify(const char *id, const char *source, const char *payload,
                                  int64_t now, uint64_t attempt) {
  buf_t b = {0};
  buf_put(&b, "{\"id\":", sizeof "{\"id\":" - 1);
  put_json_string(&b, id);
  buf_put(&b, ",\"source\":", sizeof ",\"source\":" - 1);
  put_json_string(&b, source);
  buf_put(&b, ",\"payload\":", sizeof ",\"payload\":" - 1);
  put_json_string(&b, payload ? payload : "");
  buf_put(&b, ",\"now\":", sizeof ",\"now\":" - 1);
  put_int(&b, now);
  buf_put(&b, ",\"attempt\":", sizeof ",\"attempt\":" - 1);
  put_int(&b, (long long)attempt);
  buf_put(&b, "}", sizeof "}" - 1);
  berm_host_result r = berm_host_run_entry("on_notify", b.p, b.len);
  free(b.p);
  return r;
}

unsigned berm_host_heap_queries(void) { return H.heap_queries; }
const char *berm_host_logs(void) { return H.logs.p ? (const char *)H.logs.p : ""; }
unsigned berm_host_wake_count(void) { return H.wakes; }
uint64_t berm_host_last_wake_ms(void) { return H.last_wake; }

/* ---- reply builder ------------------------------------------------------------------------- */
void berm_host_reply_bytes(berm_host_reply *r, const void *p, size_t n) {
  if (r->n == 32) die("%stoo many reply fields%llu", "", 0);
  buf_put(&r->fields[r->n++], p, n);
}
void berm_host_reply_str(berm_host_reply *r, const char *s) { berm_host_reply_bytes(r, s, strlen(s)); }
void berm_host_reply_error(berm_host_reply *r, const char *msg) {
  r->error = 1;
  buf_put(&r->msg, msg, strlen(msg));
}
void berm_host_reply_refused(berm_host_reply *r, const char *msg) {
  r->refused = 1;
  buf_put(&r->msg, msg, strlen(msg));
}

void berm_host_stub(uint64_t cap, berm_host_cap_fn fn, void *ctx) {
  for (size_t i = 0; i < nstubs; i++)
    if (stubs[i].cap == cap) {
      stubs[i].fn = fn;
      stubs[i].ctx = ctx;
      return;
    }
  if (nstubs == 64) die("%stoo many stand-ins%llu", "", 0);
  stubs[nstubs].cap = cap;
  stubs[nstubs].fn = fn;
  stubs[nstubs].ctx = ctx;
  nstubs++;
}

/* ---- ready-made stand-ins ------------------------------------------------------------------ */
struct kv {
  char *k, *v;
  size_t kl, vl;
  struct kv *next;
};
static struct kv *store;

static struct kv **kv_find(const berm_bytes *key) {
  for (struct kv **p = &store; *p; p = &(*p)->next)
    if ((*p)->kl == key->len && memcmp((*p)->k, key->ptr, key->len) == 0) return p;
  return NULL;
}
static void kv_get(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  (void)ctx;
  if (n != 1) return berm_host_reply_error(r, "berm.get takes (key)");
  struct kv **p = kv_find(&f[0]);
  if (p) berm_host_reply_bytes(r, (*p)->v, (*p)->vl); /* absent: zero fields */
}
static void kv_set(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  (void)ctx;
  if (n != 2) return berm_host_reply_error(r, "berm.set takes (key, value)");
  struct kv **p = kv_find(&f[0]);
  struct kv *e = p ? *p : (struct kv *)calloc(1, sizeof *e);
  if (!p) {
    e->k = (char *)malloc(f[0].len + 1);
    memcpy(e->k, f[0].ptr, f[0].len);
    e->kl = f[0].len;
    e->next = store;
    store = e;
  }
  free(e->v);
  e->v = (char *)malloc(f[1].len + 1);
  memcpy(e->v, f[1].ptr, f[1].len);
  e->vl = f[1].len;
}
static void kv_delete(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  (void)ctx;
  if (n != 1) return berm_host_reply_error(r, "berm.delete takes (key)");
  struct kv **p = kv_find(&f[0]);
  if (p) {
    struct kv *e = *p;
    *p = e->next;
    free(e->k), free(e->v), free(e);
  }
}
void berm_host_storage_clear(void) {
  while (store) {
    struct kv *e = store;
    store = e->next;
    free(e->k), free(e->v), free(e);
  }
}
void berm_host_use_memory_storage(void) {
  berm_host_stub(BERM_CAP_GET, kv_get, NULL);
  berm_host_stub(BERM_CAP_SET, kv_set, NULL);
  berm_host_stub(BERM_CAP_DELETE, kv_delete, NULL);
}

static int64_t fixed_now, fixed_off;
static void clock_now(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  (void)f, (void)n;
  char b[32];
  snprintf(b, sizeof b, "%lld", (long long)*(int64_t *)ctx);
  berm_host_reply_str(r, b);
}
void berm_host_use_fixed_clock(int64_t now_ms, int64_t offset_s) {
  fixed_now = now_ms;
  fixed_off = offset_s;
  berm_host_stub(BERM_CAP_NOW, clock_now, &fixed_now);
  berm_host_stub(BERM_CAP_CLOCK_OFFSET, clock_now, &fixed_off);
}

/* ---- schedule stand-ins ---------------------------------------------------------------------- */
static int parse_delay(const berm_bytes *f, uint64_t *out) {
  int64_t v;
  if (berm_dec_to_i64(f->ptr, f->len, &v) || v < 0) return -1;
  *out = (uint64_t)v;
  return 0;
}

static void wake_arm(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  (void)ctx;
  if (n < 1 || n > 3) return berm_host_reply_error(r, "berm.wake.arm takes (delay_ms, payload?, id?)");
  berm_host_sched e = {0};
  e.kind = BERM_HOST_ARM;
  if (parse_delay(&f[0], &e.delay_ms))
    return berm_host_reply_error(r, "berm.wake.arm: delay_ms is not a non-negative decimal integer");
  e.has_payload = n >= 2;
  e.payload = n >= 2 ? dupn(f[1].ptr, f[1].len) : dupn("", 0);
  e.payload_len = n >= 2 ? f[1].len : 0;
  if (n == 3 && f[2].len == 0) {
    sched_free(&e);
    return berm_host_reply_refused(r, "berm.wake.arm: id is empty");
  }
  char gen[32];
  if (n == 3) {
    e.id = dupn(f[2].ptr, f[2].len);
  } else {
    snprintf(gen, sizeof gen, "wake-%llu", ++wake_seq);
    e.id = dupn(gen, strlen(gen));
  }
  e.logs_before = H.nlogs;
  H.wakes++;
  H.last_wake = e.delay_ms;
  sched_record(&e);
  size_t i = 0;
  while (i < npending && strcmp(pending[i].id, e.id) != 0) i++;
  if (i == npending) {
    pending = (berm_host_sched *)realloc(pending, (npending + 1) * sizeof *pending);
    if (!pending) abort();
    npending++;
  } else {
    sched_free(&pending[i]);
  }
  pending[i] = e; /* takes ownership */
  berm_host_reply_str(r, e.id);
}

static void wake_cancel(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  (void)ctx;
  if (n != 1) return berm_host_reply_error(r, "berm.wake.cancel takes (id)");
  berm_host_sched e = {0};
  e.kind = BERM_HOST_CANCEL;
  if (f[0].len == 0) return berm_host_reply_refused(r, "berm.wake.cancel: id is empty");
  e.id = dupn(f[0].ptr, f[0].len);
  e.logs_before = H.nlogs;
  for (size_t i = 0; i < npending; i++)
    if (strcmp(pending[i].id, e.id) == 0) {
      sched_free(&pending[i]);
      pending[i] = pending[--npending];
      e.cancelled = 1;
      break;
    }
  sched_record(&e);
  berm_host_reply_str(r, e.cancelled ? "1" : "0");
  sched_free(&e);
}

static void call_after(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  (void)ctx;
  if (n != 4) return berm_host_reply_error(r, "berm.call.after takes (delay_ms, harness, tool, args)");
  berm_host_sched e = {0};
  e.kind = BERM_HOST_CALL_AFTER;
  if (parse_delay(&f[0], &e.delay_ms))
    return berm_host_reply_error(r, "berm.call.after: delay_ms is not a non-negative decimal integer");
  if (f[1].len == 0 || f[2].len == 0)
    return berm_host_reply_refused(r, "berm.call.after: harness and tool must not be empty");
  e.id = dupn("call-after", 10);
  e.harness = dupn(f[1].ptr, f[1].len);
  e.tool = dupn(f[2].ptr, f[2].len);
  e.args = dupn(f[3].ptr, f[3].len);
  e.logs_before = H.nlogs;
  sched_record(&e);
  if (after_pending) sched_free(&after_slot);
  after_slot = e;
  after_pending = 1;
  berm_host_reply_str(r, e.id);
}

void berm_host_use_schedule(void) {
  berm_host_stub(BERM_CAP_WAKE_ARM, wake_arm, NULL);
  berm_host_stub(BERM_CAP_WAKE_CANCEL, wake_cancel, NULL);
  berm_host_stub(BERM_CAP_CALL_AFTER, call_after, NULL);
}

void berm_host_schedule_clear(void) {
  for (size_t i = 0; i < npending; i++) sched_free(&pending[i]);
  npending = 0;
  if (after_pending) sched_free(&after_slot);
  after_pending = 0;
}

size_t berm_host_sched_count(void) { return ncalls; }
const berm_host_sched *berm_host_sched_get(size_t i) { return i < ncalls ? &calls[i] : NULL; }
const berm_host_sched *berm_host_pending(const char *id) {
  for (size_t i = 0; i < npending; i++)
    if (strcmp(pending[i].id, id) == 0) return &pending[i];
  return NULL;
}
size_t berm_host_pending_count(void) { return npending; }
const berm_host_sched *berm_host_pending_call_after(void) { return after_pending ? &after_slot : NULL; }

#ifndef BERM_HOST_NO_MAIN
int main(void) {
  berm_host_test();
  if (berm_host_failures) {
    fprintf(stderr, "FAIL: %d check(s) failed\n", berm_host_failures);
    return 1;
  }
  printf("PASS\n");
  return 0;
}
#endif

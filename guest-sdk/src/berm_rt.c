/*
 * berm guest SDK runtime. Built into every harness (guest and host-test builds).
 * Guest-only parts (_start, TLS/gp setup, sbrk) are under #ifndef BERM_HOST.
 */
#include "berm.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- per-call state (fresh in every instance; reset by the stand-in host natively) -------- */
static struct {
  int finished; /* 1 done, 2 failed */
  uint64_t res_ptr, res_len;
  const char *args;
  size_t args_len;
  int heap_known;
  uint64_t heap_next, heap_end;
} berm__st;

void berm__reset(void) { memset(&berm__st, 0, sizeof berm__st); }

#if !defined(BERM_HOST) && defined(__wasm32__)
/* wasm32: no registers to set up (the module's own stack pointer global, no TLS, no gp). */
void berm__enter(void) {}
#elif !defined(BERM_HOST)
/* A TLS anchor: guarantees .tdata is non-empty, so __berm_tls_base (start of .tdata, set by
 * berm.ld) is exactly the PT_TLS segment start that local-exec offsets are relative to. */
__thread volatile char berm__tls_anchor __attribute__((used, section(".tdata.berm_tls_anchor"))) = 1;

void berm__enter(void) {
  /* tp -> the static TLS block in place (picolibc keeps errno in TLS); gp -> __global_pointer$
   * (GNU ld relaxes accesses to gp-relative). norelax: `la gp` must not itself become gp-relative. */
  __asm__ volatile(".option push\n"
                   ".option norelax\n"
                   "la tp, __berm_tls_base\n"
                   "la gp, __global_pointer$\n"
                   ".option pop\n" ::
                       : "memory");
}
#else
void berm__enter(void) {}
#endif

static void berm__no_result(const char *tool) {
  /* No printf here: keep libc's formatter out of harnesses that do not use it. */
  static const char pre[] = "tool ", post[] = " returned without berm_done or berm_fail";
  char msg[200];
  size_t n = 0, t = strlen(tool);
  if (t > 100) t = 100;
  memcpy(msg, pre, sizeof pre - 1), n += sizeof pre - 1;
  memcpy(msg + n, tool, t), n += t;
  memcpy(msg + n, post, sizeof post - 1), n += sizeof post - 1;
  berm_fail(msg, n);
}

void berm__leave(const char *tool) {
  if (!berm__st.finished) berm__no_result(tool);
}

berm_pair berm__leave0(const char *tool) {
  if (!berm__st.finished) berm__no_result(tool);
  berm_pair p = {0, 0};
  if (berm__st.finished == 1) {
    p.a0 = berm__st.res_ptr;
    p.a1 = berm__st.res_len;
  }
  return p;
}

/* ---- results, failures, logs ------------------------------------------------------------- */
void berm_done(const void *ptr, size_t len) {
  if (berm__st.finished) return;
  berm__st.finished = 1;
#if BERM_ABI == 1
  berm_hostcall2(BERM_CAP_DONE, BERM_PTR(ptr), len);
#else
  berm__st.res_ptr = BERM_PTR(ptr);
  berm__st.res_len = len;
#endif
}

void berm_done_str(const char *s) { berm_done(s, strlen(s)); }

void berm_fail(const void *ptr, size_t len) {
  if (berm__st.finished) return;
  berm__st.finished = 2;
  berm_hostcall2(BERM_CAP_FAIL, BERM_PTR(ptr), len);
}

void berm_fail_str(const char *s) { berm_fail(s, strlen(s)); }

void berm_failf(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
  berm_fail(buf, (size_t)n);
}

void berm_log(const void *ptr, size_t len) { berm_hostcall2(BERM_CAP_LOG, BERM_PTR(ptr), len); }

void berm_log_str(const char *s) { berm_log(s, strlen(s)); }

void berm_logf(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
  berm_log(buf, (size_t)n);
}

/* ---- heap ---------------------------------------------------------------------------------- */
#if !defined(BERM_HOST) && defined(__wasm32__)
/* wasm32: the module owns its memory. The heap runs from __heap_base (after the data and the
 * stack, placed by wasm-ld) to the memory's end and grows with memory.grow; growing past the
 * operator's limit traps (the host refuses the growth), growing past the module's own maximum
 * makes berm_alloc return NULL. */
extern unsigned char __heap_base;
static int berm__heap_init(void) {
  if (!berm__st.heap_known) {
    berm__st.heap_next = (uint64_t)(uintptr_t)&__heap_base;
    berm__st.heap_end = (uint64_t)__builtin_wasm_memory_size(0) * 65536;
    berm__st.heap_known = 1;
  }
  return 1;
}

void *berm_alloc(size_t n) {
  berm__heap_init();
  uint64_t p = (berm__st.heap_next + 15) & ~(uint64_t)15;
  if (p + n > berm__st.heap_end) {
    uint64_t pages = (p + n - berm__st.heap_end + 65535) / 65536;
    if (pages > 65536 || __builtin_wasm_memory_grow(0, (size_t)pages) == (size_t)-1) return NULL;
    berm__st.heap_end += pages * 65536;
  }
  berm__st.heap_next = p + n;
  return (void *)(uintptr_t)p;
}
#else
static int berm__heap_init(void) {
  if (!berm__st.heap_known) {
    uint64_t start = berm_hostcall0(BERM_CAP_HEAP_START);
    uint64_t size = berm_hostcall0(BERM_CAP_HEAP_SIZE);
    berm__st.heap_next = start;
    berm__st.heap_end = start + size;
    berm__st.heap_known = 1;
  }
  return 1;
}

void *berm_alloc(size_t n) {
  berm__heap_init();
  uint64_t p = (berm__st.heap_next + 15) & ~(uint64_t)15;
  if (p < berm__st.heap_next || p > berm__st.heap_end || berm__st.heap_end - p < n) return NULL;
  berm__st.heap_next = p + n;
  return (void *)(uintptr_t)p;
}

#endif

uint64_t berm_heap_remaining(void) {
  berm__heap_init();
  return berm__st.heap_end - berm__st.heap_next;
}

#if !defined(BERM_HOST) && !defined(__wasm32__)
/* picolibc's malloc grows through sbrk; this one carves from the same berm heap. */
void *sbrk(ptrdiff_t incr) {
  berm__heap_init();
  uint64_t p = berm__st.heap_next;
  if (incr < 0) return (void *)-1;
  if (berm__st.heap_end - p < (uint64_t)incr) return (void *)-1;
  berm__st.heap_next = p + (uint64_t)incr;
  return (void *)(uintptr_t)p;
}
#endif

/* ---- arguments ----------------------------------------------------------------------------- */
const char *berm_args(size_t *len) {
  if (!berm__st.args) {
    uint64_t n = berm_hostcall0(BERM_CAP_ARGS_LEN);
    char *buf = (char *)berm_alloc((size_t)n + 1);
    if (!buf) {
      if (len) *len = 0;
      return NULL;
    }
    uint64_t got = berm_hostcall2(BERM_CAP_ARGS_READ, BERM_PTR(buf), n);
    if (got < n) n = got; /* arguments shrank between the two calls: keep what was copied */
    buf[n] = 0;
    berm__st.args = buf;
    berm__st.args_len = (size_t)n;
  }
  if (len) *len = berm__st.args_len;
  return berm__st.args;
}

/* ---- decimal helpers ----------------------------------------------------------------------- */
size_t berm_u64_to_dec(uint64_t v, char out[21]) {
  char tmp[21];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  out[n] = 0;
  return n;
}

int berm_dec_to_i64(const void *p, size_t len, int64_t *out) {
  const char *s = (const char *)p;
  size_t i = 0;
  int neg = 0;
  uint64_t v = 0;
  if (i < len && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  if (i == len) return -1;
  for (; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    uint64_t d = (uint64_t)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return -1;
    v = v * 10 + d;
  }
  if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return -1;
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

/* ---- capability calls ---------------------------------------------------------------------- */
static berm_reply berm__reply_fail(const char *msg) {
  berm_reply r;
  memset(&r, 0, sizeof r);
  r.error = 1;
  r.data = (char *)msg;
  r.len = strlen(msg);
  r.word = BERM_STAGED_ERROR | r.len;
  return r;
}

berm_reply berm_cap_call(uint64_t cap, const berm_bytes *fields, size_t nfields) {
  size_t total = 0;
  for (size_t i = 0; i < nfields; i++) total += 4 + fields[i].len;
  unsigned char *req = (unsigned char *)berm_alloc(total ? total : 1);
  if (!req) return berm__reply_fail("berm sdk: out of heap for the request");
  size_t o = 0;
  for (size_t i = 0; i < nfields; i++) {
    uint32_t n = (uint32_t)fields[i].len;
    req[o++] = (unsigned char)n;
    req[o++] = (unsigned char)(n >> 8);
    req[o++] = (unsigned char)(n >> 16);
    req[o++] = (unsigned char)(n >> 24);
    if (n) memcpy(req + o, fields[i].ptr, n);
    o += n;
  }
  uint64_t word = berm_hostcall2(cap, BERM_PTR(req), total);
  berm_reply r;
  memset(&r, 0, sizeof r);
  r.word = word;
  r.error = (word & BERM_STAGED_ERROR) != 0;
  r.refused = (word & BERM_STAGED_REFUSED) != 0;
  r.len = (size_t)(word & BERM_STAGED_LEN_MASK);
  char *buf = (char *)berm_alloc(r.len + 1);
  if (!buf) return berm__reply_fail("berm sdk: out of heap for the reply");
  uint64_t got = berm_hostcall2(BERM_CAP_RESULT_READ, BERM_PTR(buf), r.len);
  if (got != r.len) return berm__reply_fail("berm sdk: berm.result.read length mismatch");
  buf[r.len] = 0;
  r.data = buf;
  r.ok = !r.error && !r.refused;
  return r;
}

int berm_fields(const void *data, size_t len, berm_bytes *out, size_t max) {
  const unsigned char *p = (const unsigned char *)data;
  size_t o = 0, k = 0;
  while (o < len) {
    if (len - o < 4 || k >= max) return -1;
    uint32_t n = (uint32_t)p[o] | (uint32_t)p[o + 1] << 8 | (uint32_t)p[o + 2] << 16 |
                 (uint32_t)p[o + 3] << 24;
    o += 4;
    if (len - o < n) return -1;
    out[k].ptr = p + o;
    out[k].len = n;
    k++;
    o += n;
  }
  return (int)k;
}

static berm_bytes berm__s(const char *s) {
  berm_bytes b = {s ? s : "", s ? strlen(s) : 0};
  return b;
}

static berm_reply berm__with_pairs(uint64_t cap, berm_bytes *head, size_t nhead,
                                   const char *const *pairs) {
  size_t np = 0;
  if (pairs)
    while (pairs[np]) np++;
  if (np % 2) return berm__reply_fail("berm sdk: key/value list has an odd number of entries");
  berm_bytes *f = (berm_bytes *)berm_alloc((nhead + np) * sizeof(berm_bytes));
  if (!f) return berm__reply_fail("berm sdk: out of heap for the request");
  for (size_t i = 0; i < nhead; i++) f[i] = head[i];
  for (size_t i = 0; i < np; i++) f[nhead + i] = berm__s(pairs[i]);
  return berm_cap_call(cap, f, nhead + np);
}

static berm_reply berm__fs_read(uint64_t cap, const char *path, uint64_t offset, uint64_t limit) {
  char o[21], l[21];
  berm_bytes f[3] = {berm__s(path), {o, berm_u64_to_dec(offset, o)}, {l, berm_u64_to_dec(limit, l)}};
  return berm_cap_call(cap, f, 3);
}
static berm_reply berm__fs_write(uint64_t cap, const char *path, const void *data, size_t len) {
  berm_bytes f[2] = {berm__s(path), {data, len}};
  return berm_cap_call(cap, f, 2);
}
static berm_reply berm__exec(uint64_t cap, const char *command, const char *cwd,
                             const char *const *env) {
  berm_bytes h[2] = {berm__s(command), berm__s(cwd)};
  return berm__with_pairs(cap, h, 2, env);
}
static berm_reply berm__http(uint64_t cap, const char *method, const char *url, const void *body,
                             size_t body_len, const char *const *headers) {
  berm_bytes h[3] = {berm__s(method), berm__s(url), {body ? body : "", body ? body_len : 0}};
  return berm__with_pairs(cap, h, 3, headers);
}

berm_reply berm_fs_read(const char *path, uint64_t offset, uint64_t limit) {
  return berm__fs_read(BERM_CAP_FS_READ, path, offset, limit);
}
berm_reply berm_fs_write(const char *path, const void *data, size_t len) {
  return berm__fs_write(BERM_CAP_FS_WRITE, path, data, len);
}
berm_reply berm_fs_glob(const char *pattern) {
  berm_bytes f[1] = {berm__s(pattern)};
  return berm_cap_call(BERM_CAP_FS_GLOB, f, 1);
}
berm_reply berm_fs_grep(const char *pattern, const char *path_glob) {
  berm_bytes f[2] = {berm__s(pattern), berm__s(path_glob)};
  return berm_cap_call(BERM_CAP_FS_GREP, f, 2);
}
berm_reply berm_exec_run(const char *command, const char *cwd, const char *const *env) {
  return berm__exec(BERM_CAP_EXEC_RUN, command, cwd, env);
}
berm_reply berm_http_fetch(const char *method, const char *url, const void *body, size_t body_len,
                           const char *const *headers) {
  return berm__http(BERM_CAP_HTTP_FETCH, method, url, body, body_len, headers);
}
berm_reply berm_now(void) { return berm_cap_call(BERM_CAP_NOW, NULL, 0); }
berm_reply berm_clock_offset(void) { return berm_cap_call(BERM_CAP_CLOCK_OFFSET, NULL, 0); }
berm_reply berm_get(const char *key) {
  berm_bytes f[1] = {berm__s(key)};
  return berm_cap_call(BERM_CAP_GET, f, 1);
}
berm_reply berm_set(const char *key, const void *value, size_t len) {
  berm_bytes f[2] = {berm__s(key), {value, len}};
  return berm_cap_call(BERM_CAP_SET, f, 2);
}
berm_reply berm_delete(const char *key) {
  berm_bytes f[1] = {berm__s(key)};
  return berm_cap_call(BERM_CAP_DELETE, f, 1);
}
berm_reply berm_call(const char *harness, const char *tool, const char *args_json) {
  berm_bytes f[3] = {berm__s(harness), berm__s(tool), berm__s(args_json)};
  return berm_cap_call(BERM_CAP_CALL, f, 3);
}
berm_reply berm_crabtalk_fs_read(const char *path, uint64_t offset, uint64_t limit) {
  return berm__fs_read(BERM_CAP_CRABTALK_FS_READ, path, offset, limit);
}
berm_reply berm_crabtalk_fs_write(const char *path, const void *data, size_t len) {
  return berm__fs_write(BERM_CAP_CRABTALK_FS_WRITE, path, data, len);
}
berm_reply berm_crabtalk_exec_run(const char *command, const char *cwd, const char *const *env) {
  return berm__exec(BERM_CAP_CRABTALK_EXEC_RUN, command, cwd, env);
}
berm_reply berm_crabtalk_http_fetch(const char *method, const char *url, const void *body,
                                    size_t body_len, const char *const *headers) {
  return berm__http(BERM_CAP_CRABTALK_HTTP_FETCH, method, url, body, body_len, headers);
}

int berm_now_ms(int64_t *out) {
  berm_reply r = berm_now();
  return r.ok ? berm_dec_to_i64(r.data, r.len, out) : -1;
}
int berm_clock_offset_s(int64_t *out) {
  berm_reply r = berm_clock_offset();
  return r.ok ? berm_dec_to_i64(r.data, r.len, out) : -1;
}
int berm_http_parse(const berm_reply *r, berm_http_response *out) {
  berm_bytes f[3];
  if (!r->ok || berm_fields(r->data, r->len, f, 3) != 3) return -1;
  if (berm_dec_to_i64(f[0].ptr, f[0].len, &out->status)) return -1;
  out->headers = f[1];
  out->body = f[2];
  return 0;
}

/* ---- the raw-register wake of SDK versions before the framed berm.wake.arm -----------------
 * Not declared in berm.h and never called. Kept, byte for byte, only because deleting it would
 * renumber this file's local labels and constants and so change the bytes of every committed
 * fixture and example ELF (their symbol tables keep local labels). */
uint64_t berm__wake_arm_raw(uint64_t delay_ms);
void berm__every_raw(uint64_t period_ms, void (*body)(void));
uint64_t berm__wake_arm_raw(uint64_t delay_ms) { return berm_hostcall1(BERM_CAP_WAKE_ARM, delay_ms); }

void berm__every_raw(uint64_t period_ms, void (*body)(void)) {
  berm__wake_arm_raw(period_ms);
  body();
}

/* ---- _start ---------------------------------------------------------------------------------- */
#if !defined(BERM_HOST) && !defined(__wasm32__)
extern const berm_record __berm_records_start[], __berm_records_end[];

volatile uint64_t berm__start_sink;

/* Not an entry point: the runtime calls berm_tool_<name> exports directly. _start is the ELF
 * entry, so the linker keeps it, and through the record table every tool export it names. */
__attribute__((used, noreturn, section(".text.berm_start"))) void _start(void) {
  berm__enter();
  for (const berm_record *r = __berm_records_start; r < __berm_records_end; r++)
    berm__start_sink += (uint64_t)(uintptr_t)r->fn;
  berm_fail_str("_start is not an entry point: call a berm_tool_<name> export");
  for (;;) __asm__ volatile("ebreak");
}
#endif

/*
 * berm guest SDK: write harness tools in C for berm (RV64IMAC, statically linked).
 *
 * The same source builds two ways:
 *   - for the guest (riscv64, see berm.mk): host calls are `ecall` with the number in a7,
 *     arguments in a0..a5 and the result in a0;
 *   - natively (x86-64, -DBERM_HOST, see host/berm_host.h): host calls go to a stand-in host so
 *     `make host-test` can run tool handlers the way the runtime does.
 *
 * Quick start:
 *
 *   #include <berm.h>
 *   BERM_USAGE("Echo tools for testing.");
 *   BERM_TOOL(echo, "Return the arguments unchanged.", "{\"type\":\"object\"}") {
 *       size_t n;
 *       const char *args = berm_args(&n);
 *       berm_done(args, n);
 *   }
 *
 * ABI: BERM_ABI=1 (default): berm_tool_<name>() takes and returns nothing; the result goes out
 * through berm.done(ptr,len), failure through berm.fail(ptr,len). BERM_ABI=0: berm_tool_<name>()
 * returns (ptr,len) in a0/a1, and (0,0) after calling berm.fail on failure. Handler code is the
 * same for both: call berm_done()/berm_fail() and return.
 */
#ifndef BERM_H
#define BERM_H

#include <stddef.h>
#include <stdint.h>

#include "berm_caps.h"

#ifndef BERM_ABI
#define BERM_ABI 1
#endif

#if BERM_ABI != 0 && BERM_ABI != 1
#error "BERM_ABI must be 0 or 1"
#endif

#if !defined(BERM_HOST) && !defined(__riscv)
#define BERM_HOST 1
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Raw host calls                                                                             */
/* ------------------------------------------------------------------------------------------ */

#ifndef BERM_HOST
/*
 * One ecall: number in a7, arguments in a0..a5, result in a0. a1 is treated as written by the
 * host (it may be); a2..a7 and every other register are preserved by the host.
 */
static inline uint64_t berm_hostcall(uint64_t n, uint64_t x0, uint64_t x1, uint64_t x2,
                                     uint64_t x3, uint64_t x4, uint64_t x5) {
  register uint64_t a0 __asm__("a0") = x0;
  register uint64_t a1 __asm__("a1") = x1;
  register uint64_t a2 __asm__("a2") = x2;
  register uint64_t a3 __asm__("a3") = x3;
  register uint64_t a4 __asm__("a4") = x4;
  register uint64_t a5 __asm__("a5") = x5;
  register uint64_t a7 __asm__("a7") = n;
  __asm__ volatile("ecall"
                   : "+r"(a0), "+r"(a1)
                   : "r"(a2), "r"(a3), "r"(a4), "r"(a5), "r"(a7)
                   : "memory");
  return a0;
}
#else
/* Stand-in host (guest-sdk/host/berm_host.c). */
uint64_t berm_host_dispatch(uint64_t n, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                            uint64_t a4, uint64_t a5);
static inline uint64_t berm_hostcall(uint64_t n, uint64_t x0, uint64_t x1, uint64_t x2,
                                     uint64_t x3, uint64_t x4, uint64_t x5) {
  return berm_host_dispatch(n, x0, x1, x2, x3, x4, x5);
}
#endif

#define berm_hostcall0(n) berm_hostcall((n), 0, 0, 0, 0, 0, 0)
#define berm_hostcall1(n, a) berm_hostcall((n), (uint64_t)(a), 0, 0, 0, 0, 0)
#define berm_hostcall2(n, a, b) berm_hostcall((n), (uint64_t)(a), (uint64_t)(b), 0, 0, 0, 0)

#define BERM_PTR(p) ((uint64_t)(uintptr_t)(p))

/* ------------------------------------------------------------------------------------------ */
/* Manifest records and tool declaration                                                      */
/* ------------------------------------------------------------------------------------------ */

/* One record per BERM_TOOL / BERM_USAGE / BERM_DEP, collected in section "berm_tools". The
 * post-link step (tools/berm-manifest.py) turns them into the JSON of section .berm.abi. */
enum { BERM_REC_TOOL = 1, BERM_REC_USAGE = 2, BERM_REC_DEP = 3 };
typedef struct berm_record {
  uint64_t kind;
  const char *a; /* tool name | usage text | dependency */
  const char *b; /* tool description */
  const char *c; /* tool parameters: JSON Schema text, "" means {"type":"object"} */
  void (*fn)(void); /* tool export */
} berm_record;

typedef struct berm_pair {
  uint64_t a0, a1;
} berm_pair;

#define BERM__CAT2(a, b) a##b
#define BERM__CAT(a, b) BERM__CAT2(a, b)
#define BERM__RECORD_ATTR __attribute__((used, section("berm_tools"), aligned(8)))

/* A raw entry point kept by the linker even though nothing calls it. Use 64-bit integer
 * parameters and returns (uint64_t / int64_t, or a two-u64 struct / unsigned __int128 for a0:a1). */
#define BERM_RAW __attribute__((used, noinline, section(".text.berm_raw")))

/* Per-call setup done by every tool wrapper (sets tp to the static TLS block, gp). */
void berm__enter(void);
void berm__leave(const char *tool);
berm_pair berm__leave0(const char *tool);

#if BERM_ABI == 1
#define BERM__WRAPPER(NAME)                                                                      \
  __attribute__((used, noinline, section(".text.berm_tool"))) void berm_tool_##NAME(void) {      \
    berm__enter();                                                                               \
    berm__body_##NAME();                                                                         \
    berm__leave(#NAME);                                                                          \
  }
#define BERM__EXPORT_DECL(NAME) void berm_tool_##NAME(void);
#else
#define BERM__WRAPPER(NAME)                                                                      \
  __attribute__((used, noinline, section(".text.berm_tool"))) berm_pair berm_tool_##NAME(void) { \
    berm__enter();                                                                               \
    berm__body_##NAME();                                                                         \
    return berm__leave0(#NAME);                                                                  \
  }
#define BERM__EXPORT_DECL(NAME) berm_pair berm_tool_##NAME(void);
#endif

/*
 * BERM_TOOL(name, "description" [, "JSON Schema of the arguments"]) { body }
 * Defines the export berm_tool_<name> and its manifest entry. The body calls berm_args() to pull
 * its arguments and ends with berm_done() or berm_fail(). Returning without either fails the call.
 */
#define BERM_TOOL(NAME, DESC, ...)                                                               \
  static void berm__body_##NAME(void);                                                           \
  BERM__EXPORT_DECL(NAME)                                                                        \
  static const berm_record berm__rec_##NAME BERM__RECORD_ATTR = {                                \
      BERM_REC_TOOL, #NAME, DESC, "" __VA_ARGS__, (void (*)(void))berm_tool_##NAME};            \
  BERM__WRAPPER(NAME)                                                                            \
  static void berm__body_##NAME(void)

/* BERM_USAGE("what the tools are for") — once per harness. */
#define BERM_USAGE(TEXT)                                                                         \
  static const berm_record BERM__CAT(berm__usage_, __LINE__) BERM__RECORD_ATTR = {               \
      BERM_REC_USAGE, TEXT, 0, 0, 0}

/* BERM_DEP("harness-or-host") — a harness this one calls or a host it dials (ABI 1 "deps"). */
#define BERM_DEP(TEXT)                                                                           \
  static const berm_record BERM__CAT(berm__dep_, __LINE__) BERM__RECORD_ATTR = {                 \
      BERM_REC_DEP, TEXT, 0, 0, 0}

/* ------------------------------------------------------------------------------------------ */
/* Core host calls                                                                            */
/* ------------------------------------------------------------------------------------------ */

/* The tool's arguments (JSON text), pulled on first use with berm.args.len + berm.args.read into
 * the heap; NUL-terminated. *len (if not NULL) receives the length. NULL if the heap is full. */
const char *berm_args(size_t *len);

/* Finish the call with a result / a failure message. Call once, then return. */
void berm_done(const void *ptr, size_t len);
void berm_done_str(const char *s);
void berm_fail(const void *ptr, size_t len);
void berm_fail_str(const char *s);
void berm_failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A host-side debug line. */
void berm_log(const void *ptr, size_t len);
void berm_log_str(const char *s);
void berm_logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Heap: a bump allocator over [berm.heap.start, +berm.heap.size), asked on first allocation.
 * Memory is 16-byte aligned and zeroed (fresh instance); berm_alloc returns NULL when full.
 * picolibc's malloc works too (the SDK's sbrk carves from the same region). */
void *berm_alloc(size_t n);
uint64_t berm_heap_remaining(void);

/* ------------------------------------------------------------------------------------------ */
/* Capability calls                                                                           */
/* ------------------------------------------------------------------------------------------ */

typedef struct berm_bytes {
  const void *ptr;
  size_t len;
} berm_bytes;

#define BERM_STR(s) ((berm_bytes){(s), __builtin_strlen(s)})

#define BERM_STAGED_ERROR (1ULL << 63)
#define BERM_STAGED_REFUSED (1ULL << 62)
#define BERM_STAGED_LEN_MASK ((1ULL << 62) - 1)

typedef struct berm_reply {
  int ok;        /* the capability ran and succeeded */
  int error;     /* bit 63: data is an error message */
  int refused;   /* bit 62: refused, nothing ran (data may explain) */
  char *data;    /* staged bytes, NUL-terminated (heap); "" if none or out of memory */
  size_t len;    /* staged length */
  uint64_t word; /* the raw staged-length word returned by the ecall */
} berm_reply;

/* Generic call: fields are framed as u32-LE length + bytes; the reply is read back with
 * berm.result.read, whose return must equal the staged length (else error "short read"). */
berm_reply berm_cap_call(uint64_t cap, const berm_bytes *fields, size_t nfields);

/* Split a multi-field reply (or any framed buffer) into fields. Returns the field count, or -1 if
 * the framing is malformed or there are more than max fields. */
int berm_fields(const void *data, size_t len, berm_bytes *out, size_t max);

/* Typed wrappers. NULL-terminated k,v,k,v,... lists for env and headers (may be NULL). */
berm_reply berm_fs_read(const char *path, uint64_t offset, uint64_t limit);
berm_reply berm_fs_write(const char *path, const void *data, size_t len);
berm_reply berm_fs_glob(const char *pattern);
berm_reply berm_fs_grep(const char *pattern, const char *path_glob);
berm_reply berm_exec_run(const char *command, const char *cwd, const char *const *env);
berm_reply berm_http_fetch(const char *method, const char *url, const void *body, size_t body_len,
                           const char *const *headers);
berm_reply berm_now(void);          /* decimal UTC milliseconds */
berm_reply berm_clock_offset(void); /* decimal seconds east of UTC */
berm_reply berm_get(const char *key); /* found iff ok && len > 0 (zero fields = absent) */
berm_reply berm_set(const char *key, const void *value, size_t len);
berm_reply berm_delete(const char *key);
berm_reply berm_call(const char *harness, const char *tool, const char *args_json);

/* crabtalk.* capabilities: same field orders as their berm.* counterparts. */
berm_reply berm_crabtalk_fs_read(const char *path, uint64_t offset, uint64_t limit);
berm_reply berm_crabtalk_fs_write(const char *path, const void *data, size_t len);
berm_reply berm_crabtalk_exec_run(const char *command, const char *cwd, const char *const *env);
berm_reply berm_crabtalk_http_fetch(const char *method, const char *url, const void *body,
                                    size_t body_len, const char *const *headers);

/* Convenience parsers. Return 0 on success, -1 if the reply failed or is malformed. */
int berm_now_ms(int64_t *out);
int berm_clock_offset_s(int64_t *out);
typedef struct berm_http_response {
  int64_t status;
  berm_bytes headers; /* "k: v\n" lines */
  berm_bytes body;
} berm_http_response;
int berm_http_parse(const berm_reply *r, berm_http_response *out);

/* Decimal helpers (no libc needed). */
size_t berm_u64_to_dec(uint64_t v, char out[21]);
int berm_dec_to_i64(const void *p, size_t len, int64_t *out);

/* ------------------------------------------------------------------------------------------ */
/* Recurring wake (forward-looking)                                                           */
/* ------------------------------------------------------------------------------------------ */

/*
 * berm.wake.arm(delay_ms) -> 0 when armed. There is no scheduler capability in the runtime yet;
 * this is the shape the SDK will use. berm_every() re-arms the next wake BEFORE running the body,
 * so a trap in the body costs one occurrence, not the rest of the schedule.
 */
uint64_t berm_wake_arm(uint64_t delay_ms);
void berm_every(uint64_t period_ms, void (*body)(void));

/* BERM_RECURRING(name, "description", period_ms) { body } — a tool that re-arms itself. */
#define BERM_RECURRING(NAME, DESC, PERIOD_MS)                                                   \
  static void berm__every_##NAME(void);                                                          \
  BERM_TOOL(NAME, DESC) { berm_every((PERIOD_MS), berm__every_##NAME); }                         \
  static void berm__every_##NAME(void)

#ifdef __cplusplus
}
#endif

#endif /* BERM_H */

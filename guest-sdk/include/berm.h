/*
 * berm guest SDK: write harness tools in C for berm (RV64IMAC, statically linked).
 *
 * The same source builds three ways:
 *   - for the guest (riscv64, see berm.mk): host calls are `ecall` with the number in a7,
 *     arguments in a0..a5 and the result in a0;
 *   - for the guest as WebAssembly (wasm32, see berm.mk BERM_TARGET=wasm32 and docs/wasm.md):
 *     every host call is the one import berm.syscall(number, ptr, len) -> a0, with the same
 *     numbers; only a0 and a1 (a pointer and a length, or zeros) travel, as every berm host call
 *     needs no more;
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

#if !defined(BERM_HOST) && !defined(__riscv) && !defined(__wasm32__)
#define BERM_HOST 1
#endif

#if defined(__wasm32__) && !defined(BERM_HOST) && BERM_ABI != 1
#error "wasm32 harnesses answer through berm.done (BERM_ABI=1)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Raw host calls                                                                             */
/* ------------------------------------------------------------------------------------------ */

#if !defined(BERM_HOST) && defined(__wasm32__)
/* The one import of a Wasm harness: the call's FNV-1a-64 number, a pointer and a length. */
__attribute__((import_module("berm"), import_name("syscall"))) uint64_t berm__syscall(uint64_t n,
                                                                                    uint32_t ptr,
                                                                                    uint32_t len);
static inline uint64_t berm_hostcall(uint64_t n, uint64_t x0, uint64_t x1, uint64_t x2,
                                     uint64_t x3, uint64_t x4, uint64_t x5) {
  (void)x2, (void)x3, (void)x4, (void)x5;
  return berm__syscall(n, (uint32_t)x0, (uint32_t)x1);
}
#elif !defined(BERM_HOST)
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
#if defined(__wasm32__) && !defined(BERM_HOST)
#define BERM_RAW __attribute__((used, noinline))
#else
#define BERM_RAW __attribute__((used, noinline, section(".text.berm_raw")))
#endif

/* Per-call setup done by every tool wrapper (sets tp to the static TLS block, gp). */
void berm__enter(void);
void berm__leave(const char *tool);
berm_pair berm__leave0(const char *tool);

#if defined(__wasm32__) && !defined(BERM_HOST)
/* wasm32: the wrapper is exported under its own name (wasm-ld keeps exports) */
#define BERM__WRAPPER(NAME)                                                                      \
  __attribute__((used, noinline, export_name("berm_tool_" #NAME))) void berm_tool_##NAME(void) { \
    berm__enter();                                                                               \
    berm__body_##NAME();                                                                         \
    berm__leave(#NAME);                                                                          \
  }
#define BERM__EXPORT_DECL(NAME) void berm_tool_##NAME(void);
#elif BERM_ABI == 1
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
/* Wakes and notifications (docs/wakes.md)                                                    */
/* ------------------------------------------------------------------------------------------ */

/*
 * A harness that can be woken exports a global function `on_wake`; one that receives subscribed
 * events exports `on_notify`. The export table is the registration: the runtime refuses to arm a
 * wake for a harness without `on_wake`. Each receives its record like tool arguments (pulled with
 * berm.args.len/berm.args.read) as UTF-8 JSON:
 *   wake:   {"id":"…","scheduled_at":<ms since epoch>,"now":<ms since epoch>,"attempt":<n>,"payload":"…"}
 *   notify: {"id":"…","source":"…","payload":"…","now":<ms>,"attempt":<n>}
 * Delivery is at-least-once: attempt > 1 means an earlier delivery of the same occurrence may
 * have run (partly or fully). Returning without berm_done/berm_fail counts as ok.
 */
/* Most of the wake support is static inline (include/berm_wake.h), so harnesses that do not use
 * it link none of it. */
#define BERM__INLINE static inline __attribute__((unused))

typedef struct berm_wake {
  const char *id;       /* the wake id (NUL-terminated) */
  size_t id_len;
  int64_t scheduled_at; /* when it was due, ms since the Unix epoch */
  int64_t now;          /* when the runtime started this delivery, ms since the Unix epoch */
  uint64_t attempt;     /* 1 on the first delivery; > 1 on a redelivery of the same occurrence */
  const char *payload;  /* the payload given when armed (decoded, NUL-terminated; "" if none) */
  size_t payload_len;
} berm_wake;

typedef struct berm_notify {
  const char *id;     /* the subscription id */
  size_t id_len;
  const char *source; /* the event source */
  size_t source_len;
  const char *payload; /* the event payload (decoded, NUL-terminated) */
  size_t payload_len;
  int64_t now;      /* ms since the Unix epoch */
  uint64_t attempt; /* 1 on the first delivery */
} berm_notify;

/* Parse a record (JSON text of len bytes; strings are decoded into berm_alloc memory). 0 on
 * success; -1 when the text is not a JSON object, a field is missing or has the wrong type
 * (unknown members are ignored, so the runtime may add fields). */
BERM__INLINE int berm_wake_parse(const char *json, size_t len, berm_wake *out);
BERM__INLINE int berm_notify_parse(const char *json, size_t len, berm_notify *out);

/* Entry wrappers used by BERM_ON_WAKE / BERM_ON_NOTIFY: pull and parse the record (failing the
 * delivery with a clear message when it is malformed; then return 0), or return 1. */
BERM__INLINE int berm__wake_record(berm_wake *out);
BERM__INLINE int berm__notify_record(berm_notify *out);
BERM__INLINE void berm__leave_entry(void);
BERM__INLINE berm_pair berm__leave_entry0(void);

/* Kind of the record that keeps an entry export alive (the record table is referenced from
 * _start, like tool exports); berm-manifest.py accepts it and adds nothing to the manifest. */
enum { BERM_REC_ENTRY = 4 };

#if BERM_ABI == 1
#define BERM__ENTRY(EXPORT, TYPE, GET)                                                           \
  static void berm__body_##EXPORT(const TYPE *);                                                 \
  void EXPORT(void);                                                                             \
  static const berm_record berm__rec_##EXPORT BERM__RECORD_ATTR = {                              \
      BERM_REC_ENTRY, #EXPORT, 0, 0, (void (*)(void))EXPORT};                                     \
  __attribute__((used, noinline, section(".text.berm_tool"))) void EXPORT(void) {               \
    berm__enter();                                                                               \
    TYPE rec_;                                                                                   \
    if (GET(&rec_)) berm__body_##EXPORT(&rec_);                                                  \
    berm__leave_entry();                                                                         \
  }
#else
#define BERM__ENTRY(EXPORT, TYPE, GET)                                                           \
  static void berm__body_##EXPORT(const TYPE *);                                                 \
  berm_pair EXPORT(void);                                                                        \
  static const berm_record berm__rec_##EXPORT BERM__RECORD_ATTR = {                              \
      BERM_REC_ENTRY, #EXPORT, 0, 0, (void (*)(void))EXPORT};                                     \
  __attribute__((used, noinline, section(".text.berm_tool"))) berm_pair EXPORT(void) {          \
    berm__enter();                                                                               \
    TYPE rec_;                                                                                   \
    if (GET(&rec_)) berm__body_##EXPORT(&rec_);                                                  \
    return berm__leave_entry0();                                                                 \
  }
#endif

/*
 * BERM_ON_WAKE(w) { body } — defines the export on_wake; `w` is a `const berm_wake *`.
 * BERM_ON_NOTIFY(n) { body } — defines the export on_notify; `n` is a `const berm_notify *`.
 * The body may call berm_done/berm_fail (recorded in the journal) or simply return (= ok).
 */
#define BERM_ON_WAKE(REC)                                                                        \
  BERM__ENTRY(on_wake, berm_wake, berm__wake_record)                                             \
  static void berm__body_on_wake(const berm_wake *REC)
#define BERM_ON_NOTIFY(REC)                                                                      \
  BERM__ENTRY(on_notify, berm_notify, berm__notify_record)                                       \
  static void berm__body_on_notify(const berm_notify *REC)

/*
 * berm.wake.arm: arm a wake of this harness's on_wake at the invocation's instant + delay_ms. The
 * instant is fixed when the invocation starts: the `now` of the wake or notify record being
 * handled, or the start of a tool call; never the moment of this call, so every arm of one
 * invocation counts from the same instant (docs/wakes.md "Which now a delay counts from"); an
 * instant + delay already past is due at once. payload (NULL = none) comes back in the record; id (NULL = let the runtime choose) names the wake, and re-arming an
 * existing id replaces it. On success reply.ok and reply.data is the wake id.
 * Needs the `schedule` grant (else reply.refused or, when not linked at all, a trap).
 */
BERM__INLINE berm_reply berm_wake_arm(uint64_t delay_ms, const char *payload, const char *id);
BERM__INLINE berm_reply berm_wake_arm_n(uint64_t delay_ms, const void *payload, size_t payload_len,
                                        const char *id);
/* berm.wake.cancel: reply.data is "1" (cancelled) or "0" (no such wake). */
BERM__INLINE berm_reply berm_wake_cancel(const char *id);
/* berm.call.after: call harness.tool(args_json) at the invocation's instant + delay_ms (the
 * instant as for berm_wake_arm). At most one pending per calling harness; arming again replaces
 * it. reply.data is the wake id. */
BERM__INLINE berm_reply berm_call_after(uint64_t delay_ms, const char *harness, const char *tool,
                           const char *args_json);

/*
 * Recurring schedules. berm_every() re-arms the wake `w->id` for its next occurrence, keeping the
 * phase of the original schedule: the delay is period_ms minus how late this delivery started
 * ((now - scheduled_at) mod period_ms), so lateness does not accumulate and occurrences missed
 * during downtime are not replayed (the one overdue delivery carries the old scheduled_at).
 * payload NULL keeps w's payload. Returns 0 when armed; -1 (after logging why) otherwise.
 * Call it FIRST in on_wake: a trap later in the body then costs one occurrence, not the schedule.
 */
BERM__INLINE int berm_every(const berm_wake *w, uint64_t period_ms, const char *payload);

/* BERM_RECURRING(w, period_ms) { body } — defines on_wake: re-arm w->id every period_ms (an
 * expression that may use w), then run the body. Start the schedule from a tool with
 * berm_wake_arm(first_delay, payload, "my-id"). */
#define BERM_RECURRING(REC, PERIOD_MS)                                                           \
  static void berm__recurring_body(const berm_wake *REC);                                        \
  BERM_ON_WAKE(berm__rw_) {                                                                      \
    const berm_wake *REC = berm__rw_;                                                            \
    berm_every(REC, (PERIOD_MS), NULL);                                                          \
    berm__recurring_body(REC);                                                                   \
  }                                                                                              \
  static void berm__recurring_body(const berm_wake *REC)

/* 1 when this delivery started more than max_late_ms after it was due (logs the skip), else 0.
 * One line to skip stale work after downtime: `if (berm_wake_late(w, 5000)) return;` */
BERM__INLINE int berm_wake_late(const berm_wake *w, int64_t max_late_ms);

#include "berm_wake.h"

#ifdef __cplusplus
}
#endif

#endif /* BERM_H */

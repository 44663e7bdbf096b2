/*
 * Stand-in host for `make host-test`: the harness source is compiled natively (x86-64, -DBERM_HOST)
 * and its tool handlers run the way the runtime runs them: arguments are pulled through
 * berm.args.len/berm.args.read, the heap comes from berm.heap.start/size (a zeroed arena of the
 * configured size), results leave through berm.done/berm.fail, capability replies are staged and
 * read back with berm.result.read (copying min(staged, cap)).
 *
 * Capabilities have no default behaviour: a call to one without a stand-in aborts the test,
 * naming the capability. Register stand-ins with berm_host_stub().
 */
#ifndef BERM_HOST_H
#define BERM_HOST_H

#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#include "berm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct berm_host_result {
  int ok;       /* berm.done was called (ABI 1) / the tool returned (ptr,len) (ABI 0) */
  int failed;   /* berm.fail was called */
  char *result; /* result or failure message, NUL-terminated (owned by the stand-in host) */
  size_t len;
} berm_host_result;

/* Run tool `name` (its berm_tool_<name> export) with these argument bytes. */
berm_host_result berm_host_run(const char *name, const char *args_json);
berm_host_result berm_host_run_n(const char *name, const void *args, size_t len);

/* Prepare a fresh "instance" (heap zeroed, no args, nothing staged) before calling a raw entry
 * point directly; berm_host_run does this itself. */
void berm_host_begin(const void *args, size_t len);

/* Manifest records compiled into this binary (BERM_TOOL / BERM_USAGE / BERM_DEP). */
const berm_record *berm_host_records(size_t *count);

/* Heap size handed out by berm.heap.size (default 32 MiB). */
void berm_host_set_heap_size(uint64_t bytes);
/* Number of berm.heap.start/size calls since the last begin (a tool that never allocates: 0). */
unsigned berm_host_heap_queries(void);

/* Everything logged with berm.log since the last begin, one line per call ("\n"-joined). Logs are
 * also echoed to stderr when BERM_HOST_VERBOSE is set in the environment. */
const char *berm_host_logs(void);

/* ---- wakes and notifications ---------------------------------------------------------------
 * Run the harness's on_wake / on_notify export with the record the runtime would build (JSON,
 * docs/wakes.md). Aborts when the harness defines no such export. */
berm_host_result berm_host_wake(const char *id, int64_t scheduled_at, int64_t now, uint64_t attempt,
                                const char *payload);
berm_host_result berm_host_notify(const char *id, const char *source, const char *payload,
                                  int64_t now, uint64_t attempt);
/* Run an entry export ("on_wake" or "on_notify") with these exact record bytes. */
berm_host_result berm_host_run_entry(const char *entry, const void *record, size_t len);
/* 1 when the harness defines the entry export ("on_wake" / "on_notify"). */
int berm_host_has_entry(const char *entry);

/* Stand-ins for berm.wake.arm, berm.wake.cancel and berm.call.after over an in-memory due-set,
 * answering as the runtime does: arm replies the wake id (the one given, else "wake-<n>") and
 * replaces a pending wake of the same id; cancel replies "1" or "0"; call.after replies its id
 * ("call-after") and replaces the pending one; an empty id, harness or tool is refused, as the
 * runtime refuses it. Each call is also recorded (see below). */
void berm_host_use_schedule(void);
/* Forget every pending wake and call.after (the due-set), e.g. between test cases. */
void berm_host_schedule_clear(void);

enum { BERM_HOST_ARM = 1, BERM_HOST_CANCEL = 2, BERM_HOST_CALL_AFTER = 3 };
typedef struct berm_host_sched {
  int kind;          /* BERM_HOST_ARM / _CANCEL / _CALL_AFTER */
  uint64_t delay_ms; /* arm, call.after */
  char *id;          /* arm, call.after: the id replied; cancel: the id asked for */
  char *payload;     /* arm: the payload (NUL-terminated; "" when none) */
  size_t payload_len;
  int has_payload;       /* arm: a payload field was sent */
  char *harness, *tool, *args; /* call.after */
  int cancelled;         /* cancel: 1 if a pending wake was removed */
  unsigned logs_before;  /* berm.log lines written before this call in the same run */
} berm_host_sched;
/* Scheduling calls made since the last begin (arms, cancels, call.after), in order. */
size_t berm_host_sched_count(void);
const berm_host_sched *berm_host_sched_get(size_t i);
/* The pending wake with this id (armed, not cancelled, not yet cleared), or NULL. */
const berm_host_sched *berm_host_pending(const char *id);
size_t berm_host_pending_count(void);
/* The pending berm.call.after, or NULL. */
const berm_host_sched *berm_host_pending_call_after(void);

/* berm.wake.arm calls since the last begin, and the delay of the last one. */
unsigned berm_host_wake_count(void);
uint64_t berm_host_last_wake_ms(void);

/* ---- capability stand-ins -------------------------------------------------------------- */
typedef struct berm_host_reply berm_host_reply;
/* Append one reply field. A reply of one field is staged as its raw bytes; several are framed
 * (u32-LE length + bytes each), exactly like the runtime. */
void berm_host_reply_bytes(berm_host_reply *r, const void *p, size_t n);
void berm_host_reply_str(berm_host_reply *r, const char *s);
/* Stage an error message (bit 63) or a refusal (bit 62) instead. */
void berm_host_reply_error(berm_host_reply *r, const char *msg);
void berm_host_reply_refused(berm_host_reply *r, const char *msg);

typedef void (*berm_host_cap_fn)(const berm_bytes *fields, size_t nfields, berm_host_reply *reply,
                                 void *ctx);
/* Install (or with fn == NULL remove) the stand-in for capability number `cap`
 * (a BERM_CAP_* constant, or the FNV-1a-64 number of an embedder's own capability). */
void berm_host_stub(uint64_t cap, berm_host_cap_fn fn, void *ctx);

/* Ready-made stand-ins: an in-memory store for berm.get / berm.set / berm.delete (cleared by
 * berm_host_storage_clear), and a fixed clock for berm.now / berm.clock.offset. (The schedule
 * stand-ins are above: berm_host_use_schedule.) */
void berm_host_use_memory_storage(void);
void berm_host_storage_clear(void);
void berm_host_use_fixed_clock(int64_t now_ms, int64_t offset_s);

/* ---- tiny test helpers -------------------------------------------------------------------- */
extern int berm_host_failures;
#define BERM_CHECK(cond)                                                                         \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      berm_host_failures++;                                                                      \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                   \
    }                                                                                            \
  } while (0)
#define BERM_CHECK_STR(got, want)                                                                \
  do {                                                                                           \
    const char *g_ = (got), *w_ = (want);                                                        \
    if (!g_ || strcmp(g_, w_) != 0) {                                                            \
      berm_host_failures++;                                                                      \
      fprintf(stderr, "%s:%d: CHECK_STR failed:\n  got:  %s\n  want: %s\n", __FILE__, __LINE__,  \
              g_ ? g_ : "(null)", w_);                                                           \
    }                                                                                            \
  } while (0)

/* Every host test defines berm_host_test(); the stand-in host's main() runs it and prints
 * PASS/FAIL. Build with -DBERM_HOST_NO_MAIN to supply your own main(). */
void berm_host_test(void);

#ifdef __cplusplus
}
#endif

#endif /* BERM_HOST_H */

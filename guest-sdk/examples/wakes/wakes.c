/*
 * wakes: test harness for the runtime's queue (wakes, notifications, timeouts, call chains).
 * Not an example to copy. Grants it expects: schedule, exec (with a root), call (with callees).
 *
 *   on_wake, on_notify   log the record and reply it re-encoded as JSON (same field names and
 *                        order as docs/wakes.md), so a test can compare it field by field.
 *                        Payload "spin" spins for ever; payload "trap" faults (MemoryFault).
 *   arm {delay_ms, payload?, id?}         berm.wake.arm -> the wake id
 *   cancel {id}                           berm.wake.cancel -> "1" | "0"
 *   after {delay_ms, harness, tool, args?} berm.call.after -> the wake id
 *   spin {}                               an endless loop (ends only by timeout or fuel)
 *   trap {}                               a store below the image (MemoryFault)
 *   block {ms}                            a host call that blocks: berm.exec.run /bin/sleep
 *   call {harness, tool, args?}           berm.call -> the callee's reply (ok) or its error (fails)
 *   echo {...}                            returns its arguments
 * `args` may be a JSON object/array (passed as its text) or a string holding JSON text.
 * A host call that is refused or fails makes the tool fail with "refused: …" / "error: …".
 */
#include <berm.h>
#include <stdio.h>
#include <string.h>

#include "../json.h"

BERM_USAGE("Runtime probes for wakes and notifications (test harness).");
BERM_DEP("schedule");
BERM_DEP("exec");
BERM_DEP("call");

static __attribute__((noinline)) void memory_fault(void) {
  volatile uintptr_t p = 8; /* below the image: MemoryFault */
  *(volatile int *)p = 1;
}

static __attribute__((noinline)) void spin(void) {
  for (;;) __asm__ volatile("" ::: "memory");
}

/* Act on a payload of "spin" or "trap"; otherwise return. */
static void payload_action(const char *payload) {
  if (strcmp(payload, "spin") == 0) spin();
  if (strcmp(payload, "trap") == 0) memory_fault();
}

/* Finish with the reply of a host call: its data when ok, else fail with the reason. */
static void finish(const berm_reply *r) {
  if (r->ok) return berm_done(r->data, r->len);
  berm_failf("%s: %.400s", r->refused ? "refused" : "error", r->data);
}

/* The text of member `key`: a string's contents, or an object/array's JSON text; NULL if absent
 * (then *bad = 0) or another type (then *bad = 1). */
static const char *json_text(const char *args, const char *key, int *bad) {
  *bad = 0;
  const char *p = json_member(args, key);
  if (!p || strncmp(p, "null", 4) == 0) return NULL;
  if (*p == '"') {
    char *s;
    if (json_string(args, key, &s, NULL) != 1) return *bad = 1, NULL;
    return s;
  }
  if (*p != '{' && *p != '[') return *bad = 1, NULL;
  const char *end = json__skip_value(p);
  if (!end) return *bad = 1, NULL;
  char *s = berm_alloc((size_t)(end - p) + 1);
  if (!s) return *bad = 1, NULL;
  memcpy(s, p, (size_t)(end - p));
  s[end - p] = 0;
  return s;
}

BERM_ON_WAKE(w) {
  berm_logf("on_wake id=%s attempt=%llu payload=%.100s", w->id, (unsigned long long)w->attempt,
            w->payload);
  payload_action(w->payload);
  char *out = berm_alloc(6 * (w->id_len + w->payload_len) + 160), *o = out;
  if (!out) return berm_fail_str("out of memory");
  json_put_raw(&o, "{\"id\":");
  json_put_string(&o, w->id, w->id_len);
  o += sprintf(o, ",\"scheduled_at\":%lld,\"now\":%lld,\"attempt\":%llu,\"payload\":",
               (long long)w->scheduled_at, (long long)w->now, (unsigned long long)w->attempt);
  json_put_string(&o, w->payload, w->payload_len);
  json_put_raw(&o, "}");
  berm_done(out, (size_t)(o - out));
}

BERM_ON_NOTIFY(n) {
  berm_logf("on_notify id=%s source=%.100s attempt=%llu payload=%.100s", n->id, n->source,
            (unsigned long long)n->attempt, n->payload);
  payload_action(n->payload);
  char *out = berm_alloc(6 * (n->id_len + n->source_len + n->payload_len) + 160), *o = out;
  if (!out) return berm_fail_str("out of memory");
  json_put_raw(&o, "{\"id\":");
  json_put_string(&o, n->id, n->id_len);
  json_put_raw(&o, ",\"source\":");
  json_put_string(&o, n->source, n->source_len);
  json_put_raw(&o, ",\"payload\":");
  json_put_string(&o, n->payload, n->payload_len);
  o += sprintf(o, ",\"now\":%lld,\"attempt\":%llu}", (long long)n->now,
               (unsigned long long)n->attempt);
  berm_done(out, (size_t)(o - out));
}

BERM_TOOL(arm, "Arm a wake of this harness (berm.wake.arm); replies the wake id.",
          "{\"type\":\"object\",\"required\":[\"delay_ms\"],\"properties\":{"
          "\"delay_ms\":{\"type\":\"integer\",\"minimum\":0},"
          "\"payload\":{\"type\":\"string\"},\"id\":{\"type\":\"string\"}}}") {
  const char *args = berm_args(NULL);
  uint64_t delay;
  char *payload = NULL, *id = NULL;
  size_t plen = 0;
  if (json_uint(args, "delay_ms", &delay) != 1) return berm_fail_str("delay_ms must be a non-negative integer");
  if (json_string(args, "payload", &payload, &plen) < 0) return berm_fail_str("payload must be a string");
  if (json_string(args, "id", &id, NULL) < 0) return berm_fail_str("id must be a string");
  berm_reply r = berm_wake_arm_n(delay, payload, plen, id);
  finish(&r);
}

BERM_TOOL(cancel, "Cancel a wake by id (berm.wake.cancel); replies \"1\" or \"0\".",
          "{\"type\":\"object\",\"required\":[\"id\"],\"properties\":{\"id\":{\"type\":\"string\"}}}") {
  char *id;
  if (json_string(berm_args(NULL), "id", &id, NULL) != 1) return berm_fail_str("id must be a string");
  berm_reply r = berm_wake_cancel(id);
  finish(&r);
}

BERM_TOOL(after, "Call harness.tool(args) after delay_ms (berm.call.after); replies the wake id.",
          "{\"type\":\"object\",\"required\":[\"delay_ms\",\"harness\",\"tool\"],\"properties\":{"
          "\"delay_ms\":{\"type\":\"integer\",\"minimum\":0},\"harness\":{\"type\":\"string\"},"
          "\"tool\":{\"type\":\"string\"},\"args\":{\"type\":[\"object\",\"array\",\"string\"]}}}") {
  const char *args = berm_args(NULL);
  uint64_t delay;
  char *harness, *tool;
  int bad;
  if (json_uint(args, "delay_ms", &delay) != 1) return berm_fail_str("delay_ms must be a non-negative integer");
  if (json_string(args, "harness", &harness, NULL) != 1) return berm_fail_str("harness must be a string");
  if (json_string(args, "tool", &tool, NULL) != 1) return berm_fail_str("tool must be a string");
  const char *a = json_text(args, "args", &bad);
  if (bad) return berm_fail_str("args must be a JSON object, array or a string of JSON");
  berm_reply r = berm_call_after(delay, harness, tool, a ? a : "{}");
  finish(&r);
}

BERM_TOOL(spin, "Loop for ever (ends by the timeout or fuel).") {
  spin();
}

BERM_TOOL(trap, "Store below the image: traps MemoryFault.") {
  memory_fault();
  berm_done_str("not reached");
}

BERM_TOOL(block, "Block in a host call for ms milliseconds (berm.exec.run of /bin/sleep).",
          "{\"type\":\"object\",\"required\":[\"ms\"],\"properties\":{\"ms\":{\"type\":\"integer\",\"minimum\":0}}}") {
  uint64_t ms;
  if (json_uint(berm_args(NULL), "ms", &ms) != 1) return berm_fail_str("ms must be a non-negative integer");
  char cmd[64];
  snprintf(cmd, sizeof cmd, "exec /bin/sleep %llu.%03llu", (unsigned long long)(ms / 1000),
           (unsigned long long)(ms % 1000));
  static const char *const env[] = {"PATH", "/usr/bin:/bin", NULL};
  berm_reply r = berm_exec_run(cmd, NULL, env);
  if (!r.ok) return finish(&r);
  berm_done_str("slept");
}

BERM_TOOL(call, "Call harness.tool(args) through berm.call; replies the callee's reply or fails with its error.",
          "{\"type\":\"object\",\"required\":[\"harness\",\"tool\"],\"properties\":{"
          "\"harness\":{\"type\":\"string\"},\"tool\":{\"type\":\"string\"},"
          "\"args\":{\"type\":[\"object\",\"array\",\"string\"]}}}") {
  const char *args = berm_args(NULL);
  char *harness, *tool;
  int bad;
  if (json_string(args, "harness", &harness, NULL) != 1) return berm_fail_str("harness must be a string");
  if (json_string(args, "tool", &tool, NULL) != 1) return berm_fail_str("tool must be a string");
  const char *a = json_text(args, "args", &bad);
  if (bad) return berm_fail_str("args must be a JSON object, array or a string of JSON");
  berm_reply r = berm_call(harness, tool, a ? a : "{}");
  finish(&r);
}

BERM_TOOL(echo, "Return the arguments unchanged.", "{\"type\":\"object\"}") {
  size_t n;
  const char *args = berm_args(&n);
  if (!args) return berm_fail_str("out of memory");
  berm_done(args, n);
}

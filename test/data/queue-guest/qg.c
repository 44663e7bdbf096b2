/*
 * qg: test guest of the runtime's queue (wakes, notifications, chains, stuck host calls).
 * Not an example to copy. Tools (arguments: one JSON object of strings):
 *   echo {...}                         -> the arguments unchanged
 *   arm {delay, payload?, id?}         -> berm.wake.arm; "ok: <id>" / "refused: ..." / "error: ..."
 *   cancel {id}                        -> berm.wake.cancel; "ok: 1" / "ok: 0"
 *   after {delay, harness, tool, args} -> berm.call.after; "ok: <id>"
 *   call {harness, tool, args}         -> berm.call; "ok: ..." / "error: ..." / "refused: ..."
 *   spin {}                            -> loops for ever (Interrupted or OutOfFuel)
 *   trap {}                            -> stores through address 8 (MemoryFault)
 *   fetch {url}                        -> berm.http.fetch GET url; the status line
 *   hostcall {name}                    -> the capability call `name` (FNV-1a-64) with no fields
 * on_wake: logs "wake <record>"; payload "tick:<ms>" re-arms the same id first (a recurring
 * schedule), "tickt:<ms>" re-arms and then traps, "trap" traps, "spin" spins, "fail" fails;
 * otherwise done with the record.
 * on_notify: logs "notify <record>" and is done with the record.
 */
#include <berm.h>
#include <stdint.h>
#include <string.h>

#include "../../../guest-sdk/examples/json.h"

BERM_USAGE("Queue test guest: wakes, notifications, chains, spinning, trapping, blocking.");

#define CAP_WAKE_ARM 0xbc59719045534c41ULL    /* berm.wake.arm */
#define CAP_WAKE_CANCEL 0x49fec8e77c499a5fULL /* berm.wake.cancel */
#define CAP_CALL_AFTER 0x9b5a5c838aa65cb1ULL  /* berm.call.after */

static void reply_text(const berm_reply *r) {
  const char *kind = r->ok ? "ok: " : r->refused ? "refused: " : "error: ";
  size_t k = strlen(kind);
  char *out = berm_alloc(k + r->len + 1);
  if (!out) return berm_fail_str("out of memory");
  memcpy(out, kind, k);
  memcpy(out + k, r->data, r->len);
  berm_done(out, k + r->len);
}

/* A string member or "" when absent. */
static const char *member(const char *json, const char *key) {
  char *s = NULL;
  if (json_string(json, key, &s, NULL) != 1) return "";
  return s;
}

static void do_trap(void) {
  volatile uintptr_t p = 8;
  *(volatile int *)p = 1;
}

static void do_spin(void) {
  volatile uint64_t n = 0;
  for (;;) n++;
}

BERM_TOOL(echo, "Return the arguments unchanged.") {
  size_t n;
  const char *a = berm_args(&n);
  berm_done(a, n);
}

BERM_TOOL(arm, "berm.wake.arm with {delay, payload?, id?} (strings).") {
  const char *a = berm_args(NULL);
  char *payload = NULL, *id = NULL;
  int hp = json_string(a, "payload", &payload, NULL) == 1;
  int hi = json_string(a, "id", &id, NULL) == 1;
  berm_bytes f[3] = {BERM_STR(member(a, "delay")), {"", 0}, {"", 0}};
  size_t n = 1;
  if (hp || hi) f[n++] = hp ? BERM_STR(payload) : (berm_bytes){"", 0};
  if (hi) f[n++] = BERM_STR(id);
  berm_reply r = berm_cap_call(CAP_WAKE_ARM, f, n);
  reply_text(&r);
}

BERM_TOOL(cancel, "berm.wake.cancel with {id}.") {
  const char *a = berm_args(NULL);
  berm_bytes f[1] = {BERM_STR(member(a, "id"))};
  berm_reply r = berm_cap_call(CAP_WAKE_CANCEL, f, 1);
  reply_text(&r);
}

BERM_TOOL(after, "berm.call.after with {delay, harness, tool, args}.") {
  const char *a = berm_args(NULL);
  berm_bytes f[4] = {BERM_STR(member(a, "delay")), BERM_STR(member(a, "harness")),
                     BERM_STR(member(a, "tool")), BERM_STR(member(a, "args"))};
  berm_reply r = berm_cap_call(CAP_CALL_AFTER, f, 4);
  reply_text(&r);
}

BERM_TOOL(call, "berm.call with {harness, tool, args}.") {
  const char *a = berm_args(NULL);
  const char *args = member(a, "args");
  berm_reply r = berm_call(member(a, "harness"), member(a, "tool"), *args ? args : "{}");
  reply_text(&r);
}

BERM_TOOL(spin, "Loop for ever.") { do_spin(); }

BERM_TOOL(trap, "Store through address 8 (MemoryFault).") {
  do_trap();
  berm_done_str("not reached");
}

BERM_TOOL(fetch, "GET {url} through berm.http.fetch.") {
  const char *a = berm_args(NULL);
  berm_reply r = berm_http_fetch("GET", member(a, "url"), NULL, 0, NULL);
  reply_text(&r);
}

BERM_TOOL(hostcall, "Call the capability {name} (hashed with FNV-1a-64) with no fields.") {
  const char *name = member(berm_args(NULL), "name");
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
  berm_reply r = berm_cap_call(h, NULL, 0);
  reply_text(&r);
}

/* Re-arm this wake's own id with the same payload after `ms` milliseconds. */
static void rearm(const char *rec, const char *ms) {
  const char *id = member(rec, "id");
  const char *payload = member(rec, "payload");
  berm_bytes f[3] = {BERM_STR(ms), BERM_STR(payload), BERM_STR(id)};
  berm_reply r = berm_cap_call(CAP_WAKE_ARM, f, 3);
  if (!r.ok) berm_logf("re-arm refused: %s", r.data);
}

BERM_RAW void on_wake(void) {
  berm__enter();
  size_t n;
  const char *rec = berm_args(&n);
  berm_logf("wake %s", rec);
  const char *payload = member(rec, "payload");
  if (strncmp(payload, "tick:", 5) == 0) {
    rearm(rec, payload + 5);
  } else if (strncmp(payload, "tickt:", 6) == 0) {
    rearm(rec, payload + 6);
    do_trap();
  } else if (strcmp(payload, "trap") == 0) {
    do_trap();
  } else if (strcmp(payload, "spin") == 0) {
    do_spin();
  } else if (strcmp(payload, "fail") == 0) {
    berm_fail_str("failed on purpose");
    return;
  }
  berm_done(rec, n);
}

BERM_RAW void on_notify(void) {
  berm__enter();
  size_t n;
  const char *rec = berm_args(&n);
  berm_logf("notify %s", rec);
  berm_done(rec, n);
}

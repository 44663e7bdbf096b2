/*
 * ticker: a recurring harness built with the SDK's helper (berm_every in on_wake), for the
 * runtime's tests and as an example. Grants: schedule, storage.
 *
 *   start {period_ms?, trap_on?}  arms wake "ticker" one period from now (period default 200 ms);
 *                                 occurrence number trap_on (1-based) traps after re-arming.
 *                                 Replies the wake id.
 *   count {}                      {"count":<ticks completed>,"occurrences":<deliveries started>}
 *   stop {}                       cancels wake "ticker": "1" if one was pending, else "0"
 *
 * Each occurrence (on_wake) re-arms the next one FIRST (berm_every keeps the phase of the
 * schedule), counts the delivery in storage key "occurrences", then either traps (payload "trap",
 * or the occurrence numbered trap_on) or counts a tick in key "count", logs it and replies the
 * count. A trap therefore costs one occurrence, never the schedule.
 * The payload is JSON {"period_ms":P,"trap_on":N} or the literal "trap" (trap once, then continue
 * at the default period).
 */
#include <berm.h>
#include <stdio.h>
#include <string.h>

#include "../json.h"

BERM_USAGE("A recurring ticker: counts its occurrences in storage (runtime tests, SDK example).");
BERM_DEP("schedule");
BERM_DEP("storage");

#define TICKER_ID "ticker"
#define DEFAULT_PERIOD_MS 200

/* The decimal counter stored under key, or 0 when absent or unreadable. */
static uint64_t counter(const char *key) {
  berm_reply r = berm_get(key);
  int64_t v;
  if (!r.ok || r.len == 0 || berm_dec_to_i64(r.data, r.len, &v) || v < 0) return 0;
  return (uint64_t)v;
}

static int store(const char *key, uint64_t v) {
  char d[21];
  berm_reply r = berm_set(key, d, berm_u64_to_dec(v, d));
  if (!r.ok) berm_logf("ticker: storing %s failed: %s", key, r.data);
  return r.ok ? 0 : -1;
}

static __attribute__((noinline)) void memory_fault(void) {
  volatile uintptr_t p = 8; /* below the image: MemoryFault */
  *(volatile int *)p = 1;
}

BERM_TOOL(start, "Arm the first tick one period from now.",
          "{\"type\":\"object\",\"additionalProperties\":false,\"properties\":{"
          "\"period_ms\":{\"type\":\"integer\",\"minimum\":1},"
          "\"trap_on\":{\"type\":\"integer\",\"minimum\":1}}}") {
  const char *args = berm_args(NULL);
  uint64_t period = DEFAULT_PERIOD_MS, trap_on = 0;
  if (json_uint(args, "period_ms", &period) < 0 || period == 0)
    return berm_fail_str("period_ms must be a positive integer");
  if (json_uint(args, "trap_on", &trap_on) < 0) return berm_fail_str("trap_on must be a positive integer");
  char payload[64];
  int n = trap_on ? snprintf(payload, sizeof payload, "{\"period_ms\":%llu,\"trap_on\":%llu}",
                             (unsigned long long)period, (unsigned long long)trap_on)
                  : snprintf(payload, sizeof payload, "{\"period_ms\":%llu}", (unsigned long long)period);
  berm_reply r = berm_wake_arm_n(period, payload, (size_t)n, TICKER_ID);
  if (!r.ok) return berm_failf("%s: %s", r.refused ? "refused" : "error", r.data);
  berm_done(r.data, r.len);
}

BERM_TOOL(count, "Ticks completed and deliveries started so far.") {
  char out[64];
  int n = snprintf(out, sizeof out, "{\"count\":%llu,\"occurrences\":%llu}",
                   (unsigned long long)counter("count"), (unsigned long long)counter("occurrences"));
  berm_done(out, (size_t)n);
}

BERM_TOOL(stop, "Cancel the pending tick.") {
  berm_reply r = berm_wake_cancel(TICKER_ID);
  if (!r.ok) return berm_failf("%s: %s", r.refused ? "refused" : "error", r.data);
  berm_done(r.data, r.len);
}

BERM_ON_WAKE(w) {
  int trap_once = strcmp(w->payload, "trap") == 0;
  uint64_t period = DEFAULT_PERIOD_MS, trap_on = 0;
  if (!trap_once) {
    json_uint(w->payload, "period_ms", &period);
    json_uint(w->payload, "trap_on", &trap_on);
    if (period == 0) period = DEFAULT_PERIOD_MS;
  }
  /* Re-arm before anything else can go wrong. "trap" continues at the default period. */
  berm_every(w, period, trap_once ? "{\"period_ms\":200}" : NULL);

  uint64_t occurrence = counter("occurrences") + 1;
  store("occurrences", occurrence);
  if (trap_once || occurrence == trap_on) {
    berm_logf("ticker: occurrence %llu traps as asked", (unsigned long long)occurrence);
    memory_fault();
  }
  uint64_t count = counter("count") + 1;
  if (store("count", count)) return berm_fail_str("storage failed");
  berm_logf("tick %llu (occurrence %llu, attempt %llu, %lld ms late)", (unsigned long long)count,
            (unsigned long long)occurrence, (unsigned long long)w->attempt,
            (long long)(w->now - w->scheduled_at));
  char d[21];
  berm_done(d, berm_u64_to_dec(count, d));
}

#include <stdio.h>
#include <string.h>

#include "berm_host.h"

void berm_host_test(void) {
  berm_host_use_memory_storage();
  berm_host_use_schedule();

  /* start arms wake "ticker" one period out, with the period in the payload. */
  berm_host_result r = berm_host_run("start", "{\"period_ms\":250}");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "ticker");
  const berm_host_sched *p = berm_host_pending("ticker");
  BERM_CHECK(p && p->delay_ms == 250);
  BERM_CHECK(p && strcmp(p->payload, "{\"period_ms\":250}") == 0);

  /* Three occurrences, the second 30 ms late: each re-arms before its body logs, keeping the
   * phase (delay = period - lateness), and counts one tick. */
  int64_t t0 = 1700000000000LL;
  for (int k = 1; k <= 3; k++) {
    int64_t due = t0 + 250 * k, late = k == 2 ? 30 : 0;
    r = berm_host_wake("ticker", due, due + late, 1, "{\"period_ms\":250}");
    char want[8];
    snprintf(want, sizeof want, "%d", k);
    BERM_CHECK(r.ok);
    BERM_CHECK_STR(r.result, want);
    BERM_CHECK(berm_host_sched_count() == 1);
    const berm_host_sched *a = berm_host_sched_get(0);
    BERM_CHECK(a && a->kind == BERM_HOST_ARM && strcmp(a->id, "ticker") == 0);
    BERM_CHECK(a && a->delay_ms == (uint64_t)(250 - late));
    BERM_CHECK(a && strcmp(a->payload, "{\"period_ms\":250}") == 0);
    BERM_CHECK(a && a->logs_before == 0); /* re-armed before the body wrote anything */
    BERM_CHECK(strstr(berm_host_logs(), "tick ") != NULL);
  }
  BERM_CHECK(berm_host_pending_count() == 1);

  /* Lateness beyond a period keeps the phase too: 610 ms late at 250 ms -> next in 140 ms. */
  r = berm_host_wake("ticker", t0 + 1000, t0 + 1610, 1, "{\"period_ms\":250}");
  BERM_CHECK_STR(r.result, "4");
  BERM_CHECK(berm_host_last_wake_ms() == 140);

  r = berm_host_run("count", "{}");
  BERM_CHECK_STR(r.result, "{\"count\":4,\"occurrences\":4}");

  /* A redelivery (attempt 2) is visible in the log line. */
  r = berm_host_wake("ticker", t0 + 1250, t0 + 1250, 2, "{\"period_ms\":250}");
  BERM_CHECK(strstr(berm_host_logs(), "attempt 2") != NULL);

  /* No period in the payload: the default 200 ms. */
  r = berm_host_wake("ticker", t0, t0, 1, "");
  BERM_CHECK(r.ok && berm_host_last_wake_ms() == 200);

  /* stop cancels the pending wake; a second stop finds none. */
  r = berm_host_run("stop", "{}");
  BERM_CHECK_STR(r.result, "1");
  BERM_CHECK(berm_host_pending("ticker") == NULL);
  r = berm_host_run("stop", "{}");
  BERM_CHECK_STR(r.result, "0");

  /* Bad arguments fail the call without arming anything. */
  r = berm_host_run("start", "{\"period_ms\":0}");
  BERM_CHECK(r.failed && berm_host_sched_count() == 0);

  /* A malformed record fails the delivery with a clear message and runs nothing. */
  r = berm_host_run_entry("on_wake", "{\"id\":\"ticker\"}", 15);
  BERM_CHECK(r.failed && strstr(r.result, "on_wake: malformed record") != NULL);
  BERM_CHECK(berm_host_sched_count() == 0);
  BERM_CHECK(!berm_host_has_entry("on_notify"));
}

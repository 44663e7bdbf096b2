/*
 * wbprobe: the workbench browser tests' harness. Its usage and one description hold HTML that must
 * be shown as text; `greet` has a schema with every kind of field the Run form generates, logs a
 * line, then computes for a while before it answers, so a streamed log line comes before the
 * result; `crash` traps (MemoryFault) at a known function; on_wake lets the Wakes view arm it.
 */
#include <berm.h>
#include <stdio.h>
#include <string.h>

#include "../../../guest-sdk/examples/json.h"

BERM_USAGE("Workbench probe <img src=x onerror=\"window.__xss=1\"><b>not bold</b>");

static __attribute__((noinline)) void wb_fault(void) {
  volatile uintptr_t p = 8; /* below the image: MemoryFault */
  *(volatile int *)p = 1;
}

BERM_TOOL(greet, "Greet someone <script>window.__xss=2</script> after some work.",
          "{\"type\":\"object\",\"required\":[\"name\"],\"properties\":{"
          "\"name\":{\"type\":\"string\",\"description\":\"who to greet\"},"
          "\"times\":{\"type\":\"integer\",\"minimum\":1},"
          "\"loud\":{\"type\":\"boolean\"},"
          "\"mood\":{\"type\":\"string\",\"enum\":[\"calm\",\"glad\"]}}}") {
  const char *a = berm_args(NULL);
  char *name = NULL;
  if (json_string(a, "name", &name, NULL) != 1) return berm_fail_str("name must be a string");
  uint64_t times = 1;
  json_uint(a, "times", &times);
  berm_logf("greet: working for %s", name);
  volatile uint64_t acc = 0;
  for (uint64_t i = 0; i < 60000000ULL; i++) acc += i ^ (acc >> 3);
  berm_logf("greet: done (%llu)", (unsigned long long)(acc & 0xff));
  char out[256];
  int n = snprintf(out, sizeof out, "{\"greeting\":\"hello %s\",\"times\":%llu}", name, (unsigned long long)times);
  berm_done(out, (size_t)n);
}

BERM_TOOL(crash, "Store below the image: traps MemoryFault in wb_fault.") {
  wb_fault();
  berm_done_str("not reached");
}

BERM_ON_WAKE(w) {
  berm_logf("wbprobe woke: %s", w->id);
}

/*
 * hostile: test harness for the host's bounds (test/hostile.test.ts). Not an example to copy.
 *   spin {}        -> loops for ever without a host call (stopped by fuel or the deadline)
 *   flood {n}      -> writes n log lines of 64 bytes, then returns "done"
 *   rdtime {}      -> two rdtime reads 1000 iterations apart, as "first second"
 *   match {s}      -> returns s; its schema holds the pattern ^(a|a)*$, which a backtracking
 *                     engine takes exponential time to reject on "aaaa...b"
 *   exec {command} -> runs the command through berm.exec.run and returns the reply's JSON
 *   big {n, c?}    -> returns n bytes of 'x' (or of the byte c, 1..127: c = 1 is a control byte, six
 *                     bytes in a JSON string) through berm.done (n may exceed the result limit)
 *   badutf8 {how}  -> logs a line, then berm.done ("done") or berm.fail ("fail") with bytes that
 *                     are not valid UTF-8
 *   silent {}      -> logs a line, then returns without berm.done or berm.fail
 */
#include <berm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../guest-sdk/examples/json.h"

BERM_USAGE("Hostile behaviours: spinning, log floods, clock reads, a catastrophic pattern.");

BERM_TOOL(spin, "Loop for ever without a host call.") {
  volatile uint64_t v = 1;
  for (;;) v = v * 3 + 1;
}

BERM_TOOL(flood, "Write n log lines.",
          "{\"type\":\"object\",\"required\":[\"n\"],\"additionalProperties\":false,\"properties\":{\"n\":{\"type\":\"integer\"}}}") {
  const char *args = berm_args(NULL);
  uint64_t n = 0;
  if (json_uint(args, "n", &n) != 1) return berm_fail_str("n must be an integer");
  static const char line[] = "flood flood flood flood flood flood flood flood flood flood flood";
  for (uint64_t i = 0; i < n; i++) berm_log(line, 64);
  berm_done_str("done");
}

static uint64_t rdtime(void) {
  uint64_t t;
  __asm__ volatile("rdtime %0" : "=r"(t));
  return t;
}

BERM_TOOL(rdtime, "Two rdtime reads, 1000 iterations apart.") {
  uint64_t a = rdtime();
  volatile uint64_t v = 0;
  for (int i = 0; i < 1000; i++) v += (uint64_t)i;
  uint64_t b = rdtime();
  char out[64];
  snprintf(out, sizeof out, "%llu %llu", (unsigned long long)a, (unsigned long long)b);
  berm_done_str(out);
}

BERM_TOOL(match, "Return s (its schema has a pattern that backtracks badly).",
          "{\"type\":\"object\",\"required\":[\"s\"],\"properties\":{\"s\":{\"type\":\"string\","
          "\"pattern\":\"^(a|a)*$\"}}}") {
  const char *args = berm_args(NULL);
  char *s;
  if (json_string(args, "s", &s, NULL) != 1) return berm_fail_str("s must be a string");
  berm_done_str(s);
}

BERM_TOOL(exec, "Run a command through berm.exec.run.",
          "{\"type\":\"object\",\"required\":[\"command\"],\"properties\":{\"command\":{\"type\":\"string\"}}}") {
  const char *args = berm_args(NULL);
  char *command;
  if (json_string(args, "command", &command, NULL) != 1) return berm_fail_str("command must be a string");
  berm_reply r = berm_exec_run(command, "", NULL);
  if (!r.ok) return berm_fail(r.data, r.len);
  berm_done(r.data, r.len);
}

BERM_TOOL(big, "Return n bytes of 'x', or of the byte c (n may exceed the host's result limit).",
          "{\"type\":\"object\",\"required\":[\"n\"],\"additionalProperties\":false,\"properties\":{\"n\":{\"type\":\"integer\"},"
          "\"c\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":127}}}") {
  const char *args = berm_args(NULL);
  uint64_t n = 0, c = 'x';
  if (json_uint(args, "n", &n) != 1) return berm_fail_str("n must be an integer");
  if (json_uint(args, "c", &c) == -1) return berm_fail_str("c must be an integer");
  char *out = malloc((size_t)n);
  if (out == NULL) return berm_fail_str("out of memory");
  memset(out, (int)c, (size_t)n);
  berm_done(out, (size_t)n);
}

BERM_TOOL(badutf8, "Log a line, then give a result or failure message that is not valid UTF-8.",
          "{\"type\":\"object\",\"required\":[\"how\"],\"properties\":{\"how\":{\"enum\":[\"done\",\"fail\"]}}}") {
  const char *args = berm_args(NULL);
  char *how;
  if (json_string(args, "how", &how, NULL) != 1) return berm_fail_str("how must be a string");
  static const char line[] = "before the bad bytes";
  berm_log(line, sizeof line - 1);
  static const char bad[] = "ok \xC3\x28 then";  /* 0xC3 starts a 2-byte sequence, 0x28 is no continuation */
  if (strcmp(how, "fail") == 0) return berm_fail(bad, sizeof bad - 1);
  berm_done(bad, sizeof bad - 1);
}

/* silent: an export that returns without berm.done or berm.fail. The SDK's wrapper would fail the
 * call itself (berm__leave), so this export is written without it, as another SDK's might be. */
void berm_tool_silent(void);
static const berm_record berm__rec_silent BERM__RECORD_ATTR = {
    BERM_REC_TOOL, "silent", "Log a line, then return without berm.done or berm.fail.", "",
    (void (*)(void))berm_tool_silent};
void berm_tool_silent(void) {
  berm__enter();
  static const char line[] = "returning without a result";
  berm_log(line, sizeof line - 1);
}

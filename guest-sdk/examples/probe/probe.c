/*
 * probe: test harness for the runtime (berm.call chains, a trapping callee, guest buffers that run
 * past the end of guest memory). Not an example to copy.
 *   down {}                        -> calls probe.down through berm.call until refused; "^" per level
 *   call {harness, tool, args}     -> "ok: ..." / "error: ..." / "refused: ..." of berm.call
 *   trap {}                        -> stores through an address below the image (MemoryFault)
 *   oob {cap}                      -> a raw ecall whose request runs past the end of memory
 *                                     (cap "read": berm.fs.read, "write": berm.fs.write,
 *                                     "result": berm.result.read writing past the end)
 */
#include <berm.h>
#include <stdio.h>
#include <string.h>

#include "../json.h"

BERM_USAGE("Runtime probes: call chains, traps, out-of-bounds host-call buffers.");
BERM_DEP("call");

static void reply_text(const berm_reply *r, const char *prefix_ok) {
  const char *kind = r->ok ? prefix_ok : r->refused ? "refused: " : "error: ";
  size_t k = strlen(kind);
  char *out = berm_alloc(k + r->len + 1);
  if (!out) return berm_fail_str("out of memory");
  memcpy(out, kind, k);
  memcpy(out + k, r->data, r->len);
  berm_done(out, k + r->len);
}

BERM_TOOL(down, "Call probe.down through berm.call until the chain is refused.") {
  berm_reply r = berm_call("probe", "down", "{}");
  reply_text(&r, "^");
}

BERM_TOOL(call, "Call harness.tool with args (a JSON text) through berm.call.",
          "{\"type\":\"object\",\"required\":[\"harness\",\"tool\"],\"properties\":{"
          "\"harness\":{\"type\":\"string\"},\"tool\":{\"type\":\"string\"},"
          "\"args\":{\"type\":\"string\"}}}") {
  const char *args = berm_args(NULL);
  char *harness, *tool, *a = "{}";
  if (json_string(args, "harness", &harness, NULL) != 1) return berm_fail_str("harness must be a string");
  if (json_string(args, "tool", &tool, NULL) != 1) return berm_fail_str("tool must be a string");
  if (json_string(args, "args", &a, NULL) < 0) return berm_fail_str("args must be a string");
  berm_reply r = berm_call(harness, tool, a);
  reply_text(&r, "ok: ");
}

BERM_TOOL(trap, "Store through an address below the image: traps MemoryFault.") {
  volatile uintptr_t p = 8;
  *(volatile int *)p = 1;
  berm_done_str("not reached");
}

/* The end of guest memory: the stack sits just below it, and memory sizes are 64 KiB multiples. */
static uint64_t memory_top(void) {
  volatile char here = 0;
  return ((uint64_t)(uintptr_t)&here + 0xffff) & ~(uint64_t)0xffff;
}

BERM_TOOL(oob, "Hand a host call a buffer that runs past the end of guest memory.",
          "{\"type\":\"object\",\"required\":[\"cap\"],\"properties\":{\"cap\":{\"enum\":[\"read\",\"write\",\"result\"]}}}") {
  const char *args = berm_args(NULL);
  char *cap;
  if (json_string(args, "cap", &cap, NULL) != 1) return berm_fail_str("cap must be a string");
  uint64_t top = memory_top();
  uint64_t word;
  if (strcmp(cap, "read") == 0) {
    word = berm_hostcall(BERM_CAP_FS_READ, top - 4, 64, 0, 0, 0, 0);
  } else if (strcmp(cap, "write") == 0) {
    word = berm_hostcall(BERM_CAP_FS_WRITE, top - 4, 64, 0, 0, 0, 0);
  } else {
    berm_reply r = berm_fs_read("secret.txt", 0, 0);
    if (!r.ok) return berm_failf("setup read failed: %s", r.data);
    /* the reply stays staged: read it again into a buffer that runs past the end */
    word = berm_hostcall(BERM_CAP_RESULT_READ, top - 4, 64, 0, 0, 0, 0);
  }
  char out[64];
  int n = snprintf(out, sizeof out, "host call returned 0x%llx", (unsigned long long)word);
  berm_done(out, (size_t)n);
}

#include <stdio.h>
#include <string.h>

#include "berm_host.h"

/* berm.call stand-in: "other" is refused, tool "echo" returns its args, anything else answers as
 * the three inner levels of a refused probe.down chain would. */
static void fake_call(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (n != 3) return berm_host_reply_error(r, "bad call");
  if (f[0].len == 5 && memcmp(f[0].ptr, "other", 5) == 0) return berm_host_reply_refused(r, "not a callee");
  if (f[1].len == 4 && memcmp(f[1].ptr, "echo", 4) == 0) return berm_host_reply_bytes(r, f[2].ptr, f[2].len);
  berm_host_reply_str(r, "^^^refused: too deep");
}

void berm_host_test(void) {
  berm_host_stub(BERM_CAP_CALL, fake_call, NULL);
  berm_host_result r = berm_host_run("down", "{}");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "^^^^refused: too deep");
  r = berm_host_run("call", "{\"harness\":\"probe\",\"tool\":\"echo\",\"args\":\"{\\\"a\\\":1}\"}");
  BERM_CHECK_STR(r.result, "ok: {\"a\":1}");
  r = berm_host_run("call", "{\"harness\":\"other\",\"tool\":\"x\"}");
  BERM_CHECK_STR(r.result, "refused: not a callee");
  r = berm_host_run("call", "{\"tool\":\"x\"}");
  BERM_CHECK(r.failed);
}

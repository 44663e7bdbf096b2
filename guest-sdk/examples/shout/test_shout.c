#include <ctype.h>
#include <string.h>

#include "berm_host.h"

/* FNV-1a-64 of "acme.upper", the embedder's capability in docs/embedding.md (computed apart from
 * shout.c's own hashing: a mismatch leaves the call without a stand-in and the test fails). */
#define ACME_UPPER 0xb8df7b8c4cb42675ULL

/* acme.upper stand-in: one field in, the same bytes upper-cased out (as the doc's handler). */
static void upper(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  char buf[256];
  if (n != 1 || f[0].len >= sizeof buf) return berm_host_reply_error(r, "unexpected request");
  for (size_t i = 0; i < f[0].len; i++) buf[i] = (char)toupper(((const unsigned char *)f[0].ptr)[i]);
  berm_host_reply_bytes(r, buf, f[0].len);
}

static void broken(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  berm_host_reply_error(r, "upper is down");
}

void berm_host_test(void) {
  berm_host_stub(ACME_UPPER, upper, NULL);
  berm_host_result r = berm_host_run("shout", "{\"text\":\"hello, berm\"}");
  BERM_CHECK(r.ok && !r.failed);
  BERM_CHECK_STR(r.result, "{\"TEXT\":\"HELLO, BERM\"}");

  berm_host_stub(ACME_UPPER, broken, NULL);
  r = berm_host_run("shout", "{\"text\":\"x\"}");
  BERM_CHECK(r.failed);
  BERM_CHECK_STR(r.result, "upper is down");
}

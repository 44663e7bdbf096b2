#include <stdio.h>
#include <string.h>

#include "berm_host.h"

static int eq(const berm_bytes *b, const char *s) { return b->len == strlen(s) && memcmp(b->ptr, s, b->len) == 0; }

static char sent[64];
static int closes;

/* berm.ws.open stand-in: (url, harness, tool) -> "7"; only ws://h.test/ is granted. */
static void fake_open(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (n != 3) return berm_host_reply_error(r, "unexpected field count");
  if (!eq(&f[0], "ws://h.test/")) return berm_host_reply_refused(r, "host not declared");
  if (!eq(&f[1], "wsecho") || !eq(&f[2], "on_event")) return berm_host_reply_error(r, "unexpected target");
  berm_host_reply_str(r, "7");
}

/* berm.ws.send / berm.ws.close stand-ins: connection 7 exists, no other. */
static void fake_send(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (n != 2 || !eq(&f[0], "7")) return berm_host_reply_refused(r, "no connection is open");
  snprintf(sent, sizeof sent, "%.*s", (int)f[1].len, (const char *)f[1].ptr);
}
static void fake_close(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (n != 1 || !eq(&f[0], "7")) return berm_host_reply_refused(r, "no connection is open");
  closes++;
}

/* An event's argument bytes: fields (event, "7", body), each u32-LE length + bytes. */
static berm_host_result event(const char *name, const char *body) {
  static unsigned char buf[256];
  const char *f[3] = {name, "7", body};
  size_t o = 0;
  for (int i = 0; i < 3; i++) {
    uint32_t n = (uint32_t)strlen(f[i]);
    for (int k = 0; k < 4; k++) buf[o++] = (unsigned char)(n >> (8 * k));
    memcpy(buf + o, f[i], n);
    o += n;
  }
  return berm_host_run_n("on_event", buf, o);
}

void berm_host_test(void) {
  berm_host_use_memory_storage();
  berm_host_stub(BERM_CAP_WS_OPEN, fake_open, NULL);
  berm_host_stub(BERM_CAP_WS_SEND, fake_send, NULL);
  berm_host_stub(BERM_CAP_WS_CLOSE, fake_close, NULL);

  berm_host_result r = berm_host_run("dial", "{\"url\":\"ws://h.test/\"}");
  BERM_CHECK_STR(r.result, "{\"id\":7}");
  r = berm_host_run("dial", "{\"url\":\"ws://evil.test/\"}");
  BERM_CHECK(r.failed);
  BERM_CHECK_STR(r.result, "refused: host not declared");

  BERM_CHECK(event("open", "").ok);
  BERM_CHECK(event("message", "0").ok);
  BERM_CHECK_STR(sent, "0");
  BERM_CHECK(event("message", "1").ok);
  BERM_CHECK(event("message", "5").ok); /* the third frame is not "2": out of order */
  BERM_CHECK_STR(sent, "5");
  BERM_CHECK(event("message", "bye").ok);
  BERM_CHECK(closes == 1);
  BERM_CHECK(event("close", "closed by the harness").ok);
  r = berm_host_run("stats", "{}");
  BERM_CHECK_STR(r.result, "{\"frames\":4,\"disorder\":1,\"open\":\"ok\",\"closed\":\"closed by the harness\"}");

  r = berm_host_run("send", "{\"id\":8,\"text\":\"x\"}");
  BERM_CHECK(r.failed);
  BERM_CHECK_STR(r.result, "refused: no connection is open");
  r = berm_host_run_n("on_event", "junk", 4);
  BERM_CHECK(r.failed);
}

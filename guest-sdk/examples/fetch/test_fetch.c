#include <stdio.h>
#include <string.h>

#include "berm_host.h"

static int eq(const berm_bytes *b, const char *s) { return b->len == strlen(s) && memcmp(b->ptr, s, b->len) == 0; }

/* http.fetch stand-in: (method, url, body) -> (status, headers, body). */
static void reply3(berm_host_reply *r, const char *status, const char *headers, const void *body, size_t n) {
  berm_host_reply_str(r, status);
  berm_host_reply_str(r, headers);
  berm_host_reply_bytes(r, body, n);
}

static void fake_fetch(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (n != 3) return berm_host_reply_error(r, "unexpected field count");
  if (eq(&f[1], "http://evil.test/")) return berm_host_reply_refused(r, "host not declared");
  if (eq(&f[1], "http://h.test/bin")) {
    return reply3(r, "200", "", "\xff\x00", 2);
  }
  if (eq(&f[0], "POST") && eq(&f[2], "a\"b")) {
    return reply3(r, "201", "x-a: 1\nx-b: \"2\"\n", "got a\"b\n", 8);
  }
  if (!eq(&f[0], "GET") || f[2].len) return berm_host_reply_error(r, "unexpected request");
  reply3(r, "200", "content-type: text/plain\n", "hello", 5);
}

void berm_host_test(void) {
  berm_host_stub(BERM_CAP_HTTP_FETCH, fake_fetch, NULL);
  berm_host_result r = berm_host_run("fetch", "{\"url\":\"http://h.test/\"}");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "{\"status\":200,\"headers\":[\"content-type: text/plain\"],\"body\":\"hello\"}");
  r = berm_host_run("fetch", "{\"url\":\"http://h.test/p\",\"method\":\"POST\",\"body\":\"a\\\"b\"}");
  BERM_CHECK_STR(r.result,
                 "{\"status\":201,\"headers\":[\"x-a: 1\",\"x-b: \\\"2\\\"\"],\"body\":\"got a\\\"b\\n\"}");
  r = berm_host_run("fetch", "{\"url\":\"http://h.test/bin\"}");
  BERM_CHECK_STR(r.result, "{\"status\":200,\"headers\":[],\"body\":null,\"body_bytes\":2}");
  r = berm_host_run("fetch", "{\"url\":\"http://evil.test/\"}");
  BERM_CHECK(r.failed);
  BERM_CHECK_STR(r.result, "fetch refused: host not declared");
  r = berm_host_run("fetch", "{}");
  BERM_CHECK_STR(r.result, "url must be a string");
}

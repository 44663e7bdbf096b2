#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "berm_host.h"

/* berm.exec.run stand-in: records the command and env, answers like the exec capability. */
static char last_cmd[128], last_env[128];
static void fake_exec(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  snprintf(last_cmd, sizeof last_cmd, "%.*s", (int)f[0].len, (const char *)f[0].ptr);
  last_env[0] = 0;
  for (size_t i = 2; i + 1 < n; i += 2)
    snprintf(last_env + strlen(last_env), sizeof last_env - strlen(last_env), "%.*s=%.*s;",
             (int)f[i].len, (const char *)f[i].ptr, (int)f[i + 1].len, (const char *)f[i + 1].ptr);
  berm_host_reply_str(r, "{\"stdout\":\"\",\"stderr\":\"\",\"exit_code\":0,\"signal\":null,\"truncated\":false}");
}

/* berm.call stand-in: "ok.x" replies its args, "bad.x" fails, anything else is refused. */
static void fake_call(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (f[0].len == 2 && memcmp(f[0].ptr, "ok", 2) == 0) return berm_host_reply_bytes(r, f[2].ptr, f[2].len);
  if (f[0].len == 3 && memcmp(f[0].ptr, "bad", 3) == 0) return berm_host_reply_error(r, "bad.x failed: nope");
  berm_host_reply_refused(r, "not a callee");
}

static void refuse(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  berm_host_reply_refused(r, "no schedule grant");
}

void berm_host_test(void) {
  berm_host_use_schedule();
  berm_host_stub(BERM_CAP_EXEC_RUN, fake_exec, NULL);
  berm_host_stub(BERM_CAP_CALL, fake_call, NULL);

  /* on_wake replies its record re-encoded: escapes and unicode survive the round trip. */
  berm_host_result r = berm_host_wake("w-1", 1700000000000LL, 1700000000042LL, 3, "a\"b\\c\n\x01 \xc3\xa9");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "{\"id\":\"w-1\",\"scheduled_at\":1700000000000,\"now\":1700000000042,"
                           "\"attempt\":3,\"payload\":\"a\\\"b\\\\c\\n\\u0001 \xc3\xa9\"}");
  BERM_CHECK(strstr(berm_host_logs(), "on_wake id=w-1 attempt=3") != NULL);

  /* \u escapes (including a surrogate pair) are decoded; unknown members are ignored; member
   * order does not matter. */
  const char *rec = "{ \"payload\" : \"\\u00e9\\ud83d\\ude00\", \"extra\": {\"a\": [1, \"}\"]},"
                    " \"attempt\": 1, \"now\": 5, \"scheduled_at\": -7, \"id\": \"x\" }";
  r = berm_host_run_entry("on_wake", rec, strlen(rec));
  BERM_CHECK_STR(r.result, "{\"id\":\"x\",\"scheduled_at\":-7,\"now\":5,\"attempt\":1,"
                           "\"payload\":\"\xc3\xa9\xf0\x9f\x98\x80\"}");

  /* Malformed records fail the delivery and never reach the body. */
  const char *bad[] = {
      "",
      "[]",
      "{\"id\":\"x\",\"scheduled_at\":1,\"now\":1,\"attempt\":1}",                       /* no payload */
      "{\"id\":1,\"scheduled_at\":1,\"now\":1,\"attempt\":1,\"payload\":\"\"}",             /* id not a string */
      "{\"id\":\"x\",\"scheduled_at\":1,\"now\":1,\"attempt\":0,\"payload\":\"\"}",         /* attempt < 1 */
      "{\"id\":\"x\",\"scheduled_at\":1e3,\"now\":1,\"attempt\":1,\"payload\":\"\"}",       /* exponent */
      "{\"id\":\"x\",\"id\":\"y\",\"scheduled_at\":1,\"now\":1,\"attempt\":1,\"payload\":\"\"}", /* twice */
      "{\"id\":\"x\",\"scheduled_at\":1,\"now\":1,\"attempt\":1,\"payload\":\"\"} x",     /* trailing */
      "{\"id\":\"x\",\"scheduled_at\":1,\"now\":1,\"attempt\":1,\"payload\":\"\\q\"}",      /* bad escape */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    r = berm_host_run_entry("on_wake", bad[i], strlen(bad[i]));
    BERM_CHECK(r.failed && strstr(r.result, "on_wake: malformed record") != NULL);
    BERM_CHECK(strstr(berm_host_logs(), "on_wake id=") == NULL);
  }

  /* on_notify: the same, with source. */
  r = berm_host_notify("sub-1", "git/push", "{\"ref\":\"main\"}", 1700000000001LL, 2);
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "{\"id\":\"sub-1\",\"source\":\"git/push\",\"payload\":\"{\\\"ref\\\":\\\"main\\\"}\","
                           "\"now\":1700000000001,\"attempt\":2}");
  const char *nbad = "{\"id\":\"s\",\"payload\":\"\",\"now\":1,\"attempt\":1}"; /* no source */
  r = berm_host_run_entry("on_notify", nbad, strlen(nbad));
  BERM_CHECK(r.failed && strstr(r.result, "on_notify: malformed record") != NULL);

  /* arm: fields (delay_ms, payload?, id?) as framed; replies the id. */
  r = berm_host_run("arm", "{\"delay_ms\":1500,\"payload\":\"hello\",\"id\":\"mine\"}");
  BERM_CHECK_STR(r.result, "mine");
  const berm_host_sched *s = berm_host_sched_get(0);
  BERM_CHECK(s && s->kind == BERM_HOST_ARM && s->delay_ms == 1500 && s->has_payload);
  BERM_CHECK(s && strcmp(s->payload, "hello") == 0 && strcmp(s->id, "mine") == 0);
  r = berm_host_run("arm", "{\"delay_ms\":0}");
  BERM_CHECK(r.ok && strncmp(r.result, "wake-", 5) == 0);
  s = berm_host_sched_get(0);
  BERM_CHECK(s && s->delay_ms == 0 && !s->has_payload);
  BERM_CHECK(berm_host_pending_count() == 2);
  r = berm_host_run("arm", "{\"delay_ms\":10,\"id\":\"mine\"}"); /* re-arm replaces */
  BERM_CHECK(berm_host_pending_count() == 2 && berm_host_pending("mine")->delay_ms == 10);
  r = berm_host_run("arm", "{\"delay_ms\":-1}");
  BERM_CHECK(r.failed && berm_host_sched_count() == 0);

  /* cancel */
  r = berm_host_run("cancel", "{\"id\":\"mine\"}");
  BERM_CHECK_STR(r.result, "1");
  r = berm_host_run("cancel", "{\"id\":\"mine\"}");
  BERM_CHECK_STR(r.result, "0");
  BERM_CHECK(berm_host_pending("mine") == NULL && berm_host_pending_count() == 1);

  /* after: args as an object or as a string of JSON. */
  r = berm_host_run("after", "{\"delay_ms\":250,\"harness\":\"os\",\"tool\":\"read\",\"args\":{\"path\":\"a b\"}}");
  BERM_CHECK_STR(r.result, "call-after");
  s = berm_host_pending_call_after();
  BERM_CHECK(s && s->delay_ms == 250 && strcmp(s->harness, "os") == 0 && strcmp(s->tool, "read") == 0);
  BERM_CHECK(s && strcmp(s->args, "{\"path\":\"a b\"}") == 0);
  r = berm_host_run("after", "{\"delay_ms\":5,\"harness\":\"h\",\"tool\":\"t\",\"args\":\"[1,2]\"}");
  s = berm_host_pending_call_after();
  BERM_CHECK(s && s->delay_ms == 5 && strcmp(s->args, "[1,2]") == 0);
  r = berm_host_run("after", "{\"delay_ms\":5,\"harness\":\"h\",\"tool\":\"t\"}");
  BERM_CHECK(berm_host_pending_call_after() && strcmp(berm_host_pending_call_after()->args, "{}") == 0);

  /* A refusal reaches the caller as a failure naming it. */
  berm_host_stub(BERM_CAP_WAKE_ARM, refuse, NULL);
  r = berm_host_run("arm", "{\"delay_ms\":1}");
  BERM_CHECK(r.failed);
  BERM_CHECK_STR(r.result, "refused: no schedule grant");
  berm_host_use_schedule();

  /* block: /bin/sleep with fractional seconds, PATH given. */
  r = berm_host_run("block", "{\"ms\":1500}");
  BERM_CHECK_STR(r.result, "slept");
  BERM_CHECK_STR(last_cmd, "exec /bin/sleep 1.500");
  BERM_CHECK_STR(last_env, "PATH=/usr/bin:/bin;");

  /* call: the callee's reply, or its error / refusal as a failure. */
  r = berm_host_run("call", "{\"harness\":\"ok\",\"tool\":\"x\",\"args\":{\"k\":[1]}}");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "{\"k\":[1]}");
  r = berm_host_run("call", "{\"harness\":\"bad\",\"tool\":\"x\"}");
  BERM_CHECK(r.failed);
  BERM_CHECK_STR(r.result, "error: bad.x failed: nope");
  r = berm_host_run("call", "{\"harness\":\"other\",\"tool\":\"x\",\"args\":\"{}\"}");
  BERM_CHECK_STR(r.result, "refused: not a callee");
  r = berm_host_run("call", "{\"harness\":\"ok\",\"tool\":\"x\",\"args\":5}");
  BERM_CHECK(r.failed);

  r = berm_host_run("echo", "{\"a\":[1,{\"b\":null}]}");
  BERM_CHECK_STR(r.result, "{\"a\":[1,{\"b\":null}]}");

  BERM_CHECK(berm_host_has_entry("on_wake") && berm_host_has_entry("on_notify"));
}

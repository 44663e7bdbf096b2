#include <stdio.h>
#include <string.h>

#include "berm_host.h"
#include "berm_protocol.h"

/* crabtalk.protocol.schedule_wake stand-in: decodes the ScheduleWakeMsg with the SDK's reader and
 * answers ServerMessage{berm: {wake: WakeInfo}} as the door does (at = now + delay, now = 1000). */
static char last_payload[64];
static uint64_t last_delay, last_at;
static void fake_schedule(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (n != 1) return berm_host_reply_error(r, "expected one field");
  berm_pb_field x;
  last_at = berm_pb_find(f[0], 1, &x) == 1 ? x.varint : 0;
  last_delay = berm_pb_find(f[0], 6, &x) == 1 ? x.varint : 0;
  snprintf(last_payload, sizeof last_payload, "%s", berm_pb_string(f[0], 4));
  berm_pb wake, inner, outer;
  berm_pb_init(&wake, 0);
  berm_pb_str(&wake, 1, "wake-1");
  berm_pb_str(&wake, 2, "remind");
  berm_pb_str(&wake, 3, "on_wake");
  berm_pb_varint(&wake, 4, last_at ? last_at : 1000 + last_delay);
  berm_pb_str(&wake, 5, last_payload);
  berm_pb_init(&inner, 0);
  berm_pb_msg(&inner, 1, &wake);
  berm_pb_init(&outer, 0);
  berm_pb_msg(&outer, 1000, &inner);
  berm_host_reply_bytes(r, outer.buf, outer.len);
}

/* crabtalk.protocol.send stand-in: answers SendResponse{content: "ok: " + content}, or the
 * door's refusal when asked to. */
static int refuse_send;
static void fake_send(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (refuse_send) return berm_host_reply_refused(r, "crabtalk.protocol.send: send: the invocation carries no agent");
  char out[128];
  snprintf(out, sizeof out, "ok: %s", berm_pb_string(f[0], 2));
  berm_pb resp, msg;
  berm_pb_init(&resp, 0);
  berm_pb_str(&resp, 2, out);
  berm_pb_init(&msg, 0);
  berm_pb_msg(&msg, 3, &resp);
  berm_host_reply_bytes(r, msg.buf, msg.len);
}

void berm_host_test(void) {
  berm_host_stub(BERM_CAP_CRABTALK_PROTOCOL_SCHEDULE_WAKE, fake_schedule, NULL);
  berm_host_stub(BERM_CAP_CRABTALK_PROTOCOL_SEND, fake_send, NULL);

  berm_host_result r = berm_host_run("remind", "{\"text\":\"tea \\\"now\\\"\",\"in_ms\":60000}");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "{\"id\":\"wake-1\",\"at_ms\":61000}");
  BERM_CHECK_STR(last_payload, "tea \"now\"");
  BERM_CHECK(last_delay == 60000 && last_at == 0);

  r = berm_host_run("remind", "{\"text\":\"standup\",\"at_ms\":1764576000000}");
  BERM_CHECK_STR(r.result, "{\"id\":\"wake-1\",\"at_ms\":1764576000000}");

  r = berm_host_wake("wake-1", 61000, 61005, 1, "tea");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "ok: Reminder: tea");

  refuse_send = 1;
  r = berm_host_wake("wake-1", 61000, 61005, 1, "tea");
  BERM_CHECK(r.failed);
  BERM_CHECK_STR(r.result, "send refused: crabtalk.protocol.send: send: the invocation carries no agent");
}

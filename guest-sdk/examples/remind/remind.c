/*
 * remind: "remind me" as a harness, through the protocol door (docs/protocol-door.md).
 *   remind {"text": "...", "in_ms": N} or {"text": "...", "at_ms": T}
 *       schedules a wake of this harness (protocol:schedule) at now + N ms or at instant T
 *       (ms since the Unix epoch), carrying the text; answers {"id": "...", "at_ms": T}.
 *   on_wake
 *       sends "Reminder: <text>" to the agent that asked (protocol:send): the door sends it as
 *       the invocation's agent, into its session (the wake inherits the authority of the call
 *       that armed it), and the delivery finishes with the agent's answer.
 * Declare it with capabilities = ["protocol:schedule", "protocol:send"].
 */
#include <berm.h>
#include <berm_protocol.h>
#include <stdio.h>
#include <string.h>

#include "../json.h"

BERM_USAGE("Remind me: schedule a message to the agent at a later instant.");

BERM_TOOL(remind, "Schedule a reminder: text, and in_ms (delay) or at_ms (instant, ms since epoch).",
          "{\"type\":\"object\",\"required\":[\"text\"],\"properties\":{"
          "\"text\":{\"type\":\"string\",\"minLength\":1},"
          "\"in_ms\":{\"type\":\"integer\",\"minimum\":0},"
          "\"at_ms\":{\"type\":\"integer\",\"minimum\":1}}}") {
  const char *args = berm_args(NULL);
  char *text;
  uint64_t in_ms = 0, at_ms = 0;
  if (json_string(args, "text", &text, NULL) != 1) return berm_fail_str("text must be a string");
  if (json_uint(args, "in_ms", &in_ms) < 0) return berm_fail_str("in_ms must be a non-negative integer");
  if (json_uint(args, "at_ms", &at_ms) < 0) return berm_fail_str("at_ms must be a positive integer");
  berm_protocol_reply r = berm_protocol_schedule_wake(at_ms, in_ms, text, NULL);
  if (!r.ok) return berm_failf("cannot schedule: %s", r.message);
  berm_wake_info w;
  if (berm_protocol_wake_info(&r, &w) < 0) return berm_fail_str("the door's answer is not a wake");
  char *out = berm_alloc(64 + strlen(w.id));
  if (!out) return berm_fail_str("out of memory");
  char *o = out;
  json_put_raw(&o, "{\"id\":");
  json_put_string(&o, w.id, strlen(w.id));
  o += sprintf(o, ",\"at_ms\":%llu}", (unsigned long long)w.at_ms);
  berm_done(out, (size_t)(o - out));
}

BERM_ON_WAKE(w) {
  size_t n = 10 + w->payload_len;
  char *msg = berm_alloc(n + 1);
  if (!msg) return berm_fail_str("out of memory");
  memcpy(msg, "Reminder: ", 10);
  memcpy(msg + 10, w->payload, w->payload_len);
  msg[n] = 0;
  berm_protocol_reply r = berm_protocol_send(msg);
  if (!r.ok) return berm_failf("send %s: %s", r.refused ? "refused" : "failed", r.message);
  char *answer = berm_protocol_response_text(&r);
  berm_done_str(answer ? answer : "");
}

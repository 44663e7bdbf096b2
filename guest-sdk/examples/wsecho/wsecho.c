/*
 * wsecho: a WebSocket conversation held by a harness with no process of its own (capability ws,
 * include/berm_ws.h). Grants: ws (hosts), storage.
 *
 *   dial {url, harness?}   opens a connection whose events reach harness.on_event (harness: the
 *                          name this one is deployed under, default "wsecho"); replies {"id":N}
 *   on_event (raw fields)  the connection's events, one at a time:
 *                            open     stores the outcome in key "open" ("ok" or the error)
 *                            message  counts the frame in key "frames"; a decimal frame that is
 *                                     not the count so far counts in key "disorder"; the frame
 *                                     "bye" closes the connection, any other is echoed back
 *                            close    stores the reason in key "closed"
 *   send {id, text}        sends one text frame on connection id
 *   close {id}             closes connection id
 *   stats {}               {"frames":N,"disorder":N,"open":"...","closed":"..."} from the keys
 * Nothing survives between invocations but the keys: the count is read back on every frame.
 */
#include <berm.h>
#include <berm_ws.h>
#include <stdio.h>
#include <string.h>

#include "../json.h"

BERM_USAGE("Echo a WebSocket's frames back, counting them in storage (ws capability example).");
BERM_DEP("ws");
BERM_DEP("storage");

static uint64_t counter(const char *key) {
  berm_reply r = berm_get(key);
  int64_t v;
  if (!r.ok || r.len == 0 || berm_dec_to_i64(r.data, r.len, &v) || v < 0) return 0;
  return (uint64_t)v;
}

static void store(const char *key, uint64_t v) {
  char d[21];
  berm_reply r = berm_set(key, d, berm_u64_to_dec(v, d));
  if (!r.ok) berm_logf("wsecho: storing %s failed: %s", key, r.data);
}

/* The text of key, or "" when absent. */
static const char *text(const char *key) {
  berm_reply r = berm_get(key);
  return r.ok && r.len > 0 ? r.data : "";
}

BERM_TOOL(dial, "Open a WebSocket whose events reach this harness's on_event.",
          "{\"type\":\"object\",\"required\":[\"url\"],\"properties\":{"
          "\"url\":{\"type\":\"string\"},\"harness\":{\"type\":\"string\"}}}") {
  const char *args = berm_args(NULL);
  char *url, *harness = "wsecho";
  if (json_string(args, "url", &url, NULL) != 1) return berm_fail_str("url must be a string");
  if (json_string(args, "harness", &harness, NULL) < 0) return berm_fail_str("harness must be a string");
  uint64_t id = 0;
  berm_reply r = berm_ws_open(url, harness, "on_event", NULL, &id);
  if (!r.ok) return berm_failf("%s: %s", r.refused ? "refused" : "failed", r.data);
  char out[48];
  snprintf(out, sizeof out, "{\"id\":%llu}", (unsigned long long)id);
  berm_done_str(out);
}

BERM_TOOL(on_event, "A connection's event: raw fields (event, id, body).", "{}") {
  size_t len;
  const char *args = berm_args(&len);
  berm_ws_event e;
  if (berm_ws_event_parse(args, len, &e)) return berm_fail_str("not a connection event");
  if (e.kind == BERM_WS_OPEN) {
    if (e.body.len == 0) berm_set("open", "ok", 2);
    else berm_set("open", e.body.ptr, e.body.len);
  } else if (e.kind == BERM_WS_MESSAGE) {
    uint64_t n = counter("frames");
    int64_t v;
    if (e.body.len > 0 && berm_dec_to_i64(e.body.ptr, e.body.len, &v) == 0 && (uint64_t)v != n)
      store("disorder", counter("disorder") + 1);
    store("frames", n + 1);
    if (e.body.len == 3 && memcmp(e.body.ptr, "bye", 3) == 0) {
      berm_reply r = berm_ws_close(e.id);
      if (!r.ok) return berm_failf("close: %s", r.data);
    } else {
      berm_reply r = berm_ws_send(e.id, e.body.ptr, e.body.len);
      if (!r.ok) return berm_failf("echo: %s", r.data);
    }
  } else if (e.kind == BERM_WS_CLOSE) {
    berm_set("closed", e.body.ptr, e.body.len);
  }
  berm_done_str("ok");
}

BERM_TOOL(send, "Send one text frame on a connection.",
          "{\"type\":\"object\",\"required\":[\"id\",\"text\"],\"properties\":{"
          "\"id\":{\"type\":\"integer\",\"minimum\":0},\"text\":{\"type\":\"string\"}}}") {
  const char *args = berm_args(NULL);
  uint64_t id;
  char *t;
  size_t n;
  if (json_uint(args, "id", &id) != 1) return berm_fail_str("id must be a non-negative integer");
  if (json_string(args, "text", &t, &n) != 1) return berm_fail_str("text must be a string");
  berm_reply r = berm_ws_send(id, t, n);
  if (!r.ok) return berm_failf("%s: %s", r.refused ? "refused" : "failed", r.data);
  berm_done_str("sent");
}

BERM_TOOL(close, "Close a connection.",
          "{\"type\":\"object\",\"required\":[\"id\"],\"properties\":{"
          "\"id\":{\"type\":\"integer\",\"minimum\":0}}}") {
  const char *args = berm_args(NULL);
  uint64_t id;
  if (json_uint(args, "id", &id) != 1) return berm_fail_str("id must be a non-negative integer");
  berm_reply r = berm_ws_close(id);
  if (!r.ok) return berm_failf("%s: %s", r.refused ? "refused" : "failed", r.data);
  berm_done_str("closed");
}

BERM_TOOL(stats, "The frames counted, order violations, and the open and close outcomes.",
          "{\"type\":\"object\"}") {
  const char *open = text("open"), *closed = text("closed");
  char *out = berm_alloc(128 + 2 * (strlen(open) + strlen(closed)) * 6);
  if (!out) return berm_fail_str("out of memory");
  char *o = out;
  o += sprintf(o, "{\"frames\":%llu,\"disorder\":%llu,\"open\":", (unsigned long long)counter("frames"),
               (unsigned long long)counter("disorder"));
  json_put_string(&o, open, strlen(open));
  json_put_raw(&o, ",\"closed\":");
  json_put_string(&o, closed, strlen(closed));
  json_put_raw(&o, "}");
  berm_done(out, (size_t)(o - out));
}

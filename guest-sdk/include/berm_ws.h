/*
 * WebSocket connections (capability "ws", docs/capabilities.md): a harness dials a ws:// or
 * wss:// URL and names the tool its events reach; the connection then starts invocations of that
 * tool, one at a time and in order, with nothing surviving between them but the harness's keys
 * (berm_get / berm_set):
 *   open     the dial ended: empty body on success, the error text on failure (then nothing more)
 *   message  one frame (text or binary), its bytes
 *   close    the connection ended: the reason ("restart" when the process holding it stopped)
 * The event tool receives raw argument bytes, three fields (event, decimal id, body); parse them
 * with berm_ws_event_parse. A connection belongs to the harness that opened it: another harness's
 * id answers like one that does not exist.
 *
 * Static inline, so harnesses that do not use connections carry none of it.
 */
#ifndef BERM_WS_H
#define BERM_WS_H

#include <berm.h>

#define BERM__WS_INLINE static inline __attribute__((unused))

/* The three events. */
enum { BERM_WS_UNKNOWN = 0, BERM_WS_OPEN = 1, BERM_WS_MESSAGE = 2, BERM_WS_CLOSE = 3 };

typedef struct berm_ws_event {
  int kind;        /* BERM_WS_OPEN, _MESSAGE or _CLOSE; BERM_WS_UNKNOWN for another name */
  uint64_t id;     /* the connection */
  berm_bytes body; /* open: "" or the dial's error; message: the frame; close: the reason */
} berm_ws_event;

/* Open a connection to url whose events reach harness.tool. headers: NULL-terminated
 * name, value, name, value, ... list sent on the handshake (may be NULL). On success *id is the
 * connection's id; the dial's outcome arrives later as the open event. Returns the reply (check
 * .ok; .refused with the reason when the grant or a cap refuses it). */
BERM__WS_INLINE berm_reply berm_ws_open(const char *url, const char *harness, const char *tool,
                                        const char *const *headers, uint64_t *id) {
  berm_bytes f[3 + 2 * 16];
  size_t n = 0;
  f[n++] = (berm_bytes){url, __builtin_strlen(url)};
  f[n++] = (berm_bytes){harness, __builtin_strlen(harness)};
  f[n++] = (berm_bytes){tool, __builtin_strlen(tool)};
  for (size_t i = 0; headers && headers[i] && headers[i + 1] && n + 2 <= sizeof f / sizeof f[0]; i += 2) {
    f[n++] = (berm_bytes){headers[i], __builtin_strlen(headers[i])};
    f[n++] = (berm_bytes){headers[i + 1], __builtin_strlen(headers[i + 1])};
  }
  berm_reply r = berm_cap_call(BERM_CAP_WS_OPEN, f, n);
  if (r.ok && id) {
    int64_t v;
    if (berm_dec_to_i64(r.data, r.len, &v) == 0 && v >= 0) *id = (uint64_t)v;
    else r.ok = 0;
  }
  return r;
}

/* Queue one frame on connection id: text when the bytes are UTF-8, else binary. Never waits: a
 * full outbound queue, a frame over the cap or an id this harness does not hold is refused. */
BERM__WS_INLINE berm_reply berm_ws_send(uint64_t id, const void *data, size_t len) {
  char d[21];
  berm_bytes f[2] = {{d, berm_u64_to_dec(id, d)}, {data, len}};
  return berm_cap_call(BERM_CAP_WS_SEND, f, 2);
}

/* Close connection id; its close event ("closed by the harness") follows. */
BERM__WS_INLINE berm_reply berm_ws_close(uint64_t id) {
  char d[21];
  berm_bytes f[1] = {{d, berm_u64_to_dec(id, d)}};
  return berm_cap_call(BERM_CAP_WS_CLOSE, f, 1);
}

/* Parse an event tool's arguments (berm_args). Returns 0, or -1 when they are not an event. */
BERM__WS_INLINE int berm_ws_event_parse(const void *args, size_t len, berm_ws_event *out) {
  berm_bytes f[3];
  if (berm_fields(args, len, f, 3) != 3) return -1;
  int64_t id;
  if (berm_dec_to_i64(f[1].ptr, f[1].len, &id) || id < 0) return -1;
  out->id = (uint64_t)id;
  out->body = f[2];
  out->kind = BERM_WS_UNKNOWN;
  if (f[0].len == 4 && __builtin_memcmp(f[0].ptr, "open", 4) == 0) out->kind = BERM_WS_OPEN;
  if (f[0].len == 7 && __builtin_memcmp(f[0].ptr, "message", 7) == 0) out->kind = BERM_WS_MESSAGE;
  if (f[0].len == 5 && __builtin_memcmp(f[0].ptr, "close", 5) == 0) out->kind = BERM_WS_CLOSE;
  return 0;
}

#endif

/*
 * berm guest SDK: the protocol door's wrappers (include/berm_protocol.h). A protobuf writer and
 * reader small enough to read in one sitting: varints and length-delimited fields are all the
 * door's messages use (fixed32/fixed64 are read and skipped). Field numbers come from
 * src/protocol/crabtalk.proto.
 */
#include "berm_protocol.h"

#include <string.h>

/* ClientMessage members and berm's own (BermClientMessage) */
enum {
  CM_SEND = 1,
  CM_GET_AGENT = 16,
  CM_PING = 30,
  CM_SUBSCRIBE_EVENT = 40,
  CM_PUBLISH_EVENT = 43,
  CM_BERM = 1000,
  BCM_SCHEDULE_WAKE = 1,
  BCM_CANCEL_WAKE = 2,
  BSM_WAKE = 1,
  BSM_CANCELLED = 3,
};

/* ---- writer --------------------------------------------------------------------------------- */
static int pb_reserve(berm_pb *b, size_t more) {
  if (b->oom) return 0;
  if (b->len + more <= b->cap) return 1;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < b->len + more) cap *= 2;
  unsigned char *n = (unsigned char *)berm_alloc(cap);
  if (!n) {
    b->oom = 1;
    return 0;
  }
  if (b->len) memcpy(n, b->buf, b->len);
  b->buf = n; /* the bump allocator never frees: the old buffer is simply left behind */
  b->cap = cap;
  return 1;
}

static void pb_raw_varint(berm_pb *b, uint64_t v) {
  if (!pb_reserve(b, 10)) return;
  while (v > 0x7f) {
    b->buf[b->len++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  b->buf[b->len++] = (unsigned char)v;
}

void berm_pb_init(berm_pb *b, size_t cap) {
  memset(b, 0, sizeof *b);
  if (cap) pb_reserve(b, cap);
}

void berm_pb_varint(berm_pb *b, uint32_t field, uint64_t v) {
  pb_raw_varint(b, ((uint64_t)field << 3) | 0);
  pb_raw_varint(b, v);
}

void berm_pb_bytes(berm_pb *b, uint32_t field, const void *p, size_t n) {
  pb_raw_varint(b, ((uint64_t)field << 3) | 2);
  pb_raw_varint(b, n);
  if (!n || !pb_reserve(b, n)) return;
  memcpy(b->buf + b->len, p, n);
  b->len += n;
}

void berm_pb_str(berm_pb *b, uint32_t field, const char *s) {
  if (s) berm_pb_bytes(b, field, s, strlen(s));
}

void berm_pb_msg(berm_pb *b, uint32_t field, const berm_pb *sub) {
  if (sub->oom) b->oom = 1;
  berm_pb_bytes(b, field, sub->buf, sub->len);
}

/* ---- reader --------------------------------------------------------------------------------- */
void berm_pb_reader_init(berm_pb_reader *r, const void *p, size_t n) {
  r->p = (const unsigned char *)p;
  r->end = r->p + n;
}

static int pb_read_varint(berm_pb_reader *r, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (r->p >= r->end) return -1;
    unsigned char c = *r->p++;
    x |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -1;
}

int berm_pb_next(berm_pb_reader *r, berm_pb_field *f) {
  if (r->p >= r->end) return 0;
  uint64_t key;
  if (pb_read_varint(r, &key) < 0) return -1;
  memset(f, 0, sizeof *f);
  f->num = (uint32_t)(key >> 3);
  f->wire = (uint32_t)(key & 7);
  if (f->num == 0) return -1;
  switch (f->wire) {
    case 0:
      return pb_read_varint(r, &f->varint) < 0 ? -1 : 1;
    case 1:
    case 5: {
      size_t n = f->wire == 1 ? 8 : 4;
      if ((size_t)(r->end - r->p) < n) return -1;
      for (size_t i = 0; i < n; i++) f->varint |= (uint64_t)r->p[i] << (8 * i);
      r->p += n;
      return 1;
    }
    case 2: {
      uint64_t n;
      if (pb_read_varint(r, &n) < 0 || n > (uint64_t)(r->end - r->p)) return -1;
      f->bytes.ptr = r->p;
      f->bytes.len = (size_t)n;
      r->p += n;
      return 1;
    }
    default:
      return -1;
  }
}

int berm_pb_find(berm_bytes msg, uint32_t num, berm_pb_field *f) {
  berm_pb_reader r;
  berm_pb_field x;
  int found = 0, k;
  berm_pb_reader_init(&r, msg.ptr, msg.len);
  while ((k = berm_pb_next(&r, &x)) == 1) {
    if (x.num == num) {
      *f = x;
      found = 1;
    }
  }
  return k < 0 ? -1 : found;
}

char *berm_pb_string(berm_bytes msg, uint32_t num) {
  berm_pb_field f;
  size_t n = berm_pb_find(msg, num, &f) == 1 && f.wire == 2 ? f.bytes.len : 0;
  char *s = (char *)berm_alloc(n + 1);
  if (!s) return NULL;
  if (n) memcpy(s, f.bytes.ptr, n);
  s[n] = 0;
  return s;
}

/* ---- the door ------------------------------------------------------------------------------- */
static berm_protocol_reply from_reply(const berm_reply *r) {
  berm_protocol_reply out;
  memset(&out, 0, sizeof out);
  out.message = "";
  if (!r->ok) {
    out.refused = r->refused;
    out.error = !r->refused;
    out.message = r->data ? r->data : "";
    return out;
  }
  out.raw.ptr = r->data;
  out.raw.len = r->len;
  berm_pb_reader rd;
  berm_pb_field f;
  int k;
  berm_pb_reader_init(&rd, r->data, r->len);
  while ((k = berm_pb_next(&rd, &f)) == 1) {
    if (f.wire == 2) {
      out.kind = f.num;
      out.body = f.bytes;
    }
  }
  if (k < 0 || out.kind == 0) {
    out.error = 1;
    out.message = "berm sdk: the door's answer is not a ServerMessage";
    return out;
  }
  if (out.kind == BERM_PROTO_ERROR) {
    berm_pb_field c;
    out.error = 1;
    out.code = berm_pb_find(out.body, 1, &c) == 1 ? (uint32_t)c.varint : 0;
    char *m = berm_pb_string(out.body, 2);
    out.message = m ? m : "";
    return out;
  }
  out.ok = 1;
  return out;
}

berm_protocol_reply berm_protocol_call(const void *client_message, size_t len) {
  berm_bytes f = {client_message, len};
  berm_reply r = berm_cap_call(BERM_CAP_CRABTALK_PROTOCOL_CALL, &f, 1);
  return from_reply(&r);
}

berm_protocol_reply berm_protocol_op(uint64_t cap, const void *inner, size_t len) {
  berm_bytes f = {inner, len};
  berm_reply r = berm_cap_call(cap, &f, len ? 1 : 0);
  return from_reply(&r);
}

static berm_protocol_reply oom_reply(void) {
  berm_protocol_reply out;
  memset(&out, 0, sizeof out);
  out.error = 1;
  out.message = "berm sdk: out of heap for the request";
  return out;
}

berm_protocol_reply berm_protocol_ping(void) {
  return berm_protocol_op(BERM_CAP_CRABTALK_PROTOCOL_PING, "", 0);
}

berm_protocol_reply berm_protocol_send(const char *content) {
  return berm_protocol_send_to(NULL, NULL, content);
}

berm_protocol_reply berm_protocol_send_to(const char *agent, const char *session, const char *content) {
  berm_pb m;
  berm_pb_init(&m, 64 + (content ? strlen(content) : 0));
  berm_pb_str(&m, 1, agent);
  berm_pb_str(&m, 2, content ? content : "");
  berm_pb_str(&m, 9, session);
  if (m.oom) return oom_reply();
  return berm_protocol_op(BERM_CAP_CRABTALK_PROTOCOL_SEND, m.buf, m.len);
}

char *berm_protocol_response_text(const berm_protocol_reply *r) {
  if (!r->ok || r->kind != BERM_PROTO_RESPONSE) return NULL;
  return berm_pb_string(r->body, 2);
}

berm_protocol_reply berm_protocol_get_agent(const char *name) {
  berm_pb m;
  berm_pb_init(&m, 16 + strlen(name));
  berm_pb_str(&m, 1, name);
  if (m.oom) return oom_reply();
  return berm_protocol_op(BERM_CAP_CRABTALK_PROTOCOL_GET_AGENT, m.buf, m.len);
}

int berm_protocol_agent_info(const berm_protocol_reply *r, berm_agent_info *out) {
  if (!r->ok || r->kind != BERM_PROTO_AGENT_INFO) return -1;
  out->id = berm_pb_string(r->body, 12);
  out->name = berm_pb_string(r->body, 1);
  out->description = berm_pb_string(r->body, 2);
  out->model = berm_pb_string(r->body, 4);
  return out->id && out->name && out->description && out->model ? 0 : -1;
}

/* The BermServerMessage member `num` of a berm answer, or an empty body. */
static int berm_member(const berm_protocol_reply *r, uint32_t num, berm_bytes *body) {
  berm_pb_field f;
  if (!r->ok || r->kind != BERM_PROTO_BERM) return -1;
  if (berm_pb_find(r->body, num, &f) != 1 || f.wire != 2) return -1;
  *body = f.bytes;
  return 0;
}

berm_protocol_reply berm_protocol_schedule_wake(uint64_t at_ms, uint64_t delay_ms, const char *payload,
                                                const char *id) {
  berm_pb m;
  berm_pb_init(&m, 64 + (payload ? strlen(payload) : 0));
  if (at_ms) berm_pb_varint(&m, 1, at_ms);
  berm_pb_str(&m, 4, payload);
  berm_pb_str(&m, 5, id);
  if (!at_ms) berm_pb_varint(&m, 6, delay_ms);
  if (m.oom) return oom_reply();
  return berm_protocol_op(BERM_CAP_CRABTALK_PROTOCOL_SCHEDULE_WAKE, m.buf, m.len);
}

int berm_protocol_wake_info(const berm_protocol_reply *r, berm_wake_info *out) {
  berm_bytes w;
  berm_pb_field f;
  if (berm_member(r, BSM_WAKE, &w) < 0) return -1;
  out->id = berm_pb_string(w, 1);
  out->harness = berm_pb_string(w, 2);
  out->entry = berm_pb_string(w, 3);
  out->at_ms = berm_pb_find(w, 4, &f) == 1 ? f.varint : 0;
  out->payload = berm_pb_string(w, 5);
  return out->id && out->harness && out->entry && out->payload ? 0 : -1;
}

berm_protocol_reply berm_protocol_cancel_wake(const char *id, int *cancelled) {
  berm_pb m;
  berm_pb_init(&m, 16 + strlen(id));
  berm_pb_str(&m, 1, id);
  if (m.oom) return oom_reply();
  berm_protocol_reply r = berm_protocol_op(BERM_CAP_CRABTALK_PROTOCOL_CANCEL_WAKE, m.buf, m.len);
  berm_bytes c;
  berm_pb_field f;
  if (cancelled) {
    *cancelled = berm_member(&r, BSM_CANCELLED, &c) == 0 && berm_pb_find(c, 2, &f) == 1 && f.varint != 0;
  }
  return r;
}

berm_protocol_reply berm_protocol_subscribe_event(const char *source, int once, uint64_t *id) {
  berm_pb m;
  berm_pb_init(&m, 16 + strlen(source));
  berm_pb_str(&m, 1, source);
  if (once) berm_pb_varint(&m, 3, 1);
  if (m.oom) return oom_reply();
  berm_protocol_reply r = berm_protocol_op(BERM_CAP_CRABTALK_PROTOCOL_SUBSCRIBE_EVENT, m.buf, m.len);
  berm_pb_field f;
  if (id) *id = r.ok && r.kind == BERM_PROTO_SUBSCRIPTION_INFO && berm_pb_find(r.body, 1, &f) == 1 ? f.varint : 0;
  return r;
}

berm_protocol_reply berm_protocol_publish_event(const char *source, const char *payload) {
  berm_pb m;
  berm_pb_init(&m, 16 + strlen(source) + (payload ? strlen(payload) : 0));
  berm_pb_str(&m, 1, source);
  berm_pb_str(&m, 2, payload);
  if (m.oom) return oom_reply();
  return berm_protocol_op(BERM_CAP_CRABTALK_PROTOCOL_PUBLISH_EVENT, m.buf, m.len);
}

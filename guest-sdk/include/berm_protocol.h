/*
 * berm guest SDK: the protocol door (docs/protocol-door.md). A harness granted protocol groups in
 * its declaration (`protocol:read`, `protocol:send`, `protocol:schedule`, ...) talks to the
 * crabtalk agent daemon in the daemon's own protobuf messages. This header gives:
 *
 *   - a tiny protobuf writer and reader (varint and length-delimited fields: all the door's
 *     messages need), so a harness can build any ClientMessage and read any ServerMessage;
 *   - berm_protocol_call (upstream's single door, crabtalk.protocol.call, an encoded
 *     ClientMessage) and berm_protocol_op (one host function per operation);
 *   - typed wrappers for what a harness usually does: ping, send, get_agent, schedule/cancel a
 *     wake, subscribe to and publish events, with parsers for their answers.
 *
 * Link guest-sdk/src/berm_protocol.c with the harness (add it to SRCS). Every buffer comes from
 * the SDK heap (berm_alloc). Field numbers are the daemon's (src/protocol/crabtalk.proto).
 *
 * The door scopes what it forwards to the invocation: send goes to the invoking agent's session
 * unless the declaration grants other agents, so berm_protocol_send needs no agent or session.
 */
#ifndef BERM_PROTOCOL_H
#define BERM_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#include "berm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- protobuf writer ----------------------------------------------------------------------- */
typedef struct berm_pb {
  unsigned char *buf;
  size_t len, cap;
  int oom; /* set when the heap ran out; the message is then incomplete */
} berm_pb;

/* Start an empty message with room for `cap` bytes (grows as needed). */
void berm_pb_init(berm_pb *b, size_t cap);
/* Field `field` as a varint (uint32/uint64/bool/enum). Written even when zero. */
void berm_pb_varint(berm_pb *b, uint32_t field, uint64_t v);
/* Field `field` as length-delimited bytes / a NUL-terminated string (skipped when s is NULL). */
void berm_pb_bytes(berm_pb *b, uint32_t field, const void *p, size_t n);
void berm_pb_str(berm_pb *b, uint32_t field, const char *s);
/* Field `field` holding the encoded message `sub` (empty sub: an empty message, still present). */
void berm_pb_msg(berm_pb *b, uint32_t field, const berm_pb *sub);

/* ---- protobuf reader ----------------------------------------------------------------------- */
typedef struct berm_pb_field {
  uint32_t num;      /* field number */
  uint32_t wire;     /* 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32 */
  uint64_t varint;   /* the value of a varint / fixed field */
  berm_bytes bytes;  /* the payload of a length-delimited field */
} berm_pb_field;

typedef struct berm_pb_reader {
  const unsigned char *p, *end;
} berm_pb_reader;

void berm_pb_reader_init(berm_pb_reader *r, const void *p, size_t n);
/* Next field: 1 read, 0 at the end, -1 malformed (truncated, bad wire type, varint too long). */
int berm_pb_next(berm_pb_reader *r, berm_pb_field *f);
/* The last occurrence of field `num` in `msg` (proto3: the last one wins). 1 found, 0 absent,
 * -1 malformed. */
int berm_pb_find(berm_bytes msg, uint32_t num, berm_pb_field *f);
/* A string field as a NUL-terminated heap copy ("" when absent; NULL when the heap is full). */
char *berm_pb_string(berm_bytes msg, uint32_t num);

/* ---- the door ------------------------------------------------------------------------------ */
/* ServerMessage members (field numbers) a harness meets. */
enum {
  BERM_PROTO_ERROR = 1,
  BERM_PROTO_PONG = 2,
  BERM_PROTO_RESPONSE = 3,
  BERM_PROTO_AGENT_INFO = 11,
  BERM_PROTO_AGENT_LIST = 12,
  BERM_PROTO_SKILL_LIST = 15,
  BERM_PROTO_STATS = 20,
  BERM_PROTO_SUBSCRIPTION_INFO = 25,
  BERM_PROTO_SUBSCRIPTION_LIST = 26,
  BERM_PROTO_SKILL_BODY = 31,
  BERM_PROTO_SESSION_HITS = 32,
  BERM_PROTO_BERM = 1000, /* berm's own: body is a BermServerMessage */
};

typedef struct berm_protocol_reply {
  int ok;             /* the daemon (or the due-set) answered, and not with an ErrorMsg */
  int refused;        /* the door refused: nothing was sent (message says why) */
  int error;          /* the call failed (timeout, daemon down mid-call) or the answer is an ErrorMsg */
  uint32_t code;      /* ErrorMsg.code when the daemon answered an error, else 0 */
  const char *message;/* why, NUL-terminated ("" on ok) */
  uint32_t kind;      /* the ServerMessage member answered (BERM_PROTO_*), 0 when none */
  berm_bytes body;    /* that member's encoded body */
  berm_bytes raw;     /* the whole encoded ServerMessage */
} berm_protocol_reply;

/* Upstream's single door: an encoded ClientMessage through crabtalk.protocol.call. */
berm_protocol_reply berm_protocol_call(const void *client_message, size_t len);
/* One operation's host function (a BERM_CAP_CRABTALK_PROTOCOL_* constant) with the encoded
 * inner message (may be empty). */
berm_protocol_reply berm_protocol_op(uint64_t cap, const void *inner, size_t len);

/* ---- typed wrappers ------------------------------------------------------------------------ */
berm_protocol_reply berm_protocol_ping(void); /* protocol:read */

/* protocol:send: send `content` to the invoking agent in the invocation's session. */
berm_protocol_reply berm_protocol_send(const char *content);
/* protocol:send, to another agent the declaration grants (agent ULID; session may be NULL). */
berm_protocol_reply berm_protocol_send_to(const char *agent, const char *session, const char *content);
/* SendResponse.content of a send's answer (heap copy), or NULL when the reply is not one. */
char *berm_protocol_response_text(const berm_protocol_reply *r);

/* protocol:read: the agent named `name` (config is always blank: the door redacts it). */
berm_protocol_reply berm_protocol_get_agent(const char *name);
typedef struct berm_agent_info {
  char *id, *name, *description, *model; /* heap copies */
} berm_agent_info;
int berm_protocol_agent_info(const berm_protocol_reply *r, berm_agent_info *out); /* 0 ok, -1 not one */

/* protocol:schedule: wake this harness's on_wake at `at_ms` (ms since the Unix epoch), or, when
 * at_ms is 0, `delay_ms` after the door's clock when it handles this message (not the
 * invocation's instant that berm_wake_arm counts from: docs/protocol-door.md), with `payload`
 * (may be NULL); `id` (may be NULL) re-arms that wake. */
berm_protocol_reply berm_protocol_schedule_wake(uint64_t at_ms, uint64_t delay_ms, const char *payload,
                                                const char *id);
typedef struct berm_wake_info {
  char *id, *harness, *entry, *payload; /* heap copies */
  uint64_t at_ms;
} berm_wake_info;
int berm_protocol_wake_info(const berm_protocol_reply *r, berm_wake_info *out); /* 0 ok, -1 not one */
/* protocol:schedule: cancel wake `id` of this harness; *cancelled = 1 when one was pending. */
berm_protocol_reply berm_protocol_cancel_wake(const char *id, int *cancelled);

/* protocol:events: subscribe this harness (its on_notify) to `source`; *id receives the
 * subscription id (may be NULL). */
berm_protocol_reply berm_protocol_subscribe_event(const char *source, int once, uint64_t *id);
/* protocol:events: publish an event (to the daemon's bus and to subscribed harnesses). */
berm_protocol_reply berm_protocol_publish_event(const char *source, const char *payload);

#ifdef __cplusplus
}
#endif

#endif /* BERM_PROTOCOL_H */

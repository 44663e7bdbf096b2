/*
 * door-guest: test harness for the protocol door. Not an example to copy.
 *   raw  (raw args: u64-LE host-call number, then the framed request)
 *        -> one status byte ('o' ok, 'e' error, 'r' refused) then the staged reply in hex
 *   scan (raw args: a secret, each byte XORed with 0x5a, so the secret itself is never in
 *        guest memory) -> reads agents through crabtalk.protocol.call (list_agents) and
 *        crabtalk.protocol.get_agent, then searches the used heap and the stack for the secret:
 *        "clean <hex of the list_agents reply>" or "FOUND at 0x..."
 *   sdk  (raw args: one letter) -> the SDK's typed wrappers (berm_protocol.h), their answers
 *        parsed in C and printed as text: p ping, a get_agent researcher, s send, w schedule
 *        a wake, c cancel it, e subscribe, u publish, x call with an empty ClientMessage
 *   loop (raw args: an agent ULID) -> subscribes to agent:<ULID>:done and sends "go"; on_notify
 *        sends "again" on every event: a send -> done -> notify -> send loop that only the
 *        chain's depth and gas end
 */
#include <berm.h>
#include <berm_protocol.h>
#include <stdio.h>
#include <string.h>

BERM_USAGE("Protocol door probes.");

static const char HEX[] = "0123456789abcdef";

static void done_status(const berm_reply *r) {
  char *out = berm_alloc(2 + 2 * r->len);
  if (!out) return berm_fail_str("out of memory");
  out[0] = r->ok ? 'o' : r->refused ? 'r' : 'e';
  for (size_t i = 0; i < r->len; i++) {
    out[1 + 2 * i] = HEX[((unsigned char)r->data[i]) >> 4];
    out[2 + 2 * i] = HEX[((unsigned char)r->data[i]) & 15];
  }
  berm_done(out, 1 + 2 * r->len);
}

static berm_reply raw_call(uint64_t n, const void *req, size_t len) {
  berm_reply r;
  memset(&r, 0, sizeof r);
  uint64_t word = berm_hostcall2(n, BERM_PTR(req), len);
  r.word = word;
  r.error = (word & BERM_STAGED_ERROR) != 0;
  r.refused = (word & BERM_STAGED_REFUSED) != 0;
  r.len = (size_t)(word & BERM_STAGED_LEN_MASK);
  r.data = berm_alloc(r.len + 1);
  if (!r.data) {
    r.len = 0;
    r.error = 1;
    return r;
  }
  berm_hostcall2(BERM_CAP_RESULT_READ, BERM_PTR(r.data), r.len);
  r.ok = !r.error && !r.refused;
  return r;
}

BERM_TOOL(raw, "Raw host call: u64-LE number then the framed request.") {
  size_t len;
  const unsigned char *a = (const unsigned char *)berm_args(&len);
  if (!a || len < 8) return berm_fail_str("args: u64 number then the request");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | a[i];
  berm_reply r = raw_call(n, a + 8, len - 8);
  done_status(&r);
}

static uint64_t memory_top(void) {
  volatile char here = 0;
  return ((uint64_t)(uintptr_t)&here + 0xffff) & ~(uint64_t)0xffff;
}

static int find_xored(const unsigned char *lo, const unsigned char *hi, const unsigned char *pat, size_t n,
                      const unsigned char **at) {
  if (n == 0 || hi < lo + n) return 0;
  for (const unsigned char *p = lo; p + n <= hi; p++) {
    size_t j = 0;
    while (j < n && (unsigned char)(p[j] ^ 0x5a) == pat[j]) j++;
    if (j == n) {
      *at = p;
      return 1;
    }
  }
  return 0;
}

BERM_TOOL(scan, "Read agents through the door, then search guest memory for the XORed secret.") {
  size_t n;
  const unsigned char *pat = (const unsigned char *)berm_args(&n);
  if (!pat || n == 0) return berm_fail_str("args: the XORed secret");
  /* ClientMessage{list_agents = 15: {}} framed as one field */
  static const unsigned char list_agents[] = {2, 0, 0, 0, 0x7a, 0x00};
  berm_reply all = raw_call(BERM_CAP_CRABTALK_PROTOCOL_CALL, list_agents, sizeof list_agents);
  if (!all.ok) return berm_failf("list_agents: %s", all.data);
  /* GetAgentMsg{name = "assistant"} framed as one field */
  static const unsigned char get_agent[] = {11, 0, 0, 0, 0x0a, 9, 'a', 's', 's', 'i', 's', 't', 'a', 'n', 't'};
  berm_reply one = raw_call(BERM_CAP_CRABTALK_PROTOCOL_GET_AGENT, get_agent, sizeof get_agent);
  if (!one.ok) return berm_failf("get_agent: %s", one.data);
  uint64_t start = berm_hostcall0(BERM_CAP_HEAP_START);
  uint64_t size = berm_hostcall0(BERM_CAP_HEAP_SIZE);
  uint64_t used = size - berm_heap_remaining();
  volatile char here = 0;
  const unsigned char *at;
  if (find_xored((const unsigned char *)(uintptr_t)start, (const unsigned char *)(uintptr_t)(start + used), pat, n,
                 &at) ||
      find_xored((const unsigned char *)&here, (const unsigned char *)(uintptr_t)memory_top(), pat, n, &at)) {
    return berm_failf("FOUND at 0x%llx", (unsigned long long)(uintptr_t)at);
  }
  char *out = berm_alloc(6 + 2 * all.len);
  if (!out) return berm_fail_str("out of memory");
  memcpy(out, "clean ", 6);
  for (size_t i = 0; i < all.len; i++) {
    out[6 + 2 * i] = HEX[((unsigned char)all.data[i]) >> 4];
    out[7 + 2 * i] = HEX[((unsigned char)all.data[i]) & 15];
  }
  berm_done(out, 6 + 2 * all.len);
}

static void outcome(const berm_protocol_reply *r, const char *what) {
  if (r->refused) return berm_failf("%s refused: %s", what, r->message);
  if (r->error) return berm_failf("%s error %u: %s", what, (unsigned)r->code, r->message);
}

BERM_TOOL(sdk, "The SDK's typed protocol wrappers.") {
  size_t n;
  const char *a = berm_args(&n);
  if (!a || n != 1) return berm_fail_str("args: one letter");
  char out[512];
  int k = 0;
  berm_protocol_reply r;
  switch (a[0]) {
    case 'p':
      r = berm_protocol_ping();
      if (!r.ok) return outcome(&r, "ping");
      k = snprintf(out, sizeof out, "kind=%u", (unsigned)r.kind);
      break;
    case 'a': {
      r = berm_protocol_get_agent("researcher");
      berm_agent_info info;
      if (!r.ok) return outcome(&r, "get_agent");
      if (berm_protocol_agent_info(&r, &info) < 0) return berm_fail_str("not an AgentInfo");
      k = snprintf(out, sizeof out, "%s|%s|%s|%s", info.id, info.name, info.description, info.model);
      break;
    }
    case 's': {
      r = berm_protocol_send("hello from C");
      if (!r.ok) return outcome(&r, "send");
      char *text = berm_protocol_response_text(&r);
      if (!text) return berm_fail_str("not a SendResponse");
      k = snprintf(out, sizeof out, "%s", text);
      break;
    }
    case 'w': {
      r = berm_protocol_schedule_wake(0, 60000, "tea", "w1");
      if (!r.ok) return outcome(&r, "schedule_wake");
      berm_wake_info w;
      if (berm_protocol_wake_info(&r, &w) < 0) return berm_fail_str("not a WakeInfo");
      k = snprintf(out, sizeof out, "%s|%s|%s|%s|%llu", w.id, w.harness, w.entry, w.payload,
                   (unsigned long long)w.at_ms);
      break;
    }
    case 'c': {
      int cancelled = -1;
      r = berm_protocol_cancel_wake("w1", &cancelled);
      if (!r.ok) return outcome(&r, "cancel_wake");
      k = snprintf(out, sizeof out, "cancelled=%d", cancelled);
      break;
    }
    case 'e': {
      uint64_t id = 0;
      r = berm_protocol_subscribe_event("agent:assistant:done", 0, &id);
      if (!r.ok) return outcome(&r, "subscribe_event");
      k = snprintf(out, sizeof out, "subscription=%llu", (unsigned long long)id);
      break;
    }
    case 'u':
      r = berm_protocol_publish_event("harness:dg:tick", "42");
      if (!r.ok) return outcome(&r, "publish_event");
      k = snprintf(out, sizeof out, "kind=%u", (unsigned)r.kind);
      break;
    case 'x':
      r = berm_protocol_call("", 0);
      return outcome(&r, "empty");
    default:
      return berm_fail_str("unknown letter");
  }
  berm_done(out, (size_t)k);
}

BERM_TOOL(loop, "Start a send -> done -> notify -> send loop with the agent given as raw args.") {
  size_t n;
  const char *agent = berm_args(&n);
  if (!agent || n == 0) return berm_fail_str("args: an agent ULID");
  char source[96];
  snprintf(source, sizeof source, "agent:%.*s:done", (int)n, agent);
  uint64_t id = 0;
  berm_protocol_reply r = berm_protocol_subscribe_event(source, 0, &id);
  if (!r.ok) return outcome(&r, "subscribe_event");
  r = berm_protocol_send("go");
  if (!r.ok) return outcome(&r, "send");
  char out[64];
  int k = snprintf(out, sizeof out, "subscribed %llu", (unsigned long long)id);
  berm_done(out, (size_t)k);
}

BERM_ON_NOTIFY(ev) {
  berm_logf("on_notify %s attempt=%llu", ev->source, (unsigned long long)ev->attempt);
  berm_protocol_reply r = berm_protocol_send("again");
  if (!r.ok) return outcome(&r, "send");
  berm_done_str("sent again");
}

/*
 * The embedding example's harness (docs/embedding.md; test/data/shout.elf is its build, used by
 * test/package.test.ts): its one tool hands its
 * arguments to a capability the embedder supplies, acme.upper, and returns its reply (one field,
 * staged raw). The call number is the FNV-1a-64 hash of the name, as for every capability.
 */
#include <berm.h>
#include <stdint.h>

BERM_USAGE("Embedding example: calls the embedder's acme.upper capability.");

static uint64_t fnv1a64(const char *s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 0x100000001b3ULL;
  }
  return h;
}

BERM_TOOL(shout, "Upper-case the arguments through the embedder's acme.upper capability.",
          "{\"type\":\"object\",\"required\":[\"text\"],\"properties\":{\"text\":{\"type\":\"string\"}}}") {
  size_t len;
  const char *args = berm_args(&len);
  berm_bytes field = {args, len};
  berm_reply r = berm_cap_call(fnv1a64("acme.upper"), &field, 1);
  if (!r.ok) return berm_fail(r.data, r.len);
  berm_done(r.data, r.len);
}

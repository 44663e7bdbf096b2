/* echo: the smallest harness. Returns its arguments unchanged. */
#include <berm.h>

BERM_USAGE("Echo tools: return what you send, for testing a berm setup.");

BERM_TOOL(echo, "Return the arguments unchanged.",
          "{\"type\":\"object\",\"additionalProperties\":true}") {
  size_t n;
  const char *args = berm_args(&n);
  if (!args) {
    berm_fail_str("out of memory");
    return;
  }
  berm_done(args, n);
}

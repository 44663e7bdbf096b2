#include <stdio.h>
#include <string.h>

#include "berm_host.h"

void berm_host_test(void) {
  berm_host_result r = berm_host_run("echo", "{\"x\":1}");
  BERM_CHECK(r.ok && !r.failed);
  BERM_CHECK_STR(r.result, "{\"x\":1}");

  r = berm_host_run("echo", "");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "");
}

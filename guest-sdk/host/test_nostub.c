/* Self-test of the stand-in host: a capability without a stand-in must abort, naming itself.
 * Built with examples/notes/notes.c by the top-level `make host-test`; expected to abort. */
#include <stdio.h>

#include "berm_host.h"

void berm_host_test(void) {
  berm_host_run("file_size", "/README.md"); /* berm.fs.read has no stand-in here */
  printf("stand-in host returned instead of aborting\n");
}

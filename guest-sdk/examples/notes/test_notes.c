#include <stdio.h>
#include <string.h>

#include "berm_host.h"

/* Stand-in for berm.fs.read: one known file; anything else is an error; "/secret" is refused. */
static void fake_fs_read(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (n != 3) return berm_host_reply_error(r, "fs.read takes (path, offset, limit)");
  if (f[0].len == 7 && memcmp(f[0].ptr, "/secret", 7) == 0) return berm_host_reply_refused(r, "not granted");
  if (f[0].len == 10 && memcmp(f[0].ptr, "/README.md", 10) == 0) return berm_host_reply_str(r, "# hello\n");
  berm_host_reply_error(r, "no such file");
}

void berm_host_test(void) {
  berm_host_use_memory_storage();
  berm_host_use_fixed_clock(1700000000000LL, 3600);
  berm_host_stub(BERM_CAP_FS_READ, fake_fs_read, NULL);

  berm_host_result r = berm_host_run("note_get", "");
  BERM_CHECK(r.failed);
  BERM_CHECK_STR(r.result, "no note");

  r = berm_host_run("note_put", "buy milk");
  BERM_CHECK_STR(r.result, "stored");
  r = berm_host_run("note_get", "");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "buy milk");

  r = berm_host_run("file_size", "/README.md");
  BERM_CHECK_STR(r.result, "/README.md: 8 bytes");
  r = berm_host_run("file_size", "/nope");
  BERM_CHECK(r.failed);
  BERM_CHECK_STR(r.result, "error: no such file");
  r = berm_host_run("file_size", "/secret");
  BERM_CHECK_STR(r.result, "refused: not granted");

  /* The heartbeat: the tool arms the first wake; each occurrence re-arms before its work. */
  berm_host_use_schedule();
  r = berm_host_run("heartbeat_start", "");
  BERM_CHECK_STR(r.result, "heartbeat");
  BERM_CHECK(berm_host_pending("heartbeat") && berm_host_pending("heartbeat")->delay_ms == 60000);
  r = berm_host_wake("heartbeat", 1700000060000LL, 1700000060010LL, 1, "");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "1700000060010");
  BERM_CHECK(berm_host_wake_count() == 1);
  BERM_CHECK(berm_host_last_wake_ms() == 59990); /* 10 ms late: the phase is kept */
  /* 20 s late (after downtime): re-armed, but the stale work is skipped. */
  r = berm_host_wake("heartbeat", 1700000120000LL, 1700000140000LL, 1, "");
  BERM_CHECK(r.ok && r.len == 0);
  BERM_CHECK(berm_host_wake_count() == 1 && berm_host_last_wake_ms() == 40000);
  BERM_CHECK(strstr(berm_host_logs(), "20000 ms late") != NULL);

  /* A tool that never allocates never asks for the heap. */
  r = berm_host_run("note_get", "");
  BERM_CHECK(berm_host_heap_queries() > 0); /* berm_get allocates the request */

  /* Manifest records compiled in: 4 tools, usage, one dep. */
  size_t nrec;
  const berm_record *rec = berm_host_records(&nrec);
  size_t tools = 0;
  for (size_t i = 0; i < nrec; i++) tools += rec[i].kind == BERM_REC_TOOL;
  BERM_CHECK(tools == 4);
}

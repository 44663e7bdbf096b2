#include <stdio.h>
#include <string.h>

#include "berm_host.h"

static int eq(const berm_bytes *b, const char *s) { return b->len == strlen(s) && memcmp(b->ptr, s, b->len) == 0; }

/* fs.read stand-in: "README.md" holds "# hi\n"; offset/limit are echoed; "../x" is refused. */
static void fake_read(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (n != 3) return berm_host_reply_error(r, "fs.read takes (path, offset, limit)");
  if (eq(&f[0], "../x")) return berm_host_reply_refused(r, "path leaves the root");
  if (eq(&f[0], "bin")) return berm_host_reply_bytes(r, "\xff\xfe", 2);
  if (!eq(&f[0], "README.md")) return berm_host_reply_error(r, "no such file");
  if (eq(&f[1], "2") && eq(&f[2], "3")) return berm_host_reply_str(r, "hi\n");
  if (!eq(&f[1], "0") || !eq(&f[2], "0")) return berm_host_reply_error(r, "unexpected offset/limit");
  berm_host_reply_str(r, "# hi\n");
}

static char written[64];
static void fake_write(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (n != 2 || !eq(&f[0], "a/b.txt")) return berm_host_reply_error(r, "unexpected write");
  snprintf(written, sizeof written, "%.*s", (int)f[1].len, (const char *)f[1].ptr);
  char num[21];
  num[berm_u64_to_dec(f[1].len, num)] = 0;
  berm_host_reply_str(r, num);
}

static void fake_exec(const berm_bytes *f, size_t n, berm_host_reply *r, void *ctx) {
  if (n != 4 || !eq(&f[0], "echo hi") || !eq(&f[1], "sub") || !eq(&f[2], "PATH"))
    return berm_host_reply_error(r, "unexpected exec");
  berm_host_reply_str(r, "{\"stdout\":\"hi\\n\",\"stderr\":\"\",\"exit_code\":0,\"signal\":null,\"truncated\":false}");
}

void berm_host_test(void) {
  berm_host_stub(BERM_CAP_FS_READ, fake_read, NULL);
  berm_host_stub(BERM_CAP_FS_WRITE, fake_write, NULL);
  berm_host_stub(BERM_CAP_EXEC_RUN, fake_exec, NULL);

  berm_host_result r = berm_host_run("read", "{\"path\":\"README.md\"}");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "# hi\n");
  r = berm_host_run("read", "{\"limit\": 3, \"x\": {\"path\": \"no\"}, \"path\":\"README.md\", \"offset\":2}");
  BERM_CHECK_STR(r.result, "hi\n");
  r = berm_host_run("read", "{\"path\":\"../x\"}");
  BERM_CHECK(r.failed);
  BERM_CHECK_STR(r.result, "read refused: path leaves the root");
  r = berm_host_run("read", "{\"path\":\"gone\"}");
  BERM_CHECK_STR(r.result, "read failed: no such file");
  r = berm_host_run("read", "{\"path\":\"bin\"}");
  BERM_CHECK_STR(r.result, "bin is not UTF-8 text (2 bytes read)");
  r = berm_host_run("read", "{\"path\":7}");
  BERM_CHECK_STR(r.result, "path must be a string");
  r = berm_host_run("read", "{\"path\":\"README.md\",\"offset\":-1}");
  BERM_CHECK_STR(r.result, "offset must be a non-negative integer");

  r = berm_host_run("write", "{\"path\":\"a/b.txt\",\"content\":\"x\\n\\\"q\\\" \\u00e9\"}");
  BERM_CHECK(r.ok);
  BERM_CHECK_STR(r.result, "wrote 8 bytes to a/b.txt");
  BERM_CHECK_STR(written, "x\n\"q\" \xc3\xa9");
  r = berm_host_run("write", "{\"path\":\"a/b.txt\"}");
  BERM_CHECK_STR(r.result, "content must be a string");

  r = berm_host_run("exec", "{\"command\":\"echo hi\",\"cwd\":\"sub\"}");
  BERM_CHECK(r.ok);
  BERM_CHECK(strstr(r.result, "\"stdout\":\"hi\\n\"") != NULL);
}

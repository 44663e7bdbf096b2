/*
 * os: files and commands inside the tree the operator's declaration grants (root).
 *   read  {path, offset?, limit?}  -> the file's text (berm.fs.read)
 *   write {path, content}          -> "wrote N bytes to PATH" (berm.fs.write)
 *   exec  {command, cwd?}          -> {"stdout","stderr","exit_code","signal","truncated"} (berm.exec.run)
 * Every path is relative to the granted root; the host refuses anything outside it.
 */
#include <berm.h>
#include <stdio.h>
#include <string.h>

#include "../json.h"

BERM_USAGE("Read and write files and run shell commands inside the declared root.");
BERM_DEP("fs");
BERM_DEP("exec");

static void fail_reply(const char *what, const berm_reply *r) {
  berm_failf("%s %s: %s", what, r->refused ? "refused" : "failed", r->data);
}

BERM_TOOL(read, "Read a text file (path relative to the root; offset and limit in bytes, limit 0 = all).",
          "{\"type\":\"object\",\"required\":[\"path\"],\"properties\":{"
          "\"path\":{\"type\":\"string\"},"
          "\"offset\":{\"type\":\"integer\",\"minimum\":0},"
          "\"limit\":{\"type\":\"integer\",\"minimum\":0}}}") {
  const char *args = berm_args(NULL);
  char *path;
  uint64_t offset = 0, limit = 0;
  if (json_string(args, "path", &path, NULL) != 1) return berm_fail_str("path must be a string");
  if (json_uint(args, "offset", &offset) < 0) return berm_fail_str("offset must be a non-negative integer");
  if (json_uint(args, "limit", &limit) < 0) return berm_fail_str("limit must be a non-negative integer");
  berm_reply r = berm_fs_read(path, offset, limit);
  if (!r.ok) return fail_reply("read", &r);
  if (!json_is_utf8((const unsigned char *)r.data, r.len))
    return berm_failf("%s is not UTF-8 text (%u bytes read)", path, (unsigned)r.len);
  berm_done(r.data, r.len);
}

BERM_TOOL(write, "Write a text file (creates parent folders, replaces the content).",
          "{\"type\":\"object\",\"required\":[\"path\",\"content\"],\"properties\":{"
          "\"path\":{\"type\":\"string\"},\"content\":{\"type\":\"string\"}}}") {
  const char *args = berm_args(NULL);
  char *path, *content;
  size_t n;
  if (json_string(args, "path", &path, NULL) != 1) return berm_fail_str("path must be a string");
  if (json_string(args, "content", &content, &n) != 1) return berm_fail_str("content must be a string");
  berm_reply r = berm_fs_write(path, content, n);
  if (!r.ok) return fail_reply("write", &r);
  size_t cap = strlen(path) + r.len + 32;
  char *out = berm_alloc(cap);
  if (!out) return berm_fail_str("out of memory");
  int len = snprintf(out, cap, "wrote %s bytes to %s", r.data, path);
  berm_done(out, (size_t)len);
}

/* The command sees only PATH (the host passes no other environment). */
static const char *const exec_env[] = {"PATH", "/usr/local/bin:/usr/bin:/bin", NULL};

BERM_TOOL(exec, "Run a shell command (/bin/sh -c) in cwd (relative to the root; default the root).",
          "{\"type\":\"object\",\"required\":[\"command\"],\"properties\":{"
          "\"command\":{\"type\":\"string\"},\"cwd\":{\"type\":\"string\"}}}") {
  const char *args = berm_args(NULL);
  char *command, *cwd = "";
  if (json_string(args, "command", &command, NULL) != 1) return berm_fail_str("command must be a string");
  if (json_string(args, "cwd", &cwd, NULL) < 0) return berm_fail_str("cwd must be a string");
  berm_reply r = berm_exec_run(command, cwd, exec_env);
  if (!r.ok) return fail_reply("exec", &r);
  berm_done(r.data, r.len);
}

/* notes: capability calls (storage, fs.read, clock) and a recurring tool. */
#include <berm.h>
#include <stdio.h>
#include <string.h>

BERM_USAGE("Keep short notes in host storage; read files; a periodic heartbeat.");
BERM_DEP("storage");

/* Arguments are the note text; stores it under key "note". */
BERM_TOOL(note_put, "Store the arguments as the note.") {
  size_t n;
  const char *a = berm_args(&n);
  berm_reply r = berm_set("note", a, n);
  if (!r.ok) {
    berm_failf("storage refused or failed: %s", r.data);
    return;
  }
  berm_done_str("stored");
}

BERM_TOOL(note_get, "Return the stored note, or fail if there is none.") {
  berm_reply r = berm_get("note");
  if (!r.ok) {
    berm_fail(r.data, r.len);
    return;
  }
  if (r.len == 0) {
    berm_fail_str("no note");
    return;
  }
  berm_done(r.data, r.len);
}

/* Arguments: a path. Returns "<path>: <n> bytes" using berm.fs.read(path, 0, 4096). */
BERM_TOOL(file_size, "Read up to 4 KiB of a file and report its size.",
          "{\"type\":\"string\"}") {
  const char *path = berm_args(NULL);
  berm_reply r = berm_fs_read(path, 0, 4096);
  if (!r.ok) {
    berm_failf("%s: %s", r.refused ? "refused" : "error", r.data);
    return;
  }
  char out[300];
  int n = snprintf(out, sizeof out, "%.200s: %u bytes", path, (unsigned)r.len);
  berm_done(out, (size_t)n);
}

/* A heartbeat every minute: the tool heartbeat_start arms the first wake; each occurrence
 * re-arms the next one before doing its work (BERM_RECURRING), and skips the work when it runs
 * more than 5 s late (after downtime the one overdue occurrence is stale). */
BERM_TOOL(heartbeat_start, "Start the heartbeat (a wake every minute).") {
  berm_reply r = berm_wake_arm(60000, NULL, "heartbeat");
  if (!r.ok) return berm_failf("cannot arm the heartbeat: %s", r.data);
  berm_done(r.data, r.len); /* the wake id */
}

BERM_RECURRING(w, 60000) {
  if (berm_wake_late(w, 5000)) return;
  char v[24];
  int n = snprintf(v, sizeof v, "%lld", (long long)w->now);
  berm_set("heartbeat", v, (size_t)n);
  berm_done(v, (size_t)n);
}

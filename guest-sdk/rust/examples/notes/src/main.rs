//! notes: guest-sdk/examples/notes/notes.c written against the Rust SDK, tool for tool and message
//! for message, so both answer a shared case set identically through `berm call`
//! (test/rust-sdk.test.ts): capability calls (storage, fs.read) and a recurring wake.
#![cfg_attr(target_os = "none", no_std, no_main)]
extern crate alloc;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

berm::harness! {
    usage: "Keep short notes in host storage; read files; a periodic heartbeat.",
    deps: ["storage"],
    tools: {
        note_put: "Store the arguments as the note.";
        note_get: "Return the stored note, or fail if there is none.";
        file_size: "Read up to 4 KiB of a file and report its size.", r#"{"type":"string"}"#;
        heartbeat_start: "Start the heartbeat (a wake every minute).";
    },
    on_wake(every = 60_000): heartbeat,
}

/// Arguments are the note text; stores it under key "note".
fn note_put(args: &str) -> Result<&'static str, String> {
    berm::storage::set("note", args.as_bytes())
        .map_err(|e| format!("storage refused or failed: {}", e.message()))?;
    Ok("stored")
}

fn note_get(_: &str) -> Result<Vec<u8>, String> {
    match berm::storage::get("note") {
        Err(e) => Err(e.message().to_string()),
        Ok(None) => Err("no note".to_string()),
        Ok(Some(v)) => Ok(v),
    }
}

/// The first `n` bytes of `s`, cut back to a character boundary (C's `%.200s`).
fn cut(s: &str, mut n: usize) -> &str {
    if n >= s.len() {
        return s;
    }
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

/// Arguments: a path. Returns "<path>: <n> bytes" using berm.fs.read(path, 0, 4096).
fn file_size(path: &str) -> Result<String, String> {
    match berm::fs::read(path, 0, 4096) {
        Ok(b) => Ok(format!("{}: {} bytes", cut(path, 200), b.len())),
        Err(e) => Err(format!("{}: {}", if e.is_refused() { "refused" } else { "error" }, e.message())),
    }
}

fn heartbeat_start(_: &str) -> Result<String, String> {
    berm::schedule::arm(60_000, None, Some("heartbeat")).map_err(|e| format!("cannot arm the heartbeat: {}", e.message()))
}

/// Re-armed before this runs (every = 60 s); skips the work when more than 5 s late.
fn heartbeat(w: &berm::Wake) -> Result<(), String> {
    if w.is_late(5000) {
        return Ok(());
    }
    let v = w.now.to_string();
    let _ = berm::storage::set("heartbeat", v.as_bytes());
    berm::done(v.as_bytes());
    Ok(())
}

#[cfg(not(target_os = "none"))]
fn main() {}

#[cfg(test)]
mod tests {
    use berm::host::{Host, Outcome, Reply, Sched};

    #[test]
    fn notes_round_trip_and_errors() {
        let mut h = Host::new(&super::HARNESS);
        h.use_memory_storage();
        assert_eq!(h.run("note_get", "{}"), Outcome::Failed("no note".into()));
        assert_eq!(h.run("note_put", "hello"), Outcome::Ok("stored".into()));
        assert_eq!(h.run("note_get", "{}"), Outcome::Ok("hello".into()));
        h.stub("berm.fs.read", |f| {
            if f[0] == b"a.txt" { Reply::ok("12345") } else { Reply::refused("outside the root") }
        });
        assert_eq!(h.run("file_size", "a.txt"), Outcome::Ok("a.txt: 5 bytes".into()));
        assert_eq!(h.run("file_size", "/etc"), Outcome::Failed("refused: outside the root".into()));
    }

    #[test]
    fn heartbeat_rearms_first_and_skips_when_late() {
        let mut h = Host::new(&super::HARNESS);
        h.use_memory_storage().use_schedule();
        assert_eq!(h.run("heartbeat_start", "{}"), Outcome::Ok("heartbeat".into()));
        assert_eq!(h.wake("heartbeat", 60_000, 61_000, 1, ""), Outcome::Ok("61000".into()));
        assert_eq!(h.wake("heartbeat", 60_000, 70_000, 1, ""), Outcome::Ok("".into()));
        let calls = h.schedule().calls.clone();
        assert_eq!(calls.len(), 3);
        assert!(matches!(&calls[2], Sched::Arm { delay_ms: 50_000, logs_before: 0, .. }));
        assert!(h.logs()[0].contains("10000 ms late"));
    }
}

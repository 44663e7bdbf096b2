//! The SDK run natively through its stand-in host: the same argument transfer, limits and failure
//! channel as the runtime (expected values come from docs/capabilities.md, docs/wakes.md and
//! guest-sdk/include/berm_caps.h, not from this SDK's own output).
use berm::host::{Host, Outcome, Reply, Sched};
use std::string::String;

berm::harness! {
    usage: "SDK self-test tools.",
    deps: ["other"],
    tools: {
        echo: "Return the arguments.", r#"{"type":"object"}"#;
        boom: "Panic.";
        read: "berm.fs.read of args";
        kv: "storage round trip";
        err: "Fail with Err";
        silent: "Finish twice: done then Err";
        clock: "now and offset";
        fetch: "http";
        big: "A result over the limit";
        misc: "exec, glob, grep, call, schedule";
        door: "the protocol door";
    },
    on_wake(every = 60_000): tick,
    on_notify: noted,
}

fn echo(a: &str) -> Result<String, String> {
    berm::log!("echo {}", a.len());
    Ok(a.into())
}
fn boom(a: &str) -> Result<String, String> {
    if a == "big" {
        panic!("{}", "é".repeat(5000)); // 10,000 bytes of two-byte characters
    }
    let v: Vec<u32> = Vec::new();
    let i = v.len() + 3;
    Ok(format!("{}", v[i]))
}
fn read(a: &str) -> Result<String, String> {
    match berm::fs::read(a, 5, 7) {
        Ok(b) => Ok(String::from_utf8(b).unwrap()),
        Err(e) => Ok(format!("{} {}", if e.is_refused() { "refused" } else { "failed" }, e.message())),
    }
}
fn kv(a: &str) -> Result<String, berm::CapError> {
    let before = berm::storage::get(a)?;
    berm::storage::set(a, b"v1")?;
    let after = berm::storage::get(a)?;
    berm::storage::delete(a)?;
    Ok(format!("{:?} {:?} {:?}", before, after.map(|v| String::from_utf8(v).unwrap()), berm::storage::get(a)?))
}
fn err(_: &str) -> Result<String, String> {
    Err("it went wrong".into())
}
fn silent(_: &str) -> Result<&'static str, String> {
    berm::done(b"first");
    Err("ignored: the call already finished".into())
}
fn clock(_: &str) -> Result<String, berm::CapError> {
    Ok(format!("{} {}", berm::clock::now_ms()?, berm::clock::offset_s()?))
}
fn fetch(_: &str) -> Result<String, berm::CapError> {
    let r = berm::http::fetch("POST", "http://h/x", b"body", &[("a", "1")])?;
    Ok(format!("{} {:?} {}", r.status, r.headers, String::from_utf8_lossy(&r.body)))
}
fn big(_: &str) -> Result<Vec<u8>, String> {
    Ok(vec![b'x'; (4 << 20) + 1])
}
fn misc(_: &str) -> Result<String, berm::CapError> {
    let x = berm::exec::run("ls", "", &[("PATH", "/bin")])?;
    let g = berm::fs::glob("*.md")?;
    let r = berm::fs::grep("fn", "")?;
    let c = berm::call::tool("other", "t", "{}")?;
    let a = berm::schedule::call_after(5, "other", "t", "")?;
    let k = berm::schedule::cancel("nope")?;
    let w = berm::fs::write("o.txt", b"abc")?;
    Ok(format!("{x}|{g:?}|{r:?}|{c}|{a}|{k}|{w}"))
}
fn door(a: &str) -> Result<String, berm::protocol::DoorError> {
    match a {
        "send" => berm::protocol::send("hello"),
        "agent" => Ok(format!("{:?}", berm::protocol::get_agent("ada")?)),
        "sub" => Ok(berm::protocol::subscribe_event("mail", true)?.to_string()),
        _ => Ok(format!("{:?}", berm::protocol::ping()?.kind)),
    }
}
fn tick(w: &berm::Wake) -> Result<(), String> {
    berm::log!("tick {} {} {}", w.id, w.attempt, w.payload);
    if w.payload == "fail" {
        return Err("tick failed".into());
    }
    Ok(())
}
fn noted(n: &berm::Notify) -> Result<(), String> {
    berm::log!("{} from {}: {}", n.id, n.source, n.payload);
    Ok(())
}

#[test]
fn manifest_is_the_runtime_format() {
    let h = Host::new(&HARNESS);
    let m = h.manifest();
    // ABI 0 manifests have no "deps" (src/harness/manifest.ts)
    let head = if berm::ABI == 1 {
        r#"{"abi_version":1,"usage":"SDK self-test tools.","deps":["other"],"tools":"#
    } else {
        r#"{"abi_version":0,"usage":"SDK self-test tools.","tools":"#
    };
    assert!(m.starts_with(head), "{m}");
    let tools = r#"[{"name":"echo","description":"Return the arguments.","parameters":{"type":"object"}},{"name":"boom","description":"Panic.","parameters":{"type":"object"}}"#;
    assert!(m[head.len()..].starts_with(tools), "{m}");
    assert!(m.ends_with("}]}"));
}

#[test]
fn result_logs_and_arguments() {
    let mut h = Host::new(&HARNESS);
    assert_eq!(h.run("echo", r#"{"a":1}"#), Outcome::Ok(r#"{"a":1}"#.into()));
    assert_eq!(h.logs(), ["echo 7"]);
}

#[test]
fn a_panic_is_a_failure_with_its_message() {
    let mut h = Host::new(&HARNESS);
    let m = h.run("boom", "{}").unwrap_failed();
    assert!(m.starts_with("panicked at guest-sdk/rust/tests/host.rs:") || m.starts_with("panicked at tests/host.rs:"), "{m}");
    assert!(m.ends_with("index out of bounds: the len is 0 but the index is 3"), "{m}");
    assert_eq!(h.logs(), [m]);
}

#[test]
fn a_huge_panic_message_is_cut_to_1_kib_as_in_the_guest() {
    // The guest's panic handler formats into a fixed 1 KiB buffer (it may not allocate), cutting
    // at a character boundary; the stand-in host must fail with the same text, not refuse a
    // 10,000-byte failure message.
    let mut h = Host::new(&HARNESS);
    let m = h.run_bytes("boom", b"big").unwrap_failed();
    assert!(m.starts_with("panicked at "), "{m}");
    assert!(m.len() <= 1024 && m.len() >= 1023, "{} bytes", m.len());
    assert!(m.ends_with('é'));
}

#[test]
fn err_fails_and_a_second_finish_is_ignored() {
    let mut h = Host::new(&HARNESS);
    assert_eq!(h.run("err", "{}"), Outcome::Failed("it went wrong".into()));
    assert_eq!(h.run("silent", "{}"), Outcome::Ok("first".into()));
}

#[test]
fn capability_replies_errors_and_refusals() {
    let mut h = Host::new(&HARNESS);
    h.stub("berm.fs.read", |f| {
        assert_eq!(f, [b"a.txt".to_vec(), b"5".to_vec(), b"7".to_vec()]);
        Reply::ok("content")
    });
    assert_eq!(h.run("read", "a.txt").unwrap_ok(), "content");
    h.stub("berm.fs.read", |_| Reply::error("ENOENT: no such file"));
    assert_eq!(h.run("read", "a.txt").unwrap_ok(), "failed ENOENT: no such file");
    h.stub("berm.fs.read", |_| Reply::refused("path escapes the root"));
    assert_eq!(h.run("read", "a.txt").unwrap_ok(), "refused path escapes the root");
}

#[test]
#[should_panic(expected = "capability berm.fs.read has no stand-in")]
fn a_capability_without_stand_in_panics_naming_itself() {
    let mut h = Host::new(&HARNESS);
    h.run("read", "x");
}

#[test]
#[should_panic(expected = "result of 4194305 bytes is over the limit of 4194304")]
fn a_result_over_the_limit_fails_the_test() {
    Host::new(&HARNESS).run("big", "{}");
}

#[test]
fn storage_clock_and_http() {
    let mut h = Host::new(&HARNESS);
    h.use_memory_storage().use_fixed_clock(1_700_000_000_123, -3600);
    assert_eq!(h.run("kv", "k").unwrap_ok(), r#"None Some("v1") None"#);
    assert_eq!(h.run("clock", "{}").unwrap_ok(), "1700000000123 -3600");
    h.stub("berm.http.fetch", |f| {
        assert_eq!(f, [b"POST".to_vec(), b"http://h/x".to_vec(), b"body".to_vec(), b"a".to_vec(), b"1".to_vec()]);
        Reply::Fields(vec![b"201".to_vec(), b"x: y\n".to_vec(), b"made".to_vec()])
    });
    assert_eq!(h.run("fetch", "{}").unwrap_ok(), r#"201 "x: y\n" made"#);
}

#[test]
fn recurring_wake_rearms_before_the_body_keeping_the_phase() {
    let mut h = Host::new(&HARNESS);
    h.use_schedule();
    // 20 ms late: the next occurrence is 59,980 ms away (phase kept), armed before the body logs.
    assert_eq!(h.wake("beat", 1_700_000_060_000, 1_700_000_060_020, 2, "hi"), Outcome::Ok(String::new()));
    assert_eq!(h.logs(), ["tick beat 2 hi"]);
    assert_eq!(
        h.schedule().calls,
        [Sched::Arm { delay_ms: 59_980, payload: Some(b"hi".to_vec()), id: "beat".into(), logs_before: 0 }]
    );
    // A failing body still re-armed first: one occurrence lost, not the schedule.
    assert_eq!(h.wake("beat", 0, 130_000, 1, "fail"), Outcome::Failed("tick failed".into()));
    assert_eq!(h.schedule().pending.get("beat"), Some(&(50_000, b"fail".to_vec())));
    // A malformed record fails the entry, naming it.
    let m = h.run_entry("on_wake", br#"{"id":"x"}"#).unwrap_failed();
    assert!(m.starts_with("on_wake: malformed record"), "{m}");
}

#[test]
fn notify_entry() {
    let mut h = Host::new(&HARNESS);
    assert!(h.notify("sub-1", "mail", "hello \"you\"", 5, 1).is_ok());
    assert_eq!(h.logs(), ["sub-1 from mail: hello \"you\""]);
}

// Host calls of the C SDK that the Rust SDK does not wrap yet: WebSocket connections (C only,
// guest-sdk/include/berm_ws.h). Their numbers are still checked against FNV-1a below.
const C_ONLY: &[&str] = &["berm.ws.open", "berm.ws.send", "berm.ws.close"];

#[test]
fn call_numbers_match_the_c_sdk() {
    let h = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../include/berm_caps.h")).unwrap();
    let mut n = 0;
    for line in h.lines().filter(|l| l.starts_with("#define BERM_CAP_") && l.contains("/* ")) {
        let hex = line.split_whitespace().nth(2).unwrap().trim_end_matches("ULL").trim_start_matches("0x");
        let name = line.split("/* ").nth(1).unwrap().trim_end_matches(" */");
        let v = u64::from_str_radix(hex, 16).unwrap();
        assert_eq!(berm::sys::fnv1a64(name), v, "{name}");
        if C_ONLY.contains(&name) {
            assert_eq!(berm::sys::caps::name(v), None, "{name} is wrapped now: drop it from C_ONLY");
            continue;
        }
        assert_eq!(berm::sys::caps::name(v), Some(name));
        n += 1;
    }
    assert_eq!(n, berm::sys::caps::ALL.len());
}

#[test]
fn exec_fs_call_and_schedule_fields() {
    let mut h = Host::new(&HARNESS);
    h.use_schedule();
    h.stub("berm.exec.run", |f| {
        assert_eq!(f, [b"ls".to_vec(), b"".to_vec(), b"PATH".to_vec(), b"/bin".to_vec()]);
        Reply::ok(r#"{"stdout":"a\n"}"#)
    });
    h.stub("berm.fs.glob", |f| {
        assert_eq!(f, [b"*.md".to_vec()]);
        Reply::ok("a.md\nb/c.md\n")
    });
    h.stub("berm.fs.grep", |f| {
        assert_eq!(f, [b"fn".to_vec(), b"".to_vec()]);
        Reply::ok("x.rs:1:fn main")
    });
    h.stub("berm.call", |f| {
        assert_eq!(f, [b"other".to_vec(), b"t".to_vec(), b"{}".to_vec()]);
        Reply::ok("called")
    });
    h.stub("berm.fs.write", |f| Reply::ok(f[1].len().to_string()));
    // call.after sends "{}" for empty arguments (the C SDK's rule)
    assert_eq!(
        h.run("misc", "{}").unwrap_ok(),
        r#"{"stdout":"a\n"}|["a.md", "b/c.md"]|["x.rs:1:fn main"]|called|call-after|false|3"#
    );
    assert_eq!(
        h.schedule().call_after,
        Some(Sched::CallAfter { delay_ms: 5, harness: "other".into(), tool: "t".into(), args: "{}".into() })
    );
}

#[test]
fn the_protocol_door() {
    let mut h = Host::new(&HARNESS);
    // ServerMessage { response (3): SendResponse { content (2): "hi" } }, encoded by hand
    h.stub("crabtalk.protocol.send", |f| {
        // SendMsg { content (2): "hello" }
        assert_eq!(f, [b"\x12\x05hello".to_vec()]);
        Reply::ok(b"\x1a\x04\x12\x02hi")
    });
    assert_eq!(h.run("door", "send").unwrap_ok(), "hi");
    // ServerMessage { error (1): ErrorMsg { code (1): 404, message (2): "no agent" } }
    h.stub("crabtalk.protocol.get_agent", |_| Reply::ok(b"\x0a\x0d\x08\x94\x03\x12\x08no agent"));
    assert_eq!(h.run("door", "agent").unwrap_failed(), "daemon error 404: no agent");
    h.stub("crabtalk.protocol.subscribe_event", |f| {
        // SubscribeEvent { source (1): "mail", once (3): true }
        assert_eq!(f, [b"\x0a\x04mail\x18\x01".to_vec()]);
        // ServerMessage { subscription_info (25): { id (1): 7 } }
        Reply::ok(b"\xca\x01\x02\x08\x07")
    });
    assert_eq!(h.run("door", "sub").unwrap_ok(), "7");
    h.stub("crabtalk.protocol.ping", |f| {
        assert!(f.is_empty(), "ping sends no field");
        Reply::refused("protocol:read is not granted")
    });
    assert_eq!(h.run("door", "ping").unwrap_failed(), "refused: protocol:read is not granted");
}

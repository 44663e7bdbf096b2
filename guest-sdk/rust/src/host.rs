//! The stand-in host (native builds only): `cargo test` runs a harness's tools the way the
//! runtime does (src/harness/harness.ts). Arguments are pulled through `berm.args.len/read`,
//! results and failures leave through `berm.done`/`berm.fail` under the runtime's size limits,
//! capability replies are staged and read back with `berm.result.read`, and a panic in a tool
//! comes back as a failure carrying the panic message. Capabilities have no default behaviour: a
//! call to one without a stand-in panics the test, naming the capability.
//!
//! ```ignore
//! #[test]
//! fn greet_says_hello() {
//!     let mut host = berm::host::Host::new(&crate::HARNESS);
//!     host.stub("berm.fs.read", |f| berm::host::Reply::ok(b"file text"));
//!     let out = host.run("greet", r#"{"name":"ada"}"#).unwrap_ok();
//!     assert_eq!(out, "hello ada");
//!     assert!(host.logs()[0].contains("greet"));
//! }
//! ```
use crate::cap::{STAGED_ERROR, STAGED_REFUSED};
use crate::sys::caps;
use crate::Harness;
use std::any::Any;
use std::boxed::Box;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::format;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::string::{String, ToString};
use std::vec::Vec;

/// The reply a stand-in gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// success with these fields (one field is staged raw, any other count framed)
    Fields(Vec<Vec<u8>>),
    /// an error message (bit 63)
    Error(String),
    /// a refusal: nothing ran (bits 63 and 62)
    Refused(String),
}

impl Reply {
    /// Success with one field.
    pub fn ok(bytes: impl AsRef<[u8]>) -> Reply {
        Reply::Fields(std::vec![bytes.as_ref().to_vec()])
    }
    /// Success with no field (what `berm.set` answers, and `berm.get` for an absent key).
    pub fn empty() -> Reply {
        Reply::Fields(Vec::new())
    }
    /// An error message.
    pub fn error(msg: impl Into<String>) -> Reply {
        Reply::Error(msg.into())
    }
    /// A refusal.
    pub fn refused(msg: impl Into<String>) -> Reply {
        Reply::Refused(msg.into())
    }
    fn stage(&self) -> (Vec<u8>, u64) {
        match self {
            Reply::Fields(f) if f.len() == 1 => (f[0].clone(), f[0].len() as u64),
            Reply::Fields(f) => {
                let refs: Vec<&[u8]> = f.iter().map(|x| x.as_slice()).collect();
                let b = crate::cap::frame(&refs);
                let n = b.len() as u64;
                (b, n)
            }
            Reply::Error(m) => (m.as_bytes().to_vec(), m.len() as u64 | STAGED_ERROR),
            Reply::Refused(m) => (m.as_bytes().to_vec(), m.len() as u64 | STAGED_ERROR | STAGED_REFUSED),
        }
    }
}

/// How a run ended (a trap has no equivalent here: a panic is a failure, as on the guest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `berm.done` (or an ABI 0 return): the result text
    Ok(String),
    /// `berm.fail`: the failure message
    Failed(String),
}

impl Outcome {
    /// The result; panics (failing the test) with the failure message otherwise.
    #[track_caller]
    pub fn unwrap_ok(self) -> String {
        match self {
            Outcome::Ok(s) => s,
            Outcome::Failed(m) => panic!("the call failed: {}", m),
        }
    }
    /// The failure message; panics (failing the test) with the result otherwise.
    #[track_caller]
    pub fn unwrap_failed(self) -> String {
        match self {
            Outcome::Failed(m) => m,
            Outcome::Ok(s) => panic!("the call succeeded: {}", s),
        }
    }
    /// True for `Ok`.
    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok(_))
    }
}

/// Size limits of one call, bytes; the runtime's defaults (src/harness/harness.ts CallLimits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// largest argument payload (1 MiB)
    pub max_args: usize,
    /// largest result or failure message (4 MiB)
    pub max_result: usize,
    /// largest capability request (16 MiB): larger ones are refused
    pub max_request: usize,
    /// longest log line kept (4 KiB); longer lines are cut
    pub max_log_line: usize,
    /// most log lines kept per call (1000)
    pub max_log_lines: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_args: 1 << 20, max_result: 4 << 20, max_request: 16 << 20, max_log_line: 4096, max_log_lines: 1000 }
    }
}

/// A stand-in: the decoded request fields in, a reply out.
pub type StandIn = Box<dyn FnMut(&[Vec<u8>]) -> Reply>;

/// One scheduling call seen by the schedule stand-ins ([`Host::use_schedule`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sched {
    /// `berm.wake.arm`: delay, payload (None: no payload field), the id replied, and how many log
    /// lines the call had written before it (to check a re-arm came before the body's logs)
    Arm {
        /// ms
        delay_ms: u64,
        /// the payload field, if sent
        payload: Option<Vec<u8>>,
        /// the wake id replied
        id: String,
        /// berm.log lines written before this call in the same run
        logs_before: usize,
    },
    /// `berm.wake.cancel`: the id and whether a pending wake was removed
    Cancel {
        /// the id asked for
        id: String,
        /// a pending wake was removed
        cancelled: bool,
    },
    /// `berm.call.after`
    CallAfter {
        /// ms
        delay_ms: u64,
        /// callee harness
        harness: String,
        /// callee tool
        tool: String,
        /// arguments
        args: String,
    },
}

/// The in-memory due-set of the schedule stand-ins.
#[derive(Debug, Default, Clone)]
pub struct Schedule {
    /// every scheduling call, in order (across runs until [`Schedule::clear`])
    pub calls: Vec<Sched>,
    /// pending wakes by id: (delay ms, payload)
    pub pending: BTreeMap<String, (u64, Vec<u8>)>,
    /// the pending call.after, if any
    pub call_after: Option<Sched>,
    next: u64,
}

impl Schedule {
    /// Forget every pending wake, call.after and recorded call.
    pub fn clear(&mut self) {
        *self = Schedule::default();
    }
}

/// Per-run state of the stand-in host.
struct Call {
    args: Vec<u8>,
    staged: Vec<u8>,
    done: Option<Vec<u8>>,
    failed: Option<Vec<u8>>,
    logs: Vec<String>,
    dropped_logs: usize,
    limits: Limits,
}

/// A stand-in host for one harness: stand-ins, limits, and the logs of the last run.
pub struct Host {
    harness: &'static Harness,
    stubs: HashMap<u64, StandIn>,
    /// the call limits (the runtime's defaults)
    pub limits: Limits,
    logs: Vec<String>,
    schedule: Rc<RefCell<Schedule>>,
}

struct Current {
    call: *mut Call,
    stubs: *mut HashMap<u64, StandIn>,
}

std::thread_local! {
    static CURRENT: Cell<Option<*mut Current>> = const { Cell::new(None) };
    static IN_BODY: Cell<bool> = const { Cell::new(false) };
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A panic of the stand-in host itself (an ABI violation, a missing stand-in): it fails the test,
/// never the tool call.
struct HostAbort(String);

#[track_caller]
fn abort(msg: String) -> ! {
    panic::panic_any(HostAbort(msg))
}

fn install_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            if let Some(a) = payload.downcast_ref::<HostAbort>() {
                LAST_PANIC.with(|l| *l.borrow_mut() = Some(a.0.clone()));
                return; // Host::run panics again with this message, in the test's thread
            }
            let msg: &dyn core::fmt::Display = if let Some(s) = payload.downcast_ref::<&str>() {
                s
            } else if let Some(s) = payload.downcast_ref::<String>() {
                s
            } else {
                &"Box<dyn Any>"
            };
            // cut like the guest's panic handler, which formats into a fixed buffer
            let mut text = crate::rt::FixedBuf::<{ crate::rt::PANIC_TEXT_BYTES }>::new();
            crate::rt::panic_text(&mut text, info.location(), msg);
            LAST_PANIC.with(|l| *l.borrow_mut() = Some(text.as_str().to_string()));
            if !IN_BODY.with(|b| b.get()) || std::env::var_os("BERM_HOST_VERBOSE").is_some() {
                prev(info);
            }
        }));
    });
}

/// Run a tool body natively: a panic in it logs its message and fails the call with it, as the
/// guest's panic handler does; a panic of the stand-in host goes on to fail the test.
pub(crate) fn guarded(f: &mut dyn FnMut()) {
    install_hook();
    let outer = IN_BODY.with(|b| b.replace(true));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    IN_BODY.with(|b| b.set(outer));
    if let Err(p) = r {
        if p.is::<HostAbort>() {
            panic::resume_unwind(p);
        }
        let text = LAST_PANIC.with(|l| l.borrow_mut().take()).unwrap_or_else(|| "panicked".to_string());
        crate::rt::log(&text);
        crate::rt::fail(&text);
    }
}

fn read_mem(ptr: u64, len: u64) -> Vec<u8> {
    if len == 0 {
        return Vec::new();
    }
    // SAFETY: the SDK passes (ptr, len) of live buffers.
    unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize).to_vec() }
}

fn write_mem(ptr: u64, bytes: &[u8]) {
    if !bytes.is_empty() {
        // SAFETY: the SDK passes a buffer of at least bytes.len() (min of its capacity).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr as *mut u8, bytes.len()) }
    }
}

fn cap_name(n: u64) -> String {
    caps::name(n).map(String::from).unwrap_or_else(|| format!("{:#x}", n))
}

/// Answer one host call (the native `sys::hostcall`).
pub(crate) fn dispatch(n: u64, a: [u64; 6]) -> u64 {
    let Some(cur) = CURRENT.with(|c| c.get()) else {
        abort(format!(
            "host call {} outside berm::host::Host::run: run tools through a Host",
            cap_name(n)
        ))
    };
    // SAFETY: set by Host::run for the duration of the run, on this thread.
    let cur = unsafe { &mut *cur };
    let call = unsafe { &mut *cur.call };
    let lim = call.limits;
    match n {
        caps::ARGS_LEN => call.args.len() as u64,
        caps::ARGS_READ => {
            let k = call.args.len().min(a[1] as usize);
            write_mem(a[0], &call.args[..k]);
            call.args.len() as u64
        }
        caps::RESULT_READ => {
            let k = call.staged.len().min(a[1] as usize);
            write_mem(a[0], &call.staged[..k]);
            call.staged.len() as u64
        }
        caps::DONE | caps::FAIL => {
            let (what, name) =
                if n == caps::DONE { ("result", "berm.done") } else { ("failure message", "berm.fail") };
            if call.done.is_some() || call.failed.is_some() {
                abort(format!("{} after the result was already given", name));
            }
            if a[1] > lim.max_result as u64 {
                abort(format!("{} of {} bytes is over the limit of {}", what, a[1], lim.max_result));
            }
            let b = read_mem(a[0], a[1]);
            if n == caps::DONE {
                call.done = Some(b)
            } else {
                call.failed = Some(b)
            }
            0
        }
        caps::LOG => {
            if call.logs.len() >= lim.max_log_lines {
                call.dropped_logs += 1;
            } else {
                let b = read_mem(a[0], a[1].min(lim.max_log_line as u64));
                let line = String::from_utf8_lossy(&b).into_owned();
                if std::env::var_os("BERM_HOST_VERBOSE").is_some() {
                    std::eprintln!("[berm.log] {}", line);
                }
                call.logs.push(line);
            }
            0
        }
        caps::HEAP_START | caps::HEAP_SIZE => {
            abort(format!("{} is guest-only (natively the heap is the test's own)", cap_name(n)))
        }
        _ => {
            // SAFETY: as above.
            let stubs = unsafe { &mut *cur.stubs };
            let Some(stub) = stubs.get_mut(&n) else {
                abort(format!("capability {} has no stand-in (register one with Host::stub)", cap_name(n)))
            };
            let reply = if a[1] > lim.max_request as u64 {
                Reply::refused(format!("request of {} bytes is over the limit of {}", a[1], lim.max_request))
            } else {
                let req = read_mem(a[0], a[1]);
                match crate::cap::fields(&req) {
                    Some(f) => {
                        let owned: Vec<Vec<u8>> = f.iter().map(|x| x.to_vec()).collect();
                        stub(&owned)
                    }
                    None => Reply::refused("malformed request: the field framing is broken"),
                }
            };
            let (bytes, word) = reply.stage();
            call.staged = bytes;
            word
        }
    }
}

/// The number of `berm.log` lines written so far in the current run (0 outside a run).
pub fn logs_so_far() -> usize {
    CURRENT.with(|c| c.get()).map(|p| unsafe { (*(*p).call).logs.len() }).unwrap_or(0)
}

fn text(f: &[u8]) -> String {
    String::from_utf8_lossy(f).into_owned()
}

impl Host {
    /// A stand-in host for `harness` (the `HARNESS` static [`crate::harness!`] defines), with no
    /// stand-ins and the runtime's default limits.
    pub fn new(harness: &'static Harness) -> Host {
        Host {
            harness,
            stubs: HashMap::new(),
            limits: Limits::default(),
            logs: Vec::new(),
            schedule: Rc::new(RefCell::new(Schedule::default())),
        }
    }

    /// Install the stand-in for capability `name` (e.g. `"berm.fs.read"`), replacing any other.
    /// Panics for a name the SDK does not know.
    pub fn stub(&mut self, name: &str, f: impl FnMut(&[Vec<u8>]) -> Reply + 'static) -> &mut Host {
        let n = crate::sys::fnv1a64(name);
        assert!(caps::name(n).is_some(), "berm::host: no capability named {}", name);
        self.stubs.insert(n, Box::new(f));
        self
    }

    /// Remove the stand-in for `name`.
    pub fn unstub(&mut self, name: &str) -> &mut Host {
        self.stubs.remove(&crate::sys::fnv1a64(name));
        self
    }

    /// Stand-ins for `berm.get`/`berm.set`/`berm.delete` over one in-memory map (shared by
    /// later runs of this Host), answering as the runtime does (get: one field, or none when
    /// absent).
    pub fn use_memory_storage(&mut self) -> &mut Host {
        let kv: Rc<RefCell<BTreeMap<Vec<u8>, Vec<u8>>>> = Rc::default();
        let (g, s, d) = (kv.clone(), kv.clone(), kv);
        self.stub("berm.get", move |f| match f {
            [k] => g.borrow().get(k).map(Reply::ok).unwrap_or_else(Reply::empty),
            _ => Reply::refused("berm.get takes (key)"),
        });
        self.stub("berm.set", move |f| match f {
            [k, v] => {
                s.borrow_mut().insert(k.clone(), v.clone());
                Reply::empty()
            }
            _ => Reply::refused("berm.set takes (key, value)"),
        });
        self.stub("berm.delete", move |f| match f {
            [k] => {
                d.borrow_mut().remove(k);
                Reply::empty()
            }
            _ => Reply::refused("berm.delete takes (key)"),
        })
    }

    /// Stand-ins for `berm.now` (`now_ms`) and `berm.clock.offset` (`offset_s`).
    pub fn use_fixed_clock(&mut self, now_ms: i64, offset_s: i64) -> &mut Host {
        self.stub("berm.now", move |_| Reply::ok(now_ms.to_string()));
        self.stub("berm.clock.offset", move |_| Reply::ok(offset_s.to_string()))
    }

    /// Stand-ins for `berm.wake.arm`, `berm.wake.cancel` and `berm.call.after` over an in-memory
    /// due-set ([`Host::schedule`]), answering as the runtime does: arm replies the wake id (the
    /// one given, else `wake-<n>`) and replaces a pending wake of the same id; cancel replies
    /// `1`/`0`; call.after replies `call-after`; an empty id, harness or tool is refused.
    pub fn use_schedule(&mut self) -> &mut Host {
        let (a, c, ca) = (self.schedule.clone(), self.schedule.clone(), self.schedule.clone());
        self.stub("berm.wake.arm", move |f| {
            let mut s = a.borrow_mut();
            let Some(delay) = f.first().and_then(|d| text(d).parse::<u64>().ok()) else {
                return Reply::refused("berm.wake.arm: the delay is not a decimal integer");
            };
            if f.len() > 3 {
                return Reply::refused("berm.wake.arm takes (delay_ms[, payload[, id]])");
            }
            let id = match f.get(2) {
                Some(i) if i.is_empty() => return Reply::refused("berm.wake.arm: empty wake id"),
                Some(i) => text(i),
                None => {
                    s.next += 1;
                    format!("wake-{}", s.next)
                }
            };
            let payload = f.get(1).cloned();
            s.pending.insert(id.clone(), (delay, payload.clone().unwrap_or_default()));
            s.calls.push(Sched::Arm { delay_ms: delay, payload, id: id.clone(), logs_before: logs_so_far() });
            Reply::ok(id)
        });
        self.stub("berm.wake.cancel", move |f| {
            let mut s = c.borrow_mut();
            let [id] = f else { return Reply::refused("berm.wake.cancel takes (id)") };
            if id.is_empty() {
                return Reply::refused("berm.wake.cancel: empty wake id");
            }
            let cancelled = s.pending.remove(&text(id)).is_some();
            s.calls.push(Sched::Cancel { id: text(id), cancelled });
            Reply::ok(if cancelled { "1" } else { "0" })
        });
        self.stub("berm.call.after", move |f| {
            let mut s = ca.borrow_mut();
            let [d, h, t, args] = f else {
                return Reply::refused("berm.call.after takes (delay_ms, harness, tool, args_json)");
            };
            let Ok(delay) = text(d).parse::<u64>() else {
                return Reply::refused("berm.call.after: the delay is not a decimal integer");
            };
            if h.is_empty() || t.is_empty() {
                return Reply::refused("berm.call.after: empty harness or tool");
            }
            let e = Sched::CallAfter { delay_ms: delay, harness: text(h), tool: text(t), args: text(args) };
            s.call_after = Some(e.clone());
            s.calls.push(e);
            Reply::ok("call-after")
        })
    }

    /// The due-set of the schedule stand-ins.
    pub fn schedule(&self) -> std::cell::RefMut<'_, Schedule> {
        self.schedule.borrow_mut()
    }

    /// The `berm.log` lines of the last run (plus a note when lines past the limit were dropped).
    pub fn logs(&self) -> &[String] {
        &self.logs
    }

    /// The manifest (`.berm.abi` JSON text) this harness declares.
    pub fn manifest(&self) -> &'static str {
        core::str::from_utf8(self.harness.manifest).expect("the manifest is UTF-8")
    }

    /// Run tool `tool` with JSON arguments `args`, as `berm call` would.
    #[track_caller]
    pub fn run(&mut self, tool: &str, args: &str) -> Outcome {
        self.run_bytes(tool, args.as_bytes())
    }

    /// Run tool `tool` with these exact argument bytes.
    #[track_caller]
    pub fn run_bytes(&mut self, tool: &str, args: &[u8]) -> Outcome {
        let Some((_, export)) = self.harness.tools.iter().find(|(n, _)| *n == tool) else {
            let known: Vec<&str> = self.harness.tools.iter().map(|(n, _)| *n).collect();
            panic!("no tool named {} (tools: {})", tool, if known.is_empty() { "none".into() } else { known.join(", ") });
        };
        self.invoke(*export, args, Some(tool))
    }

    /// Run the harness's `on_wake` with the record the runtime builds (docs/wakes.md).
    #[track_caller]
    pub fn wake(&mut self, id: &str, scheduled_at: i64, now: i64, attempt: u64, payload: &str) -> Outcome {
        let mut r = String::from("{\"id\":");
        crate::json::push_string(&mut r, id);
        r.push_str(&format!(",\"scheduled_at\":{},\"now\":{},\"attempt\":{},\"payload\":", scheduled_at, now, attempt));
        crate::json::push_string(&mut r, payload);
        r.push('}');
        self.run_entry("on_wake", r.as_bytes())
    }

    /// Run the harness's `on_notify` with the record the runtime builds (docs/wakes.md).
    #[track_caller]
    pub fn notify(&mut self, id: &str, source: &str, payload: &str, now: i64, attempt: u64) -> Outcome {
        let mut r = String::from("{\"id\":");
        crate::json::push_string(&mut r, id);
        r.push_str(",\"source\":");
        crate::json::push_string(&mut r, source);
        r.push_str(",\"payload\":");
        crate::json::push_string(&mut r, payload);
        r.push_str(&format!(",\"now\":{},\"attempt\":{}}}", now, attempt));
        self.run_entry("on_notify", r.as_bytes())
    }

    /// Run `"on_wake"` or `"on_notify"` with these exact record bytes. Panics when the harness
    /// declares no such entry.
    #[track_caller]
    pub fn run_entry(&mut self, entry: &str, record: &[u8]) -> Outcome {
        let e = match entry {
            "on_wake" => self.harness.on_wake,
            "on_notify" => self.harness.on_notify,
            _ => panic!("berm::host: no entry named {} (on_wake, on_notify)", entry),
        };
        let Some(e) = e else { panic!("the harness exports no function {}", entry) };
        self.invoke(e, record, None)
    }

    #[track_caller]
    fn invoke(&mut self, export: crate::rt::Export, args: &[u8], tool: Option<&str>) -> Outcome {
        install_hook();
        if args.len() > self.limits.max_args {
            panic!("arguments of {} bytes are over the limit of {}", args.len(), self.limits.max_args);
        }
        let mut call = Call {
            args: args.to_vec(),
            staged: Vec::new(),
            done: None,
            failed: None,
            logs: Vec::new(),
            dropped_logs: 0,
            limits: self.limits,
        };
        let mut cur = Current { call: &mut call, stubs: &mut self.stubs };
        *crate::rt::state() = crate::rt::State::new();
        let prev = CURRENT.with(|c| c.replace(Some(&mut cur as *mut Current)));
        let r = panic::catch_unwind(AssertUnwindSafe(|| export()));
        CURRENT.with(|c| c.set(prev));
        self.logs = std::mem::take(&mut call.logs);
        if call.dropped_logs > 0 {
            self.logs.push(format!(
                "[berm: {} more log line(s) dropped; the limit is {} per call]",
                call.dropped_logs, self.limits.max_log_lines
            ));
        }
        let ret = match r {
            Ok(ret) => ret,
            Err(p) => {
                let msg = host_abort_text(&p);
                match msg {
                    Some(m) => panic!("{}", m),
                    None => panic::resume_unwind(p),
                }
            }
        };
        if let Some(f) = call.failed {
            return Outcome::Failed(String::from_utf8_lossy(&f).into_owned());
        }
        let mut out = call.done;
        if tool.is_none() && out.is_none() {
            out = Some(Vec::new());
        }
        #[cfg(feature = "abi0")]
        if out.is_none() {
            if ret.len > self.limits.max_result as u64 {
                panic!("result of {} bytes is over the limit of {}", ret.len, self.limits.max_result);
            }
            out = Some(read_mem(ret.ptr, ret.len));
        }
        let _ = ret;
        let Some(out) = out else {
            panic!("tool {} returned without calling berm.done or berm.fail", tool.unwrap_or("?"))
        };
        match String::from_utf8(out) {
            Ok(s) => Outcome::Ok(s),
            Err(_) => panic!("{} returned a result that is not valid UTF-8", tool.unwrap_or("the entry")),
        }
    }
}

fn host_abort_text(p: &Box<dyn Any + Send>) -> Option<String> {
    p.downcast_ref::<HostAbort>().map(|a| a.0.clone())
}

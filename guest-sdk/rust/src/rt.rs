//! The per-call runtime: argument transfer, the result and failure channel, logs, the heap, the
//! panic path and the entry wrappers the [`crate::harness!`] macro expands to.
//!
//! Every call runs in a fresh instance (statics start at their initial values), so the state below
//! is per call on the guest; natively it is per thread and reset by the stand-in host before each
//! run.
use crate::sys::{call2, caps};
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// Per-call state.
pub(crate) struct State {
    /// 0 nothing yet, 1 done, 2 failed
    pub finished: u8,
    /// ABI 0: the result a tool export returns in a0/a1
    pub res: (u64, u64),
    /// the arguments once pulled
    pub args: Option<&'static [u8]>,
}

impl State {
    pub(crate) const fn new() -> State {
        State { finished: 0, res: (0, 0), args: None }
    }
}

#[cfg(berm_guest)]
static mut STATE: State = State::new();

#[cfg(berm_guest)]
pub(crate) fn state() -> &'static mut State {
    // SAFETY: one thread per instance; no reference outlives a single SDK function.
    unsafe { &mut *core::ptr::addr_of_mut!(STATE) }
}

#[cfg(not(berm_guest))]
std::thread_local! {
    static STATE: core::cell::UnsafeCell<State> = const { core::cell::UnsafeCell::new(State::new()) };
}

#[cfg(not(berm_guest))]
pub(crate) fn state() -> &'static mut State {
    // SAFETY: per thread; no reference outlives a single SDK function.
    STATE.with(|s| unsafe { &mut *s.get() })
}

/// The tool's arguments (JSON text as the runtime sends it), pulled on first use with
/// `berm.args.len` + `berm.args.read` into the heap. Later calls return the same bytes.
pub fn args() -> &'static [u8] {
    let st = state();
    if let Some(a) = st.args {
        return a;
    }
    let n = call2(caps::ARGS_LEN, 0, 0) as usize;
    let mut buf: Vec<u8> = Vec::with_capacity(n);
    let got = call2(caps::ARGS_READ, buf.as_mut_ptr() as u64, n as u64) as usize;
    // The arguments cannot change during a call; keep what was copied if they did.
    // SAFETY: the host wrote min(got, n) bytes into the buffer.
    unsafe { buf.set_len(got.min(n)) };
    let a: &'static [u8] = buf.leak();
    state().args = Some(a);
    a
}

/// Finish the call with `result` (UTF-8 text for a tool). Ignored when the call already finished
/// (a second `berm.done` would be an ABI violation).
pub fn done(result: &[u8]) {
    let st = state();
    if st.finished != 0 {
        return;
    }
    st.finished = 1;
    if crate::ABI == 1 {
        call2(caps::DONE, result.as_ptr() as u64, result.len() as u64);
    } else {
        // ABI 0: the export returns (ptr, len) after the body, so the bytes must outlive it.
        let keep: &'static [u8] = result.to_vec().leak();
        st.res = (keep.as_ptr() as u64, keep.len() as u64);
    }
}

/// Fail the call with `message` (what the caller, often a model, sees). Ignored when the call
/// already finished.
pub fn fail(message: &str) {
    let st = state();
    if st.finished != 0 {
        return;
    }
    st.finished = 2;
    call2(caps::FAIL, message.as_ptr() as u64, message.len() as u64);
}

/// True once [`done`] or [`fail`] finished the call.
pub fn finished() -> bool {
    state().finished != 0
}

/// One host-side debug line (`berm.log`; the runtime keeps up to 4 KiB of it).
pub fn log(line: &str) {
    call2(caps::LOG, line.as_ptr() as u64, line.len() as u64);
}

/// A fixed buffer that formats without the heap (the panic path must not need it), cutting at a
/// character boundary when full.
pub(crate) struct FixedBuf<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> FixedBuf<N> {
    pub(crate) const fn new() -> Self {
        FixedBuf { buf: [0; N], len: 0 }
    }
    pub(crate) fn as_str(&self) -> &str {
        // SAFETY: only whole UTF-8 characters are ever appended.
        unsafe { core::str::from_utf8_unchecked(&self.buf[..self.len]) }
    }
}

impl<const N: usize> Write for FixedBuf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut take = s.len().min(N - self.len);
        while !s.is_char_boundary(take) {
            take -= 1;
        }
        self.buf[self.len..self.len + take].copy_from_slice(&s.as_bytes()[..take]);
        self.len += take;
        Ok(())
    }
}

/// What a tool handler may return in `Ok`: the result bytes (UTF-8 text for the runtime).
pub trait Output {
    /// Finish the call with this value through [`done`].
    fn finish(self);
}
impl Output for String {
    fn finish(self) {
        done(self.as_bytes())
    }
}
impl Output for &str {
    fn finish(self) {
        done(self.as_bytes())
    }
}
impl Output for Vec<u8> {
    fn finish(self) {
        done(&self)
    }
}
impl Output for &[u8] {
    fn finish(self) {
        done(self)
    }
}
/// `Ok(())`: an empty result.
impl Output for () {
    fn finish(self) {
        done(b"")
    }
}

/// Fail with a Display value (an `Err` of a handler).
pub fn fail_display(e: &dyn fmt::Display) {
    let mut s = String::new();
    let _ = write!(s, "{}", e);
    fail(&s);
}

/// The `(a0, a1)` pair an ABI 0 tool export returns: the result's address and length, (0, 0)
/// after a failure.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pair {
    /// a0
    pub ptr: u64,
    /// a1
    pub len: u64,
}

/// The return type of entry exports: nothing under ABI 1, [`Pair`] under ABI 0.
#[cfg(not(feature = "abi0"))]
pub type Ret = ();
/// The return type of entry exports: nothing under ABI 1, [`Pair`] under ABI 0.
#[cfg(feature = "abi0")]
pub type Ret = Pair;

/// An entry export (`berm_tool_<name>`, `on_wake`, `on_notify`) as the runtime calls it.
#[cfg(berm_guest)]
pub type Export = extern "C" fn() -> Ret;
/// An entry export (`berm_tool_<name>`, `on_wake`, `on_notify`) as the stand-in host calls it
/// (natively, "C-unwind" so a test's failing stand-in can unwind to the test).
#[cfg(not(berm_guest))]
pub type Export = extern "C-unwind" fn() -> Ret;

fn leave(what: &str) -> Ret {
    if state().finished == 0 {
        let mut m = FixedBuf::<200>::new();
        let _ = write!(m, "tool {} returned without berm_done or berm_fail", what);
        fail(m.as_str());
    }
    #[cfg(feature = "abi0")]
    {
        let st = state();
        if st.finished == 1 {
            return Pair { ptr: st.res.0, len: st.res.1 };
        }
        Pair { ptr: 0, len: 0 }
    }
}

/// The body of a tool export: pull the arguments, run the handler under the panic guard, turn its
/// `Ok` into `berm.done` and its `Err` (or a panic) into `berm.fail`.
#[doc(hidden)]
pub fn run_tool<R: Output, E: fmt::Display>(name: &str, handler: fn(&str) -> Result<R, E>) -> Ret {
    guarded(&mut || {
        let a = args();
        let Ok(text) = core::str::from_utf8(a) else {
            return fail("the arguments are not valid UTF-8");
        };
        match handler(text) {
            Ok(r) => r.finish(),
            Err(e) => fail_display(&e),
        }
    });
    leave(name)
}

/// The body of the `on_wake` / `on_notify` exports: `body` runs under the panic guard; returning
/// without a result is ok (an empty one), as docs/wakes.md asks.
#[doc(hidden)]
pub fn run_entry(body: &mut dyn FnMut()) -> Ret {
    guarded(body);
    done(b"");
    leave("entry")
}

// ---- the panic guard ---------------------------------------------------------------------------

/// Run `f`. On the guest a panic inside it logs its message, fails the call with it and stops with
/// `ebreak`: the runtime reads a breakpoint after `berm.fail` as that failure (src/harness), so a
/// panic comes back as a failure carrying its message, not as a bare trap. (Translated code has
/// one Wasm frame per guest function, so no setjmp/longjmp-style return to the export exists.)
#[cfg(berm_guest)]
pub(crate) fn guarded(f: &mut dyn FnMut()) {
    f()
}

#[cfg(not(berm_guest))]
pub(crate) fn guarded(f: &mut dyn FnMut()) {
    crate::host::guarded(f)
}

/// Most bytes of a panic's failure text, guest and stand-in host alike (the guest's panic handler
/// formats into a fixed buffer of this size: it may not allocate).
pub(crate) const PANIC_TEXT_BYTES: usize = 1024;

/// The panic message as both the guest and the stand-in host report it:
/// `panicked at FILE:LINE:COL: MESSAGE`, cut to [`PANIC_TEXT_BYTES`] by the caller's buffer.
pub(crate) fn panic_text<W: Write>(
    w: &mut W,
    loc: Option<&core::panic::Location<'_>>,
    msg: &dyn fmt::Display,
) {
    let _ = match loc {
        Some(l) => write!(w, "panicked at {}:{}:{}: {}", l.file(), l.line(), l.column(), msg),
        None => write!(w, "panicked: {}", msg),
    };
}

#[cfg(berm_guest)]
#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    // No heap here: the panic may be an allocation failure.
    let mut m = FixedBuf::<PANIC_TEXT_BYTES>::new();
    panic_text(&mut m, info.location(), &info.message());
    log(m.as_str());
    fail(m.as_str());
    loop {
        // SAFETY: a breakpoint ends the call; after berm.fail the runtime reports the failure.
        unsafe { core::arch::asm!("ebreak") }
    }
}

// ---- the heap -----------------------------------------------------------------------------------

/// A bump allocator over [berm.heap.start, +berm.heap.size), asked on the first allocation (a
/// call that never allocates never asks). Memory is never reused, except that freeing or growing
/// the most recent block works in place; each call's instance starts with a fresh heap.
#[cfg(berm_guest)]
pub struct BumpHeap;

#[cfg(berm_guest)]
static mut HEAP: (u64, u64) = (0, 0); // (next, end); next == 0: not asked yet

#[cfg(berm_guest)]
fn heap() -> &'static mut (u64, u64) {
    // SAFETY: one thread per instance.
    let h = unsafe { &mut *core::ptr::addr_of_mut!(HEAP) };
    if h.0 == 0 {
        let start = call2(caps::HEAP_START, 0, 0);
        let size = call2(caps::HEAP_SIZE, 0, 0);
        *h = (start.max(1), start.saturating_add(size));
    }
    h
}

/// Bytes left on the heap (asks the host for its bounds on first use). Natively: `u64::MAX`.
pub fn heap_remaining() -> u64 {
    #[cfg(berm_guest)]
    {
        let h = heap();
        h.1.saturating_sub(h.0)
    }
    #[cfg(not(berm_guest))]
    u64::MAX
}

#[cfg(berm_guest)]
unsafe impl core::alloc::GlobalAlloc for BumpHeap {
    unsafe fn alloc(&self, l: core::alloc::Layout) -> *mut u8 {
        let h = heap();
        let align = (l.align() as u64).max(8);
        let p = match h.0.checked_add(align - 1) {
            Some(x) => x & !(align - 1),
            None => return core::ptr::null_mut(),
        };
        if p > h.1 || h.1 - p < l.size() as u64 {
            return core::ptr::null_mut();
        }
        h.0 = p + l.size() as u64;
        p as *mut u8
    }
    unsafe fn dealloc(&self, ptr: *mut u8, l: core::alloc::Layout) {
        let h = heap();
        if ptr as u64 + l.size() as u64 == h.0 {
            h.0 = ptr as u64; // the most recent block: give it back
        }
    }
    unsafe fn realloc(&self, ptr: *mut u8, l: core::alloc::Layout, new: usize) -> *mut u8 {
        let h = heap();
        if ptr as u64 + l.size() as u64 == h.0 && h.1 - ptr as u64 >= new as u64 {
            h.0 = ptr as u64 + new as u64; // the most recent block grows or shrinks in place
            return ptr;
        }
        let n = core::alloc::Layout::from_size_align_unchecked(new, l.align());
        let q = self.alloc(n);
        if !q.is_null() {
            core::ptr::copy_nonoverlapping(ptr, q, l.size().min(new));
        }
        q
    }
}

#[cfg(berm_guest)]
#[global_allocator]
static ALLOCATOR: BumpHeap = BumpHeap;

// ---- _start -------------------------------------------------------------------------------------

#[cfg(berm_guest)]
extern "Rust" {
    /// Defined by the harness! macro; references every export, so --gc-sections keeps them.
    #[link_name = "__berm_harness"]
    static HARNESS: crate::Harness;
}

/// Not an entry point (it fails the call): the ELF entry, which the linker keeps, and through the
/// harness table every export with it.
#[cfg(berm_guest)]
#[no_mangle]
#[link_section = ".text.berm_start"]
pub extern "C" fn _start() -> ! {
    // Only the address is taken; black_box keeps the reference (and so the table) alive.
    core::hint::black_box(core::ptr::addr_of!(HARNESS));
    fail("_start is not an entry point: call a berm_tool_<name> export");
    loop {
        // SAFETY: stop here (a trap).
        unsafe { core::arch::asm!("ebreak") }
    }
}

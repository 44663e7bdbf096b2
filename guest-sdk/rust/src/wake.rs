//! Wakes and notifications (docs/wakes.md). A harness that declares `on_wake` in
//! [`crate::harness!`] exports `on_wake`, which receives a [`Wake`] record; `on_notify` receives a
//! [`Notify`]. Records are pulled like tool arguments, as JSON:
//! wake `{"id","scheduled_at","now","attempt","payload"}`, notify
//! `{"id","source","payload","now","attempt"}` (ms since the Unix epoch; `attempt` ≥ 1, > 1 on a
//! redelivery). Unknown members are ignored, so the runtime may add fields.
use crate::json::{self, Value};
use alloc::string::String;

/// One wake occurrence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    /// the wake id
    pub id: String,
    /// when it was due, ms since the Unix epoch
    pub scheduled_at: i64,
    /// when this delivery started, ms since the Unix epoch
    pub now: i64,
    /// 1 on the first delivery; > 1 when this occurrence may have run before
    pub attempt: u64,
    /// the payload given when armed ("" if none)
    pub payload: String,
}

/// One event of a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    /// the subscription id
    pub id: String,
    /// the event source
    pub source: String,
    /// the event payload
    pub payload: String,
    /// ms since the Unix epoch
    pub now: i64,
    /// 1 on the first delivery
    pub attempt: u64,
}

#[derive(Default)]
struct Fields {
    id: Option<String>,
    source: Option<String>,
    payload: Option<String>,
    scheduled_at: Option<i64>,
    now: Option<i64>,
    attempt: Option<i64>,
    twice: bool,
}

fn read(text: &[u8]) -> Option<Fields> {
    let mut f = Fields::default();
    json::object(text, |k, v| {
        let twice = &mut f.twice;
        fn put<T>(slot: &mut Option<T>, v: Option<T>, twice: &mut bool) {
            if slot.is_some() {
                *twice = true; // a member given twice is ambiguous
            }
            *slot = v;
        }
        let s = |v: &Value| if let Value::Str(s) = v { Some(s.clone()) } else { None };
        let n = |v: &Value| if let Value::Int(n) = v { Some(*n) } else { None };
        match k {
            "id" => put(&mut f.id, s(&v), twice),
            "source" => put(&mut f.source, s(&v), twice),
            "payload" => put(&mut f.payload, s(&v), twice),
            "scheduled_at" => put(&mut f.scheduled_at, n(&v), twice),
            "now" => put(&mut f.now, n(&v), twice),
            "attempt" => put(&mut f.attempt, n(&v), twice),
            _ => {}
        }
    })?;
    (!f.twice).then_some(f)
}

fn bad_record(entry: &str, text: &[u8]) {
    let cut = &text[..text.len().min(200)];
    crate::fail!(
        "{}: malformed record (want the fields of docs/wakes.md): {}",
        entry,
        String::from_utf8_lossy(cut)
    );
}

impl Wake {
    /// Parse a wake record; `None` when a field is missing, has the wrong type, or `attempt` < 1.
    pub fn parse(text: &[u8]) -> Option<Wake> {
        let f = read(text)?;
        let attempt = f.attempt.filter(|a| *a >= 1)? as u64;
        Some(Wake { id: f.id?, scheduled_at: f.scheduled_at?, now: f.now?, attempt, payload: f.payload? })
    }
    /// The record of this call (its arguments); fails the call when malformed.
    #[doc(hidden)]
    pub fn from_args() -> Option<Wake> {
        let a = crate::args();
        let w = Wake::parse(a);
        if w.is_none() {
            bad_record("on_wake", a);
        }
        w
    }
    /// True (and logs why) when this occurrence is more than `max_late_ms` late, e.g. after
    /// downtime: `if w.is_late(5000) { return Ok(()) }` skips stale work.
    pub fn is_late(&self, max_late_ms: i64) -> bool {
        let late = self.now - self.scheduled_at;
        if late <= max_late_ms {
            return false;
        }
        crate::log!("wake {}: {} ms late (limit {} ms): skipped", self.id, late, max_late_ms);
        true
    }
}

impl Notify {
    /// Parse a notify record; `None` when a field is missing, has the wrong type, or `attempt` < 1.
    pub fn parse(text: &[u8]) -> Option<Notify> {
        let f = read(text)?;
        let attempt = f.attempt.filter(|a| *a >= 1)? as u64;
        Some(Notify { id: f.id?, source: f.source?, payload: f.payload?, now: f.now?, attempt })
    }
    /// The record of this call (its arguments); fails the call when malformed.
    #[doc(hidden)]
    pub fn from_args() -> Option<Notify> {
        let a = crate::args();
        let n = Notify::parse(a);
        if n.is_none() {
            bad_record("on_notify", a);
        }
        n
    }
}

/// Scheduling (`berm.wake.arm`, `berm.wake.cancel`, `berm.call.after`; the `schedule` grant).
pub mod schedule {
    use super::Wake;
    use crate::cap::{invoke, CapError, CapResult};
    use crate::sys::caps;
    use alloc::string::{String, ToString};

    fn text(b: alloc::vec::Vec<u8>) -> CapResult<String> {
        String::from_utf8(b).map_err(|_| CapError::Failed("berm sdk: the reply is not UTF-8".to_string()))
    }

    /// Wake this harness's `on_wake` in `delay_ms` with `payload`; `id` names the wake (arming an
    /// id again replaces the pending one). The wake id.
    pub fn arm(delay_ms: u64, payload: Option<&[u8]>, id: Option<&str>) -> CapResult<String> {
        let d = delay_ms.to_string();
        let p = payload.unwrap_or(b"");
        match id.filter(|i| !i.is_empty()) {
            Some(i) => text(invoke(caps::WAKE_ARM, &[d.as_bytes(), p, i.as_bytes()])?),
            None if payload.is_some() => text(invoke(caps::WAKE_ARM, &[d.as_bytes(), p])?),
            None => text(invoke(caps::WAKE_ARM, &[d.as_bytes()])?),
        }
    }

    /// Cancel the pending wake `id`: true when one was pending.
    pub fn cancel(id: &str) -> CapResult<bool> {
        Ok(invoke(caps::WAKE_CANCEL, &[id.as_bytes()])? == b"1")
    }

    /// Call `tool` of `harness` with `args_json` ("" = `{}`) in `delay_ms`. Its id.
    pub fn call_after(delay_ms: u64, harness: &str, tool: &str, args_json: &str) -> CapResult<String> {
        let d = delay_ms.to_string();
        let a = if args_json.is_empty() { "{}" } else { args_json };
        text(invoke(caps::CALL_AFTER, &[d.as_bytes(), harness.as_bytes(), tool.as_bytes(), a.as_bytes()])?)
    }

    /// Re-arm `w.id` for its next occurrence, keeping the schedule's phase: due at
    /// `scheduled_at + k * period_ms`, the first such instant after `now`, with `payload` (None:
    /// the same payload). Logs and returns the error when re-arming fails. `on_wake(every = P): f`
    /// in [`crate::harness!`] calls this before the body.
    pub fn every(w: &Wake, period_ms: u64, payload: Option<&[u8]>) -> CapResult<String> {
        if period_ms == 0 {
            crate::log("berm::schedule::every: period 0 ms: the schedule is not re-armed");
            return Err(CapError::Refused("period 0 ms".to_string()));
        }
        let late = if w.now > w.scheduled_at { (w.now - w.scheduled_at) as u64 } else { 0 };
        let delay = period_ms - late % period_ms;
        let r = arm(delay, Some(payload.unwrap_or(w.payload.as_bytes())), Some(&w.id));
        if let Err(e) = &r {
            crate::log!(
                "berm::schedule::every: re-arming wake {} {}: {}",
                w.id,
                if e.is_refused() { "was refused" } else { "failed" },
                e.message()
            );
        }
        r
    }
}

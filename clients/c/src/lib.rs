//! zlink's C ABI client (issue 22 item 4; docs/clients.md "C ABI"): what
//! Unity loads through P/Invoke and Unreal through C++. The header,
//! include/zlink.h, is generated from this file by cbindgen (build.rs).
//!
//! Game engines own their threads, so the client never makes one and
//! never blocks: the game loop calls [`zlink_poll`] once a frame, which
//! does all the I/O the socket allows and checks every deadline and timer,
//! then reads what happened with [`zlink_next_event`]. The client itself is
//! `client::Client`, in safe Rust; this file is its C face:
//!
//! - every pointer is checked for null (`ZLINK_E_NULL`);
//! - no panic crosses the boundary: every entry point runs inside
//!   `catch_unwind`, and a client that panicked is poisoned
//!   (`ZLINK_E_PANIC` from then on) rather than left half-updated;
//! - every buffer passed in is copied before the call returns; every buffer
//!   handed out is owned by the client until the next `zlink_next_event`,
//!   `zlink_poll`, `zlink_wait` or `zlink_client_free` on it;
//! - a request callback runs inside `zlink_poll` (or `zlink_close`,
//!   `zlink_client_free`) on the caller's thread, and may call
//!   `zlink_request`, `zlink_send` and `zlink_close`, not the calls that
//!   would free the event it is reading (`ZLINK_E_REENTRANT`).
#![allow(non_camel_case_types)]
#![warn(missing_docs, unsafe_op_in_unsafe_fn)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod client;

use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use zlink::client::CloseReason;
use zlink::error::{ErrorKind, Reason};

use client::{Backoff, Cause, Client, Event, Failure, Options, Refused, State};

// ---- status codes ---------------------------------------------------------

/// Success.
pub const ZLINK_OK: i32 = 0;
/// A pointer argument was null (or a payload pointer null with a length).
pub const ZLINK_E_NULL: i32 = -1;
/// No logged-in connection (connecting, logging in, reconnecting): nothing
/// was sent; safe to retry once `LOGGED_IN` came.
pub const ZLINK_E_NOT_CONNECTED: i32 = -2;
/// The client is closed for good: nothing was sent.
pub const ZLINK_E_CLOSED: i32 = -3;
/// The frame would exceed `frame_len_max`: nothing was sent.
pub const ZLINK_E_TOO_LARGE: i32 = -4;
/// `max_in_flight` requests in flight, or `outbound_max` bytes unsent:
/// nothing was sent.
pub const ZLINK_E_QUEUE_FULL: i32 = -5;
/// An argument is out of range (the options, a call in the wrong state).
pub const ZLINK_E_INVALID: i32 = -6;
/// Called from inside a request callback where that is not allowed.
pub const ZLINK_E_REENTRANT: i32 = -7;
/// The client panicked inside (a bug): it is unusable; free it.
pub const ZLINK_E_PANIC: i32 = -8;

// ---- events ---------------------------------------------------------------

/// `zlink_event.kind`: the connection is open and the login succeeded
/// (`payload`: the login's reply; `reconnect`: 1 after a reconnect).
pub const ZLINK_EVENT_LOGGED_IN: u32 = 1;
/// `zlink_event.kind`: a request ended (`request_id`; `error_kind` 0 and
/// `payload` the reply, or `error_kind`/`error_reason` the failure).
pub const ZLINK_EVENT_REPLY: u32 = 2;
/// `zlink_event.kind`: a push from a bound Actor (`key`, `payload`).
pub const ZLINK_EVENT_PUSH: u32 = 3;
/// `zlink_event.kind`: a logged-in connection ended, or the client closed
/// for good (`cause`, `close_reason`, `will_reconnect`).
pub const ZLINK_EVENT_CLOSED: u32 = 4;
/// `zlink_event.kind`: a reconnect attempt is scheduled (`attempt` from 1,
/// `delay_ms`).
pub const ZLINK_EVENT_RECONNECTING: u32 = 5;
/// `zlink_event.kind`: a reconnect attempt failed (`attempt`, `cause`, and
/// for `ZLINK_CAUSE_LOGIN_FAILED` the login's `error_kind`/`error_reason`).
pub const ZLINK_EVENT_RECONNECT_FAILED: u32 = 6;

/// `zlink_event.cause`: the server sent a Close frame (`close_reason`).
pub const ZLINK_CAUSE_SERVER_CLOSE: u8 = 1;
/// `zlink_event.cause`: the connection ended without a Close frame.
pub const ZLINK_CAUSE_CONNECTION_LOST: u8 = 2;
/// `zlink_event.cause`: the server's bytes did not decode.
pub const ZLINK_CAUSE_PROTOCOL_ERROR: u8 = 3;
/// `zlink_event.cause`: a ping got no pong in time.
pub const ZLINK_CAUSE_KEEPALIVE_TIMEOUT: u8 = 4;
/// `zlink_event.cause`: `zlink_close` (or `zlink_client_free`).
pub const ZLINK_CAUSE_CLIENT_CLOSED: u8 = 5;
/// `zlink_event.cause`: the connection could not be opened.
pub const ZLINK_CAUSE_CONNECT_FAILED: u8 = 6;
/// `zlink_event.cause`: the login request failed (`error_kind`,
/// `error_reason`).
pub const ZLINK_CAUSE_LOGIN_FAILED: u8 = 7;
/// `zlink_event.cause`: `reconnect_max_attempts` attempts failed in a row.
pub const ZLINK_CAUSE_GAVE_UP: u8 = 8;

/// ErrorKind codes (src/error.rs; docs/wire.md "Codes"). A reply's
/// `error_kind` is one of these, a code a newer zlink added (passed
/// through), or `ZLINK_KIND_UNKNOWN`: treat any other as a generic error.
pub const ZLINK_KIND_UNAVAILABLE: u8 = 1;
/// See `ZLINK_KIND_UNAVAILABLE`.
pub const ZLINK_KIND_INVALID_OPERATION: u8 = 2;
/// See `ZLINK_KIND_UNAVAILABLE`.
pub const ZLINK_KIND_NOT_FOUND: u8 = 3;
/// See `ZLINK_KIND_UNAVAILABLE`.
pub const ZLINK_KIND_DEADLINE_EXCEEDED: u8 = 4;
/// See `ZLINK_KIND_UNAVAILABLE`.
pub const ZLINK_KIND_CANCELLED: u8 = 5;
/// The server sent a kind this build does not know: a generic error.
pub const ZLINK_KIND_UNKNOWN: u8 = 255;

/// `error_reason` of a request in flight when its connection ended (kind
/// Unavailable, `outcome_unknown` 1): the server may or may not have run
/// it, and the client never sends it again. Retry only what is safe twice.
/// Server reasons are the codes of src/error.rs's `reasons!` table
/// (`zlink_reason_name` names them); the client's own start at 200. A call
/// the client refuses before sending anything returns a `ZLINK_E_*`
/// status instead of an event.
pub const ZLINK_REASON_OUTCOME_UNKNOWN: u8 = 200;
/// Server reason `Deadline` (kind DeadlineExceeded), also raised locally
/// (`remote` 0, `outcome_unknown` 1) when a request's deadline passes.
pub const ZLINK_REASON_DEADLINE: u8 = 30;

/// `zlink_state`: made, `zlink_connect` not called.
pub const ZLINK_STATE_IDLE: i32 = 0;
/// `zlink_state`: opening the first connection or logging in on it.
pub const ZLINK_STATE_CONNECTING: i32 = 1;
/// `zlink_state`: logged in; requests and sends go out.
pub const ZLINK_STATE_OPEN: i32 = 2;
/// `zlink_state`: waiting to reconnect, or reconnecting and logging in.
pub const ZLINK_STATE_RECONNECTING: i32 = 3;
/// `zlink_state`: closed for good.
pub const ZLINK_STATE_CLOSED: i32 = 4;

/// The client's settings. Fill it with `zlink_options_default`, then set
/// `address` and the login. Every pointer is read (and copied) by
/// `zlink_client_new` only.
#[repr(C)]
pub struct zlink_options {
    /// "host:port", NUL-terminated. An IP address never blocks; a host
    /// name is resolved at each connection attempt by the system resolver,
    /// which may block the calling frame.
    pub address: *const c_char,
    /// 1: log in on every new connection with one request of `login_key`
    /// and `login_payload`, before the client counts as open.
    pub has_login: u8,
    /// The login request's packet key.
    pub login_key: u16,
    /// The login request's payload (may be null when its length is 0).
    pub login_payload: *const u8,
    /// Its length.
    pub login_payload_len: usize,
    /// The login request's deadline, ms (default 10,000).
    pub login_deadline_ms: u32,
    /// A request's deadline when `zlink_request` gets 0, ms (default 10,000).
    pub request_deadline_ms: u32,
    /// How long a connection may take to open, ms (default 5,000).
    pub connect_timeout_ms: u32,
    /// 1: reconnect by the rules of docs/clients.md (default); 0: never.
    pub reconnect: u8,
    /// The first reconnect delay, ms (default 100).
    pub reconnect_initial_ms: u32,
    /// The cap of every delay, ms (default 5,000).
    pub reconnect_max_ms: u32,
    /// Growth per failed attempt, >= 1 (default 2).
    pub reconnect_multiplier: f64,
    /// The random share of each delay, 0..1 (default 0.5).
    pub reconnect_jitter: f64,
    /// Attempts after one drop before giving up; 0: no limit (default).
    pub reconnect_max_attempts: u32,
    /// The client's own ping interval, ms; 0: no client pings (default
    /// 10,000). The server's pings are always answered.
    pub keepalive_interval_ms: u32,
    /// A ping without its pong for this long ends the connection, ms
    /// (default 10,000).
    pub keepalive_timeout_ms: u32,
    /// The node's `limits.frame_len_max`, both ways (default 65,536).
    pub frame_len_max: u32,
    /// Requests in flight before `ZLINK_E_QUEUE_FULL` (default 4,096).
    pub max_in_flight: u32,
    /// Bytes unsent before `ZLINK_E_QUEUE_FULL` (default 4 MiB).
    pub outbound_max: u32,
    /// Events queued before the client stops reading the socket until the
    /// game takes some (default 4,096).
    pub max_events: u32,
}

/// One event. Pointers are valid until the next `zlink_next_event`,
/// `zlink_poll`, `zlink_wait` or `zlink_client_free` on the client (in a
/// request callback: during the callback only).
#[repr(C)]
pub struct zlink_event {
    /// `ZLINK_EVENT_*`.
    pub kind: u32,
    /// REPLY: the id `zlink_request` gave.
    pub request_id: u64,
    /// PUSH: the packet key.
    pub key: u16,
    /// LOGGED_IN, REPLY (success), PUSH: the payload bytes (null when empty).
    pub payload: *const u8,
    /// Their length.
    pub payload_len: usize,
    /// REPLY, RECONNECT_FAILED, CLOSED with `ZLINK_CAUSE_LOGIN_FAILED`:
    /// 0 for success, else the ErrorKind code (`ZLINK_KIND_*`).
    pub error_kind: u8,
    /// The Reason code: a server reason, or a local `ZLINK_REASON_*`.
    pub error_reason: u8,
    /// 1: the server sent the error; 0: the client raised it.
    pub remote: u8,
    /// 1: the request may or may not have run (never sent again).
    pub outcome_unknown: u8,
    /// CLOSED, RECONNECT_FAILED: `ZLINK_CAUSE_*`.
    pub cause: u8,
    /// With `ZLINK_CAUSE_SERVER_CLOSE`: the CloseReason code (1 Replaced,
    /// 4 Shutdown, 8 AuthenticationFailed …; `zlink_close_reason_name`).
    pub close_reason: u8,
    /// CLOSED: 1 when a reconnect follows.
    pub will_reconnect: u8,
    /// LOGGED_IN: 1 after a reconnect.
    pub reconnect: u8,
    /// RECONNECTING, RECONNECT_FAILED: the attempt, from 1.
    pub attempt: u32,
    /// RECONNECTING: the delay before it, ms.
    pub delay_ms: u32,
}

/// Counts, for diagnostics and tests.
#[repr(C)]
pub struct zlink_stats {
    /// Connections opened.
    pub connections: u64,
    /// Logins after a reconnect.
    pub reconnects: u64,
    /// Request frames written, logins included.
    pub requests_sent: u64,
    /// Replies that came after their request ended (its deadline).
    pub dropped: u64,
    /// Requests in flight.
    pub in_flight: u64,
    /// Bytes queued and not yet taken by the socket.
    pub unsent: u64,
}

/// A request callback: called once with the request's REPLY event (valid
/// during the call only), on the thread that called `zlink_poll`,
/// `zlink_close` or `zlink_client_free`.
pub type zlink_reply_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const zlink_event)>;

/// A client: opaque; made by `zlink_client_new`, freed by
/// `zlink_client_free`.
pub struct zlink_client {
    client: Client,
    /// The event `zlink_next_event` handed out last: its payload is what
    /// the C pointers point into.
    current: Option<Event>,
    callbacks: HashMap<
        u64,
        (
            unsafe extern "C" fn(*mut c_void, *const zlink_event),
            *mut c_void,
        ),
    >,
    in_callback: bool,
    poisoned: bool,
}

// The client's own codes are these (one list, checked at compile time).
const _: () = assert!(
    ZLINK_KIND_UNKNOWN == client::KIND_UNKNOWN
        && ZLINK_REASON_OUTCOME_UNKNOWN == client::local::OUTCOME_UNKNOWN
);

// ---- the boundary ---------------------------------------------------------

/// Runs `f` on the client behind `ptr`: null-checked, refused while
/// poisoned or (unless `in_callback_ok`) inside a callback, and any panic
/// caught and turned into a poisoned client.
fn with_client(
    ptr: *mut zlink_client,
    in_callback_ok: bool,
    f: impl FnOnce(&mut zlink_client) -> i32,
) -> i32 {
    if ptr.is_null() {
        return ZLINK_E_NULL;
    }
    // SAFETY: non-null, and by the header's contract a live pointer from
    // zlink_client_new used by one thread at a time; no other reference to
    // it is alive during this call (callbacks run with none held).
    let handle = unsafe { &mut *ptr };
    if handle.poisoned {
        return ZLINK_E_PANIC;
    }
    if handle.in_callback && !in_callback_ok {
        return ZLINK_E_REENTRANT;
    }
    match catch_unwind(AssertUnwindSafe(|| f(handle))) {
        Ok(status) => status,
        Err(_) => {
            // SAFETY: as above; the closure's borrow ended with the unwind.
            unsafe { (*ptr).poisoned = true };
            ZLINK_E_PANIC
        }
    }
}

fn refused(r: Refused) -> i32 {
    match r {
        Refused::NotConnected => ZLINK_E_NOT_CONNECTED,
        Refused::Closed => ZLINK_E_CLOSED,
        Refused::TooLarge => ZLINK_E_TOO_LARGE,
        Refused::QueueFull => ZLINK_E_QUEUE_FULL,
    }
}

/// A payload from C as a slice: null is allowed only with length 0.
///
/// # Safety
/// `data` must point to `len` readable bytes when non-null.
unsafe fn payload<'a>(data: *const u8, len: usize) -> Option<&'a [u8]> {
    if len == 0 {
        return Some(&[]);
    }
    if data.is_null() {
        return None;
    }
    // SAFETY: non-null, and the caller promises `len` readable bytes.
    Some(unsafe { std::slice::from_raw_parts(data, len) })
}

fn blank_event() -> zlink_event {
    zlink_event {
        kind: 0,
        request_id: 0,
        key: 0,
        payload: std::ptr::null(),
        payload_len: 0,
        error_kind: 0,
        error_reason: 0,
        remote: 0,
        outcome_unknown: 0,
        cause: 0,
        close_reason: 0,
        will_reconnect: 0,
        reconnect: 0,
        attempt: 0,
        delay_ms: 0,
    }
}

fn set_payload(out: &mut zlink_event, bytes: &Bytes) {
    if !bytes.is_empty() {
        out.payload = bytes.as_ptr();
        out.payload_len = bytes.len();
    }
}

fn set_failure(out: &mut zlink_event, f: &Failure) {
    out.error_kind = f.kind;
    out.error_reason = f.reason;
    out.remote = f.remote.into();
    out.outcome_unknown = f.outcome_unknown.into();
}

fn set_cause(out: &mut zlink_event, cause: &Cause) {
    out.cause = match cause {
        Cause::ServerClose(reason) => {
            out.close_reason = reason.code();
            ZLINK_CAUSE_SERVER_CLOSE
        }
        Cause::ConnectionLost => ZLINK_CAUSE_CONNECTION_LOST,
        Cause::ProtocolError => ZLINK_CAUSE_PROTOCOL_ERROR,
        Cause::KeepaliveTimeout => ZLINK_CAUSE_KEEPALIVE_TIMEOUT,
        Cause::ClientClosed => ZLINK_CAUSE_CLIENT_CLOSED,
        Cause::ConnectFailed => ZLINK_CAUSE_CONNECT_FAILED,
        Cause::LoginFailed(f) => {
            set_failure(out, f);
            ZLINK_CAUSE_LOGIN_FAILED
        }
        Cause::GaveUp => ZLINK_CAUSE_GAVE_UP,
    };
}

fn millis(d: Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// The C view of an event; its pointers borrow from `event`.
fn view(event: &Event) -> zlink_event {
    let mut out = blank_event();
    match event {
        Event::LoggedIn { reconnect, payload } => {
            out.kind = ZLINK_EVENT_LOGGED_IN;
            out.reconnect = (*reconnect).into();
            set_payload(&mut out, payload);
        }
        Event::Reply { id, outcome } => {
            out.kind = ZLINK_EVENT_REPLY;
            out.request_id = *id;
            match outcome {
                Ok(payload) => set_payload(&mut out, payload),
                Err(f) => set_failure(&mut out, f),
            }
        }
        Event::Push { key, payload } => {
            out.kind = ZLINK_EVENT_PUSH;
            out.key = *key;
            set_payload(&mut out, payload);
        }
        Event::Closed {
            cause,
            will_reconnect,
        } => {
            out.kind = ZLINK_EVENT_CLOSED;
            out.will_reconnect = (*will_reconnect).into();
            set_cause(&mut out, cause);
        }
        Event::Reconnecting { attempt, delay } => {
            out.kind = ZLINK_EVENT_RECONNECTING;
            out.attempt = *attempt;
            out.delay_ms = millis(*delay);
        }
        Event::ReconnectFailed { attempt, cause } => {
            out.kind = ZLINK_EVENT_RECONNECT_FAILED;
            out.attempt = *attempt;
            set_cause(&mut out, cause);
        }
    }
    out
}

/// Calls the callbacks of every routed request that ended, one at a time,
/// holding no reference to the client while each runs (a callback may call
/// `zlink_request`, `zlink_send` or `zlink_close` on it). Ends that those
/// calls queue are dispatched by the same loop.
///
/// # Safety
/// `ptr` is a live client, not poisoned, and no reference to it is alive.
unsafe fn dispatch_callbacks(ptr: *mut zlink_client) {
    loop {
        let next = {
            // SAFETY: live, and no other reference exists (the caller's
            // contract; the previous callback has returned).
            let handle = unsafe { &mut *ptr };
            loop {
                match handle.client.next_routed() {
                    None => break None,
                    // Each routed request stored its callback when it was
                    // accepted; one without is skipped, never called twice.
                    Some((id, outcome)) => {
                        if let Some(cb) = handle.callbacks.remove(&id) {
                            handle.in_callback = true;
                            break Some((cb, Event::Reply { id, outcome }));
                        }
                    }
                }
            }
        };
        let Some(((cb, user), event)) = next else {
            return;
        };
        let c_event = view(&event);
        // SAFETY: `cb` is the caller's function for this request; the event
        // and the bytes it points to (owned by `event`, a local) outlive the
        // call, and no Rust reference to the client is alive during it.
        unsafe { cb(user, &c_event) };
        // SAFETY: live; the callback may not free it (zlink_client_free is
        // refused in a callback), and its own borrows have ended.
        unsafe { (*ptr).in_callback = false };
    }
}

// ---- the API --------------------------------------------------------------

/// Fills `out` with the defaults (those of clients/ts): reconnect on,
/// 100 ms to 5 s backoff ×2 with 0.5 jitter, no attempt limit, 10 s
/// request and login deadlines, 5 s connect timeout, 10 s pings, 64 KiB
/// frames, 4,096 requests in flight, 4 MiB unsent, 4,096 events; no
/// address, no login.
///
/// # Safety
/// `out` is null or points to writable memory for one `zlink_options`.
#[no_mangle]
pub unsafe extern "C" fn zlink_options_default(out: *mut zlink_options) -> i32 {
    if out.is_null() {
        return ZLINK_E_NULL;
    }
    let d = Options::default();
    let b = d.reconnect.unwrap_or(Backoff {
        initial: Duration::from_millis(100),
        max: Duration::from_secs(5),
        multiplier: 2.0,
        jitter: 0.5,
        max_attempts: 0,
    });
    let (interval, timeout) = d.keepalive.unwrap_or_default();
    let options = zlink_options {
        address: std::ptr::null(),
        has_login: 0,
        login_key: 0,
        login_payload: std::ptr::null(),
        login_payload_len: 0,
        login_deadline_ms: millis(d.login_deadline),
        request_deadline_ms: millis(d.request_deadline),
        connect_timeout_ms: millis(d.connect_timeout),
        reconnect: 1,
        reconnect_initial_ms: millis(b.initial),
        reconnect_max_ms: millis(b.max),
        reconnect_multiplier: b.multiplier,
        reconnect_jitter: b.jitter,
        reconnect_max_attempts: b.max_attempts,
        keepalive_interval_ms: millis(interval),
        keepalive_timeout_ms: millis(timeout),
        frame_len_max: d.frame_len_max,
        max_in_flight: u32::try_from(d.max_in_flight).unwrap_or(u32::MAX),
        outbound_max: u32::try_from(d.outbound_max).unwrap_or(u32::MAX),
        max_events: u32::try_from(d.max_events).unwrap_or(u32::MAX),
    };
    // SAFETY: non-null, and the caller promises room for one zlink_options;
    // `write` does not read the (maybe uninitialised) old value.
    unsafe { out.write(options) };
    ZLINK_OK
}

/// The Rust options for C options, or `None` when one is out of range.
///
/// # Safety
/// The pointers inside `o` follow `zlink_options`' documentation.
unsafe fn options_of(o: &zlink_options) -> Option<Options> {
    if o.address.is_null() {
        return None;
    }
    // SAFETY: non-null, and the caller promises a NUL-terminated string.
    let address = unsafe { CStr::from_ptr(o.address) }
        .to_str()
        .ok()?
        .to_owned();
    let login = if o.has_login != 0 {
        // SAFETY: the caller promises `login_payload_len` readable bytes.
        let bytes = unsafe { payload(o.login_payload, o.login_payload_len) }?;
        // The login must fit a frame: 12 bytes of Request around it.
        if bytes.len().saturating_add(12) > o.frame_len_max as usize {
            return None;
        }
        Some((o.login_key, Bytes::copy_from_slice(bytes)))
    } else {
        None
    };
    let ms = |v: u32| Duration::from_millis(u64::from(v));
    let reconnect = if o.reconnect != 0 {
        let ok = o.reconnect_multiplier.is_finite()
            && o.reconnect_multiplier >= 1.0
            && (0.0..=1.0).contains(&o.reconnect_jitter)
            && o.reconnect_max_ms >= o.reconnect_initial_ms;
        if !ok {
            return None;
        }
        Some(Backoff {
            initial: ms(o.reconnect_initial_ms),
            max: ms(o.reconnect_max_ms),
            multiplier: o.reconnect_multiplier,
            jitter: o.reconnect_jitter,
            max_attempts: o.reconnect_max_attempts,
        })
    } else {
        None
    };
    let keepalive = if o.keepalive_interval_ms != 0 {
        if o.keepalive_timeout_ms == 0 {
            return None;
        }
        Some((ms(o.keepalive_interval_ms), ms(o.keepalive_timeout_ms)))
    } else {
        None
    };
    // A frame of at least a Ping's 10 bytes, events and in-flight room > 0.
    if o.frame_len_max < 16 || o.max_in_flight == 0 || o.max_events == 0 || o.outbound_max == 0 {
        return None;
    }
    if o.login_deadline_ms == 0 || o.request_deadline_ms == 0 || o.connect_timeout_ms == 0 {
        return None;
    }
    Some(Options {
        address,
        login,
        login_deadline: ms(o.login_deadline_ms),
        request_deadline: ms(o.request_deadline_ms),
        connect_timeout: ms(o.connect_timeout_ms),
        reconnect,
        keepalive,
        frame_len_max: o.frame_len_max,
        max_in_flight: o.max_in_flight as usize,
        outbound_max: o.outbound_max as usize,
        max_events: o.max_events as usize,
    })
}

/// Makes a client; nothing is opened before `zlink_connect`. Everything
/// `options` points to is copied. Null when `options` or its `address` is
/// null or a setting is out of range (a multiplier under 1, a jitter
/// outside 0..1, a max delay under the initial one, a zero deadline, limit
/// or `keepalive_timeout_ms` with pings on, a login over `frame_len_max`).
///
/// # Safety
/// `options` is null or points to a `zlink_options` whose pointers follow
/// its documentation.
#[no_mangle]
pub unsafe extern "C" fn zlink_client_new(options: *const zlink_options) -> *mut zlink_client {
    if options.is_null() {
        return std::ptr::null_mut();
    }
    let made = catch_unwind(|| {
        // SAFETY: non-null; the caller promises a valid zlink_options.
        let o = unsafe { &*options };
        // SAFETY: the caller promises its pointers are valid.
        unsafe { options_of(o) }.map(|opts| zlink_client {
            client: Client::new(opts),
            current: None,
            callbacks: HashMap::new(),
            in_callback: false,
            poisoned: false,
        })
    });
    match made {
        Ok(Some(handle)) => Box::into_raw(Box::new(handle)),
        _ => std::ptr::null_mut(),
    }
}

/// Closes the client if it is not (every request callback is then called,
/// with OutcomeUnknown for a request in flight) and frees it. Null is
/// ignored. Refused inside a callback (`ZLINK_E_REENTRANT`: nothing freed).
///
/// # Safety
/// `client` is null or a live pointer from `zlink_client_new`, not used
/// after this call returns `ZLINK_OK` (or `ZLINK_E_PANIC`).
#[no_mangle]
pub unsafe extern "C" fn zlink_client_free(client: *mut zlink_client) -> i32 {
    if client.is_null() {
        return ZLINK_OK;
    }
    // SAFETY: live (the caller's contract); a short borrow.
    if unsafe { (*client).in_callback } {
        return ZLINK_E_REENTRANT;
    }
    let _ = with_client(client, false, |h| {
        h.current = None;
        h.client.close();
        ZLINK_OK
    });
    // SAFETY: live and not poisoned checked inside; callbacks get their end.
    if !unsafe { (*client).poisoned } {
        // SAFETY: live, no reference alive.
        let _ = catch_unwind(|| unsafe { dispatch_callbacks(client) });
    }
    // SAFETY: made by Box::into_raw in zlink_client_new and not freed yet
    // (the caller's contract); nothing refers to it after this.
    let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(client) })));
    ZLINK_OK
}

/// Starts the first connection and its login, without blocking. The
/// outcome is an event: `LOGGED_IN`, or `CLOSED` with
/// `ZLINK_CAUSE_CONNECT_FAILED` or `ZLINK_CAUSE_LOGIN_FAILED` (the first
/// connection is not retried; the game decides). `ZLINK_E_INVALID` when
/// called twice.
///
/// # Safety
/// `client` is null or a live pointer from `zlink_client_new`.
#[no_mangle]
pub unsafe extern "C" fn zlink_connect(client: *mut zlink_client) -> i32 {
    with_client(client, false, |h| match h.client.connect(Instant::now()) {
        Ok(()) => ZLINK_OK,
        Err(Refused::Closed) => ZLINK_E_CLOSED,
        Err(_) => ZLINK_E_INVALID,
    })
}

/// Does all the I/O the socket allows now and checks deadlines, keepalive
/// and the reconnect timer; never blocks. Call it once a frame. Request
/// callbacks run inside it. Returns the number of events queued for
/// `zlink_next_event` (>= 0), or a negative `ZLINK_E_*`. Invalidates the
/// pointers of the last event.
///
/// # Safety
/// `client` is null or a live pointer from `zlink_client_new`.
#[no_mangle]
pub unsafe extern "C" fn zlink_poll(client: *mut zlink_client) -> i32 {
    let status = with_client(client, false, |h| {
        h.current = None;
        h.client.poll(Instant::now());
        ZLINK_OK
    });
    if status != ZLINK_OK {
        return status;
    }
    // SAFETY: live and not poisoned (with_client succeeded), no reference
    // alive now.
    if catch_unwind(|| unsafe { dispatch_callbacks(client) }).is_err() {
        // SAFETY: live; a short borrow.
        unsafe { (*client).poisoned = true };
        return ZLINK_E_PANIC;
    }
    with_client(client, false, |h| {
        i32::try_from(h.client.queued()).unwrap_or(i32::MAX)
    })
}

/// Blocks up to `timeout_ms` until the client's socket is ready or one of
/// its timers is due, then does `zlink_poll`. For tools, bots and tests
/// that own their thread: a game frame calls `zlink_poll` instead.
///
/// # Safety
/// `client` is null or a live pointer from `zlink_client_new`.
#[no_mangle]
pub unsafe extern "C" fn zlink_wait(client: *mut zlink_client, timeout_ms: u32) -> i32 {
    let status = with_client(client, false, |h| {
        if h.client.queued() > 0 {
            return ZLINK_OK;
        }
        let interest = h.client.interest();
        let now = Instant::now();
        let mut wait = Duration::from_millis(u64::from(timeout_ms));
        if let Some(until) = interest.until {
            wait = wait.min(until.saturating_duration_since(now));
        }
        // Round up, so a timer due in 0.4 ms is not polled too early.
        let ms = i32::try_from(wait.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        match interest.fd {
            Some(fd) => {
                let mut pfd = libc::pollfd {
                    fd,
                    events: libc::POLLIN | if interest.write { libc::POLLOUT } else { 0 },
                    revents: 0,
                };
                // SAFETY: one valid pollfd for a socket the client owns.
                unsafe { libc::poll(&mut pfd, 1, ms) };
            }
            None if ms > 0 && interest.until.is_some() => std::thread::sleep(wait),
            // Idle or closed: nothing will happen by waiting.
            None => {}
        }
        ZLINK_OK
    });
    if status != ZLINK_OK {
        return status;
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { zlink_poll(client) }
}

/// Takes the next event into `*out`: 1 when there was one, 0 when none,
/// or a negative `ZLINK_E_*`. Its pointers are valid until the next
/// `zlink_next_event`, `zlink_poll`, `zlink_wait` or `zlink_client_free`.
/// Replies of requests made with `zlink_request_cb` never come here.
///
/// # Safety
/// `client` is null or a live pointer from `zlink_client_new`; `out` is
/// null or points to writable memory for one `zlink_event`.
#[no_mangle]
pub unsafe extern "C" fn zlink_next_event(client: *mut zlink_client, out: *mut zlink_event) -> i32 {
    if out.is_null() {
        return ZLINK_E_NULL;
    }
    with_client(client, false, |h| {
        h.current = h.client.next_event();
        let event = match &h.current {
            Some(event) => view(event),
            None => return 0,
        };
        // SAFETY: non-null, and the caller promises room for one event.
        unsafe { out.write(event) };
        1
    })
}

/// Sends a request (`deadline_ms` 0: the default) and writes its id (>= 1)
/// to `*out_id`. It then ends with exactly one `ZLINK_EVENT_REPLY` of that
/// id: the reply, the server's error, the deadline (`ZLINK_REASON_DEADLINE`,
/// `outcome_unknown` 1), or `ZLINK_REASON_OUTCOME_UNKNOWN` if the
/// connection ends first; it is never sent again. When refused, nothing
/// was sent and no event follows: `ZLINK_E_NOT_CONNECTED` (not logged in),
/// `ZLINK_E_CLOSED`, `ZLINK_E_TOO_LARGE`, `ZLINK_E_QUEUE_FULL`.
///
/// # Safety
/// `client` is null or a live pointer from `zlink_client_new`; `data`
/// points to `len` readable bytes (or is null with `len` 0); `out_id` is
/// null or writable.
#[no_mangle]
pub unsafe extern "C" fn zlink_request(
    client: *mut zlink_client,
    key: u16,
    data: *const u8,
    len: usize,
    deadline_ms: u32,
    out_id: *mut u64,
) -> i32 {
    // SAFETY: the caller's contract, passed on.
    unsafe { request(client, key, data, len, deadline_ms, None, out_id) }
}

/// As `zlink_request`, but the end comes to `callback(user_data, event)`
/// (inside a later `zlink_poll`, or `zlink_close`/`zlink_client_free`),
/// never to `zlink_next_event`. Called exactly once per accepted request.
///
/// # Safety
/// As `zlink_request`; `callback` is non-null and callable with
/// `user_data` until it has been called.
#[no_mangle]
pub unsafe extern "C" fn zlink_request_cb(
    client: *mut zlink_client,
    key: u16,
    data: *const u8,
    len: usize,
    deadline_ms: u32,
    callback: zlink_reply_fn,
    user_data: *mut c_void,
    out_id: *mut u64,
) -> i32 {
    let Some(callback) = callback else {
        return ZLINK_E_NULL;
    };
    // SAFETY: the caller's contract, passed on.
    unsafe {
        request(
            client,
            key,
            data,
            len,
            deadline_ms,
            Some((callback, user_data)),
            out_id,
        )
    }
}

/// # Safety
/// As `zlink_request`.
unsafe fn request(
    client: *mut zlink_client,
    key: u16,
    data: *const u8,
    len: usize,
    deadline_ms: u32,
    callback: Option<(
        unsafe extern "C" fn(*mut c_void, *const zlink_event),
        *mut c_void,
    )>,
    out_id: *mut u64,
) -> i32 {
    // SAFETY: the caller promises `len` readable bytes at `data`.
    let Some(bytes) = (unsafe { payload(data, len) }) else {
        return ZLINK_E_NULL;
    };
    with_client(client, true, |h| {
        let deadline = (deadline_ms != 0).then(|| Duration::from_millis(u64::from(deadline_ms)));
        match h
            .client
            .request(key, bytes, deadline, callback.is_some(), Instant::now())
        {
            Ok(id) => {
                if let Some(cb) = callback {
                    h.callbacks.insert(id, cb);
                }
                if !out_id.is_null() {
                    // SAFETY: non-null, and the caller promises it writable.
                    unsafe { out_id.write(id) };
                }
                ZLINK_OK
            }
            Err(r) => refused(r),
        }
    })
}

/// Sends a one-way message (no answer, and nothing tells whether it
/// arrived). `ZLINK_OK`, or as `zlink_request` when refused.
///
/// # Safety
/// `client` is null or a live pointer from `zlink_client_new`; `data`
/// points to `len` readable bytes (or is null with `len` 0).
#[no_mangle]
pub unsafe extern "C" fn zlink_send(
    client: *mut zlink_client,
    key: u16,
    data: *const u8,
    len: usize,
) -> i32 {
    // SAFETY: the caller promises `len` readable bytes at `data`.
    let Some(bytes) = (unsafe { payload(data, len) }) else {
        return ZLINK_E_NULL;
    };
    with_client(client, true, |h| match h.client.send(key, bytes) {
        Ok(()) => ZLINK_OK,
        Err(r) => refused(r),
    })
}

/// Closes the client for good: no reconnect; each request in flight ends
/// with `ZLINK_REASON_OUTCOME_UNKNOWN` (callbacks are called now, outside
/// a callback), then a `CLOSED` event with `ZLINK_CAUSE_CLIENT_CLOSED`.
/// The client stays valid until `zlink_client_free`.
///
/// # Safety
/// `client` is null or a live pointer from `zlink_client_new`.
#[no_mangle]
pub unsafe extern "C" fn zlink_close(client: *mut zlink_client) -> i32 {
    let mut outside_callback = false;
    let status = with_client(client, true, |h| {
        h.client.close();
        outside_callback = !h.in_callback;
        ZLINK_OK
    });
    if status == ZLINK_OK && outside_callback {
        // SAFETY: live and not poisoned; no reference alive. Inside a
        // callback the running dispatch loop calls them instead.
        if catch_unwind(|| unsafe { dispatch_callbacks(client) }).is_err() {
            // SAFETY: live; a short borrow.
            unsafe { (*client).poisoned = true };
            return ZLINK_E_PANIC;
        }
    }
    status
}

/// The client's state (`ZLINK_STATE_*`), or a negative `ZLINK_E_*`.
///
/// # Safety
/// `client` is null or a live pointer from `zlink_client_new`.
#[no_mangle]
pub unsafe extern "C" fn zlink_state(client: *mut zlink_client) -> i32 {
    with_client(client, true, |h| match h.client.state() {
        State::Idle => ZLINK_STATE_IDLE,
        State::Connecting => ZLINK_STATE_CONNECTING,
        State::Open => ZLINK_STATE_OPEN,
        State::Reconnecting => ZLINK_STATE_RECONNECTING,
        State::Closed => ZLINK_STATE_CLOSED,
    })
}

/// Writes the client's counts to `*out`.
///
/// # Safety
/// `client` is null or a live pointer from `zlink_client_new`; `out` is
/// null or points to writable memory for one `zlink_stats`.
#[no_mangle]
pub unsafe extern "C" fn zlink_get_stats(client: *mut zlink_client, out: *mut zlink_stats) -> i32 {
    if out.is_null() {
        return ZLINK_E_NULL;
    }
    with_client(client, true, |h| {
        let s = h.client.stats();
        let stats = zlink_stats {
            connections: s.connections,
            reconnects: s.reconnects,
            requests_sent: s.requests_sent,
            dropped: s.dropped,
            in_flight: s.in_flight,
            unsent: s.unsent,
        };
        // SAFETY: non-null, and the caller promises room for one.
        unsafe { out.write(stats) };
        ZLINK_OK
    })
}

/// NUL-terminated names for the 256 codes of a `u8`, made once.
fn names(table: &'static OnceLock<Vec<CString>>, name: fn(u8) -> String) -> &'static [CString] {
    table.get_or_init(|| {
        (0..=u8::MAX)
            .map(|code| CString::new(name(code)).unwrap_or_default())
            .collect()
    })
}

fn name_ptr(table: &'static [CString], code: u8) -> *const c_char {
    table
        .get(usize::from(code))
        .map_or(std::ptr::null(), |s| s.as_ptr())
}

/// The ErrorKind's name ("Unavailable", "NotFound" …), through
/// src/error.rs's `ErrorKind::from_code` so that a kind a newer zlink
/// adds is named; "Unknown" for a code it does not know. Static; never
/// null.
#[no_mangle]
pub extern "C" fn zlink_error_kind_name(code: u8) -> *const c_char {
    static TABLE: OnceLock<Vec<CString>> = OnceLock::new();
    let table = names(&TABLE, |code| match ErrorKind::from_code(code) {
        Some(kind) => format!("{kind:?}"),
        None if code == 0 => "Ok".to_owned(),
        None => "Unknown".to_owned(),
    });
    name_ptr(table, code)
}

/// The Reason's name ("NoPacketHandler", "Deadline", "OutcomeUnknown" …),
/// a server one from src/error.rs's table or a local `ZLINK_REASON_*`;
/// "Unknown" otherwise. Static; never null.
#[no_mangle]
pub extern "C" fn zlink_reason_name(code: u8) -> *const c_char {
    static TABLE: OnceLock<Vec<CString>> = OnceLock::new();
    let table = names(&TABLE, |code| {
        if let Some(reason) = Reason::from_code(code) {
            return format!("{reason:?}");
        }
        match code {
            ZLINK_REASON_OUTCOME_UNKNOWN => "OutcomeUnknown",
            _ => "Unknown",
        }
        .to_owned()
    });
    name_ptr(table, code)
}

/// The CloseReason's name ("Replaced", "Shutdown" …); "Unknown" otherwise.
/// Static; never null.
#[no_mangle]
pub extern "C" fn zlink_close_reason_name(code: u8) -> *const c_char {
    static TABLE: OnceLock<Vec<CString>> = OnceLock::new();
    let table = names(&TABLE, |code| match CloseReason::from_code(code) {
        Some(reason) => format!("{reason:?}"),
        None => "Unknown".to_owned(),
    });
    name_ptr(table, code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use zlink::client::{ClientFrame, DecodeLimits};
    use zlink::ids::Correlation;

    fn name(p: *const c_char) -> String {
        assert!(!p.is_null());
        // SAFETY: the name functions return static NUL-terminated strings.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
    }

    fn options(address: &CStr) -> zlink_options {
        let mut o = std::mem::MaybeUninit::<zlink_options>::uninit();
        // SAFETY: room for one zlink_options; it fills every field.
        assert_eq!(unsafe { zlink_options_default(o.as_mut_ptr()) }, ZLINK_OK);
        // SAFETY: initialised just above.
        let mut o = unsafe { o.assume_init() };
        o.address = address.as_ptr();
        o
    }

    #[test]
    fn names_come_from_the_error_tables() {
        assert_eq!(name(zlink_error_kind_name(1)), "Unavailable");
        assert_eq!(name(zlink_error_kind_name(0)), "Ok");
        assert_eq!(name(zlink_error_kind_name(ZLINK_KIND_UNKNOWN)), "Unknown");
        assert_eq!(name(zlink_reason_name(21)), "NoPacketHandler");
        assert_eq!(
            name(zlink_reason_name(ZLINK_REASON_DEADLINE)),
            format!("{:?}", Reason::Deadline)
        );
        assert_eq!(Reason::Deadline.code(), ZLINK_REASON_DEADLINE);
        assert_eq!(
            name(zlink_reason_name(ZLINK_REASON_OUTCOME_UNKNOWN)),
            "OutcomeUnknown"
        );
        assert!(Reason::from_code(ZLINK_REASON_OUTCOME_UNKNOWN).is_none());
        assert_eq!(name(zlink_close_reason_name(1)), "Replaced");
        assert_eq!(name(zlink_close_reason_name(0)), "Unknown");
        for (kind, code) in [
            (ErrorKind::Unavailable, ZLINK_KIND_UNAVAILABLE),
            (ErrorKind::InvalidOperation, ZLINK_KIND_INVALID_OPERATION),
            (ErrorKind::NotFound, ZLINK_KIND_NOT_FOUND),
            (ErrorKind::DeadlineExceeded, ZLINK_KIND_DEADLINE_EXCEEDED),
            (ErrorKind::Cancelled, ZLINK_KIND_CANCELLED),
        ] {
            assert_eq!(kind.code(), code);
        }
    }

    #[test]
    fn null_pointers_and_bad_options_are_refused() {
        let null = std::ptr::null_mut();
        let mut ev = blank_event();
        let mut id = 0;
        // SAFETY: every call is made with null pointers, which each checks.
        unsafe {
            assert_eq!(zlink_options_default(std::ptr::null_mut()), ZLINK_E_NULL);
            assert!(zlink_client_new(std::ptr::null()).is_null());
            assert_eq!(zlink_client_free(null), ZLINK_OK);
            assert_eq!(zlink_connect(null), ZLINK_E_NULL);
            assert_eq!(zlink_poll(null), ZLINK_E_NULL);
            assert_eq!(zlink_wait(null, 0), ZLINK_E_NULL);
            assert_eq!(zlink_next_event(null, &mut ev), ZLINK_E_NULL);
            assert_eq!(
                zlink_request(null, 1, std::ptr::null(), 0, 0, &mut id),
                ZLINK_E_NULL
            );
            assert_eq!(zlink_send(null, 1, std::ptr::null(), 0), ZLINK_E_NULL);
            assert_eq!(zlink_close(null), ZLINK_E_NULL);
            assert_eq!(zlink_state(null), ZLINK_E_NULL);
        }
        let address = c"127.0.0.1:1";
        let bad: [fn(&mut zlink_options); 6] = [
            |o| o.address = std::ptr::null(),
            |o| o.reconnect_multiplier = 0.5,
            |o| o.reconnect_jitter = 1.5,
            |o| o.reconnect_max_ms = 10,
            |o| o.request_deadline_ms = 0,
            |o| {
                o.has_login = 1;
                o.login_payload_len = 4;
            },
        ];
        for change in bad {
            let mut o = options(address);
            change(&mut o);
            // SAFETY: a valid zlink_options (its pointers null or static).
            assert!(unsafe { zlink_client_new(&o) }.is_null());
        }
        let o = options(address);
        // SAFETY: valid options; the client is freed below.
        let c = unsafe { zlink_client_new(&o) };
        assert!(!c.is_null());
        // SAFETY: a live client; a null payload with a length is refused.
        unsafe {
            assert_eq!(zlink_state(c), ZLINK_STATE_IDLE);
            assert_eq!(
                zlink_request(c, 1, std::ptr::null(), 0, 0, &mut id),
                ZLINK_E_NOT_CONNECTED
            );
            assert_eq!(
                zlink_request(c, 1, std::ptr::null(), 3, 0, &mut id),
                ZLINK_E_NULL
            );
            assert_eq!(zlink_client_free(c), ZLINK_OK);
        }
    }

    struct Seen {
        client: *mut zlink_client,
        replies: Vec<(u64, Vec<u8>)>,
        reasons: Vec<u8>,
        poll_inside: i32,
        request_inside: i32,
        free_inside: i32,
    }

    unsafe extern "C" fn on_reply(user: *mut c_void, event: *const zlink_event) {
        // SAFETY: `user` is the test's Seen, `event` valid during the call.
        let (seen, event) = unsafe { (&mut *(user as *mut Seen), &*event) };
        let payload = if event.payload.is_null() {
            Vec::new()
        } else {
            // SAFETY: `payload_len` bytes, valid during the call.
            unsafe { std::slice::from_raw_parts(event.payload, event.payload_len) }.to_vec()
        };
        seen.replies.push((event.request_id, payload));
        seen.reasons.push(event.error_reason);
        if seen.replies.len() == 1 {
            let mut id = 0;
            // SAFETY: a live client; these calls are what a callback may try.
            unsafe {
                seen.poll_inside = zlink_poll(seen.client);
                seen.free_inside = zlink_client_free(seen.client);
                seen.request_inside = zlink_request_cb(
                    seen.client,
                    7,
                    b"again".as_ptr(),
                    5,
                    0,
                    Some(on_reply),
                    user,
                    &mut id,
                );
            }
        }
    }

    /// A callback gets its reply inside zlink_poll, may make a request, and
    /// may not poll or free; a request it made in flight at zlink_client_free
    /// gets OutcomeUnknown through its callback then.
    #[test]
    fn callbacks_run_inside_poll_and_are_called_once_each() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = std::ffi::CString::new(listener.local_addr().unwrap().to_string()).unwrap();
        let server = std::thread::spawn(move || {
            let (mut sock, _) = listener.accept().unwrap();
            sock.set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let limits = DecodeLimits::default();
            let mut buf = bytes::BytesMut::new();
            let mut answered = 0;
            // Answers the login and the first request; the second stays in flight.
            while answered < 2 {
                while let Some(frame) = ClientFrame::decode_from(&mut buf, &limits).unwrap() {
                    if let ClientFrame::Request { correlation, .. } = frame {
                        let mut out = bytes::BytesMut::new();
                        ClientFrame::Reply {
                            correlation: Correlation(correlation.0),
                            payload: Bytes::from_static(b"ok"),
                        }
                        .encode(&mut out);
                        sock.write_all(&out).unwrap();
                        answered += 1;
                    }
                }
                let mut chunk = [0u8; 1024];
                let n = sock.read(&mut chunk).unwrap();
                assert!(n > 0);
                buf.extend_from_slice(&chunk[..n]);
            }
            // Hold the connection until the client goes.
            let mut chunk = [0u8; 1024];
            while matches!(sock.read(&mut chunk), Ok(n) if n > 0) {}
        });
        let mut o = options(&address);
        o.has_login = 1;
        o.login_key = 1;
        let c = unsafe { zlink_client_new(&o) };
        assert!(!c.is_null());
        let mut seen = Seen {
            client: c,
            replies: Vec::new(),
            reasons: Vec::new(),
            poll_inside: 0,
            request_inside: 1,
            free_inside: 0,
        };
        let mut ev = blank_event();
        let end = Instant::now() + Duration::from_secs(10);
        // SAFETY: a live client, a valid event, a Seen that outlives it.
        unsafe {
            assert_eq!(zlink_connect(c), ZLINK_OK);
            while zlink_next_event(c, &mut ev) == 0 {
                assert!(Instant::now() < end);
                assert!(zlink_wait(c, 100) >= 0);
            }
            assert_eq!(ev.kind, ZLINK_EVENT_LOGGED_IN);
            let mut id = 0;
            let user = &mut seen as *mut Seen as *mut c_void;
            assert_eq!(
                zlink_request_cb(c, 2, b"x".as_ptr(), 1, 0, Some(on_reply), user, &mut id),
                ZLINK_OK
            );
            while (*(user as *mut Seen)).replies.is_empty() {
                assert!(Instant::now() < end);
                assert_eq!(zlink_wait(c, 100), 0, "a callback's reply is no event");
            }
            assert_eq!(zlink_client_free(c), ZLINK_OK);
        }
        assert_eq!(seen.poll_inside, ZLINK_E_REENTRANT);
        assert_eq!(seen.free_inside, ZLINK_E_REENTRANT);
        assert_eq!(seen.request_inside, ZLINK_OK);
        assert_eq!(seen.replies.len(), 2);
        assert_eq!(seen.replies[0].1, b"ok");
        assert_eq!(seen.reasons, [0, ZLINK_REASON_OUTCOME_UNKNOWN]);
        server.join().unwrap();
    }
}

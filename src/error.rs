//! The closed error vocabulary of §12: every failure a caller, a client or a
//! peer node can see is one [`ErrorKind`] with one precise [`Reason`].
//!
//! Each kind and each reason has exactly one code, written once here and used
//! by the wire layer for client error frames and node replies.
//!
//! Beside its reason an error may carry a **detail** (issue 21 item 4):
//!
//! - the application's own errors, [`Error::app`]`(code, detail)`: the kind
//!   [`ErrorKind::Application`], with the game's code and text, which reach
//!   the client as they were given;
//! - what a framework error is about: the ActorId, Spot, type name or packet
//!   key it concerns ([`Error::about_actor`], [`Error::about_type`] …).
//!
//! The detail travels to the client with the error (docs/wire.md "Client
//! frames"), so only those constructors write it: a NodeRid, an endpoint or
//! a generation — what §1 keeps from the application and its clients — has
//! no way in.

use std::fmt;
use std::sync::Arc;

use crate::ids::{ActorId, PacketKey, SpotId};

/// The public kind of a failure (§12, DESIGN "Error kinds are a closed enum").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ErrorKind {
    /// The route, owner or fence is not usable now; no other target is tried.
    Unavailable = 1,
    /// The operation is not valid in this state (session-not-bound among them).
    InvalidOperation = 2,
    /// The thing asked for does not exist and retrying cannot make it exist.
    NotFound = 3,
    /// The deadline passed before a terminal arrived.
    DeadlineExceeded = 4,
    /// The caller cancelled.
    Cancelled = 5,
    /// Startup was refused because the configuration is invalid (§3).
    Configuration = 6,
    /// The application refused the request with an error of its own
    /// ([`Error::app`]): its code and detail are the game's, not the
    /// framework's.
    Application = 7,
}

impl ErrorKind {
    /// The kind's wire code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The kind for a wire code, if the code names one.
    pub fn from_code(code: u8) -> Option<Self> {
        Some(match code {
            1 => Self::Unavailable,
            2 => Self::InvalidOperation,
            3 => Self::NotFound,
            4 => Self::DeadlineExceeded,
            5 => Self::Cancelled,
            6 => Self::Configuration,
            7 => Self::Application,
            _ => return None,
        })
    }
}

macro_rules! reasons {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal => $kind:ident, $text:literal; )*) => {
        /// Why an operation failed: each reason belongs to exactly one kind.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        #[non_exhaustive]
        pub enum Reason {
            $( $(#[$doc])* $variant = $code, )*
        }

        impl Reason {
            /// Every reason, in code order.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant),*];

            /// The kind this reason belongs to.
            pub fn kind(self) -> ErrorKind {
                match self { $( Reason::$variant => ErrorKind::$kind, )* }
            }

            /// The reason's wire code.
            pub fn code(self) -> u8 {
                self as u8
            }

            /// The reason for a wire code, if the code names one.
            pub fn from_code(code: u8) -> Option<Self> {
                match code { $( $code => Some(Reason::$variant), )* _ => None }
            }

            /// A short sentence for logs and error messages.
            pub fn text(self) -> &'static str {
                match self { $( Reason::$variant => $text, )* }
            }
        }
    };
}

reasons! {
    /// Push, close, relay or notify asked for a binding the session does not have (§12).
    SessionNotBound = 1 => InvalidOperation, "session-not-bound: bind the actor first";
    /// The ActorRef's ObjectGeneration is not the Actor's current incarnation (§12).
    ObjectGenerationMismatch = 2 => InvalidOperation, "the actor's ObjectGeneration differs";
    /// The bind is already in progress for this ActorId on this session.
    BindInProgress = 3 => InvalidOperation, "a bind of this actor is already in progress on this session";
    /// A packet handler neither relayed nor answered a request.
    NotAnswered = 5 => InvalidOperation, "the packet handler neither relayed nor answered the request";
    /// The receiving node does not implement this operation (version skew).
    NotSupported = 4 => InvalidOperation, "the receiving node does not support this operation";
    /// A peer's request record did not decode (§6: a typed error, not silence).
    MalformedRecord = 6 => InvalidOperation, "the request record is malformed";
    /// A reply or push is larger than a client frame may carry: it would
    /// have broken the client's connection, so it is refused at its sender
    /// (docs/wire.md "Limits").
    MessageTooLarge = 25 => InvalidOperation, "the message is larger than a client frame may carry";
    /// The session sent faster than its rate limit allows; the packet was
    /// refused at ingress (`NodeSettings::session_rate`).
    RateLimited = 26 => Unavailable, "the session sends faster than its rate limit";
    /// The Actor has as many pending timers as it may
    /// (docs/actors.md "Timers": 64).
    TooManyTimers = 27 => InvalidOperation, "the actor has as many pending timers as it may";
    /// A repeating timer's period is shorter than the timer wheel's tick
    /// (1 ms).
    TimerPeriodTooShort = 28 => InvalidOperation, "a repeating timer's period is shorter than 1 ms";
    /// The Actor's state and queued work do not fit one handoff record (60).
    HandoffTooLarge = 7 => InvalidOperation, "the actor's state and queued work do not fit one handoff record";
    /// The relocation target is the Actor's own node, or already hosts it.
    RelocationTargetInvalid = 8 => InvalidOperation, "the relocation target cannot take this actor";
    /// The connect callback refused the client's hello (§1 step 1: a session
    /// callback authenticates the client); the connection closes with
    /// `CloseReason::AuthenticationFailed`.
    NotAuthenticated = 9 => InvalidOperation, "the client did not authenticate";
    /// The stored location is stale and no Message Follow route exists (§12).
    StaleLocation = 10 => Unavailable, "the actor is not at this location and no Message Follow route exists";
    /// The binding generation is retired or unknown at the Actor owner (§6, §12).
    StaleBinding = 11 => Unavailable, "the binding was replaced or ended";
    /// The target node's process lifecycle is not the one the route names (§5).
    StaleNodeGeneration = 12 => Unavailable, "the owner node restarted since the route was stored";
    /// The authority owner generation is not current (§5).
    StaleAuthority = 13 => Unavailable, "authority over the actor moved";
    /// The Actor is in a relocation pre-commit seal (§12).
    RelocationSealed = 14 => Unavailable, "the actor is being relocated";
    /// The session is closing and refuses new application dispatch (§6).
    SessionClosing = 15 => Unavailable, "the session is closing";
    /// The owner lease lapsed, so the stored route may not be used (§5).
    LeaseExpired = 16 => Unavailable, "the owner lease lapsed";
    /// A bounded queue refused admission.
    QueueFull = 17 => Unavailable, "a bounded queue is full";
    /// The peer node is not connected.
    PeerUnreachable = 18 => Unavailable, "the owner node is not reachable";
    /// The Location Store could not be reached or could not answer (§3, §5);
    /// the operation may be retried, a stored route is never extended by it.
    StoreUnavailable = 19 => Unavailable, "the location store is unavailable";
    /// No Actor factory is registered for the type (§12).
    NoActorFactory = 20 => NotFound, "no actor factory is registered for this type";
    /// No handler is registered for the packet key.
    NoPacketHandler = 21 => NotFound, "no handler is registered for this packet key";
    /// The session owner host is shutting down or relocating its sessions (§10).
    ShuttingDown = 22 => Unavailable, "the node is shutting down";
    /// The relocation was aborted before relay-ready, or its target's CAS
    /// found it recorded aborted (§8.1 durable abort); the source stays owner.
    RelocationAborted = 23 => Unavailable, "the relocation was aborted";
    /// The Actor's route names a mesh this node is not in, or its owner is
    /// reached from this node through another mesh than the one the route
    /// names (§3, §4; docs/threading.md "Several meshes").
    MeshUnreachable = 24 => Unavailable, "the actor's mesh is not one this node reaches its owner through";
    /// §12: the request may or may not have run — a connection it crossed
    /// ended while it was in flight — and it is never sent again by itself;
    /// the game decides whether running it twice is harmless. Client
    /// libraries raise it for their own connection (docs/clients.md
    /// "Reconnect rules"); a node sends it for a link to the Actor's node
    /// that went down (docs/threading.md "Node links").
    OutcomeUnknown = 29 => Unavailable, "the request may or may not have run: a connection it crossed ended first";
    /// The deadline passed before the terminal (§12).
    Deadline = 30 => DeadlineExceeded, "the deadline passed";
    /// The caller cancelled (§12).
    CallerCancelled = 40 => Cancelled, "the caller cancelled";
    /// Startup refused an invalid configuration (§3).
    InvalidConfiguration = 50 => Configuration, "the configuration is invalid";
    /// §1: an Actor belongs to exactly one current Spot; creating it into
    /// another one is refused (it already exists there, or elsewhere).
    ActorInOtherSpot = 60 => InvalidOperation, "the actor already belongs to another Spot";
    /// §5: the Actors of a SpotWide Spot share its gate, so they are placed
    /// with it: their ActorId is `<spot>/<name>` (docs/threading.md).
    NotPlacedWithSpot = 61 => InvalidOperation, "an actor of a SpotWide Spot must be named <spot>/<name>";
    /// A Spot of another kind already has this SpotId.
    SpotIdInUse = 62 => InvalidOperation, "a Spot of another kind already has this id";
    /// No Spot kind is registered under the name (§1: User Spots are of a
    /// kind registered at startup).
    NoSpotKind = 63 => NotFound, "no Spot kind is registered under this name";
    /// The Actor cannot be relocated: its type provides no state snapshot
    /// (`Actor::snapshot`), or it belongs to a User Spot, whose Actors move
    /// only with their Spot (docs/relocation.md "The relocation API").
    NotRelocatable = 64 => InvalidOperation, "the actor cannot be relocated";
    /// A typed payload did not decode as the message type its key names, or
    /// a value did not encode (docs/wire.md "Typed payloads"); the detail
    /// names the type.
    MalformedPayload = 65 => InvalidOperation, "the payload is not a valid encoding of its message type";
    /// The application's own error ([`Error::app`]): the code and detail
    /// are the game's.
    Application = 70 => Application, "the application refused the request";
    /// A turn asked to await twice ([`crate::api::ActorContext::suspend`]):
    /// a turn awaits one future at a time; its continuation may await the
    /// next (docs/actors.md "Async turns").
    TurnAlreadyAwaits = 66 => InvalidOperation, "this turn already awaits";
    /// An awaiting turn's continuation was written for another Actor type
    /// than the Actor whose turn it is (`AsyncTurn::new::<A, …>`).
    TurnOfAnotherType = 67 => InvalidOperation, "the turn's continuation is for another actor type";
}

/// A typed failure: its kind, its reason and, for some, a detail (the
/// application's code and text, or what the failure is about).
///
/// Cheap to clone: the detail, when there is one, is shared.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Error {
    reason: Reason,
    detail: Option<Arc<Detail>>,
}

/// The detail of an [`Error`]: the application's code (0 for a framework
/// error) and a text of at most [`Error::DETAIL_MAX`] bytes.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Detail {
    code: u32,
    text: Box<str>,
}

impl Error {
    /// The longest detail text, in bytes: bounded so that an error frame is
    /// small and its decoding bounded (docs/wire.md "Client frames").
    /// [`Error::app`] cuts a longer text at a character boundary.
    pub const DETAIL_MAX: usize = 1024;

    /// The failure for a reason.
    pub fn new(reason: Reason) -> Self {
        Self {
            reason,
            detail: None,
        }
    }

    /// The application's own error (issue 21 item 4): it reaches the client
    /// as kind [`ErrorKind::Application`] with `code` and `detail` as given
    /// (`detail` cut to [`Error::DETAIL_MAX`] bytes). The codes are the
    /// game's to choose; the framework never writes one. The text goes to
    /// the client: put nothing in it a player should not see.
    pub fn app(code: u32, detail: impl Into<String>) -> Self {
        let mut text: String = detail.into();
        if text.len() > Self::DETAIL_MAX {
            let mut cut = Self::DETAIL_MAX;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        Self::with_detail(Reason::Application, code, text)
    }

    /// The error, saying it is about the Actor `id` (unless it already says
    /// what it is about).
    pub fn about_actor(self, id: &ActorId) -> Self {
        self.about(|| format!("actor {id}"))
    }

    /// The error, saying it is about the Spot `id` (unless it already says
    /// what it is about).
    pub fn about_spot(self, id: &SpotId) -> Self {
        self.about(|| format!("spot {id}"))
    }

    /// The error, saying it is about the type `name` — an Actor type, a Spot
    /// kind or a message type (unless it already says what it is about).
    pub fn about_type(self, name: &str) -> Self {
        self.about(|| format!("type {name}"))
    }

    /// The error, saying it is about the packet key `key` (unless it
    /// already says what it is about).
    pub fn about_key(self, key: PacketKey) -> Self {
        self.about(|| format!("packet key {}", key.0))
    }

    /// A typed payload that is not a valid encoding of `type_name`, and why
    /// (docs/wire.md "Typed payloads").
    pub(crate) fn malformed_payload(type_name: &str, cause: &dyn fmt::Display) -> Self {
        Self::new(Reason::MalformedPayload).about_type(&format!("{type_name}: {cause}"))
    }

    /// The first word is the one closest to the failure: an error that
    /// already says what it is about keeps it.
    fn about(self, text: impl FnOnce() -> String) -> Self {
        if self.detail.is_some() {
            return self;
        }
        let mut text = text();
        if text.len() > Self::DETAIL_MAX {
            // An ActorId is at most 255 bytes and a type name is the
            // program's own; cut anyway, so the bound holds whatever comes.
            let mut cut = Self::DETAIL_MAX;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        Self::with_detail(self.reason, 0, text)
    }

    /// An error as the wire carries it: `None` when `code` is 0 and `text`
    /// empty, which the wire writes as no detail at all.
    pub(crate) fn with_detail(reason: Reason, code: u32, text: String) -> Self {
        let detail = (code != 0 || !text.is_empty()).then(|| {
            Arc::new(Detail {
                code,
                text: text.into_boxed_str(),
            })
        });
        Self { reason, detail }
    }

    /// Its public kind.
    pub fn kind(&self) -> ErrorKind {
        self.reason.kind()
    }

    /// Its reason.
    pub fn reason(&self) -> Reason {
        self.reason
    }

    /// The application's code: that of [`Error::app`], 0 for every
    /// framework error.
    pub fn code(&self) -> u32 {
        self.detail.as_ref().map_or(0, |d| d.code)
    }

    /// The detail text: the application's, or what a framework error is
    /// about (`"actor player-7"`); empty when there is none.
    pub fn detail(&self) -> &str {
        self.detail.as_ref().map_or("", |d| &d.text)
    }

    /// Whether it carries a code or a detail text (the wire then writes
    /// them).
    pub(crate) fn has_detail(&self) -> bool {
        self.detail.is_some()
    }
}

impl From<Reason> for Error {
    fn from(reason: Reason) -> Self {
        Self::new(reason)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}({:?}", self.kind(), self.reason)?;
        if let Some(detail) = &self.detail {
            if self.reason == Reason::Application {
                write!(f, " {}", detail.code)?;
            }
            write!(f, " {:?}", detail.text)?;
        }
        write!(f, ")")
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason == Reason::Application {
            return write!(f, "application error {}: {}", self.code(), self.detail());
        }
        write!(f, "{:?}: {}", self.kind(), self.reason.text())?;
        match self.detail() {
            "" => Ok(()),
            about => write!(f, " ({about})"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_code_round_trips_and_names_one_kind() {
        for &reason in Reason::ALL {
            assert_eq!(Reason::from_code(reason.code()), Some(reason));
            let kind = reason.kind();
            assert_eq!(ErrorKind::from_code(kind.code()), Some(kind));
        }
        assert_eq!(Reason::from_code(0), None);
        assert_eq!(ErrorKind::from_code(0), None);
    }

    #[test]
    fn an_application_error_is_its_own_kind_with_its_code_and_detail() {
        let e = Error::app(404, "no such item: sword");
        assert_eq!(e.kind(), ErrorKind::Application);
        assert_eq!(e.reason(), Reason::Application);
        assert_eq!((e.code(), e.detail()), (404, "no such item: sword"));
        assert_eq!(e.to_string(), "application error 404: no such item: sword");
        // A framework error has code 0 and no detail unless it says what
        // it is about.
        let plain = Error::new(Reason::StaleBinding);
        assert_eq!((plain.code(), plain.detail()), (0, ""));
        assert_eq!(
            Error::app(0, ""),
            Error::with_detail(Reason::Application, 0, String::new())
        );
    }

    #[test]
    fn an_error_says_what_it_is_about_and_keeps_the_first_word() {
        let id = ActorId::new("player-7").unwrap();
        let e = Error::new(Reason::StaleLocation).about_actor(&id);
        assert_eq!(e.detail(), "actor player-7");
        assert!(e.to_string().contains("(actor player-7)"), "{e}");
        let e = e.about_type("player");
        assert_eq!(e.detail(), "actor player-7", "the innermost word stays");
        let e = Error::new(Reason::NoActorFactory).about_type("monster");
        assert!(e.to_string().contains("type monster"), "{e}");
        // An application error's own detail is never replaced.
        assert_eq!(Error::app(3, "x").about_actor(&id).detail(), "x");
    }

    #[test]
    fn a_detail_is_cut_to_its_bound_at_a_character_boundary() {
        let long = "é".repeat(Error::DETAIL_MAX);
        let e = Error::app(1, long);
        assert!(e.detail().len() <= Error::DETAIL_MAX);
        assert!(e.detail().len() >= Error::DETAIL_MAX - 1);
        assert!(e.detail().chars().all(|c| c == 'é'));
    }

    #[test]
    fn session_not_bound_is_an_invalid_operation() {
        let e = Error::new(Reason::SessionNotBound);
        assert_eq!(e.kind(), ErrorKind::InvalidOperation);
        assert!(e.to_string().contains("session-not-bound"));
    }
}

//! What an application hands the runtime besides its callbacks: the node's
//! settings, and the vocabulary of start failures and relocation units.
//! They live in the runtime, which reads them; `api` re-exports them.

use std::time::Duration;

use crate::core::lane::{ActorDeliveryLane, LaneEngine};
use crate::core::relocation::RelocationConfig;
use crate::error::{Error, Reason};
use crate::ids::{ActorId, PacketKey, SpotId};
use crate::net::IoBackend;
use crate::wire::DecodeLimits;

/// Settings of a node, with the spec's defaults where it gives one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSettings {
    /// §6 SessionReplacementCallbackTimeout (default 30,000 ms).
    pub replacement_callback_timeout: Duration,
    /// §8.1 SessionRelocationSealTimeout (default 3,000 ms).
    pub relocation_seal_timeout: Duration,
    /// §7 lifecycle deadline (default 5,000 ms): how long a disconnect
    /// notification waits for `on_disconnect_actor`, and how long each
    /// session callback still running after its connection ended (the
    /// session's `on_disconnect` included) may take before it is dropped.
    pub disconnect_deadline: Duration,
    /// Deadline of a bind request (default 5,000 ms).
    pub bind_timeout: Duration,
    /// §6 the send timeout of record 51 (default 5,000 ms): a
    /// boundSessionReplaced offered to a full link (its unsent bytes at
    /// `outbound_max`) waits for admission this long, then ends with
    /// DeadlineExceeded (`replaced_notice_deadline_exceeded`, dropped, no
    /// retry). It never delays the bind terminal (docs/threading.md
    /// "Settings").
    pub send_timeout: Duration,
    /// Deadline of a relayed request (default 5,000 ms).
    pub relay_deadline: Duration,
    /// How long a client frame that has begun may take to arrive whole
    /// (default 10,000 ms). A client that sends part of a frame and stops
    /// (a slow writer, "slowloris") is closed with `ProtocolError` then,
    /// counted as `client_frame_timeout` (docs/threading.md "Timeouts on
    /// the edges"). A quiet client between frames is not affected.
    pub client_frame_deadline: Duration,
    /// A connection to the WebSocket listener must finish its upgrade
    /// (the HTTP request and its 101 answer) within this long of its accept
    /// (default 10,000 ms, as the client frame deadline); one that has not
    /// is closed and counted as `websocket_handshake_timeout`
    /// (docs/threading.md "Timeouts on the edges").
    pub websocket_handshake_deadline: Duration,
    /// Packets a session may send a second, over any stretch of time
    /// (default 10,000; 0: no limit). A game client sends tens a second:
    /// the default only stops a flood. A packet over the rate is refused
    /// at ingress (a request ends `RateLimited`, a one-way message is
    /// dropped and counted).
    pub session_rate: u32,
    /// Packets a session may send at once above its rate (default 10,000).
    pub session_burst: u32,
    /// How long a node link connection may take to finish its handshake
    /// (default 5,000 ms), on either side; one that has not is closed and
    /// counted as `link_handshake_failed`.
    pub link_handshake_deadline: Duration,
    /// Bytes a client's outbound queue may hold before it is disconnected;
    /// a node link's unsent bytes at this bound make the link full, so that
    /// a 51 waits for admission (`send_timeout`, §6).
    pub outbound_max: usize,
    /// Sessions the node holds at most, over all its shards (default
    /// `usize::MAX`: no limit). A STREAM connection accepted beyond it is
    /// closed at once with `CloseReason::SessionLimit` and counted
    /// (`session_limit_refused`); a session counts from its accept until it
    /// ended (its disconnect procedure done, §7).
    pub max_sessions: usize,
    /// WebSocket upgrades one shard has in progress at most (default 512):
    /// connections to the WebSocket listener whose upgrade request is not
    /// whole yet. Such a connection is no session yet, so `max_sessions`
    /// does not bound it; each may buffer up to the 64 KiB request limit
    /// until the handshake deadline, so this bounds that memory (about
    /// 64 MiB a shard at the default). One over it is closed at its accept
    /// and counted (`websocket_upgrades_full`; docs/wire.md "WebSocket").
    pub websocket_upgrades_max: usize,
    /// Packets a session's lane may hold before new ones are refused.
    pub session_queue_max: usize,
    /// Messages an Actor's lane may hold before new ones are refused.
    pub actor_queue_max: usize,
    /// How long an Actor's turn may await ([`crate::api::AsyncTurn`],
    /// docs/actors.md "Async turns") before it is ended: its future is
    /// dropped, its continuation never runs, a request it was answering
    /// ends `DeadlineExceeded`, and its lane goes on (default 1,400 ms).
    /// It must be below `relocation_seal_timeout` minus the relocation's
    /// `prepare_timeout` (startup refuses it otherwise): a move waits for
    /// the awaiting turn to end before it seals anything, within its
    /// prepare bound.
    pub actor_turn_deadline: Duration,
    /// Messages a SpotWide Spot's gate (its one Spot lane, shared by all its
    /// Actors, §5) may hold before new ones are refused (default 16,384).
    pub spot_queue_max: usize,
    /// Frame and budget limits for decoding.
    pub decode_limits: DecodeLimits,
    /// Shards (threads) the node runs; 0 means one per available core, or
    /// one per listed core when `cores` lists some.
    pub shards: usize,
    /// Pin each shard's thread to its own core (core_affinity). Tests turn
    /// it off so several nodes share 2 cores without starving.
    pub pin_cores: bool,
    /// The core ids the shards are pinned to, shard `i` to `cores[i %
    /// len]`, when `pin_cores` is on (default empty: every core this
    /// process may run on, in order). An id this process may not run on
    /// fails startup.
    pub cores: Vec<usize>,
    /// §10: how long Shutdown lets accepted work finish before it closes the
    /// sessions (default 5,000 ms).
    pub shutdown_deadline: Duration,
    /// How often the owner lease is renewed; the store's lease term must be
    /// several times longer (default 1,000 ms).
    pub lease_renew_interval: Duration,
    /// The Actor owner's relocation settings: the coordinator's bounded
    /// waits, Message Follow's lifetime and bounds (docs/relocation.md
    /// "Settings"). Their `limits` are always the node's `decode_limits`.
    pub relocation: RelocationConfig,
    /// A shard loop turn whose work (after its wait) takes this long or
    /// longer is counted as `shard_stalled` and logged with the time of
    /// each phase, at most once a second per shard (default 50 ms; zero
    /// turns the watch off). Every session and Actor of a shard waits
    /// while its turn runs: a stall is usually a handler that blocks
    /// (docs/operations.md "Shard stalls").
    pub stall_warn: Duration,
    /// After start, the node is not ready (`/readyz`, `Readiness::Linking`)
    /// until every peer it knows then (configured, or in the membership's
    /// first listing) is linked, or until this long has passed: a peer that
    /// is down delays readiness by at most this much (default 5,000 ms,
    /// about two of a peer's redials at their longest; zero: ready without
    /// waiting for links; docs/operations.md "Probes").
    pub ready_link_wait: Duration,
    /// Which system interface runs the shards' socket loops (issue 8;
    /// docs/threading.md "Choosing a backend"). `Auto` (the default) runs on
    /// io_uring where it is permitted and on epoll, with one warning, where
    /// it is not; `IoUring` where it is not permitted fails startup.
    pub io_backend: IoBackend,
}

impl Default for NodeSettings {
    fn default() -> Self {
        Self {
            replacement_callback_timeout: Duration::from_millis(30_000),
            relocation_seal_timeout: Duration::from_millis(3_000),
            disconnect_deadline: Duration::from_millis(5_000),
            bind_timeout: Duration::from_millis(5_000),
            send_timeout: Duration::from_millis(5_000),
            relay_deadline: Duration::from_millis(5_000),
            client_frame_deadline: Duration::from_millis(10_000),
            websocket_handshake_deadline: Duration::from_millis(10_000),
            session_rate: 10_000,
            session_burst: 10_000,
            link_handshake_deadline: Duration::from_millis(5_000),
            outbound_max: 4 << 20,
            max_sessions: usize::MAX,
            websocket_upgrades_max: 512,
            session_queue_max: 1_024,
            actor_queue_max: 4_096,
            actor_turn_deadline: Duration::from_millis(1_400),
            spot_queue_max: 16_384,
            decode_limits: DecodeLimits::default(),
            shutdown_deadline: Duration::from_millis(5_000),
            shards: 0,
            pin_cores: true,
            cores: Vec::new(),
            lease_renew_interval: Duration::from_millis(1_000),
            relocation: RelocationConfig::default(),
            stall_warn: Duration::from_millis(50),
            ready_link_wait: Duration::from_millis(5_000),
            io_backend: IoBackend::Auto,
        }
    }
}

impl NodeSettings {
    /// Every lane bound is one the one lane engine can hold (§11): at least
    /// one item and at most `LaneEngine::CAPACITY_MAX`, so a bad setting
    /// fails startup rather than a shard at its first session or Actor.
    pub(crate) fn check_lane_bounds(&self) -> Result<(), StartError> {
        let max = LaneEngine::<ActorDeliveryLane, ()>::CAPACITY_MAX;
        for (name, value) in [
            ("session_queue_max", self.session_queue_max),
            ("actor_queue_max", self.actor_queue_max),
            ("spot_queue_max", self.spot_queue_max),
        ] {
            if !(1..=max).contains(&value) {
                return Err(StartError::Invalid(format!(
                    "{name} = {value}: a lane holds 1 to {max} items"
                )));
            }
        }
        Ok(())
    }

    /// The client frame limit is within the mesh-wide ceiling that node
    /// links carry (docs/wire.md "Limits").
    pub(crate) fn check_frame_limit(&self) -> Result<(), StartError> {
        if !self.decode_limits.frame_len_max_allowed() {
            return Err(StartError::Invalid(format!(
                "decode_limits.frame_len_max = {}: it must be 1 to {} bytes, \
                 what a node link carries",
                self.decode_limits.frame_len_max,
                DecodeLimits::FRAME_LEN_MAX_CEILING
            )));
        }
        Ok(())
    }

    /// An awaiting turn ends before a move waiting for it could outlast its
    /// seal (issue 21 item 3): the turn deadline is below the seal timeout
    /// minus the prepare timeout.
    pub(crate) fn check_turn_deadline(&self) -> Result<(), StartError> {
        let bound = self
            .relocation_seal_timeout
            .saturating_sub(self.relocation.prepare_timeout);
        if self.actor_turn_deadline.is_zero() || self.actor_turn_deadline >= bound {
            return Err(StartError::Invalid(format!(
                "actor_turn_deadline = {:?}: it must be above zero and below \
                 relocation_seal_timeout ({:?}) minus the prepare timeout ({:?})",
                self.actor_turn_deadline,
                self.relocation_seal_timeout,
                self.relocation.prepare_timeout
            )));
        }
        Ok(())
    }
}

/// Why a node did not start (§3): each is a configuration error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Actor dispatch is enabled but the process has no object role.
    #[error("configuration error: actor dispatch needs an object role (client or server)")]
    NoObjectRole,
    /// Actor dispatch is enabled but no Location Store is configured.
    #[error("configuration error: actor dispatch needs a Location Store; none is configured")]
    NoLocationStore,
    /// Two handlers were registered for one packet key.
    #[error("configuration error: two handlers for packet key {}", .0 .0)]
    DuplicatePacketHandler(PacketKey),
    /// `IoBackend::IoUring` was demanded and io_uring is not permitted or
    /// not supported here; the message says why and how to enable it.
    #[error("configuration error: {0}")]
    IoUring(String),
    /// The Location Store refused the owner lease.
    #[error("configuration error: the Location Store refused the owner lease: {0}")]
    Lease(String),
    /// Another setting is invalid.
    #[error("configuration error: {0}")]
    Invalid(String),
    /// A socket could not be set up.
    #[error("could not start: {0}")]
    Io(String),
    /// The Location Store says this lifecycle's owner lease lapsed: a
    /// request whose answer was lost took it, and it ran out before the
    /// start could use it (a store outage longer than a lease term at
    /// start). §5: a lapsed lifecycle stays dead; start again as a new
    /// one (`zlink-node` exits 3, as for a lease that lapses later).
    #[error("the owner lease lapsed: {0}")]
    LeaseLapsed(String),
    /// The start was ended by [`StartCancel::cancel`](crate::api::StartCancel::cancel)
    /// before it returned a node; whatever it had taken was given back.
    #[error("the start was cancelled")]
    Cancelled,
}

impl StartError {
    /// The closed vocabulary's reason: a start ended by its own
    /// [`StartCancel`](crate::api::StartCancel) is a node shutting down, one
    /// whose lease lapsed `LeaseExpired`, every other start failure a
    /// configuration error.
    pub fn error(&self) -> Error {
        match self {
            Self::Cancelled => Error::new(Reason::ShuttingDown),
            Self::LeaseLapsed(_) => Error::new(Reason::LeaseExpired),
            _ => Error::new(Reason::InvalidConfiguration),
        }
    }
}

/// What [`Node::relocate_all`](crate::api::Node::relocate_all) moves: an Actor alone, or a SpotWide Spot
/// with its Actors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RelocationUnit {
    /// An Actor of its type's Entry Spot, or of a PerActor User Spot.
    Actor(ActorId),
    /// A SpotWide User Spot.
    Spot(SpotId),
}

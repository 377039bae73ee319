//! The closed flow-trace vocabulary (DESIGN "Flow trace"): every rejection,
//! drop and fallback the contract cares about has a name, is emitted through
//! `tracing` and is counted, so that nothing refused vanishes unrecorded (§5
//! point 4, §6, §8.1).

use std::fmt;

macro_rules! flow_trace {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, $level:ident; )*) => {
        /// A named flow event.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum FlowTrace {
            $( $(#[$doc])* $variant, )*
        }

        impl FlowTrace {
            /// Every event, in declaration order.
            pub const ALL: &'static [FlowTrace] = &[$(FlowTrace::$variant),*];

            /// The event's stable snake-case name.
            pub fn name(self) -> &'static str {
                match self { $( FlowTrace::$variant => $name, )* }
            }

            /// Whether the event is a warning (an anomaly a person should see)
            /// rather than an expected rejection.
            pub fn is_warning(self) -> bool {
                match self { $( FlowTrace::$variant => flow_trace!(@warn $level), )* }
            }
        }
    };
    (@warn warn) => { true };
    (@warn debug) => { false };
}

flow_trace! {
    /// §5 point 4: a push (36) refused because its generations are not current.
    PushRejectedNotCurrent => "push_rejected_not_current", debug;
    /// §5: a push or close (36) for a session this owner does not have.
    PushRejectedNoSession => "push_rejected_no_session", debug;
    /// §6: relay (24) carrying a retired or unknown binding identity, refused.
    RelayRejectedStaleBinding => "relay_rejected_stale_binding", debug;
    /// §5: relay (24) for an ObjectGeneration or authority that is not current.
    RelayRejectedStaleFence => "relay_rejected_stale_fence", debug;
    /// §6: a bind admitted that replaced another binding of the Actor
    /// (counted by the Actor's owner, once per replacement).
    BindingReplaced => "binding_replaced", debug;
    /// §6: a record 51 retired a binding of this session owner's session
    /// (counted by the replaced session's owner; on one node, a
    /// replacement counts this and `binding_replaced` once each).
    BindingRetired => "binding_retired", debug;
    /// §6: record 51 whose previous session-owner values do not match.
    ReplacedNoticeMismatch => "replaced_notice_mismatch", debug;
    /// §6: record 51 for a binding already retired here (late or duplicate).
    ReplacedNoticeDuplicate => "replaced_notice_duplicate", debug;
    /// §6: a record 51 not admitted to its full link before the send
    /// timeout: it ended with DeadlineExceeded and was dropped (no retry).
    ReplacedNoticeDeadlineExceeded => "replaced_notice_deadline_exceeded", warn;
    /// §6: the replacement callback reached no terminal in time.
    ReplacementCallbackTimeout => "replacement_callback_timeout", warn;
    /// §6: the 100 ms close timer found its target no longer current.
    ReplacementCloseSuperseded => "replacement_close_superseded", debug;
    /// §7: a session callback turn that ran after its session ended
    /// outlived the lifecycle deadline: it was dropped and its lane moved on.
    SessionTurnExpired => "session_turn_expired", warn;
    /// §6: the replacement callback ended with a failure.
    ReplacementCallbackFailed => "replacement_callback_failed", warn;
    /// §7: a disconnect callback ended with a failure.
    DisconnectCallbackFailed => "disconnect_callback_failed", warn;
    /// §7: a disconnect callback reached no terminal before the lifecycle deadline.
    DisconnectCallbackTimeout => "disconnect_callback_timeout", warn;
    /// §7: a second disconnect notification for a binding already notified.
    DisconnectDeduplicated => "disconnect_deduplicated", debug;
    /// §6, §7: a tombstone (38) for an identity that is not current: ignored.
    TombstoneStale => "tombstone_stale", debug;
    /// §12: a reply for a request that already ended or whose session closed.
    LateReplyDropped => "late_reply_dropped", debug;
    /// A reply from another node than the request's, or of another kind:
    /// ignored; the request waits for its own reply or its deadline.
    ReplyMismatch => "reply_mismatch", warn;
    /// §12: a request ended with DeadlineExceeded.
    RequestDeadlineExceeded => "request_deadline_exceeded", debug;
    /// §5, §6: a record from a previous node lifecycle, ignored.
    StaleLifecycleRecord => "stale_lifecycle_record", debug;
    /// §8.1: command 44 after the seal ended, for another relocation, or twice.
    LateSessionRouteUpdate => "late_session_route_update", warn;
    /// §8.1: a relocation seal timed out and closed the session.
    SealTimeout => "seal_timeout", warn;
    /// §8.1: a message held under a seal dropped undelivered (the seal timed
    /// out, or its binding was retired while sealed).
    HeldMessageDropped => "held_message_dropped", debug;
    /// §8.2: a message held under a seal went out when the seal was released
    /// (over the target's route after a commit, the source's after an abort).
    HeldMessageReleased => "held_message_released", debug;
    /// §8.1: an item of the saved work or the ingress hold reached the Actor
    /// at the target after the commit (queue merge).
    RelocationWorkMerged => "relocation_work_merged", debug;
    /// §8.2: a 44 commit switched a sealed binding's route to the target.
    SessionRouteCommitted => "session_route_committed", debug;
    /// §8.2: a 44 abort released a seal; held messages went over the source route.
    SessionSealAborted => "session_seal_aborted", debug;
    /// §8.1: the target's cutover fallback fired.
    CutoverTimeout => "cutover_timeout", warn;
    /// §8.1: a coordinator handed its 60 prepare to the link to the target;
    /// the move now waits on the target's 61, the prepare timeout, or the
    /// link dropping (which aborts it at once).
    RelocationPrepareSent => "relocation_prepare_sent", debug;
    /// §8.1: a relocation committed (the target's CAS swapped authority).
    RelocationCommitted => "relocation_committed", debug;
    /// §8.1: a relocation was aborted before relay-ready; the source stays owner.
    RelocationAborted => "relocation_aborted", warn;
    /// §8.1: a relocation failed after relay-ready (CAS failure, no finish);
    /// no path reopens the source route.
    RelocationFailed => "relocation_failed", warn;
    /// A relocation record or answer (43, 60–65, a proxied reply, a runtime
    /// answer) that names no relocation in that state: late or duplicate, ignored.
    RelocationRecordStale => "relocation_record_stale", warn;
    /// §8.1: the durable abort, or the target's CAS, could not reach the
    /// Location Store (its outcome unknown); retried.
    RelocationStoreRetry => "relocation_store_retry", warn;
    /// §1, L6: a create found the store row naming this node for an
    /// incarnation it no longer hosts (lost after relay-ready): the row was
    /// removed and a new incarnation created in its place.
    LostIncarnationReplaced => "lost_incarnation_replaced", warn;
    /// A BindOrGet found the Actor's live row naming another node and asked
    /// that node to run it (71, src/core/host_ask.rs).
    HostAsked => "host_asked", debug;
    /// An answer to a 71 ask that this shard no longer waits for (its
    /// deadline passed, or it came from another node): dropped.
    LateHostAnswerDropped => "late_host_answer_dropped", debug;
    /// A BindOrGet found its Actor ending here (its destroy's row removal
    /// with the store) and waits for the destroy to end before it starts
    /// again (src/core/creation.rs, "an ending Actor").
    HostWaitedForDestroy => "host_waited_for_destroy", debug;
    /// A recheck after an unknown store outcome found a row naming this
    /// node for an incarnation it neither hosts nor is moving (a create
    /// whose answer was lost, or an L6 loss): the row is removed at its
    /// version, and nothing created (src/core/recheck.rs).
    OrphanRowFound => "orphan_row_found", warn;
    /// A Location Store operation offered to the node's full store queue:
    /// refused at once with Unavailable (StoreUnavailable), never queued
    /// without bound (docs/threading.md "Never block a shard").
    StoreQueueFull => "store_queue_full", warn;
    /// §9: a record for a moved Actor was forwarded once over Message Follow.
    MessageFollowed => "message_followed", debug;
    /// A well-formed record this node has no handler for (a later feature).
    UnhandledRecord => "unhandled_record", warn;
    /// §6: a one-way record refused by its judge (stale binding, fence).
    OneWayRecordRefused => "one_way_record_refused", debug;
    /// A record for a node this node has no link to: dropped; a request
    /// among them ends at its deadline with a typed error.
    RecordUnroutable => "record_unroutable", warn;
    /// §8.1: a 44 that waited for its link to the session owner for the
    /// send timeout and found none: dropped (the seal timeout there ends
    /// the binding's seal; src/core/admission.rs).
    RouteUpdateUnroutable => "route_update_unroutable", warn;
    /// A shard's loop turn worked `NodeSettings::stall_warn` or longer
    /// after its wait: every session and Actor of the shard waited on it
    /// (src/runtime/stall.rs; its own warning, rate-limited, names the
    /// phases).
    ShardStalled => "shard_stalled", debug;
    /// A shard's loop turn took its budget of inbox messages (records and
    /// transmits from other shards, store answers, commands) and left the
    /// rest for its next turn, so that its own sockets and timers are not
    /// held up: the shard gets more from the other shards than one turn
    /// takes (src/runtime/shard.rs `INBOX_BUDGET`).
    InboxBudgetSpent => "inbox_budget_spent", debug;
    /// A record larger than a link frame may be (an Actor's reply or push
    /// over the limits): not sent, so the peer never drops the link for it;
    /// a reply among them is answered with MessageTooLarge instead, a
    /// request ends as unroutable (docs/wire.md "Limits").
    RecordTooLarge => "record_too_large", warn;
    /// A link frame whose length prefix is over the link limit: the stream
    /// cannot be resynchronised, so the link was closed. No record this
    /// node or a client produces can cause it (docs/wire.md "Limits").
    LinkFrameTooLong => "link_frame_too_long", warn;
    /// A client frame that had begun did not arrive whole within the
    /// client frame deadline (a slow writer): the session was closed with
    /// ProtocolError (docs/threading.md "Timeouts on the edges").
    ClientFrameTimeout => "client_frame_timeout", debug;
    /// A client that does not read what it is sent (a stalled or hostile
    /// reader): its outbound queue grew past `NodeSettings::outbound_max`,
    /// so the connection was aborted rather than let the node's memory
    /// grow (docs/threading.md "Timeouts on the edges").
    ClientOutboundOverflow => "client_outbound_overflow", warn;
    /// A WebSocket connection that did not finish its upgrade within the
    /// handshake deadline: closed (docs/threading.md "Timeouts on the edges").
    WebSocketHandshakeTimeout => "websocket_handshake_timeout", debug;
    /// A WebSocket upgrade refused with 400: a request that is no upgrade,
    /// is too large, or whose `Sec-WebSocket-Key` is not 16 bytes in
    /// base64; closed.
    WebSocketUpgradeRefused => "websocket_upgrade_refused", debug;
    /// A WebSocket upgrade refused with 403: a browser's `Origin` not on the
    /// allow-list, or more than one `Origin`; closed. Counted apart from
    /// the 400s: these are pages of other sites (docs/wire.md "WebSocket").
    WebSocketOriginRefused => "websocket_origin_refused", debug;
    /// A connection to the WebSocket listener closed at its accept: its
    /// shard already had as many upgrades in progress as it takes
    /// (`NodeSettings::websocket_upgrades_max`).
    WebSocketUpgradesFull => "websocket_upgrades_full", warn;
    /// A WebSocket message over the client frame limit, refused as soon as
    /// its header announced it: the connection was closed with 1009 and
    /// `ProtocolError` (docs/wire.md "WebSocket").
    WebSocketMessageTooLarge => "websocket_message_too_large", debug;
    /// Bytes on an upgraded WebSocket connection that are not WebSocket
    /// (bad framing, an unmasked frame) or a text message: closed with
    /// 1002 or 1003 and `ProtocolError`.
    WebSocketProtocolError => "websocket_protocol_error", debug;
    /// A client packet over its session's rate limit: a request ended
    /// RateLimited, a one-way message was dropped (this counts both).
    SessionRateLimited => "session_rate_limited", debug;
    /// A client packet refused because its session's lane held
    /// `session_queue_max` packets: a request ended QueueFull, a one-way
    /// message was dropped (this counts both; a client that pipelines
    /// faster than its handler runs).
    SessionQueueFull => "session_queue_full", debug;
    /// An answer (a reply, a terminal, 43, 61, 65) to a request of a peer's
    /// previous NodeGeneration: dropped, never given to the peer's new
    /// lifecycle, whose own requests reuse the ids (§4).
    AnswerToPastLifecycleDropped => "answer_to_past_lifecycle_dropped", debug;
    /// A ROUTER link handshake failed (wrong secret, mesh, version).
    LinkHandshakeFailed => "link_handshake_failed", warn;
    /// A link handshake between nodes of different link protocol versions:
    /// refused (also counted as `link_handshake_failed`), on the accepting
    /// side with a `VersionRefused` frame naming its version
    /// (docs/operations.md "Versions").
    LinkVersionRefused => "link_version_refused", warn;
    /// A record for this node's Actor owner arrived on a link of another
    /// mesh than the home mesh its routes name: refused, a request with
    /// `Unavailable` (MeshUnreachable) (docs/threading.md "Several meshes").
    RecordFromOtherMesh => "record_from_other_mesh", warn;
    /// A Hello from a node that is not a peer of this node in the mesh it
    /// names (not configured, not listed by the membership): refused before
    /// any Welcome (also counted as `link_handshake_failed`; issue 20 item
    /// 2, docs/threading.md "Node links").
    UnexpectedLinkPeer => "unexpected_link_peer", warn;
    /// A link from a previous NodeGeneration of a peer was refused or closed.
    StaleLinkGeneration => "stale_link_generation", warn;
    /// A peer's lease lapsed (it left the store's membership): its links
    /// were dropped and its lifecycle fenced (docs/store.md "Membership").
    PeerLeaseLapsed => "peer_lease_lapsed", warn;
    /// A STREAM connection accepted while the node held its most sessions
    /// (`NodeSettings::max_sessions`): closed at once with
    /// `CloseReason::SessionLimit`.
    SessionLimitRefused => "session_limit_refused", warn;
    /// §6: a malformed control or one-way record, dropped and counted.
    MalformedRecordDropped => "malformed_record_dropped", warn;
    /// A tick of an Actor's timer came due while its previous tick was
    /// still queued or running (or its lane was full): skipped, never fired
    /// in a burst (docs/actors.md "Timers").
    ActorTimerTickSkipped => "actor_timer_tick_skipped", debug;
    /// An Actor's turn awaited past `actor_turn_deadline`: ended, its
    /// continuation never run, a request it answered `DeadlineExceeded`
    /// (docs/actors.md "Async turns").
    ActorTurnDeadlineExceeded => "actor_turn_deadline_exceeded", warn;
    /// A move (or a Spot move's next member) waits, parked, for the
    /// Actor's awaiting turn to end before it seals anything
    /// (docs/actors.md "Async turns").
    RelocationWaitsForTurn => "relocation_waits_for_turn", debug;
    /// A parked move went on when the turn it waited for ended (or was
    /// over at its deadline).
    RelocationUnparked => "relocation_unparked", debug;
    /// §12: a request in flight to a peer (a relay, an Actor call) ended
    /// with OutcomeUnknown when the link to that peer went down.
    RequestLinkDown => "request_link_down", debug;
}

impl fmt::Display for FlowTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One counter per [`FlowTrace`] event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowCounters {
    counts: [u64; FlowTrace::ALL.len()],
}

impl Default for FlowCounters {
    fn default() -> Self {
        Self {
            counts: [0; FlowTrace::ALL.len()],
        }
    }
}

impl FlowCounters {
    /// Counts `event`. Its log line is the core's to write, within a
    /// budget (`Effects::trace`).
    pub fn record(&mut self, event: FlowTrace) {
        self.counts[event as usize] += 1;
    }

    /// How many times `event` was recorded.
    pub fn get(&self, event: FlowTrace) -> u64 {
        self.counts[event as usize]
    }

    /// Adds `count` occurrences of `event` (a node sums its shards).
    pub fn add(&mut self, event: FlowTrace, count: u64) {
        self.counts[event as usize] += count;
    }

    /// Adds every count of `other` into `self` (a node sums its parts).
    pub fn merge(&mut self, other: &FlowCounters) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine += theirs;
        }
    }

    /// Every event with a non-zero count.
    pub fn nonzero(&self) -> impl Iterator<Item = (FlowTrace, u64)> + '_ {
        FlowTrace::ALL
            .iter()
            .map(|&e| (e, self.get(e)))
            .filter(|&(_, n)| n > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_counts_add_up() {
        let mut names: Vec<_> = FlowTrace::ALL.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FlowTrace::ALL.len());

        let mut a = FlowCounters::default();
        a.record(FlowTrace::LateSessionRouteUpdate);
        a.record(FlowTrace::LateSessionRouteUpdate);
        let mut b = FlowCounters::default();
        b.record(FlowTrace::PushRejectedNotCurrent);
        b.merge(&a);
        assert_eq!(b.get(FlowTrace::LateSessionRouteUpdate), 2);
        assert_eq!(b.get(FlowTrace::PushRejectedNotCurrent), 1);
        assert_eq!(b.nonzero().count(), 2);
    }

    /// An event displays as its stable snake-case name, the one the logs,
    /// the demo's report (`{event} {n}`) and the `event` label of
    /// `zlink_flow_events_total` use (docs/operations.md): never empty,
    /// never another event's.
    #[test]
    fn every_event_displays_as_its_stable_name() {
        for &event in FlowTrace::ALL {
            assert_eq!(event.to_string(), event.name(), "{event:?}");
        }
        assert_eq!(
            FlowTrace::SessionLimitRefused.to_string(),
            "session_limit_refused"
        );
        assert_eq!(
            format!("{} {}", FlowTrace::SealTimeout, 3),
            "seal_timeout 3"
        );
    }

    /// `add` puts `count` more occurrences onto what was recorded, for that
    /// event alone (a node sums its shards' published counters this way).
    #[test]
    fn added_counts_sum_onto_recorded_ones_for_that_event_alone() {
        let mut counters = FlowCounters::default();
        counters.record(FlowTrace::SealTimeout);
        counters.add(FlowTrace::SealTimeout, 3);
        counters.add(FlowTrace::CutoverTimeout, 2);
        counters.add(FlowTrace::CutoverTimeout, 5);
        counters.add(FlowTrace::HostAsked, 0);
        assert_eq!(counters.get(FlowTrace::SealTimeout), 4);
        assert_eq!(counters.get(FlowTrace::CutoverTimeout), 7);
        assert_eq!(counters.get(FlowTrace::HostAsked), 0);
        let nonzero: Vec<_> = counters.nonzero().collect();
        assert_eq!(
            nonzero,
            vec![(FlowTrace::SealTimeout, 4), (FlowTrace::CutoverTimeout, 7)]
        );
    }
}

//! The node-record codec (docs/wire.md "Node records"): every record variant
//! round-trips, every malformation is its own typed error, and no byte string
//! panics or decodes to a value that encodes differently.

mod fuzz_seed;
mod wire_support;

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use zlink::error::{Error, ErrorKind, Reason};
use zlink::ids::{
    ActorId, ActorLocation, ActorRef, ActorTypeName, AuthorityOwnerGeneration, BindingGeneration,
    CallId, Correlation, MeshName, NameError, NodeGeneration, NodeRid, ObjectGeneration,
    OwnerLeaseGeneration, PacketKey, RelocationId, RequestId, SessionOwnerId, SessionRef,
    SessionRid, SessionSequence, TimerId,
};
use zlink::wire::client::CloseReason;
use zlink::wire::node::*;
use zlink::wire::{DecodeLimits, WireError};

use wire_support::{
    assert_every_byte_substitution_total, assert_every_prefix_truncated,
    assert_total_and_canonical, edits, error, frame_and_body, payload,
};

// ---- strategies -------------------------------------------------------------

fn name_text(chars_max: usize, ascii_max: usize) -> impl Strategy<Value = String> {
    prop_oneof![
        // Multi-byte UTF-8 (at most 4 bytes a char, so within the limit).
        vec(any::<char>(), 1..=chars_max).prop_map(String::from_iter),
        // ASCII up to the exact byte limit.
        (1..=ascii_max).prop_map(|len| "a".repeat(len)),
    ]
}

fn actor_id() -> impl Strategy<Value = ActorId> {
    name_text(63, ActorId::LEN_MAX).prop_map(|s| ActorId::new(&s).unwrap())
}

fn mesh_name() -> impl Strategy<Value = MeshName> {
    name_text(16, MeshName::LEN_MAX).prop_map(|s| MeshName::new(&s).unwrap())
}

fn session_ref() -> impl Strategy<Value = SessionRef> {
    (any::<u64>(), any::<u64>(), any::<u16>(), any::<u64>()).prop_map(|(o, l, id, s)| SessionRef {
        owner: NodeRid(o),
        lifecycle: NodeGeneration(l),
        owner_id: SessionOwnerId(id),
        session: SessionRid(s),
    })
}

/// Whole milliseconds within the default limit: what survives the trip.
fn request_header() -> impl Strategy<Value = RequestHeader> {
    (
        any::<u64>(),
        0..=u64::from(DecodeLimits::BUDGET_MAX_MS_DEFAULT),
    )
        .prop_map(|(id, ms)| RequestHeader {
            id: RequestId(id),
            budget: Duration::from_millis(ms),
        })
}

fn seal_identity() -> impl Strategy<Value = SealIdentity> {
    (any::<u64>(), any::<u64>(), session_ref(), any::<u64>()).prop_map(|(c, seq, session, b)| {
        SealIdentity {
            relocation: RelocationId {
                coordinator: NodeRid(c),
                sequence: seq,
            },
            session,
            binding: BindingGeneration(b),
        }
    })
}

fn close_reason() -> impl Strategy<Value = CloseReason> {
    select(vec![
        CloseReason::Replaced,
        CloseReason::SealTimeout,
        CloseReason::ActorRequested,
        CloseReason::Shutdown,
        CloseReason::ProtocolError,
        CloseReason::KeepaliveTimeout,
        CloseReason::Application,
        CloseReason::AuthenticationFailed,
        CloseReason::SessionLimit,
    ])
}

fn actor_send_body() -> impl Strategy<Value = ActorSendBody> {
    prop_oneof![
        (any::<u16>(), proptest::option::of(any::<u32>()), payload()).prop_map(
            |(k, c, payload)| ActorSendBody::Payload {
                key: PacketKey(k),
                correlation: c.map(Correlation),
                payload,
            }
        ),
        Just(ActorSendBody::DisconnectNotice),
    ]
}

fn actor_send() -> impl Strategy<Value = ActorSend> {
    let message = (
        proptest::option::of(request_header()),
        actor_id(),
        any::<[u64; 3]>(),
        (session_ref(), any::<u64>(), any::<u64>()),
        actor_send_body(),
    )
        .prop_map(
            |(request, actor, [og, auth, lease], (session, b, seq), body)| {
                ActorSend::Message(ActorMessage {
                    request,
                    actor,
                    object_generation: ObjectGeneration(og),
                    authority: AuthorityOwnerGeneration(auth),
                    lease: OwnerLeaseGeneration(lease),
                    tail: BoundSessionTail {
                        session,
                        binding: BindingGeneration(b),
                        sequence: SessionSequence(seq),
                    },
                    body,
                })
            },
        );
    let reply = (
        any::<u64>(),
        prop_oneof![payload().prop_map(Ok), error().prop_map(Err)],
    )
        .prop_map(|(id, outcome)| {
            ActorSend::Reply(ActorReply {
                request: RequestId(id),
                outcome,
            })
        });
    prop_oneof![message, reply]
}

fn bound_session_send() -> impl Strategy<Value = BoundSessionSend> {
    let body = prop_oneof![
        (any::<u16>(), payload()).prop_map(|(k, payload)| BoundSessionBody::Push {
            key: PacketKey(k),
            payload,
        }),
        close_reason().prop_map(|reason| BoundSessionBody::Close { reason }),
    ];
    (session_ref(), actor_id(), any::<[u64; 4]>(), body).prop_map(
        |(session, actor, [b, og, ng, auth], body)| BoundSessionSend {
            session,
            binding: BindingGeneration(b),
            actor,
            object_generation: ObjectGeneration(og),
            node_generation: NodeGeneration(ng),
            authority: AuthorityOwnerGeneration(auth),
            body,
        },
    )
}

fn bound_route() -> impl Strategy<Value = BoundRoute> {
    (mesh_name(), any::<[u64; 4]>()).prop_map(|(mesh, [o, ng, auth, lease])| BoundRoute {
        mesh,
        owner: NodeRid(o),
        node_generation: NodeGeneration(ng),
        authority: AuthorityOwnerGeneration(auth),
        lease: OwnerLeaseGeneration(lease),
    })
}

fn bound_session_bind() -> impl Strategy<Value = BoundSessionBind> {
    let request = (
        request_header(),
        actor_id(),
        any::<[u64; 6]>(),
        session_ref(),
    )
        .prop_map(|(request, actor, [og, ng, auth, lease, sl, b], session)| {
            BoundSessionBind::Request(BindRequest {
                request,
                actor,
                object_generation: ObjectGeneration(og),
                target_node_generation: NodeGeneration(ng),
                authority: AuthorityOwnerGeneration(auth),
                lease: OwnerLeaseGeneration(lease),
                session,
                session_lease: OwnerLeaseGeneration(sl),
                binding: BindingGeneration(b),
            })
        });
    let terminal = (
        any::<u64>(),
        prop_oneof![bound_route().prop_map(Ok), error().prop_map(Err)],
    )
        .prop_map(|(id, outcome)| {
            BoundSessionBind::Terminal(BindTerminal {
                request: RequestId(id),
                outcome,
            })
        });
    let cause = select(vec![
        TombstoneCause::Disconnect,
        TombstoneCause::Notified,
        TombstoneCause::Replaced,
    ]);
    let tombstone = (actor_id(), any::<[u64; 2]>(), session_ref(), cause).prop_map(
        |(actor, [og, b], session, cause)| {
            BoundSessionBind::Tombstone(BindTombstone {
                actor,
                object_generation: ObjectGeneration(og),
                session,
                binding: BindingGeneration(b),
                cause,
            })
        },
    );
    prop_oneof![request, terminal, tombstone]
}

fn relocation_seal() -> impl Strategy<Value = SessionRelocationSeal> {
    (request_header(), seal_identity(), actor_id(), any::<u64>()).prop_map(
        |(request, seal, actor, og)| SessionRelocationSeal {
            request,
            seal,
            actor,
            object_generation: ObjectGeneration(og),
        },
    )
}

fn relocation_sealed() -> impl Strategy<Value = SessionRelocationSealed> {
    (
        any::<u64>(),
        prop_oneof![Just(Ok(())), error().prop_map(Err)],
    )
        .prop_map(|(id, outcome)| SessionRelocationSealed {
            request: RequestId(id),
            outcome,
        })
}

fn relocation_route() -> impl Strategy<Value = SessionRelocationRoute> {
    let commit = (seal_identity(), actor_id(), mesh_name(), any::<[u64; 5]>()).prop_map(
        |(seal, actor, target_mesh, [og, t, ng, auth, lease])| {
            SessionRelocationRoute::Commit(RouteCommit {
                seal,
                actor,
                object_generation: ObjectGeneration(og),
                target_mesh,
                target: NodeRid(t),
                target_node_generation: NodeGeneration(ng),
                authority: AuthorityOwnerGeneration(auth),
                lease: OwnerLeaseGeneration(lease),
            })
        },
    );
    prop_oneof![
        commit,
        seal_identity().prop_map(SessionRelocationRoute::Abort)
    ]
}

fn replaced() -> impl Strategy<Value = BoundSessionReplaced> {
    (actor_id(), any::<[u64; 6]>(), session_ref()).prop_map(
        |(actor, [og, o, ng, auth, pl, r], previous)| BoundSessionReplaced {
            fence: AuthorityFence {
                actor,
                object_generation: ObjectGeneration(og),
                owner: NodeRid(o),
                node_generation: NodeGeneration(ng),
                authority: AuthorityOwnerGeneration(auth),
            },
            previous,
            previous_lease: OwnerLeaseGeneration(pl),
            retired: BindingGeneration(r),
        },
    )
}

fn tombstone_cause() -> impl Strategy<Value = TombstoneCause> {
    select(vec![
        TombstoneCause::Disconnect,
        TombstoneCause::Notified,
        TombstoneCause::Replaced,
    ])
}

fn relocation_id() -> impl Strategy<Value = RelocationId> {
    (any::<u64>(), any::<u64>()).prop_map(|(c, sequence)| RelocationId {
        coordinator: NodeRid(c),
        sequence,
    })
}

fn saved_work() -> impl Strategy<Value = SavedWork> {
    prop_oneof![
        (
            proptest::option::of(request_header()),
            any::<u16>(),
            proptest::option::of(any::<u32>()),
            any::<u64>(),
            payload()
        )
            .prop_map(|(request, k, c, seq, payload)| SavedWork::Deliver {
                request,
                key: PacketKey(k),
                correlation: c.map(Correlation),
                sequence: SessionSequence(seq),
                payload,
            }),
        (request_header(), session_ref())
            .prop_map(|(request, session)| SavedWork::Disconnect { request, session }),
        session_ref().prop_map(|session| SavedWork::Bound { session }),
        (session_ref(), any::<u64>(), tombstone_cause()).prop_map(|(session, b, cause)| {
            SavedWork::Tombstone {
                session,
                binding: BindingGeneration(b),
                cause,
            }
        }),
        any::<[u64; 2]>().prop_map(|[timer, tick]| SavedWork::Timer {
            timer: TimerId(timer),
            tick,
        }),
        (
            proptest::option::of(request_header()),
            proptest::option::of(actor_id()),
            any::<u16>(),
            payload()
        )
            .prop_map(|(request, from, k, payload)| SavedWork::Call {
                request,
                from,
                key: PacketKey(k),
                payload,
            }),
        (any::<u64>(), payload()).prop_map(|(call, reply)| SavedWork::CallOutcome {
            call: CallId(call),
            outcome: Ok(reply),
        }),
    ]
}

fn timers_handoff() -> impl Strategy<Value = TimersHandoff> {
    let timer = (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
        |(timer, remaining, period, ticks)| TimerHandoff {
            timer: TimerId(timer),
            remaining: Duration::from_micros(remaining),
            // The encoding keeps microseconds, 0 for a one-shot.
            period: Some(Duration::from_micros(period)).filter(|p| !p.is_zero()),
            ticks,
        },
    );
    (any::<u64>(), vec(timer, 0..4)).prop_map(|(next, timers)| TimersHandoff {
        next: TimerId(next),
        timers,
    })
}

fn calls_handoff() -> impl Strategy<Value = CallsHandoff> {
    // The encoding keeps microseconds.
    let open = (any::<u64>(), any::<u64>())
        .prop_map(|(call, left)| (CallId(call), Duration::from_micros(left)));
    (any::<u64>(), vec(open, 0..4)).prop_map(|(last, open)| CallsHandoff {
        last: CallId(last),
        open,
    })
}

fn binding_handoff() -> impl Strategy<Value = BindingHandoff> {
    (session_ref(), any::<[u64; 2]>()).prop_map(|(session, [sl, b])| BindingHandoff {
        session,
        session_lease: OwnerLeaseGeneration(sl),
        binding: BindingGeneration(b),
    })
}

fn relocation_prepare() -> impl Strategy<Value = RelocationPrepare> {
    (
        request_header(),
        relocation_id(),
        actor_id(),
        any::<[u64; 2]>(),
        proptest::option::of(binding_handoff()),
        payload(),
        vec(saved_work(), 0..6),
        (timers_handoff(), calls_handoff()),
    )
        .prop_map(
            |(request, relocation, actor, [og, auth], binding, state, saved, (timers, calls))| {
                RelocationPrepare {
                    request,
                    relocation,
                    actor,
                    object_generation: ObjectGeneration(og),
                    expected_authority: AuthorityOwnerGeneration(auth),
                    binding,
                    state,
                    saved,
                    timers,
                    calls,
                }
            },
        )
}

/// The handoff records 60–65.
fn handoff_record() -> impl Strategy<Value = NodeRecord> {
    prop_oneof![
        relocation_prepare().prop_map(|p| NodeRecord::RelocationPrepare(Box::new(p))),
        (
            any::<u64>(),
            prop_oneof![Just(Ok(())), error().prop_map(Err)]
        )
            .prop_map(
                |(id, outcome)| NodeRecord::RelocationReady(RelocationReady {
                    request: RequestId(id),
                    outcome,
                })
            ),
        (relocation_id(), actor_id(), saved_work()).prop_map(|(relocation, actor, work)| {
            NodeRecord::RelocationIngressHold(RelocationIngressHold {
                relocation,
                actor,
                work,
            })
        }),
        (relocation_id(), actor_id()).prop_map(|(relocation, actor)| {
            NodeRecord::RelocationCutover(RelocationCutover { relocation, actor })
        }),
        (relocation_id(), actor_id()).prop_map(|(relocation, actor)| {
            NodeRecord::RelocationDiscard(RelocationDiscard { relocation, actor })
        }),
        (
            relocation_id(),
            actor_id(),
            prop_oneof![bound_route().prop_map(Ok), error().prop_map(Err)]
        )
            .prop_map(|(relocation, actor, outcome)| {
                NodeRecord::RelocationFinished(RelocationFinished {
                    relocation,
                    actor,
                    outcome,
                })
            }),
    ]
}

/// Every record variant of every command.
fn node_record() -> impl Strategy<Value = NodeRecord> {
    prop_oneof![
        handoff_record(),
        actor_send().prop_map(NodeRecord::ActorSend),
        bound_session_send().prop_map(NodeRecord::BoundSessionSend),
        bound_session_bind().prop_map(NodeRecord::BoundSessionBind),
        relocation_seal().prop_map(NodeRecord::SessionRelocationSeal),
        relocation_sealed().prop_map(NodeRecord::SessionRelocationSealed),
        relocation_route().prop_map(NodeRecord::SessionRelocationRoute),
        replaced().prop_map(NodeRecord::BoundSessionReplaced),
        actor_call().prop_map(NodeRecord::ActorCall),
        actor_host().prop_map(NodeRecord::ActorHost),
    ]
}

fn actor_ref() -> impl Strategy<Value = ActorRef> {
    (actor_id(), any::<[u64; 5]>(), mesh_name()).prop_map(
        |(id, [og, owner, node_generation, auth, lease], mesh)| ActorRef {
            id,
            generation: ObjectGeneration(og),
            location: ActorLocation {
                mesh,
                owner: NodeRid(owner),
                node_generation: NodeGeneration(node_generation),
                authority: AuthorityOwnerGeneration(auth),
                lease: OwnerLeaseGeneration(lease),
            },
        },
    )
}

fn actor_host() -> impl Strategy<Value = ActorHost> {
    let type_name =
        name_text(16, ActorTypeName::LEN_MAX).prop_map(|s| ActorTypeName::new(&s).unwrap());
    prop_oneof![
        (request_header(), actor_id(), type_name).prop_map(|(request, actor, actor_type)| {
            ActorHost::Ask(HostAsk {
                request,
                actor,
                actor_type,
            })
        }),
        (
            any::<u64>(),
            prop_oneof![actor_ref().prop_map(Ok), error().prop_map(Err)]
        )
            .prop_map(|(request, outcome)| ActorHost::Answer(HostAnswer {
                request: RequestId(request),
                outcome,
            })),
    ]
}

fn actor_call() -> impl Strategy<Value = ActorCall> {
    let body = prop_oneof![
        (any::<u16>(), payload()).prop_map(|(k, payload)| CallBody::Message {
            key: PacketKey(k),
            payload,
        }),
        (
            any::<u64>(),
            prop_oneof![payload().prop_map(Ok), error().prop_map(Err)]
        )
            .prop_map(|(call, outcome)| CallBody::Outcome {
                call: CallId(call),
                outcome,
            }),
    ];
    (
        proptest::option::of(request_header()),
        actor_id(),
        any::<[u64; 3]>(),
        proptest::option::of(actor_id()),
        body,
    )
        .prop_map(
            |(request, actor, [og, auth, lease], from, body)| ActorCall {
                request,
                actor,
                object_generation: ObjectGeneration(og),
                authority: AuthorityOwnerGeneration(auth),
                lease: OwnerLeaseGeneration(lease),
                from,
                body,
            },
        )
}

// ---- samples ----------------------------------------------------------------

fn session() -> SessionRef {
    SessionRef {
        owner: NodeRid(1),
        lifecycle: NodeGeneration(2),
        owner_id: SessionOwnerId(3),
        session: SessionRid(4),
    }
}

fn seal() -> SealIdentity {
    SealIdentity {
        relocation: RelocationId {
            coordinator: NodeRid(9),
            sequence: 10,
        },
        session: session(),
        binding: BindingGeneration(11),
    }
}

fn actor() -> ActorId {
    ActorId::new("player/42").unwrap()
}

fn message(body: ActorSendBody) -> NodeRecord {
    NodeRecord::ActorSend(ActorSend::Message(ActorMessage {
        request: Some(RequestHeader {
            id: RequestId(5),
            budget: Duration::from_millis(250),
        }),
        actor: actor(),
        object_generation: ObjectGeneration(6),
        authority: AuthorityOwnerGeneration(7),
        lease: OwnerLeaseGeneration(8),
        tail: BoundSessionTail {
            session: session(),
            binding: BindingGeneration(12),
            sequence: SessionSequence(13),
        },
        body,
    }))
}

fn route() -> BoundRoute {
    BoundRoute {
        mesh: MeshName::new("eu-west").unwrap(),
        owner: NodeRid(20),
        node_generation: NodeGeneration(21),
        authority: AuthorityOwnerGeneration(22),
        lease: OwnerLeaseGeneration(23),
    }
}

/// One record of every variant.
fn samples() -> Vec<NodeRecord> {
    let unavailable = Error::new(Reason::StaleBinding);
    vec![
        message(ActorSendBody::Payload {
            key: PacketKey(14),
            correlation: Some(Correlation(15)),
            payload: Bytes::from_static(b"move north"),
        }),
        message(ActorSendBody::DisconnectNotice),
        NodeRecord::ActorSend(ActorSend::Reply(ActorReply {
            request: RequestId(5),
            outcome: Ok(Bytes::from_static(b"ok")),
        })),
        NodeRecord::ActorSend(ActorSend::Reply(ActorReply {
            request: RequestId(5),
            outcome: Err(unavailable),
        })),
        NodeRecord::BoundSessionSend(BoundSessionSend {
            session: session(),
            binding: BindingGeneration(12),
            actor: actor(),
            object_generation: ObjectGeneration(6),
            node_generation: NodeGeneration(21),
            authority: AuthorityOwnerGeneration(7),
            body: BoundSessionBody::Push {
                key: PacketKey(30),
                payload: Bytes::from_static(b"hp=10"),
            },
        }),
        NodeRecord::BoundSessionSend(BoundSessionSend {
            session: session(),
            binding: BindingGeneration(12),
            actor: actor(),
            object_generation: ObjectGeneration(6),
            node_generation: NodeGeneration(21),
            authority: AuthorityOwnerGeneration(7),
            body: BoundSessionBody::Close {
                reason: CloseReason::ActorRequested,
            },
        }),
        NodeRecord::BoundSessionBind(BoundSessionBind::Request(BindRequest {
            request: RequestHeader {
                id: RequestId(40),
                budget: Duration::from_secs(2),
            },
            actor: actor(),
            object_generation: ObjectGeneration(6),
            target_node_generation: NodeGeneration(21),
            authority: AuthorityOwnerGeneration(7),
            lease: OwnerLeaseGeneration(8),
            session: session(),
            session_lease: OwnerLeaseGeneration(41),
            binding: BindingGeneration(12),
        })),
        NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(BindTerminal {
            request: RequestId(40),
            outcome: Ok(route()),
        })),
        NodeRecord::BoundSessionBind(BoundSessionBind::Terminal(BindTerminal {
            request: RequestId(40),
            outcome: Err(Error::new(Reason::ObjectGenerationMismatch)),
        })),
        NodeRecord::BoundSessionBind(BoundSessionBind::Tombstone(BindTombstone {
            actor: actor(),
            object_generation: ObjectGeneration(6),
            session: session(),
            binding: BindingGeneration(12),
            cause: TombstoneCause::Notified,
        })),
        NodeRecord::SessionRelocationSeal(SessionRelocationSeal {
            request: RequestHeader {
                id: RequestId(50),
                budget: Duration::from_millis(3_000),
            },
            seal: seal(),
            actor: actor(),
            object_generation: ObjectGeneration(6),
        }),
        NodeRecord::SessionRelocationSealed(SessionRelocationSealed {
            request: RequestId(50),
            outcome: Ok(()),
        }),
        NodeRecord::SessionRelocationSealed(SessionRelocationSealed {
            request: RequestId(50),
            outcome: Err(Error::new(Reason::SessionNotBound)),
        }),
        NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Commit(RouteCommit {
            seal: seal(),
            actor: actor(),
            object_generation: ObjectGeneration(6),
            target_mesh: MeshName::new("eu-west").unwrap(),
            target: NodeRid(60),
            target_node_generation: NodeGeneration(61),
            authority: AuthorityOwnerGeneration(62),
            lease: OwnerLeaseGeneration(63),
        })),
        NodeRecord::SessionRelocationRoute(SessionRelocationRoute::Abort(seal())),
        NodeRecord::BoundSessionReplaced(BoundSessionReplaced {
            fence: AuthorityFence {
                actor: actor(),
                object_generation: ObjectGeneration(6),
                owner: NodeRid(20),
                node_generation: NodeGeneration(21),
                authority: AuthorityOwnerGeneration(22),
            },
            previous: session(),
            previous_lease: OwnerLeaseGeneration(41),
            retired: BindingGeneration(12),
        }),
        prepare(),
        NodeRecord::RelocationPrepare(Box::new(RelocationPrepare {
            binding: None,
            state: Bytes::new(),
            saved: Vec::new(),
            ..prepare_body()
        })),
        NodeRecord::RelocationReady(RelocationReady {
            request: RequestId(70),
            outcome: Ok(()),
        }),
        NodeRecord::RelocationReady(RelocationReady {
            request: RequestId(70),
            outcome: Err(Error::new(Reason::RelocationTargetInvalid)),
        }),
        NodeRecord::RelocationIngressHold(RelocationIngressHold {
            relocation: relocation(),
            actor: actor(),
            work: SavedWork::Deliver {
                request: None,
                key: PacketKey(14),
                correlation: None,
                sequence: SessionSequence(75),
                payload: Bytes::from_static(b"held"),
            },
        }),
        NodeRecord::RelocationCutover(RelocationCutover {
            relocation: relocation(),
            actor: actor(),
        }),
        NodeRecord::RelocationDiscard(RelocationDiscard {
            relocation: relocation(),
            actor: actor(),
        }),
        NodeRecord::RelocationFinished(RelocationFinished {
            relocation: relocation(),
            actor: actor(),
            outcome: Ok(route()),
        }),
        NodeRecord::RelocationFinished(RelocationFinished {
            relocation: relocation(),
            actor: actor(),
            outcome: Err(Error::new(Reason::RelocationAborted)),
        }),
        NodeRecord::ActorCall(ActorCall {
            request: Some(RequestHeader {
                id: RequestId(RequestId::CALL_BIT | 3),
                budget: Duration::from_millis(2_000),
            }),
            actor: actor(),
            object_generation: ObjectGeneration(6),
            authority: AuthorityOwnerGeneration(7),
            lease: OwnerLeaseGeneration(8),
            from: Some(ActorId::new("room-1").unwrap()),
            body: CallBody::Message {
                key: PacketKey(14),
                payload: Bytes::from_static(b"join"),
            },
        }),
        NodeRecord::ActorCall(ActorCall {
            request: None,
            actor: actor(),
            object_generation: ObjectGeneration(6),
            authority: AuthorityOwnerGeneration(7),
            lease: OwnerLeaseGeneration(8),
            from: Some(actor()),
            body: CallBody::Outcome {
                call: CallId(2),
                outcome: Err(Error::new(Reason::Deadline)),
            },
        }),
        NodeRecord::ActorHost(ActorHost::Ask(HostAsk {
            request: RequestHeader {
                id: RequestId(RequestId::HOST_BIT | 4),
                budget: Duration::from_millis(5_000),
            },
            actor: actor(),
            actor_type: ActorTypeName::new("player").unwrap(),
        })),
        NodeRecord::ActorHost(ActorHost::Answer(HostAnswer {
            request: RequestId(RequestId::HOST_BIT | 4),
            outcome: Ok(ActorRef {
                id: actor(),
                generation: ObjectGeneration(6),
                location: ActorLocation {
                    mesh: MeshName::new("lobby").unwrap(),
                    owner: NodeRid(9),
                    node_generation: NodeGeneration(10),
                    authority: AuthorityOwnerGeneration(7),
                    lease: OwnerLeaseGeneration(8),
                },
            }),
        })),
    ]
}

fn relocation() -> RelocationId {
    RelocationId {
        coordinator: NodeRid(9),
        sequence: 10,
    }
}

/// A 60 with a binding and one saved-work item of every kind.
fn prepare_body() -> RelocationPrepare {
    RelocationPrepare {
        request: RequestHeader {
            id: RequestId(70),
            budget: Duration::from_millis(1_500),
        },
        relocation: relocation(),
        actor: actor(),
        object_generation: ObjectGeneration(6),
        expected_authority: AuthorityOwnerGeneration(7),
        binding: Some(BindingHandoff {
            session: session(),
            session_lease: OwnerLeaseGeneration(41),
            binding: BindingGeneration(12),
        }),
        state: Bytes::from_static(b"hp=10;x=3"),
        saved: vec![
            SavedWork::Deliver {
                request: Some(RequestHeader {
                    id: RequestId(71),
                    budget: Duration::from_millis(10_000),
                }),
                key: PacketKey(14),
                correlation: Some(Correlation(15)),
                sequence: SessionSequence(13),
                payload: Bytes::from_static(b"move north"),
            },
            SavedWork::Disconnect {
                request: RequestHeader {
                    id: RequestId(72),
                    budget: Duration::from_millis(10_000),
                },
                session: session(),
            },
            SavedWork::Bound { session: session() },
            SavedWork::Tombstone {
                session: session(),
                binding: BindingGeneration(12),
                cause: TombstoneCause::Disconnect,
            },
            SavedWork::Timer {
                timer: TimerId(2),
                tick: 40,
            },
        ],
        timers: TimersHandoff {
            next: TimerId(4),
            timers: vec![
                TimerHandoff {
                    timer: TimerId(2),
                    remaining: Duration::from_millis(20),
                    period: Some(Duration::from_millis(50)),
                    ticks: 40,
                },
                TimerHandoff {
                    timer: TimerId(3),
                    remaining: Duration::from_secs(5),
                    period: None,
                    ticks: 0,
                },
            ],
        },
        calls: CallsHandoff {
            last: CallId(17),
            open: vec![(CallId(16), Duration::from_millis(1_500))],
        },
    }
}

fn prepare() -> NodeRecord {
    NodeRecord::RelocationPrepare(Box::new(prepare_body()))
}

fn body_of(record: &NodeRecord) -> Bytes {
    frame_and_body(record, NodeRecord::encode).1
}

fn decode(body: &[u8]) -> Result<NodeRecord, WireError> {
    NodeRecord::decode(Bytes::copy_from_slice(body), &DecodeLimits::default())
}

/// The body of the 43 sample with `outcome` replaced by raw bytes.
fn sealed_body(outcome: &[u8]) -> Vec<u8> {
    let mut body = vec![43, 1];
    body.extend_from_slice(&50u64.to_be_bytes());
    body.extend_from_slice(outcome);
    body
}

// ---- well-formed ------------------------------------------------------------

#[test]
fn every_sample_round_trips_through_decode_and_decode_from() {
    let limits = DecodeLimits::default();
    for record in samples() {
        let (mut frame, body) = frame_and_body(&record, NodeRecord::encode);
        assert_eq!(body[0], record.command().code());
        assert_eq!(NodeRecord::decode(body, &limits), Ok(record.clone()));
        assert_eq!(
            NodeRecord::decode_from(&mut frame, &limits),
            Ok(Some(record))
        );
        assert!(frame.is_empty(), "the splitter consumed the whole frame");
    }
}

#[test]
fn every_sample_is_truncated_at_every_prefix_length() {
    for record in samples() {
        let (frame, body) = frame_and_body(&record, NodeRecord::encode);
        assert_every_prefix_truncated(&frame, &body, NodeRecord::decode, NodeRecord::decode_from);
    }
}

#[test]
fn every_single_byte_substitution_of_every_sample_is_total_and_canonical() {
    for record in samples() {
        assert_every_byte_substitution_total(
            &body_of(&record),
            NodeRecord::decode,
            NodeRecord::encode,
        );
    }
}

#[test]
fn a_relay_request_with_a_64_byte_payload_is_181_bytes() {
    // docs/wire.md "24 actorSend": the hot record's size, pinned.
    let mut record = message(ActorSendBody::Payload {
        key: PacketKey(14),
        correlation: Some(Correlation(15)),
        payload: Bytes::from(vec![0; 64]),
    });
    if let NodeRecord::ActorSend(ActorSend::Message(m)) = &mut record {
        m.actor = ActorId::new(&"a".repeat(20)).unwrap();
    }
    let (frame, _) = frame_and_body(&record, NodeRecord::encode);
    assert_eq!(frame.len(), 181);
}

#[test]
fn core_l7_record_43_has_no_sequence_or_high_water() {
    // Given a 43 for each outcome, when it is encoded, then its body is the
    // command, the variant, the request id and the outcome, and nothing else.
    let ok = NodeRecord::SessionRelocationSealed(SessionRelocationSealed {
        request: RequestId(0x0102_0304_0506_0708),
        outcome: Ok(()),
    });
    let mut expected = vec![43, 1, 1, 2, 3, 4, 5, 6, 7, 8, 0];
    assert_eq!(body_of(&ok), expected);

    let failed = NodeRecord::SessionRelocationSealed(SessionRelocationSealed {
        request: RequestId(0x0102_0304_0506_0708),
        outcome: Err(Error::new(Reason::SessionNotBound)),
    });
    expected.pop();
    // The error: kind, reason, and no detail (presence 0).
    expected.extend_from_slice(&[1, ErrorKind::InvalidOperation.code(), 1, 0]);
    assert_eq!(body_of(&failed), expected);
}

#[test]
fn core_l7_command_45_is_refused_on_decode() {
    // Given any body that starts with 45, decoding refuses it with its own
    // error, before reading a variant or a field.
    let limits = DecodeLimits::default();
    for body in [&[45u8][..], &[45, 1], &[45, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]] {
        assert_eq!(decode(body), Err(WireError::ReservedCommand));
    }
    let mut stream = BytesMut::from(&[0, 0, 0, 2, 45, 1][..]);
    assert_eq!(
        NodeRecord::decode_from(&mut stream, &limits),
        Err(WireError::ReservedCommand)
    );
    assert_eq!(Command::from_code(45), Err(WireError::ReservedCommand));
    // No record encodes as 45: the command byte comes from `Command`, which
    // has no 45.
    for record in samples() {
        assert_ne!(body_of(&record)[0], RESERVED_COMMAND);
    }
}

#[test]
fn the_payload_is_a_slice_of_the_frame_not_a_copy() {
    let record = &samples()[0];
    let body = body_of(record);
    let range = body.as_ptr_range();
    let Ok(NodeRecord::ActorSend(ActorSend::Message(ActorMessage {
        body: ActorSendBody::Payload { payload, .. },
        actor,
        ..
    }))) = NodeRecord::decode(body.clone(), &DecodeLimits::default())
    else {
        panic!("the sample is a payload message");
    };
    assert!(range.contains(&payload.as_ptr()));
    assert!(range.contains(&actor.as_bytes().as_ptr()));
}

#[test]
fn budget_travels_as_whole_milliseconds_and_saturates() {
    let limits = DecodeLimits {
        budget_max_ms: u32::MAX,
        ..DecodeLimits::default()
    };
    let with_budget = |budget| {
        NodeRecord::SessionRelocationSeal(SessionRelocationSeal {
            request: RequestHeader {
                id: RequestId(1),
                budget,
            },
            seal: seal(),
            actor: actor(),
            object_generation: ObjectGeneration(6),
        })
    };
    let budget_after_trip =
        |budget| match NodeRecord::decode(body_of(&with_budget(budget)), &limits) {
            Ok(NodeRecord::SessionRelocationSeal(s)) => s.request.budget,
            other => panic!("{other:?}"),
        };
    assert_eq!(
        budget_after_trip(Duration::from_micros(2_999)),
        Duration::from_millis(2)
    );
    assert_eq!(
        budget_after_trip(Duration::MAX),
        Duration::from_millis(u64::from(u32::MAX))
    );
}

#[test]
fn decode_from_splits_back_to_back_records_and_skips_a_bad_one() {
    let limits = DecodeLimits::default();
    let records = samples();
    let mut stream = BytesMut::new();
    records[0].encode(&mut stream);
    stream.extend_from_slice(&[0, 0, 0, 2, 99, 1]);
    records[1].encode(&mut stream);
    assert_eq!(
        NodeRecord::decode_from(&mut stream, &limits),
        Ok(Some(records[0].clone()))
    );
    assert_eq!(
        NodeRecord::decode_from(&mut stream, &limits),
        Err(WireError::UnknownCommand(99))
    );
    assert_eq!(
        NodeRecord::decode_from(&mut stream, &limits),
        Ok(Some(records[1].clone()))
    );
    assert_eq!(NodeRecord::decode_from(&mut stream, &limits), Ok(None));
}

// ---- malformed --------------------------------------------------------------

#[test]
fn an_oversized_length_prefix_is_refused_before_the_frame_arrives() {
    let limits = DecodeLimits::default();
    let max = limits.frame_len_max;
    // Only the prefix has arrived: the splitter refuses at once, untouched.
    let mut stream = BytesMut::from(&(max + 1).to_be_bytes()[..]);
    assert_eq!(
        NodeRecord::decode_from(&mut stream, &limits),
        Err(WireError::FrameTooLong { len: max + 1, max })
    );
    assert_eq!(stream.len(), 4);
    let mut stream = BytesMut::from(&u32::MAX.to_be_bytes()[..]);
    assert_eq!(
        NodeRecord::decode_from(&mut stream, &limits),
        Err(WireError::FrameTooLong { len: u32::MAX, max })
    );
    // At the limit the frame is simply awaited.
    let mut stream = BytesMut::from(&max.to_be_bytes()[..]);
    assert_eq!(NodeRecord::decode_from(&mut stream, &limits), Ok(None));
    // A complete body over the limit is refused by `decode` too.
    let tight = DecodeLimits {
        frame_len_max: 8,
        ..limits
    };
    assert_eq!(
        NodeRecord::decode(body_of(&samples()[0]), &tight),
        Err(WireError::FrameTooLong {
            len: body_of(&samples()[0]).len() as u32,
            max: 8
        })
    );
}

/// docs/wire.md "Limits that compose": a node's links take records up to
/// `RECORD_ENVELOPE_MAX` past the largest client frame any node may accept
/// (`FRAME_LEN_MAX_CEILING`), whatever this node's own client limit, and
/// every other bound of its own: a record carrying a payload as long as a
/// whole client frame — of this node or of a peer configured with a larger
/// limit — still crosses a link (under the client limits alone it would be
/// refused, and the link closed).
#[test]
fn link_limits_let_a_record_carry_a_payload_as_long_as_a_client_frame() {
    let small = DecodeLimits {
        frame_len_max: 2_000,
        budget_max_ms: 9_000,
        handoff_state_len_max: 700,
        saved_work_count_max: 5,
    };
    let link_max = DecodeLimits::FRAME_LEN_MAX_CEILING + DecodeLimits::RECORD_ENVELOPE_MAX;
    assert_eq!(
        small.for_links(),
        DecodeLimits {
            frame_len_max: link_max,
            ..small
        }
    );
    assert_eq!(DecodeLimits::default().for_links().frame_len_max, link_max);
    assert_eq!(link_max, 16 * 1024 * 1024 + 4 * 1024);
    // A node may run with a client limit of 1 byte to the ceiling.
    let with = |frame_len_max| DecodeLimits {
        frame_len_max,
        ..DecodeLimits::default()
    };
    assert!(DecodeLimits::default().frame_len_max_allowed());
    assert!(with(1).frame_len_max_allowed());
    assert!(with(DecodeLimits::FRAME_LEN_MAX_CEILING).frame_len_max_allowed());
    assert!(!with(0).frame_len_max_allowed());
    assert!(!with(DecodeLimits::FRAME_LEN_MAX_CEILING + 1).frame_len_max_allowed());
    // A peer whose clients may send 128 KiB frames relays one to a node
    // with the default 64 KiB: its link takes it.
    let larger_peer = DecodeLimits {
        frame_len_max: 128 * 1024,
        ..DecodeLimits::default()
    };
    for client in [DecodeLimits::default(), small, larger_peer] {
        let links = DecodeLimits::default().for_links();
        let record = message(ActorSendBody::Payload {
            key: PacketKey(14),
            correlation: Some(Correlation(15)),
            payload: Bytes::from(vec![7u8; client.frame_len_max as usize]),
        });
        let (frame, _) = frame_and_body(&record, NodeRecord::encode);
        let mut stream = frame.clone();
        assert_eq!(
            NodeRecord::decode_from(&mut stream, &links),
            Ok(Some(record)),
            "{client:?}"
        );
        assert!(stream.is_empty());
        let mut stream = frame;
        assert!(
            matches!(
                NodeRecord::decode_from(&mut stream, &client),
                Err(WireError::FrameTooLong { .. })
            ),
            "{client:?}"
        );
    }
    // One byte past the link bound, a link refuses the frame from its
    // length prefix alone, before buffering any of it.
    let mut stream = BytesMut::from(&(link_max + 1).to_be_bytes()[..]);
    assert_eq!(
        NodeRecord::decode_from(&mut stream, &DecodeLimits::default().for_links()),
        Err(WireError::FrameTooLong {
            len: link_max + 1,
            max: link_max
        })
    );
}

#[test]
fn an_unknown_command_is_refused() {
    for command in [0u8, 1, 23, 25, 37, 39, 46, 50, 52, 255] {
        assert_eq!(
            decode(&[command, 1]),
            Err(WireError::UnknownCommand(command))
        );
    }
}

#[test]
fn an_unknown_variant_is_refused_for_every_command() {
    let cases = [
        (Command::ActorSend, [0u8, 4]),
        (Command::BoundSessionSend, [0, 3]),
        (Command::BoundSessionBind, [0, 4]),
        (Command::SessionRelocationSeal, [0, 2]),
        (Command::SessionRelocationSealed, [0, 2]),
        (Command::SessionRelocationRoute, [0, 3]),
        (Command::BoundSessionReplaced, [0, 2]),
        (Command::RelocationPrepare, [0, 2]),
        (Command::RelocationReady, [0, 2]),
        (Command::RelocationIngressHold, [0, 2]),
        (Command::RelocationCutover, [0, 2]),
        (Command::RelocationDiscard, [0, 2]),
        (Command::RelocationFinished, [0, 2]),
    ];
    for (command, variants) in cases {
        for variant in variants {
            assert_eq!(
                decode(&[command.code(), variant]),
                Err(WireError::UnknownVariant { command, variant })
            );
        }
    }
}

#[test]
fn a_bad_name_is_refused_with_its_reason() {
    // The 38 tombstone starts with the ActorId: [38][3][len][bytes]...
    let tombstone = body_of(&samples()[9]).to_vec();
    assert_eq!(tombstone[..3], [38, 3, 9]);

    let mut not_utf8 = tombstone.clone();
    not_utf8[3] = 0xff;
    assert_eq!(
        decode(&not_utf8),
        Err(WireError::BadName {
            name: "ActorId",
            source: NameError::NotUtf8
        })
    );

    let mut empty = vec![38, 3, 0];
    empty.extend_from_slice(&tombstone[12..]);
    assert_eq!(
        decode(&empty),
        Err(WireError::BadName {
            name: "ActorId",
            source: NameError::Empty
        })
    );

    // A MeshName is at most 64 bytes; the 38 terminal's route starts with it:
    // [38][2][id 8][tag 0][len][mesh]...
    let mut too_long = vec![38, 2];
    too_long.extend_from_slice(&40u64.to_be_bytes());
    too_long.push(0);
    too_long.push(65);
    too_long.extend_from_slice(&[b'm'; 65]);
    too_long.extend_from_slice(&[0; 32]);
    assert_eq!(
        decode(&too_long),
        Err(WireError::BadName {
            name: "MeshName",
            source: NameError::TooLong { len: 65, max: 64 }
        })
    );
}

#[test]
fn a_bad_error_code_is_refused() {
    let unavailable = ErrorKind::Unavailable.code();
    let invalid = ErrorKind::InvalidOperation.code();
    assert_eq!(
        decode(&sealed_body(&[1, 0, Reason::StaleBinding.code()])),
        Err(WireError::UnknownErrorKind(0))
    );
    assert_eq!(
        decode(&sealed_body(&[1, 8, Reason::StaleBinding.code()])),
        Err(WireError::UnknownErrorKind(8))
    );
    assert_eq!(
        decode(&sealed_body(&[1, unavailable, 99])),
        Err(WireError::UnknownReason(99))
    );
    assert_eq!(
        decode(&sealed_body(&[1, invalid, Reason::StaleBinding.code()])),
        Err(WireError::ReasonKindMismatch {
            kind: ErrorKind::InvalidOperation,
            reason: Reason::StaleBinding
        })
    );
    assert_eq!(
        decode(&sealed_body(&[2])),
        Err(WireError::InvalidOutcome(2))
    );
    assert_eq!(
        decode(&sealed_body(&[
            1,
            unavailable,
            Reason::StaleBinding.code(),
            2
        ])),
        Err(WireError::InvalidPresence(2))
    );
}

#[test]
fn an_error_detail_crosses_a_link_with_its_code_and_text() {
    // Given an application error in a record: kind 7, reason 70, presence 1,
    // code u32, text length u16, text.
    let app = ErrorKind::Application.code();
    let body = sealed_body(&[1, app, 70, 1, 0, 0, 1, 0, 0, 3, b'g', b'o', b'd']);
    let Ok(NodeRecord::SessionRelocationSealed(sealed)) = decode(&body) else {
        panic!("a 43")
    };
    let error = sealed.outcome.unwrap_err();
    assert_eq!((error.code(), error.detail()), (256, "god"));
    // A code on a framework error is refused, as on a client frame.
    let unavailable = ErrorKind::Unavailable.code();
    let stale = Reason::StaleBinding.code();
    assert_eq!(
        decode(&sealed_body(&[
            1,
            unavailable,
            stale,
            1,
            0,
            0,
            0,
            1,
            0,
            1,
            b'a'
        ])),
        Err(WireError::InvalidErrorDetail("a code on a framework error"))
    );
}

#[test]
fn a_bad_presence_byte_is_refused() {
    // The 24 message starts with the optional request header.
    assert_eq!(decode(&[24, 1, 2]), Err(WireError::InvalidPresence(2)));
}

#[test]
fn a_bad_tombstone_cause_or_close_reason_is_refused() {
    let mut tombstone = body_of(&samples()[9]).to_vec();
    for code in [0, 4, 255] {
        *tombstone.last_mut().unwrap() = code;
        assert_eq!(
            decode(&tombstone),
            Err(WireError::UnknownTombstoneCause(code))
        );
    }
    let mut close = body_of(&samples()[5]).to_vec();
    for code in [0, 10, 255] {
        *close.last_mut().unwrap() = code;
        assert_eq!(decode(&close), Err(WireError::UnknownCloseReason(code)));
    }
}

#[test]
fn a_budget_above_the_limit_is_refused() {
    let limits = DecodeLimits::default();
    let max_ms = limits.budget_max_ms;
    let header = |ms: u32| {
        let mut body = vec![24, 2, 1];
        body.extend_from_slice(&5u64.to_be_bytes());
        body.extend_from_slice(&ms.to_be_bytes());
        body
    };
    assert_eq!(
        decode(&header(max_ms + 1)),
        Err(WireError::BudgetOutOfRange {
            budget_ms: max_ms + 1,
            max_ms
        })
    );
    // At the limit the header is accepted and decoding goes on to the ActorId.
    assert!(matches!(
        decode(&header(max_ms)),
        Err(WireError::Truncated { .. })
    ));
}

/// docs/wire.md "Limits": `budget_max_ms` defaults to 10 minutes. A
/// request whose budget is exactly 600,000 ms decodes under the default
/// limits; one millisecond more is refused.
#[test]
fn the_default_budget_limit_is_ten_minutes_to_the_millisecond() {
    let with_budget = |ms: u64| {
        let mut record = message(ActorSendBody::DisconnectNotice);
        if let NodeRecord::ActorSend(ActorSend::Message(m)) = &mut record {
            m.request = Some(RequestHeader {
                id: RequestId(5),
                budget: Duration::from_millis(ms),
            });
        }
        record
    };
    let ten_minutes = with_budget(600_000);
    assert_eq!(decode(&body_of(&ten_minutes)), Ok(ten_minutes));
    assert_eq!(
        decode(&body_of(&with_budget(600_001))),
        Err(WireError::BudgetOutOfRange {
            budget_ms: 600_001,
            max_ms: 600_000
        })
    );
}

#[test]
fn trailing_bytes_after_a_body_are_refused() {
    for record in samples() {
        let mut body = body_of(&record).to_vec();
        body.push(0);
        assert_eq!(
            decode(&body),
            Err(WireError::TrailingBytes { len: 1 }),
            "{record:?}"
        );
    }
}

#[test]
fn a_payload_length_past_the_frame_is_truncated_without_allocating() {
    // A 24 reply claiming a 4 GiB payload inside a 15-byte frame.
    let mut body = vec![24, 3];
    body.extend_from_slice(&5u64.to_be_bytes());
    body.push(0);
    body.extend_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(
        decode(&body),
        Err(WireError::Truncated {
            need: u32::MAX as usize,
            have: 0
        })
    );
}

#[test]
fn a_prepare_state_over_the_limit_is_refused_before_it_is_read() {
    let limits = DecodeLimits {
        handoff_state_len_max: 8,
        ..DecodeLimits::default()
    };
    // At the limit the state is accepted.
    let at_limit = NodeRecord::RelocationPrepare(Box::new(RelocationPrepare {
        state: Bytes::from_static(b"12345678"),
        ..prepare_body()
    }));
    assert_eq!(
        NodeRecord::decode(body_of(&at_limit), &limits),
        Ok(at_limit.clone())
    );
    // One byte more is refused with the announced length, and a length
    // claiming 4 GiB is refused the same way, before any slice is taken.
    let over = NodeRecord::RelocationPrepare(Box::new(RelocationPrepare {
        state: Bytes::from_static(b"123456789"),
        ..prepare_body()
    }));
    assert_eq!(
        NodeRecord::decode(body_of(&over), &limits),
        Err(WireError::StateTooLong { len: 9, max: 8 })
    );
    let mut huge = body_of(&at_limit).to_vec();
    let state_at = state_offset(&at_limit);
    huge[state_at..state_at + 4].copy_from_slice(&u32::MAX.to_be_bytes());
    assert_eq!(
        NodeRecord::decode(Bytes::from(huge), &limits),
        Err(WireError::StateTooLong {
            len: u32::MAX,
            max: 8
        })
    );
}

/// docs/wire.md "Limits" and docs/relocation.md: `handoff_state_len_max`
/// defaults to 32 KiB. A prepare (60) carrying exactly 32 KiB of Actor
/// state decodes under the default limits; one byte more is refused.
#[test]
fn the_default_prepare_state_limit_is_32_kib() {
    let with_state = |len: usize| {
        NodeRecord::RelocationPrepare(Box::new(RelocationPrepare {
            state: Bytes::from(vec![3u8; len]),
            ..prepare_body()
        }))
    };
    let at_limit = with_state(32 * 1024);
    assert_eq!(decode(&body_of(&at_limit)), Ok(at_limit));
    assert_eq!(
        decode(&body_of(&with_state(32 * 1024 + 1))),
        Err(WireError::StateTooLong {
            len: 32 * 1024 + 1,
            max: 32 * 1024
        })
    );
}

#[test]
fn a_prepare_with_more_timers_than_an_actor_may_have_is_refused_before_one_is_read() {
    // At the limit the timers are accepted.
    let timer = |n| TimerHandoff {
        timer: TimerId(n),
        remaining: Duration::from_millis(n),
        period: None,
        ticks: 0,
    };
    let max = TimerHandoff::PER_ACTOR_MAX;
    let at_limit = NodeRecord::RelocationPrepare(Box::new(RelocationPrepare {
        timers: TimersHandoff {
            next: TimerId(u64::from(max)),
            timers: (0..u64::from(max)).map(timer).collect(),
        },
        ..prepare_body()
    }));
    assert_eq!(decode(&body_of(&at_limit)), Ok(at_limit.clone()));
    // A count of 65,535 with no timers behind it is refused by the count.
    let empty = NodeRecord::RelocationPrepare(Box::new(RelocationPrepare {
        timers: TimersHandoff::default(),
        calls: CallsHandoff::default(),
        ..prepare_body()
    }));
    let mut body = body_of(&empty).to_vec();
    // The timers' count, before the calls (an 8-byte last number and a
    // 2-byte count).
    let at = body.len() - 12;
    body[at..at + 2].copy_from_slice(&u16::MAX.to_be_bytes());
    assert_eq!(
        decode(&body),
        Err(WireError::TooManyTimers {
            count: u16::MAX,
            max
        })
    );
}

#[test]
fn a_prepare_with_more_open_requests_than_an_actor_may_have_is_refused_before_one_is_read() {
    // At the limit the ledger is accepted.
    let max = CallsHandoff::OPEN_MAX;
    let at_limit = NodeRecord::RelocationPrepare(Box::new(RelocationPrepare {
        calls: CallsHandoff {
            last: CallId(u64::from(max)),
            open: (1..=u64::from(max))
                .map(|n| (CallId(n), Duration::from_millis(n)))
                .collect(),
        },
        ..prepare_body()
    }));
    assert_eq!(decode(&body_of(&at_limit)), Ok(at_limit.clone()));
    // A count of 65,535 with nothing behind it is refused by the count.
    let empty = NodeRecord::RelocationPrepare(Box::new(RelocationPrepare {
        calls: CallsHandoff::default(),
        ..prepare_body()
    }));
    let mut body = body_of(&empty).to_vec();
    let at = body.len() - 2;
    body[at..].copy_from_slice(&u16::MAX.to_be_bytes());
    assert_eq!(
        decode(&body),
        Err(WireError::TooManyOpenCalls {
            count: u16::MAX,
            max
        })
    );
}

#[test]
fn a_prepare_with_too_much_saved_work_is_refused_before_an_item_is_read() {
    let limits = DecodeLimits {
        saved_work_count_max: 3,
        ..DecodeLimits::default()
    };
    // The sample carries 5 items: two over the limit.
    assert_eq!(
        NodeRecord::decode(body_of(&prepare()), &limits),
        Err(WireError::TooMuchSavedWork { count: 5, max: 3 })
    );
    // A count of 65,535 with no items behind it is refused by the count,
    // not read item by item.
    let empty = NodeRecord::RelocationPrepare(Box::new(RelocationPrepare {
        saved: Vec::new(),
        timers: TimersHandoff::default(),
        calls: CallsHandoff::default(),
        ..prepare_body()
    }));
    let mut body = body_of(&empty).to_vec();
    // The saved-work count, before the timers (an 8-byte next number and a
    // 2-byte count) and the calls (the same).
    let at = body.len() - 22;
    body[at..at + 2].copy_from_slice(&u16::MAX.to_be_bytes());
    assert_eq!(
        decode(&body),
        Err(WireError::TooMuchSavedWork {
            count: u16::MAX,
            max: DecodeLimits::SAVED_WORK_COUNT_MAX_DEFAULT
        })
    );
    // Within the limit, a count larger than the items present is truncated.
    body[at..at + 2].copy_from_slice(&2u16.to_be_bytes());
    body.truncate(at + 2);
    assert!(matches!(decode(&body), Err(WireError::Truncated { .. })));
}

/// docs/wire.md "Limits": `saved_work_count_max` bounds a 60's saved work
/// inclusively. The sample prepare, with 5 items, decodes whole under a
/// limit of 5 (and is refused under 4, as the test above shows for 3).
#[test]
fn a_prepare_with_exactly_the_saved_work_limit_decodes() {
    let record = prepare();
    let NodeRecord::RelocationPrepare(body) = &record else {
        panic!("the sample is a 60")
    };
    assert_eq!(body.saved.len(), 5);
    let at = DecodeLimits {
        saved_work_count_max: 5,
        ..DecodeLimits::default()
    };
    assert_eq!(
        NodeRecord::decode(body_of(&record), &at),
        Ok(record.clone())
    );
    let under = DecodeLimits {
        saved_work_count_max: 4,
        ..DecodeLimits::default()
    };
    assert_eq!(
        NodeRecord::decode(body_of(&record), &under),
        Err(WireError::TooMuchSavedWork { count: 5, max: 4 })
    );
}

#[test]
fn an_unknown_saved_work_kind_is_refused() {
    // The 62 sample ends with its one item: [62][1][relocation 16][actor]
    // [kind]...; the kind byte follows the ActorId.
    let hold = samples()
        .into_iter()
        .find(|r| r.command() == Command::RelocationIngressHold)
        .unwrap();
    let mut body = body_of(&hold).to_vec();
    let kind_at = 2 + 16 + 1 + actor().as_bytes().len();
    assert_eq!(body[kind_at], 1, "the sample's item is a Deliver");
    for kind in [0u8, 8, 255] {
        body[kind_at] = kind;
        assert_eq!(decode(&body), Err(WireError::UnknownSavedWork(kind)));
    }
}

#[test]
fn a_request_between_actors_that_does_not_decode_is_still_answered_under_its_id() {
    let call = samples()
        .into_iter()
        .find(|r| matches!(r, NodeRecord::ActorCall(c) if c.request.is_some()))
        .unwrap();
    let mut body = body_of(&call).to_vec();
    body.truncate(20);
    assert_eq!(
        NodeRecord::request_of(&Bytes::from(body)),
        Some((Command::ActorCall, RequestId(RequestId::CALL_BIT | 3)))
    );
    // An outcome is one-way: nothing to answer.
    let outcome = samples()
        .into_iter()
        .find(|r| matches!(r, NodeRecord::ActorCall(c) if c.request.is_none()))
        .unwrap();
    assert_eq!(NodeRecord::request_of(&body_of(&outcome)), None);
    // An outcome that carries a request header decodes (the core answers
    // it MalformedRecord under that id), so request_of names the same id
    // as the record does (found by the node_record fuzz target).
    let NodeRecord::ActorCall(mut malformed) = outcome else {
        unreachable!("an ActorCall")
    };
    malformed.request = Some(RequestHeader {
        id: RequestId(RequestId::CALL_BIT | 9),
        budget: Duration::from_secs(1),
    });
    let malformed = NodeRecord::ActorCall(malformed);
    assert_eq!(
        NodeRecord::request_of(&body_of(&malformed)).map(|(_, id)| id),
        malformed.request_id()
    );
}

#[test]
fn an_ask_to_host_that_does_not_decode_is_still_answered_under_its_id() {
    let ask = samples()
        .into_iter()
        .find(|r| matches!(r, NodeRecord::ActorHost(ActorHost::Ask(_))))
        .unwrap();
    let mut body = body_of(&ask).to_vec();
    body.truncate(16);
    assert_eq!(
        NodeRecord::request_of(&Bytes::from(body)),
        Some((Command::ActorHost, RequestId(RequestId::HOST_BIT | 4)))
    );
    // An answer is not a request: nothing to answer.
    let answer = samples()
        .into_iter()
        .find(|r| matches!(r, NodeRecord::ActorHost(ActorHost::Answer(_))))
        .unwrap();
    assert_eq!(NodeRecord::request_of(&body_of(&answer)), None);
    // A type name over 255 bytes cannot be encoded: its length byte would
    // wrap, so it is refused where it is made.
    assert!(ActorTypeName::new(&"t".repeat(256)).is_err());
}

/// A 71 ask that cannot be sent (no link to the row's owner) must end the
/// ask `PeerUnreachable` at once, not at the bind timeout: the sender finds
/// the ask's id in the record itself (`request_id`, as for a 24 request,
/// 38, 42, 60 and 70). An answer is not a request: its failure ends nothing.
#[test]
fn an_ask_to_host_names_its_request_id_so_a_failure_to_send_it_reaches_the_ask() {
    let ask = samples()
        .into_iter()
        .find(|r| matches!(r, NodeRecord::ActorHost(ActorHost::Ask(_))))
        .unwrap();
    assert_eq!(ask.request_id(), Some(RequestId(RequestId::HOST_BIT | 4)));
    let answer = samples()
        .into_iter()
        .find(|r| matches!(r, NodeRecord::ActorHost(ActorHost::Answer(_))))
        .unwrap();
    assert_eq!(answer.request_id(), None);
}

#[test]
fn the_handoff_records_have_their_command_numbers() {
    let numbers: Vec<u8> = samples()
        .iter()
        .map(|r| r.command().code())
        .filter(|&c| (60..=65).contains(&c))
        .collect();
    assert_eq!(numbers, vec![60, 60, 61, 61, 62, 63, 64, 65, 65]);
    for code in (60..=65).chain([70]) {
        assert_eq!(Command::from_code(code).map(Command::code), Ok(code));
    }
    // 66–69 are not used.
    for code in 66..=69 {
        assert_eq!(
            Command::from_code(code),
            Err(WireError::UnknownCommand(code))
        );
    }
    // 60 is a request: a malformed one is answered under its id.
    let mut body = body_of(&prepare()).to_vec();
    body.truncate(20);
    assert_eq!(
        NodeRecord::request_of(&Bytes::from(body)),
        Some((Command::RelocationPrepare, RequestId(70)))
    );
    assert_eq!(prepare().request_id(), Some(RequestId(70)));
}

/// §6 and docs/wire.md "Node records": a request record names its
/// RequestId (`request_id`: a failure to send it ends that request), and a
/// request whose body does not decode still names its command and id from
/// its first bytes (`request_of`: it is answered with a typed error instead
/// of silence). The requests are the 24 message with a request header (a
/// payload or a disconnect notice), the 38 bind request, 42, 60, the 70
/// with a request header and the 71 ask; a reply, a terminal, an answer or
/// a one-way record names none, whole or cut.
#[test]
fn every_request_names_its_id_whole_or_cut_after_its_header_and_no_other_record_does() {
    let mut records = samples();
    let NodeRecord::ActorSend(ActorSend::Message(mut one_way)) = samples()[0].clone() else {
        unreachable!("the first sample is a 24 message")
    };
    one_way.request = None;
    records.push(NodeRecord::ActorSend(ActorSend::Message(one_way)));
    let requests: Vec<(u8, u64)> = records
        .iter()
        .filter_map(|r| r.request_id().map(|id| (r.command().code(), id.0)))
        .collect();
    assert_eq!(
        requests,
        vec![
            (24, 5),
            (24, 5),
            (38, 40),
            (42, 50),
            (60, 70),
            (60, 70),
            (70, RequestId::CALL_BIT | 3),
            (71, RequestId::HOST_BIT | 4),
        ]
    );
    for record in &records {
        let named = record.request_id().map(|id| (record.command(), id));
        let body = body_of(record);
        assert_eq!(NodeRecord::request_of(&body), named, "{record:?}");
        // Command, variant, a presence byte (24, 70) and the 12-byte
        // header: a body cut there does not decode but still names it (a
        // shorter record is cut by its last byte).
        let cut = body.slice(..body.len().min(16) - 1);
        assert!(decode(&cut).is_err(), "{record:?}");
        assert_eq!(NodeRecord::request_of(&cut), named, "{record:?} cut");
    }
}

/// The link reader splits one whole record body at a time off its receive
/// buffer (`split_from`, before decoding it, so that a body that does not
/// decode is still looked at by `request_of`): the bodies come out whole
/// and in order, an incomplete one is awaited with nothing consumed, and an
/// oversized length prefix is refused at once.
#[test]
fn split_from_takes_whole_bodies_off_the_buffer_in_order_and_awaits_a_partial_one() {
    let limits = DecodeLimits::default();
    let records = samples();
    let mut stream = BytesMut::new();
    records[0].encode(&mut stream);
    records[2].encode(&mut stream);
    let mut third = BytesMut::new();
    records[4].encode(&mut third);
    stream.extend_from_slice(&third[..third.len() - 1]);
    let partial = third.len() - 1;
    assert_eq!(
        NodeRecord::split_from(&mut stream, &limits),
        Ok(Some(body_of(&records[0])))
    );
    assert_eq!(
        NodeRecord::split_from(&mut stream, &limits),
        Ok(Some(body_of(&records[2])))
    );
    assert_eq!(NodeRecord::split_from(&mut stream, &limits), Ok(None));
    assert_eq!(
        stream.len(),
        partial,
        "nothing of the partial body consumed"
    );
    stream.extend_from_slice(&third[third.len() - 1..]);
    assert_eq!(
        NodeRecord::split_from(&mut stream, &limits),
        Ok(Some(body_of(&records[4])))
    );
    assert!(stream.is_empty());
    let max = limits.frame_len_max;
    let mut oversized = BytesMut::from(&(max + 1).to_be_bytes()[..]);
    assert_eq!(
        NodeRecord::split_from(&mut oversized, &limits),
        Err(WireError::FrameTooLong { len: max + 1, max })
    );
}

/// Where the state's length prefix starts in a 60's body: after command,
/// variant, header 12, relocation 16, actor, generations 16 and the binding.
fn state_offset(record: &NodeRecord) -> usize {
    let NodeRecord::RelocationPrepare(p) = record else {
        panic!("not a 60");
    };
    let binding = if p.binding.is_some() {
        1 + 26 + 8 + 8
    } else {
        1
    };
    2 + 12 + 16 + 1 + p.actor.as_bytes().len() + 16 + binding
}

// ---- properties -------------------------------------------------------------

/// The payload bytes a record carries (client or Actor payloads, the only
/// fields whose size the other side chooses).
fn payload_len(record: &NodeRecord) -> usize {
    let work = |work: &SavedWork| match work {
        SavedWork::Deliver { payload, .. } => payload.len(),
        _ => 0,
    };
    match record {
        NodeRecord::ActorSend(ActorSend::Message(ActorMessage {
            body: ActorSendBody::Payload { payload, .. },
            ..
        })) => payload.len(),
        NodeRecord::ActorSend(ActorSend::Reply(ActorReply {
            outcome: Ok(payload),
            ..
        })) => payload.len(),
        NodeRecord::BoundSessionSend(BoundSessionSend {
            body: BoundSessionBody::Push { payload, .. },
            ..
        }) => payload.len(),
        NodeRecord::RelocationIngressHold(hold) => work(&hold.work),
        _ => 0,
    }
}

proptest! {
    /// docs/wire.md "Limits": a record adds at most RECORD_ENVELOPE_MAX
    /// bytes to the payload it carries, so any client frame fits a link.
    #[test]
    fn a_record_adds_at_most_the_envelope_to_its_payload(record in node_record()) {
        prop_assume!(!matches!(record, NodeRecord::RelocationPrepare(_)));
        let (frame, _) = frame_and_body(&record, NodeRecord::encode);
        let envelope = frame.len() - 4 - payload_len(&record);
        prop_assert!(
            envelope <= DecodeLimits::RECORD_ENVELOPE_MAX as usize,
            "{envelope} bytes around the payload of {:?}", record.command()
        );
    }

    #[test]
    fn every_record_round_trips(record in node_record()) {
        let limits = DecodeLimits::default();
        let (mut frame, body) = frame_and_body(&record, NodeRecord::encode);
        prop_assert_eq!(NodeRecord::decode(body, &limits), Ok(record.clone()));
        prop_assert_eq!(NodeRecord::decode_from(&mut frame, &limits), Ok(Some(record)));
        prop_assert!(frame.is_empty());
    }

    #[test]
    fn every_strict_prefix_of_a_record_is_truncated(record in node_record()) {
        let (frame, body) = frame_and_body(&record, NodeRecord::encode);
        assert_every_prefix_truncated(&frame, &body, NodeRecord::decode, NodeRecord::decode_from);
    }

    #[test]
    fn arbitrary_bytes_decode_or_error_never_panic(bytes in vec(any::<u8>(), 0..300)) {
        assert_total_and_canonical(Bytes::from(bytes), NodeRecord::decode, NodeRecord::encode);
    }

    #[test]
    fn arbitrary_bytes_after_a_command_byte_decode_or_error(
        command in select(vec![24u8, 36, 38, 42, 43, 44, 45, 51, 60, 61, 62, 63, 64, 65]),
        variant in 0u8..5,
        rest in vec(any::<u8>(), 0..300),
    ) {
        let mut body = vec![command, variant];
        body.extend_from_slice(&rest);
        assert_total_and_canonical(Bytes::from(body), NodeRecord::decode, NodeRecord::encode);
    }

    #[test]
    fn mutated_records_decode_or_error_never_panic(record in node_record(), edits in edits()) {
        let body = edits.apply(&body_of(&record));
        assert_total_and_canonical(body, NodeRecord::decode, NodeRecord::encode);
    }

    #[test]
    fn an_arbitrary_stream_splits_into_records_and_errors(bytes in vec(any::<u8>(), 0..600)) {
        let limits = DecodeLimits { frame_len_max: 256, ..DecodeLimits::default() };
        let mut stream = BytesMut::from(&bytes[..]);
        loop {
            let before = stream.len();
            match NodeRecord::decode_from(&mut stream, &limits) {
                Ok(None) | Err(WireError::FrameTooLong { .. }) => break,
                Ok(Some(_)) | Err(_) => prop_assert!(stream.len() < before),
            }
        }
    }
}

/// Writes every sample as a seed of the `node_record` fuzz target, alone and
/// all back to back in one stream (run by hand: `cargo test --test
/// wire_node -- --ignored`; docs/TESTING.md).
#[test]
#[ignore = "writes fuzz/corpus; run by hand"]
fn write_fuzz_corpus() {
    let mut stream = BytesMut::new();
    let mut seeds = Vec::new();
    for (i, sample) in samples().iter().enumerate() {
        let mut frame = BytesMut::new();
        sample.encode(&mut frame);
        stream.extend_from_slice(&frame);
        seeds.push((format!("{i:02}"), frame.to_vec()));
    }
    seeds.push(("all".to_string(), stream.to_vec()));
    fuzz_seed::write("node_record", seeds);
}

//! The node's metrics and readiness (issue 24; docs/operations.md "Metrics"
//! and "Probes"), for a scraper or an embedder, with no endpoint of its own:
//! `zlink-node` serves them over HTTP (`listen.metrics`), an embedder calls
//! [`NodeMetrics::encode`] or registers the [`NodeMetrics`] collector in a
//! `prometheus_client` registry of its own.
//!
//! Why it is built this way:
//! - **Read at scrape time, never pushed.** The values already exist: the
//!   flow-trace counters and the Actor and Spot counts each shard publishes
//!   in atomics after every loop turn, the node's session count
//!   (an atomic), the lease's lapse. What the shards do not publish — their
//!   sessions, bound sessions, Actor mailbox depth, messages held by
//!   relocations, link states and lease time left — is asked of each shard
//!   through its inbox ([`ShardMsg::Gauges`]) once per scrape: the shard
//!   answers on its next turn from its own state, with no lock, and the
//!   scrape thread waits for the answers (at most [`SCRAPE_WAIT`]). A shard
//!   thread never blocks or takes a lock for a scrape, and a loop turn
//!   costs nothing more between scrapes. A shard that does not answer in
//!   time is reported as such (`zlink_shard_responsive` 0): a stalled loop
//!   is worth an alert.
//! - **The format is the crate's.** Every series is encoded by
//!   `prometheus_client` (its Prometheus text encoder, version 0.0.4), never
//!   written by hand here.
//! - **Store latency is measured where the store is called**: the store
//!   workers and the embedder's threads (lease acquisition and release), off
//!   every shard, through [`MeasuredStore`]. `prometheus_client`'s
//!   `Histogram` takes a mutex per observation, which is fine there and
//!   would not be on a shard thread.
//! - **Readiness is the lease, the drain and the link round after start,
//!   not the store**: a hung store must not take every node out of service
//!   while relays, pushes and the bindings in hand keep working
//!   (docs/threading.md "Never block a shard"). Store health is in the
//!   metrics, for alerts. Links count only once, after start, and for a
//!   bounded time (`NodeSettings::ready_link_wait`; docs/operations.md
//!   "Probes").

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant as StdInstant};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::links::LinkStatus;
use super::router::{Router, ShardMsg};
use super::{NodeShared, PublishedCounters};
use crate::core::latency::{LatencySnapshot, PushOrigin, SealEnd};
use crate::core::trace::FlowTrace;
use crate::core::warn_budget::WarnBudget;
use crate::ids::{ActorId, MeshName, NodeGeneration, NodeRid, RelocationId};
use crate::runtime::app::RelocationUnit;
use crate::store::{
    AbortOutcome, CasOutcome, Created, LocationRow, LocationStore, Member, OwnerClaim, OwnerLease,
    RemoveOutcome, RowVersion, StoreError,
};
use crate::time::Instant;

/// How long a scrape waits for the shards' answers, all together: a
/// shard's turn is microseconds, so only a stalled loop misses it.
pub(crate) const SCRAPE_WAIT: Duration = Duration::from_millis(500);

/// The `Content-Type` of [`NodeMetrics::encode`]'s text (Prometheus text
/// format 0.0.4).
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// What a shard reports of itself when a scrape asks ([`ShardMsg::Gauges`]):
/// counted on the shard's own thread, from its own state, on its next turn.
#[derive(Debug, Default)]
pub(crate) struct ShardGauges {
    pub(crate) shard: u16,
    /// STREAM sessions this shard holds (open or ending).
    pub(crate) sessions: usize,
    /// Session callback lanes the shard keeps: a session's lives from its
    /// accept until its disconnect callback is over (or dropped at its §7
    /// deadline), so it is never fewer than `sessions` and falls back with
    /// it; one that stays up once its session is gone is a leak.
    pub(crate) session_lanes: usize,
    /// Tasks alive on the shard's executor: a session lane's, once one of
    /// its callbacks awaited, until the lane goes; an Actor turn's await
    /// until it resumes. One that stays up once its session or turn is
    /// gone is a leak.
    pub(crate) tasks: usize,
    /// Sessions with at least one binding the application still sees.
    pub(crate) bound_sessions: usize,
    /// Bindings the application still sees, over all sessions.
    pub(crate) bindings: usize,
    /// Requests this shard's sessions sent and are waiting on.
    pub(crate) requests_pending: usize,
    /// Actor turns queued on the shard's Actor and Spot lanes, summed.
    pub(crate) mailbox_depth: usize,
    /// The deepest single Actor or Spot lane.
    pub(crate) mailbox_depth_max: usize,
    /// Client messages this shard's sessions hold under relocation seals.
    pub(crate) held_sealed: usize,
    /// Messages for Actors moving away from this shard held by their
    /// relocations (the ingress hold; after relay-ready, those waiting for
    /// the 65 to be followed).
    pub(crate) held_ingress: usize,
    /// (Link shard) every peer it knows, with its mesh and whether its link
    /// is up now.
    pub(crate) links: Vec<PeerLink>,
    /// (Link shard) how long the owner lease has left by the store's clock.
    pub(crate) lease_left: Option<Duration>,
}

/// One peer's link, as the link shard sees it.
#[derive(Debug)]
pub(crate) struct PeerLink {
    pub(crate) peer: NodeRid,
    pub(crate) mesh: MeshName,
    pub(crate) up: bool,
}

/// Whether a node should get traffic (`/readyz`), and if not why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// The owner lease is held (or the node needs none) and the node is
    /// not draining.
    Ready,
    /// §10 Shutdown has begun: the node refuses new sessions and binds and
    /// is moving its Actors away.
    Draining,
    /// §5: the owner lease lapsed; this lifecycle fenced its Actors and is
    /// dead to the mesh. It stops, and a new lifecycle takes its place.
    LeaseLapsed,
    /// The node's shards have stopped.
    Stopped,
    /// Just started: some peer it knew at its start is not linked yet, and
    /// `NodeSettings::ready_link_wait` has not passed (docs/operations.md
    /// "Probes").
    Linking,
}

impl Readiness {
    /// Whether the node should get traffic.
    pub fn is_ready(self) -> bool {
        self == Readiness::Ready
    }

    /// A word for logs and the `/readyz` body.
    pub fn as_str(self) -> &'static str {
        match self {
            Readiness::Ready => "ready",
            Readiness::Draining => "draining",
            Readiness::LeaseLapsed => "lease_lapsed",
            Readiness::Stopped => "stopped",
            Readiness::Linking => "linking",
        }
    }
}

impl std::fmt::Display for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node's metrics and readiness (module doc), from [`Node::metrics`].
/// Cheap to clone and `Send + Sync`: give it to the thread that serves a
/// scraper. It outlives the node's shutdown, so a probe can see the drain
/// to its end; once the shards stopped it reports [`Readiness::Stopped`]
/// and no per-shard answers.
///
/// [`Node::metrics`]: crate::api::Node::metrics
#[derive(Clone)]
pub struct NodeMetrics {
    inner: Arc<Inner>,
}

struct Inner {
    rid: NodeRid,
    generation: NodeGeneration,
    shared: Arc<NodeShared>,
    counters: Vec<Arc<PublishedCounters>>,
    router: Arc<Router>,
    stop: Arc<AtomicBool>,
    /// Whether the node holds an owner lease (a node with no store, or with
    /// neither Actors nor discovery, has none to lose).
    leased: bool,
    store: Option<Arc<StoreMetrics>>,
    /// Whether the link round after start is over (readiness).
    links: Arc<LinkStatus>,
}

impl std::fmt::Debug for NodeMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeMetrics")
            .field("rid", &self.inner.rid)
            .field("readiness", &self.readiness())
            .finish()
    }
}

impl NodeMetrics {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        rid: NodeRid,
        generation: NodeGeneration,
        shared: Arc<NodeShared>,
        counters: Vec<Arc<PublishedCounters>>,
        router: Arc<Router>,
        stop: Arc<AtomicBool>,
        leased: bool,
        store: Option<Arc<StoreMetrics>>,
        links: Arc<LinkStatus>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                rid,
                generation,
                shared,
                counters,
                router,
                stop,
                leased,
                store,
                links,
            }),
        }
    }

    /// Every series in the Prometheus text format (version 0.0.4; serve it
    /// with [`CONTENT_TYPE`]). Blocks the calling thread for at most
    /// 500 ms (`SCRAPE_WAIT`) while the shards answer; never call it on a thread
    /// that a shard waits for.
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self.clone()));
        let mut text = String::new();
        // Writing into a String cannot fail, and every value here is a
        // number or a label this module wrote.
        if let Err(error) =
            prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)
        {
            tracing::warn!(%error, "metrics: encoding failed");
        }
        text
    }

    /// Whether the node should get traffic: its owner lease held (when it
    /// has one), not draining, and the link round after start over (every
    /// peer it knew at its start linked, or `NodeSettings::ready_link_wait`
    /// passed). The store's health is not part of it, nor are links that go
    /// down later (module doc).
    pub fn readiness(&self) -> Readiness {
        let shared = &self.inner.shared;
        if self.inner.stop.load(Ordering::Acquire) {
            Readiness::Stopped
        } else if self.inner.leased && shared.lease_lapsed.is_set() {
            Readiness::LeaseLapsed
        } else if shared.draining.load(Ordering::Acquire) {
            Readiness::Draining
        } else if !self.inner.links.linked_in() {
            Readiness::Linking
        } else {
            Readiness::Ready
        }
    }

    /// Asks every shard for its [`ShardGauges`] and waits for them, at most
    /// [`SCRAPE_WAIT`] in all; `None` for a shard that did not answer.
    fn ask_shards(&self) -> Vec<Option<ShardGauges>> {
        let shards = self.inner.router.shards();
        let mut answers: Vec<Option<ShardGauges>> = (0..shards).map(|_| None).collect();
        if self.inner.stop.load(Ordering::Acquire) {
            return answers;
        }
        let (reply, gauges) = mpsc::channel();
        for shard in 0..shards {
            self.inner
                .router
                .send(shard, ShardMsg::Gauges(reply.clone()));
        }
        drop(reply);
        let until = StdInstant::now() + SCRAPE_WAIT;
        for _ in 0..shards {
            let left = until.saturating_duration_since(StdInstant::now());
            let Ok(answer) = gauges.recv_timeout(left) else {
                break;
            };
            if let Some(slot) = answers.get_mut(usize::from(answer.shard)) {
                *slot = Some(answer);
            }
        }
        answers
    }
}

/// The label every series carries: which node it is of, so that several
/// nodes of one process (an embedder's, the demo's) register side by side.
fn node_label(rid: NodeRid) -> (&'static str, String) {
    ("node", rid.0.to_string())
}

type Labels = Vec<(&'static str, String)>;

/// One family of gauges, one row per label set.
fn gauges<V: prometheus_client::encoding::EncodeGaugeValue + Copy>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, V)],
) -> Result<(), std::fmt::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in rows {
        ConstGauge::new(*value).encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

impl Collector for NodeMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let inner = &*self.inner;
        let node = || vec![node_label(inner.rid)];
        let shard = |index: usize| vec![node_label(inner.rid), ("shard", index.to_string())];

        gauges(
            &mut encoder,
            "zlink_node_info",
            "This node's lifecycle (NodeGeneration); always 1.",
            &[(
                vec![
                    node_label(inner.rid),
                    ("node_generation", inner.generation.0.to_string()),
                ],
                1i64,
            )],
        )?;

        // Every flow-trace counter, summed over the shards (as each last
        // published it), the zeros too: a rate needs its start.
        let mut flow = crate::core::trace::FlowCounters::default();
        for published in &inner.counters {
            published.add_into(&mut flow);
        }
        {
            let mut metric = encoder.encode_descriptor(
                "zlink_flow_events",
                "Flow-trace events (src/core/trace.rs): every rejection, drop and fallback \
                 the contract names; level=warn marks an anomaly worth a look.",
                None,
                MetricType::Counter,
            )?;
            for &event in FlowTrace::ALL {
                let labels = vec![
                    node_label(inner.rid),
                    ("event", event.name().to_owned()),
                    (
                        "level",
                        if event.is_warning() { "warn" } else { "debug" }.to_owned(),
                    ),
                ];
                ConstCounter::new(flow.get(event)).encode(metric.encode_family(&labels)?)?;
            }
        }

        // The node's own gauges, read without asking the shards.
        let readiness = self.readiness();
        let lapsed = inner.leased && inner.shared.lease_lapsed.is_set();
        let draining = inner.shared.draining.load(Ordering::Acquire);
        gauges(
            &mut encoder,
            "zlink_ready",
            "1 while the node should get traffic (/readyz): its owner lease held, not \
             draining, and linked to its peers after start (or done waiting for them).",
            &[(node(), i64::from(readiness.is_ready()))],
        )?;
        gauges(
            &mut encoder,
            "zlink_draining",
            "1 once §10 Shutdown began (SIGTERM): new sessions and binds are refused.",
            &[(node(), i64::from(draining))],
        )?;
        if inner.leased {
            gauges(
                &mut encoder,
                "zlink_lease_held",
                "1 while this lifecycle holds its owner lease; 0 once it lapsed (the node \
                 fenced its Actors and stops).",
                &[(node(), i64::from(!lapsed))],
            )?;
        }
        let sessions = inner.shared.sessions_open.load(Ordering::Relaxed);
        gauges(
            &mut encoder,
            "zlink_sessions",
            "STREAM sessions the node holds (against limits.max_sessions).",
            &[(node(), sessions as u64)],
        )?;
        let (actors, spots): (Vec<_>, Vec<_>) = inner
            .counters
            .iter()
            .map(|c| {
                (
                    c.actors.load(Ordering::Relaxed),
                    c.spots.load(Ordering::Relaxed),
                )
            })
            .unzip();
        gauges(
            &mut encoder,
            "zlink_actors",
            "Actors this node hosts, as of its shards' last loop turns.",
            &[(node(), actors.iter().sum::<usize>() as u64)],
        )?;
        gauges(
            &mut encoder,
            "zlink_spots",
            "User Spots this node created, as of its shards' last loop turns.",
            &[(node(), spots.iter().sum::<usize>() as u64)],
        )?;
        let per_shard = |values: &[usize]| -> Vec<(Labels, u64)> {
            values
                .iter()
                .enumerate()
                .map(|(i, &v)| (shard(i), v as u64))
                .collect()
        };
        gauges(
            &mut encoder,
            "zlink_shard_actors",
            "Actors each shard hosts, as of its last loop turn.",
            &per_shard(&actors),
        )?;
        gauges(
            &mut encoder,
            "zlink_shard_spots",
            "User Spots whose home is each shard, as of its last loop turn.",
            &per_shard(&spots),
        )?;

        // Read before the scrape asks the shards (and so adds to them).
        let inboxes: Vec<usize> = (0..inner.router.shards())
            .map(|shard| inner.router.waiting(shard))
            .collect();
        gauges(
            &mut encoder,
            "zlink_shard_inbox_depth",
            "Messages waiting in each shard's inbox (records and transmits from other \
             shards, store answers, commands), read without asking the shard: one that \
             grows while zlink_shard_responsive is 0 is a held-up shard's backlog.",
            &per_shard(&inboxes),
        )?;

        // What the shards count when asked (module doc).
        let answers = self.ask_shards();
        gauges(
            &mut encoder,
            "zlink_shard_responsive",
            "1 when the shard answered this scrape within 500 ms; 0 means its loop is \
             stalled (a long Actor handler, say) or stopped.",
            &answers
                .iter()
                .enumerate()
                .map(|(i, a)| (shard(i), i64::from(a.is_some())))
                .collect::<Vec<_>>(),
        )?;
        let answered: Vec<&ShardGauges> = answers.iter().flatten().collect();
        let each = |pick: fn(&ShardGauges) -> usize| -> Vec<(Labels, u64)> {
            answered
                .iter()
                .map(|g| (shard(usize::from(g.shard)), pick(g) as u64))
                .collect()
        };
        let total = |pick: fn(&ShardGauges) -> usize| -> Vec<(Labels, u64)> {
            if answered.is_empty() {
                return Vec::new();
            }
            vec![(node(), answered.iter().map(|g| pick(g) as u64).sum())]
        };
        gauges(
            &mut encoder,
            "zlink_bound_sessions",
            "Sessions with at least one binding the application sees, summed over the \
             shards that answered.",
            &total(|g| g.bound_sessions),
        )?;
        gauges(
            &mut encoder,
            "zlink_bindings",
            "Session-to-Actor bindings the application sees, summed over the shards \
             that answered.",
            &total(|g| g.bindings),
        )?;
        gauges(
            &mut encoder,
            "zlink_shard_sessions",
            "STREAM sessions each shard holds (open or ending).",
            &each(|g| g.sessions),
        )?;
        gauges(
            &mut encoder,
            "zlink_shard_session_lanes",
            "Session callback lanes each shard keeps: a session's lives from its accept \
             until its disconnect callback is over or dropped at its deadline.",
            &each(|g| g.session_lanes),
        )?;
        gauges(
            &mut encoder,
            "zlink_shard_tasks",
            "Tasks alive on each shard's executor: a session lane's, from its first \
             callback that awaits until its disconnect callback is over; an Actor turn's \
             await until the turn resumes.",
            &each(|g| g.tasks),
        )?;
        gauges(
            &mut encoder,
            "zlink_shard_bound_sessions",
            "Sessions of each shard with at least one binding the application sees.",
            &each(|g| g.bound_sessions),
        )?;
        gauges(
            &mut encoder,
            "zlink_shard_requests_pending",
            "Requests each shard's sessions sent and wait on (relays and binds in \
             flight).",
            &each(|g| g.requests_pending),
        )?;
        gauges(
            &mut encoder,
            "zlink_shard_mailbox_depth",
            "Actor turns queued on each shard's Actor and Spot lanes, summed.",
            &each(|g| g.mailbox_depth),
        )?;
        gauges(
            &mut encoder,
            "zlink_shard_mailbox_depth_max",
            "The deepest single Actor or Spot lane of each shard (its bound is \
             limits.actor_queue_max or limits.spot_queue_max).",
            &each(|g| g.mailbox_depth_max),
        )?;
        // Messages held by live relocations, by where they are held: the
        // flow counters say how many were released or dropped, these how
        // many wait now (the pause histogram below says for how long).
        let holds = |g: &ShardGauges| {
            [
                ("session_seal", g.held_sealed as u64),
                ("ingress", g.held_ingress as u64),
            ]
        };
        let held_rows = |labels: Labels, held: [(&'static str, u64); 2]| {
            held.into_iter().map(move |(hold, count)| {
                let mut labels = labels.clone();
                labels.push(("hold", hold.to_owned()));
                (labels, count)
            })
        };
        let held_total: Vec<(Labels, u64)> = if answered.is_empty() {
            Vec::new()
        } else {
            let mut sum = [("session_seal", 0), ("ingress", 0)];
            for g in &answered {
                for (total, (_, count)) in sum.iter_mut().zip(holds(g)) {
                    total.1 += count;
                }
            }
            held_rows(node(), sum).collect()
        };
        gauges(
            &mut encoder,
            "zlink_held_messages",
            "Messages held by live relocations now, summed over the shards that answered: \
             hold=session_seal, client messages on a sealed binding (sent on at the 44, \
             held_message_released; dropped at a seal timeout, held_message_dropped); \
             hold=ingress, messages for an Actor moving away that arrived after its \
             capture (handed to the target, or run here again after an abort).",
            &held_total,
        )?;
        let held_per_shard: Vec<(Labels, u64)> = answered
            .iter()
            .flat_map(|g| held_rows(shard(usize::from(g.shard)), holds(g)))
            .collect();
        gauges(
            &mut encoder,
            "zlink_shard_held_messages",
            "Messages held by live relocations on each shard now, by hold (as \
             zlink_held_messages).",
            &held_per_shard,
        )?;
        let links: Vec<(Labels, i64)> = answered
            .iter()
            .flat_map(|g| g.links.iter())
            .map(|l| {
                (
                    vec![
                        node_label(inner.rid),
                        ("peer", l.peer.0.to_string()),
                        ("mesh", l.mesh.to_string()),
                    ],
                    i64::from(l.up),
                )
            })
            .collect();
        gauges(
            &mut encoder,
            "zlink_link_up",
            "1 while the node link to the peer is up (authenticated), 0 while it is down; \
             one row per peer the node knows (configured, listed or once linked).",
            &links,
        )?;
        if let Some(left) = answered.iter().find_map(|g| g.lease_left) {
            gauges(
                &mut encoder,
                "zlink_lease_left_seconds",
                "How long the owner lease has left by the store's clock; it is renewed \
                 every store.lease_renew_interval_ms, so a value far below the term means \
                 renewals fail.",
                &[(node(), left.as_secs_f64())],
            )?;
        }

        // The latency histograms the shards record lock-free, summed.
        let mut relay = LatencySnapshot::default();
        let mut turns = LatencySnapshot::default();
        let mut push: [LatencySnapshot; PushOrigin::ALL.len()] = Default::default();
        let mut pause: [LatencySnapshot; SealEnd::ALL.len()] = Default::default();
        for published in &inner.counters {
            if let Some(core) = published.latency.get() {
                relay.merge(&core.relay.snapshot());
                for (sum, histogram) in push.iter_mut().zip(&core.push) {
                    sum.merge(&histogram.snapshot());
                }
                for (sum, histogram) in pause.iter_mut().zip(&core.pause) {
                    sum.merge(&histogram.snapshot());
                }
            }
            turns.merge(&published.actor_turns.snapshot());
        }
        latency(
            &mut encoder,
            "zlink_relay_duration_seconds",
            "Relayed requests, from the session's relay to the Actor's reply reaching \
             the session's shard: the Actor's queue and turn and every hop between, on \
             this node or across a link (the client's own network is not in it).",
            &[(node(), relay)],
        )?;
        let labelled = |label: &'static str, value: &str| {
            let mut labels = node();
            labels.push((label, value.to_owned()));
            labels
        };
        latency(
            &mut encoder,
            "zlink_push_duration_seconds",
            "Actor pushes handed to a client by this node's session owners, from the \
             push entering this node (origin=local: the Actor's push on this node; \
             origin=link: the 36 read off the link from the Actor's node) to its frame \
             handed to the client's connection: the shard hops and queues it waited in \
             here, to the resolution of a shard's loop turn.",
            &PushOrigin::ALL
                .iter()
                .zip(push)
                .map(|(origin, snapshot)| (labelled("origin", origin.name()), snapshot))
                .collect::<Vec<_>>(),
        )?;
        latency(
            &mut encoder,
            "zlink_relocation_pause_seconds",
            "Relocation pauses this node's sessions saw: how long a binding was sealed, \
             from the 42 (its client's messages held from then on, the Actor captured \
             at its source) to the 44 that released it (outcome=committed: the target \
             serves the Actor; aborted: the source again) or the seal timeout \
             (timed_out: the session was closed).",
            &SealEnd::ALL
                .iter()
                .zip(pause)
                .map(|(end, snapshot)| (labelled("outcome", end.name()), snapshot))
                .collect::<Vec<_>>(),
        )?;
        latency(
            &mut encoder,
            "zlink_actor_turn_duration_seconds",
            "Actor handler turns (handle, on_bound), one in 64 timed: a handler that \
             holds its shard's thread holds every session and Actor of that shard.",
            &[(node(), turns)],
        )?;
        inner.shared.relocations.encode(&mut encoder, inner.rid)?;

        if let Some(store) = &inner.store {
            store.encode(&mut encoder, inner.rid)?;
        }
        Ok(())
    }
}

/// One family of histograms read from [`LatencySnapshot`]s, in seconds,
/// one row per label set.
fn latency(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    rows: &[(Labels, LatencySnapshot)],
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, snapshot) in rows {
        let buckets: Vec<(f64, u64)> = snapshot
            .buckets
            .iter()
            .enumerate()
            .map(|(i, &count)| (crate::core::latency::upper_bound_seconds(i), count))
            .collect();
        metric
            .encode_family(labels)?
            .encode_histogram::<NoLabelSet>(
                snapshot.sum_micros as f64 / 1e6,
                snapshot.count(),
                &buckets,
                None,
            )?;
    }
    Ok(())
}

/// Bucket bounds of a relocation's duration, in seconds: a live move
/// takes milliseconds; its bounded waits add up to seconds.
const RELOCATION_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// How long the application's moves took (Node::relocate, relocate_spot,
/// relocate_all, a Shutdown's moves), from the ask to the outcome, timed on
/// the embedder's thread that waits for them (never a shard's).
#[derive(Debug)]
pub(crate) struct RelocationMetrics {
    /// By what moved (an Actor, a Spot) and how it ended (committed, not).
    durations: [[Histogram; 2]; 2],
}

impl RelocationMetrics {
    pub(crate) fn new() -> Self {
        let histogram = || Histogram::new(RELOCATION_BUCKETS);
        Self {
            durations: [[histogram(), histogram()], [histogram(), histogram()]],
        }
    }

    /// A move of `unit` ended after `took`, committed (`ok`) or not.
    pub(crate) fn observe(&self, unit: &RelocationUnit, took: Duration, ok: bool) {
        let kind = usize::from(matches!(unit, RelocationUnit::Spot(_)));
        self.durations[kind][usize::from(!ok)].observe(took.as_secs_f64());
    }

    fn encode(&self, encoder: &mut DescriptorEncoder, rid: NodeRid) -> Result<(), std::fmt::Error> {
        let mut metric = encoder.encode_descriptor(
            "zlink_relocation_duration_seconds",
            "Live relocations this node's application asked for (Node::relocate, \
             relocate_spot, relocate_all, Shutdown), from the ask to the outcome; \
             outcome=failed covers aborts, failures and the caller's deadline.",
            None,
            MetricType::Histogram,
        )?;
        for (kind, by_outcome) in ["actor", "spot"].iter().zip(&self.durations) {
            for (outcome, histogram) in ["committed", "failed"].iter().zip(by_outcome) {
                let labels = [
                    ("node", rid.0.to_string()),
                    ("unit", (*kind).to_owned()),
                    ("outcome", (*outcome).to_owned()),
                ];
                histogram.encode(metric.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeMetrics")
            .field("rid", &self.rid)
            .finish()
    }
}

// ---- the Location Store's operations ----------------------------------------

/// The store operations measured, in [`LocationStore`]'s order.
#[derive(Clone, Copy, Debug)]
enum StoreOp {
    Lookup,
    Create,
    CompareAndSet,
    AbortRelocation,
    Remove,
    AcquireLease,
    RenewLease,
    ReleaseLease,
    Lease,
    RegisterMember,
    Members,
}

impl StoreOp {
    const ALL: [StoreOp; 11] = [
        StoreOp::Lookup,
        StoreOp::Create,
        StoreOp::CompareAndSet,
        StoreOp::AbortRelocation,
        StoreOp::Remove,
        StoreOp::AcquireLease,
        StoreOp::RenewLease,
        StoreOp::ReleaseLease,
        StoreOp::Lease,
        StoreOp::RegisterMember,
        StoreOp::Members,
    ];

    fn name(self) -> &'static str {
        match self {
            StoreOp::Lookup => "lookup",
            StoreOp::Create => "create",
            StoreOp::CompareAndSet => "compare_and_set",
            StoreOp::AbortRelocation => "abort_relocation",
            StoreOp::Remove => "remove",
            StoreOp::AcquireLease => "acquire_lease",
            StoreOp::RenewLease => "renew_lease",
            StoreOp::ReleaseLease => "release_lease",
            StoreOp::Lease => "lease",
            StoreOp::RegisterMember => "register_member",
            StoreOp::Members => "members",
        }
    }
}

/// The kinds of store error, as the `error` label says them.
const ERROR_KINDS: [&str; 5] = [
    "unavailable",
    "lease_expired",
    "lease_held",
    "stale_node_generation",
    "refused",
];

/// The index in [`ERROR_KINDS`] of a store error's kind.
fn error_kind(error: &StoreError) -> usize {
    match error {
        StoreError::Unavailable(_) => 0,
        StoreError::LeaseExpired { .. } => 1,
        StoreError::LeaseHeld { .. } => 2,
        StoreError::StaleNodeGeneration { .. } => 3,
        StoreError::Refused(_) => 4,
    }
}

/// Bucket bounds of a store operation's latency, in seconds: from an
/// embedded store's microseconds to a Redis call timing out (its default
/// call timeout is 500 ms).
const STORE_BUCKETS: [f64; 14] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0,
];

/// Latency and errors of every store operation this node made.
#[derive(Debug)]
pub(crate) struct StoreMetrics {
    /// One histogram per [`StoreOp`], in its order.
    latency: Vec<Histogram>,
    /// Per [`StoreOp`], one counter per [`ERROR_KINDS`] entry.
    errors: Vec<[Counter; ERROR_KINDS.len()]>,
    /// The refusal warnings' budget.
    refusals: std::sync::Mutex<WarnBudget<std::time::Instant>>,
    /// A refusal was logged and no call has succeeded since: the next that
    /// does says the store serves this node again.
    refusing: AtomicBool,
}

/// At most one refusal warning this often: a store that refuses every
/// call would otherwise log each login.
const REFUSAL_WARN_EVERY: Duration = Duration::from_secs(10);

impl StoreMetrics {
    pub(crate) fn new() -> Self {
        Self {
            latency: StoreOp::ALL
                .iter()
                .map(|_| Histogram::new(STORE_BUCKETS))
                .collect(),
            errors: StoreOp::ALL.iter().map(|_| Default::default()).collect(),
            refusals: std::sync::Mutex::new(WarnBudget::new(
                StdInstant::now(),
                1,
                REFUSAL_WARN_EVERY,
            )),
            refusing: AtomicBool::new(false),
        }
    }

    /// A refusal is a configuration problem (credentials, an ACL, TLS) that
    /// the node cannot mend by asking again, and it may hit only some
    /// operations (an ACL that allows the lease keys and not the Actor
    /// rows leaves the node ready while every login fails): say so, at
    /// most once every [`REFUSAL_WARN_EVERY`], with the count left unsaid.
    /// Runs on the store workers and the embedder's threads, never a
    /// shard's, so the lock is fine.
    fn warn_refused(&self, op: StoreOp, detail: &str) {
        let admitted = self
            .refusals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .admit(StdInstant::now());
        let Some(unsaid) = admitted else {
            return;
        };
        tracing::warn!(
            op = op.name(),
            %detail,
            refusals_not_logged = unsaid,
            "the Location Store refused this node (credentials, ACL or TLS): what needs \
             the store fails until its configuration is mended"
        );
        self.refusing.store(true, Ordering::Release);
    }

    /// Records one call that took `took`.
    fn observe<T>(&self, op: StoreOp, took: Duration, outcome: &Result<T, StoreError>) {
        if let Some(histogram) = self.latency.get(op as usize) {
            histogram.observe(took.as_secs_f64());
        }
        if outcome.is_ok() && self.refusing.swap(false, Ordering::AcqRel) {
            tracing::info!(
                op = op.name(),
                "the Location Store serves this node again after refusing it"
            );
        }
        if let Err(error) = outcome {
            if let StoreError::Refused(detail) = error {
                self.warn_refused(op, detail);
            }
            if let Some(counter) = self
                .errors
                .get(op as usize)
                .and_then(|kinds| kinds.get(error_kind(error)))
            {
                counter.inc();
            }
        }
    }

    fn encode(&self, encoder: &mut DescriptorEncoder, rid: NodeRid) -> Result<(), std::fmt::Error> {
        {
            let mut metric = encoder.encode_descriptor(
                "zlink_store_operation_duration_seconds",
                "Location Store calls by operation, timed on the thread that made them \
                 (store workers, lease start and release), failures included.",
                None,
                MetricType::Histogram,
            )?;
            for op in StoreOp::ALL {
                if let Some(histogram) = self.latency.get(op as usize) {
                    let labels = [("node", rid.0.to_string()), ("op", op.name().to_owned())];
                    histogram.encode(metric.encode_family(&labels)?)?;
                }
            }
        }
        let mut metric = encoder.encode_descriptor(
            "zlink_store_errors",
            "Location Store calls that failed, by operation and error: \
             error=unavailable is the store unreachable or timing out.",
            None,
            MetricType::Counter,
        )?;
        // error=unavailable is listed for every operation from the start,
        // so an alert's rate has its zero; the other kinds once seen.
        for op in StoreOp::ALL {
            let Some(kinds) = self.errors.get(op as usize) else {
                continue;
            };
            for (kind, counter) in ERROR_KINDS.iter().zip(kinds) {
                let value = counter.get();
                if value == 0 && *kind != "unavailable" {
                    continue;
                }
                let labels = [
                    ("node", rid.0.to_string()),
                    ("op", op.name().to_owned()),
                    ("error", (*kind).to_owned()),
                ];
                ConstCounter::new(value).encode(metric.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// A [`LocationStore`] that times every call into [`StoreMetrics`]. It is
/// what the node's store workers and its lease start and release call;
/// `now` is not a call to the store and is not timed.
pub(crate) struct MeasuredStore {
    inner: Arc<dyn LocationStore>,
    metrics: Arc<StoreMetrics>,
}

impl MeasuredStore {
    pub(crate) fn new(inner: Arc<dyn LocationStore>, metrics: Arc<StoreMetrics>) -> Self {
        Self { inner, metrics }
    }

    fn timed<T>(
        &self,
        op: StoreOp,
        call: impl FnOnce(&dyn LocationStore) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let start = StdInstant::now();
        let outcome = call(self.inner.as_ref());
        self.metrics.observe(op, start.elapsed(), &outcome);
        outcome
    }
}

impl LocationStore for MeasuredStore {
    fn lookup(&self, actor: &ActorId) -> Result<Option<LocationRow>, StoreError> {
        self.timed(StoreOp::Lookup, |s| s.lookup(actor))
    }

    fn create(&self, actor: &ActorId, owner: &OwnerClaim) -> Result<Created, StoreError> {
        self.timed(StoreOp::Create, |s| s.create(actor, owner))
    }

    fn compare_and_set(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
        new_owner: &OwnerClaim,
    ) -> Result<CasOutcome, StoreError> {
        self.timed(StoreOp::CompareAndSet, |s| {
            s.compare_and_set(actor, expected, relocation, new_owner)
        })
    }

    fn abort_relocation(
        &self,
        actor: &ActorId,
        expected: RowVersion,
        relocation: RelocationId,
    ) -> Result<AbortOutcome, StoreError> {
        self.timed(StoreOp::AbortRelocation, |s| {
            s.abort_relocation(actor, expected, relocation)
        })
    }

    fn remove(&self, actor: &ActorId, expected: RowVersion) -> Result<RemoveOutcome, StoreError> {
        self.timed(StoreOp::Remove, |s| s.remove(actor, expected))
    }

    fn acquire_lease(
        &self,
        node: NodeRid,
        node_generation: NodeGeneration,
        mesh: &MeshName,
    ) -> Result<OwnerLease, StoreError> {
        self.timed(StoreOp::AcquireLease, |s| {
            s.acquire_lease(node, node_generation, mesh)
        })
    }

    fn renew_lease(&self, lease: &OwnerLease) -> Result<OwnerLease, StoreError> {
        self.timed(StoreOp::RenewLease, |s| s.renew_lease(lease))
    }

    fn release_lease(&self, lease: &OwnerLease) -> Result<(), StoreError> {
        self.timed(StoreOp::ReleaseLease, |s| s.release_lease(lease))
    }

    fn lease(&self, node: NodeRid) -> Result<Option<OwnerLease>, StoreError> {
        self.timed(StoreOp::Lease, |s| s.lease(node))
    }

    fn register_member(
        &self,
        lease: &OwnerLease,
        address: SocketAddr,
    ) -> Result<Member, StoreError> {
        self.timed(StoreOp::RegisterMember, |s| {
            s.register_member(lease, address)
        })
    }

    fn members(&self, mesh: &MeshName) -> Result<Vec<Member>, StoreError> {
        self.timed(StoreOp::Members, |s| s.members(mesh))
    }

    /// Not timed: reading the store's clock asks the store nothing.
    fn now(&self) -> Instant {
        self.inner.now()
    }
}

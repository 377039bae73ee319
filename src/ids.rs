//! Identities of §4: the values a binding links and the generations that fence
//! stale messages.
//!
//! Every generation is a `u64` (DESIGN "Decisions already made"). Each is its own
//! type so that a binding generation can never be compared with an
//! ObjectGeneration by mistake. Names are bounded strings: an [`ActorId`] is at
//! most 255 bytes of UTF-8, a [`MeshName`] at most 64.

use std::fmt;

use bytes::Bytes;

/// Why a name could not be built from bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is longer than its limit.
    #[error("name is {len} bytes, the limit is {max}")]
    TooLong {
        /// Length that was offered.
        len: usize,
        /// The limit for this kind of name.
        max: usize,
    },
    /// The name is empty.
    #[error("name is empty")]
    Empty,
    /// The bytes are not UTF-8.
    #[error("name is not UTF-8")]
    NotUtf8,
    /// A [`SpotId`] contains its separator `/`.
    #[error("a Spot's name may not contain '/'")]
    Separator,
}

/// A non-empty UTF-8 string of at most `MAX` bytes, cheap to clone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct BoundedName<const MAX: usize>(Bytes);

impl<const MAX: usize> BoundedName<MAX> {
    fn from_bytes(bytes: Bytes) -> Result<Self, NameError> {
        if bytes.is_empty() {
            return Err(NameError::Empty);
        }
        if bytes.len() > MAX {
            return Err(NameError::TooLong {
                len: bytes.len(),
                max: MAX,
            });
        }
        std::str::from_utf8(&bytes).map_err(|_| NameError::NotUtf8)?;
        Ok(Self(bytes))
    }

    fn as_str(&self) -> &str {
        // The constructor checked UTF-8; an empty fallback can never be taken.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

macro_rules! bounded_name {
    ($(#[$doc:meta])* $name:ident, $max:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(BoundedName<{ $max }>);

        impl $name {
            /// Longest accepted name, in bytes.
            pub const LEN_MAX: usize = $max;

            /// Builds the name from a string, checking its length.
            pub fn new(name: &str) -> Result<Self, NameError> {
                Self::from_bytes(Bytes::copy_from_slice(name.as_bytes()))
            }

            /// Builds the name from bytes (zero-copy), checking length and UTF-8.
            pub fn from_bytes(bytes: Bytes) -> Result<Self, NameError> {
                BoundedName::from_bytes(bytes).map(Self)
            }

            /// The name as text.
            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }

            /// The name's bytes, as they travel on the wire.
            pub fn as_bytes(&self) -> &Bytes {
                &self.0 .0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.as_str())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

bounded_name!(
    /// The global identity of an Actor (§1): at most 255 bytes of UTF-8.
    ActorId,
    255
);
bounded_name!(
    /// The name of one of several physical connection groups (§3).
    MeshName,
    64
);
bounded_name!(
    /// The name an Actor type is registered under (`NodeBuilder::actor_type`):
    /// at most 255 bytes of UTF-8, so that a BindOrGet can name it to the
    /// node that owns the Actor's row (command 71, docs/store.md).
    ActorTypeName,
    255
);

macro_rules! generation {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub u64);

        impl $name {
            /// The generation after this one.
            #[must_use]
            pub fn next(self) -> Self {
                Self(self.0.wrapping_add(1))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

generation!(
    /// The relay identity of a MeshNode (§4 "owner NodeRid").
    NodeRid
);
generation!(
    /// One process lifecycle of a node: new at every start, never reused for the
    /// same [`NodeRid`]. For a session owner this is its "lifecycle generation" (§4).
    NodeGeneration
);
generation!(
    /// One incarnation of an Actor: kept across relocation, new after destroy (§1).
    ObjectGeneration
);
generation!(
    /// Changes whenever authority over an Actor moves to another owner (§5).
    AuthorityOwnerGeneration
);
generation!(
    /// The owner host's process lifecycle as the Location Store leases it (§5);
    /// preserved in envelopes, never an input to bind admission.
    OwnerLeaseGeneration
);
generation!(
    /// Orders bindings within one session owner lifecycle (§4). Allocated by the
    /// session owner; magnitudes compare only within one lifecycle.
    BindingGeneration
);
generation!(
    /// The order of messages accepted on one session (§4, §5).
    SessionSequence
);
generation!(
    /// A physical STREAM session, unique and never reused within one session
    /// owner lifecycle (§4 "SessionRid").
    SessionRid
);
generation!(
    /// A node-to-node request, unique within the sender's lifecycle; the reply
    /// names it (docs/wire.md, "Requests and deadlines").
    RequestId
);

/// The shard of `shards` that `key` is placed on: FNV-1a of its bytes, the
/// same on every node and every run, so any shard routes a record by its
/// ActorId alone (docs/threading.md "Placement").
fn placement_shard(key: &[u8], shards: u16) -> u16 {
    let hash = key.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % u64::from(shards.max(1))) as u16
}

impl ActorId {
    /// The shard of `shards` that hosts this Actor: placed by its
    /// [`ActorId::placement_key`], so that the Actors of one SpotWide Spot
    /// share that Spot's shard and its gate (§5, §11; docs/threading.md).
    pub fn shard(&self, shards: u16) -> u16 {
        placement_shard(self.placement_key(), shards)
    }

    /// What places the Actor on a shard: the part before the first
    /// [`SpotId::SEPARATOR`] when there is one (an Actor of the Spot of that
    /// name, `room-7/monster-3`), else the whole ActorId.
    pub fn placement_key(&self) -> &[u8] {
        let bytes = self.as_bytes();
        match bytes.iter().position(|&b| b == SpotId::SEPARATOR) {
            Some(end) => &bytes[..end],
            None => bytes,
        }
    }

    /// Whether this ActorId is named under `spot` (`<spot>/<name>`), so
    /// that it is placed with it.
    pub fn is_under(&self, spot: &SpotId) -> bool {
        self.as_bytes().len() > spot.as_bytes().len()
            && self.placement_key() == &spot.as_bytes()[..]
    }
}

/// The identity of a User Spot (§1, §7): a Spot the application creates at
/// run time, a room for instance. A non-empty UTF-8 string of at most
/// [`SpotId::LEN_MAX`] bytes without [`SpotId::SEPARATOR`], so that an
/// ActorId `<spot>/<name>` names both the Actor and the Spot it is placed
/// with.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpotId(BoundedName<{ SpotId::LEN_MAX }>);

impl SpotId {
    /// Longest accepted name, in bytes: it leaves room in an ActorId (255)
    /// for the separator and a name of its own.
    pub const LEN_MAX: usize = 128;

    /// Separates a Spot's name from its Actor's own name in an ActorId
    /// (`/`).
    pub const SEPARATOR: u8 = b'/';

    /// Builds the id, checking its length and that it has no separator.
    pub fn new(name: &str) -> Result<Self, NameError> {
        if name.as_bytes().contains(&Self::SEPARATOR) {
            return Err(NameError::Separator);
        }
        BoundedName::from_bytes(Bytes::copy_from_slice(name.as_bytes())).map(Self)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }

    /// The id's bytes.
    pub fn as_bytes(&self) -> &Bytes {
        &self.0 .0
    }

    /// The ActorId `<spot>/<name>` of an Actor placed with this Spot: the
    /// form every Actor of a SpotWide Spot has (§5: they share the Spot's
    /// gate, so they live on its shard).
    pub fn actor_id(&self, name: &str) -> Result<ActorId, NameError> {
        ActorId::new(&format!("{}/{name}", self.as_str()))
    }

    /// The shard of `shards` that hosts this Spot's gate: the one its
    /// `<spot>/<name>` Actors are placed on.
    pub fn shard(&self, shards: u16) -> u16 {
        placement_shard(self.as_bytes(), shards)
    }
}

impl fmt::Debug for SpotId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpotId({:?})", self.as_str())
    }
}

impl fmt::Display for SpotId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl NodeGeneration {
    /// A generation for a process starting now: microseconds of the wall
    /// clock, so a restart of the same NodeRid gets a greater one (DESIGN:
    /// "new on every process start, never reused").
    pub fn from_wall_clock() -> Self {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        Self(micros)
    }
}

impl RequestId {
    /// The top bits of a RequestId name the session owner (shard) that sent
    /// the request, so that its reply — which carries only the id — reaches
    /// that shard in one hop (docs/wire.md).
    pub const OWNER_SHIFT: u32 = 48;

    /// The id before the first one `owner` allocates.
    pub fn origin(owner: SessionOwnerId) -> Self {
        Self(u64::from(owner.0) << Self::OWNER_SHIFT)
    }

    /// The session owner (shard) that allocated this id.
    pub fn owner(self) -> SessionOwnerId {
        SessionOwnerId((self.0 >> Self::OWNER_SHIFT) as u16)
    }

    /// Bit 47 marks an id the shard's relocation side allocated (42, 60 and
    /// the requests it proxies, docs/relocation.md), so that their replies
    /// (43, 61, a 24 reply, a 38 terminal) reach the relocation coordinator
    /// and never the session owner, from the record alone. A session
    /// owner's counter, which starts at [`RequestId::origin`], would need
    /// 2^47 requests to reach it.
    pub const RELOCATION_BIT: u64 = 1 << 47;

    /// The id before the first one the relocation side of `owner` allocates.
    pub fn relocation_origin(owner: SessionOwnerId) -> Self {
        Self(Self::origin(owner).0 | Self::RELOCATION_BIT)
    }

    /// Whether the relocation side allocated this id.
    pub fn is_relocation(self) -> bool {
        self.0 & Self::RELOCATION_BIT != 0
    }

    /// Bit 46 marks a request one Actor made of another (70), so that its
    /// reply (a 24 reply) reaches the caller's side of the shard and never
    /// the session owner, from the record alone (docs/actors.md).
    pub const CALL_BIT: u64 = 1 << 46;

    /// The id before the first one the Actor side of `owner` allocates for
    /// its Actors' requests.
    pub fn call_origin(owner: SessionOwnerId) -> Self {
        Self(Self::origin(owner).0 | Self::CALL_BIT)
    }

    /// Whether an Actor's request (70) allocated this id.
    pub fn is_call(self) -> bool {
        self.0 & Self::CALL_BIT != 0 && !self.is_relocation()
    }

    /// Bit 45 marks a BindOrGet this shard asked of the node owning the
    /// Actor's row (71, docs/store.md), so that a failure to send it (no
    /// link) reaches the ask and never a session's request of the same
    /// number.
    pub const HOST_BIT: u64 = 1 << 45;

    /// The id before the first ask `owner` allocates.
    pub fn host_origin(owner: SessionOwnerId) -> Self {
        Self(Self::origin(owner).0 | Self::HOST_BIT)
    }

    /// Whether an ask (71) allocated this id.
    pub fn is_host(self) -> bool {
        self.0 & Self::HOST_BIT != 0 && !self.is_call() && !self.is_relocation()
    }
}

/// One request an Actor made of another (docs/actors.md): numbered by the
/// node that sent it, handed back with its outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(pub u64);

/// The session owner inside a node that owns a session (its shard), so that a
/// record for the session reaches it with at most one shard hop (docs/wire.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SessionOwnerId(pub u16);

/// The key that selects a typed packet handler (§5 "typed handler registry").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PacketKey(pub u16);

/// One of an Actor's timers (docs/actors.md "Timers"). Numbered per Actor by
/// the framework, never reused by that Actor, and kept across a live
/// relocation, so a number the Actor stored in its state still names the
/// same timer on the target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(pub u64);

/// A client's request correlation on its STREAM connection (§5, §12).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Correlation(pub u32);

/// Where a physical session lives: enough to address it from any node, and to
/// tell a previous session owner lifecycle from the current one (§4, §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SessionRef {
    /// The session owner's node.
    pub owner: NodeRid,
    /// The session owner's lifecycle generation.
    pub lifecycle: NodeGeneration,
    /// The session owner (shard) within that node.
    pub owner_id: SessionOwnerId,
    /// The physical session.
    pub session: SessionRid,
}

/// Binding identity (§4): session owner RID, its lifecycle generation and the
/// owner-local binding generation, compared as a whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BindingIdentity {
    /// The session owner's node.
    pub owner: NodeRid,
    /// The session owner's lifecycle generation.
    pub lifecycle: NodeGeneration,
    /// The owner-local binding generation.
    pub generation: BindingGeneration,
}

impl BindingIdentity {
    /// Whether `self` is a later binding than `other` of the same session
    /// owner lifecycle. `None` when the two come from different owners or
    /// lifecycles, whose counters cannot be compared (§4).
    pub fn is_newer_than(&self, other: &BindingIdentity) -> Option<bool> {
        if self.owner != other.owner || self.lifecycle != other.lifecycle {
            return None;
        }
        Some(self.generation > other.generation)
    }
}

/// Where an Actor's authority lives: the route a binding stores (§4).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ActorLocation {
    /// The mesh the owner is reached through.
    pub mesh: MeshName,
    /// The Actor owner node.
    pub owner: NodeRid,
    /// That node's process lifecycle.
    pub node_generation: NodeGeneration,
    /// The current authority owner generation.
    pub authority: AuthorityOwnerGeneration,
    /// The owner host's lease generation (preserved, not admitted on, §5).
    pub lease: OwnerLeaseGeneration,
}

/// An Actor that finished creation and can receive messages (§1 "Ready"),
/// with the location it was found at: what `Session::actor` and
/// `Node::create_actor` return, what `SessionActors::bind` takes, and what
/// `SessionActor::actor_ref` gives back (§13).
///
/// It is the one reference type of the API (issue 21 item 5): a game keeps
/// it, compares `id` and `generation`, and binds it. It carries a location
/// because a bind goes to the location in the caller's ActorRef with no
/// store read first (§5); that location names a node and generations, which
/// §1 keeps from the game, so it is hidden from the documentation — read
/// it only through `SessionActor::location`, an opaque snapshot. Two refs
/// of one incarnation found at different times may differ in location:
/// compare `id` and `generation` to ask "the same Actor?".
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ActorRef {
    /// The global identity.
    pub id: ActorId,
    /// The incarnation.
    pub generation: ObjectGeneration,
    /// Where the caller found it: the initial route of a bind (§5).
    #[doc(hidden)]
    pub location: ActorLocation,
}

/// An authenticated peer node as the transport saw it (§2 "Transport
/// ingress"): its RID and the NodeGeneration current for the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Peer {
    /// The peer's RID.
    pub rid: NodeRid,
    /// The peer's process lifecycle, checked by the transport.
    pub generation: NodeGeneration,
}

/// Names one relocation of one Actor, chosen by its coordinator (§8.1
/// "relocation identity").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RelocationId {
    /// The coordinating node.
    pub coordinator: NodeRid,
    /// Unique per coordinator lifecycle, and increasing for the relocations
    /// of one Actor (the Location Store's durable abort relies on it,
    /// docs/store.md).
    pub sequence: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actor_id_is_bounded_to_255_bytes() {
        assert!(ActorId::new(&"a".repeat(255)).is_ok());
        assert_eq!(
            ActorId::new(&"a".repeat(256)),
            Err(NameError::TooLong { len: 256, max: 255 })
        );
        assert_eq!(ActorId::new(""), Err(NameError::Empty));
        assert_eq!(
            ActorId::from_bytes(Bytes::from_static(&[0xff, 0xfe])),
            Err(NameError::NotUtf8)
        );
    }

    #[test]
    fn an_actor_under_a_spot_is_placed_with_the_spot() {
        let room = SpotId::new("room-7").unwrap();
        let monster = room.actor_id("monster-3").unwrap();
        assert_eq!(monster.as_str(), "room-7/monster-3");
        assert!(monster.is_under(&room));
        assert!(!ActorId::new("room-7").unwrap().is_under(&room));
        assert!(!ActorId::new("room-70/x").unwrap().is_under(&room));
        for shards in 1..=16 {
            assert_eq!(monster.shard(shards), room.shard(shards));
        }
        // Without a separator the whole id places the Actor.
        let plain = ActorId::new("player-1").unwrap();
        assert_eq!(plain.placement_key(), b"player-1");
        assert_eq!(SpotId::new("a/b"), Err(NameError::Separator));
        assert!(SpotId::new(&"s".repeat(SpotId::LEN_MAX)).is_ok());
        assert!(SpotId::new(&"s".repeat(SpotId::LEN_MAX + 1)).is_err());
        assert_eq!(SpotId::new(""), Err(NameError::Empty));
    }

    #[test]
    fn binding_generations_compare_only_within_one_lifecycle() {
        let a = BindingIdentity {
            owner: NodeRid(1),
            lifecycle: NodeGeneration(7),
            generation: BindingGeneration(5),
        };
        let later = BindingIdentity {
            generation: BindingGeneration(6),
            ..a
        };
        let restarted = BindingIdentity {
            lifecycle: NodeGeneration(8),
            generation: BindingGeneration(1),
            ..a
        };
        assert_eq!(later.is_newer_than(&a), Some(true));
        assert_eq!(a.is_newer_than(&later), Some(false));
        assert_eq!(restarted.is_newer_than(&a), None);
    }
}

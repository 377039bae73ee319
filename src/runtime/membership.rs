//! Peer discovery through the Location Store's membership (issue 6
//! "membership", docs/store.md "Membership"): shard 0, which holds the
//! node's links and renews its lease, registers this process lifecycle at
//! its peer address and lists the mesh once per renewal; [`Links`] follows
//! the listing (dials new peers, drops and fences peers whose lease lapsed).
//!
//! [`Links`]: super::links::Links

use std::net::SocketAddr;

use crate::ids::MeshName;
use crate::store::{LocationStore, Member, OwnerLease};

/// This node's side of the membership.
pub(crate) struct Membership {
    mesh: MeshName,
    /// Where peers link to this node: the bound peer listener.
    address: SocketAddr,
    /// The mesh as last listed, followed again while the store cannot be
    /// read. Only the store decides that a peer's lease lapsed: this node
    /// losing the store says nothing about its peers, which may be renewing
    /// fine, and a peer that really lapsed fenced its own Actors at its
    /// expiry (§5, X21), so keeping its link uses no route past the lease.
    last: Vec<Member>,
}

impl Membership {
    pub(crate) fn new(mesh: MeshName, address: SocketAddr) -> Self {
        Self {
            mesh,
            address,
            last: Vec::new(),
        }
    }

    /// One round: registers `lease`'s lifecycle (none once the node fenced
    /// itself: a lapsed lifecycle does not rejoin) and lists the mesh. A
    /// failed registration leaves the listing as the store has it; the
    /// lease's own renewal decides whether the node fences.
    pub(crate) fn poll(
        &mut self,
        store: &dyn LocationStore,
        lease: Option<&OwnerLease>,
    ) -> &[Member] {
        if let Some(lease) = lease {
            if let Err(error) = store.register_member(lease, self.address) {
                tracing::warn!(%error, "membership registration failed");
            }
        }
        match store.members(&self.mesh) {
            Ok(members) => self.last = members,
            Err(error) => {
                tracing::warn!(%error, "membership listing failed: following the last one")
            }
        }
        &self.last
    }
}

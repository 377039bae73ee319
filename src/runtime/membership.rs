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

    /// What a lease round needs to register and list, off the shard.
    pub(crate) fn registration(&self) -> Registration {
        Registration {
            mesh: self.mesh.clone(),
            address: self.address,
        }
    }

    /// A round's listing (`None`: it could not be read): followed, or else
    /// the last one is.
    pub(crate) fn listed(&mut self, listed: Option<Vec<Member>>) -> &[Member] {
        if let Some(members) = listed {
            self.last = members;
        }
        &self.last
    }
}

/// One membership round, run by a store worker (never on a shard thread).
pub(crate) struct Registration {
    mesh: MeshName,
    address: SocketAddr,
}

impl Registration {
    /// Registers `lease`'s lifecycle (none once the node fenced itself: a
    /// lapsed lifecycle does not rejoin) and lists the mesh; `None` when the
    /// listing failed. A failed registration leaves the listing as the store
    /// has it; the lease's own renewal decides whether the node fences.
    pub(crate) fn round(
        &self,
        store: &dyn LocationStore,
        lease: Option<&OwnerLease>,
    ) -> Option<Vec<Member>> {
        if let Some(lease) = lease {
            if let Err(error) = store.register_member(lease, self.address) {
                tracing::warn!(%error, "membership registration failed");
            }
        }
        match store.members(&self.mesh) {
            Ok(members) => Some(members),
            Err(error) => {
                tracing::warn!(%error, "membership listing failed: following the last one");
                None
            }
        }
    }
}

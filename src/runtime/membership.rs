//! Peer discovery through the Location Store's membership (issue 6
//! "membership", docs/store.md "Membership"): shard 0, which holds the
//! node's links and renews its lease, registers this process lifecycle at
//! its peer address and lists the mesh once per renewal; [`Links`] follows
//! the listing (dials new peers, drops and fences peers whose lease lapsed).
//!
//! [`Links`]: super::links::Links

use std::net::SocketAddr;

use crate::ids::MeshName;
use crate::store::{LocationStore, Member, OwnerLease, StoreError};

/// This node's side of the membership.
pub(crate) struct Membership {
    mesh: MeshName,
    /// Where peers link to this node: the bound peer listener.
    address: SocketAddr,
    /// The mesh as last listed. Through a store outage each peer stays
    /// only until its lease's `expires_at`: an outage never extends a lease
    /// (§5), so a peer the store cannot vouch for is dead at its expiry.
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
                if !matches!(error, StoreError::Unavailable(_)) {
                    tracing::warn!(%error, "membership listing failed");
                }
                let now = store.now();
                self.last.retain(|member| member.expires_at > now);
            }
        }
        &self.last
    }
}

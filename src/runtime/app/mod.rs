//! What the application plugs into the runtime (§1, §5, §10): the Actor
//! and Spot traits it implements, the session handle its callbacks get,
//! and the node settings. They are defined here, below `api`, because the
//! runtime calls them; `api` re-exports them as the public surface, so the
//! arrows run one way (api → runtime).

pub mod actor;
mod cancel;
pub mod session;
mod settings;
pub mod spot;

pub use cancel::StartCancel;
pub use settings::{NodeSettings, RelocationUnit, StartError};

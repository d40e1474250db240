//! What [`Session::prepare`](crate::Session::prepare) resolves a spec to,
//! which the build, the remote step and `explain` all take.

use abicache_key::{Environment, Keyed};
use abicache_scan::ScanReport;

/// A spec resolved against the session's environment: its scan and key.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The environment with what the key needed filled in (nvcc release, archs).
    pub env: Environment,
    /// What the scanner found.
    pub scan: ScanReport,
    /// The key and everything decided on the way.
    pub keyed: Keyed,
}

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
    /// True when nobody chose the CUDA arch list (no `cuda_archs` in the
    /// spec or the environment, no `TORCH_CUDA_ARCH_LIST`, no arch flag in
    /// the nvcc flags) and it came from the visible GPUs: a miss may then be
    /// served by an entry that covers them ([`crate::covering`]).
    pub archs_from_gpus: bool,
}

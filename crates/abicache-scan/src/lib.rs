//! Source scanning for abicache (SPEC §2–3).
//!
//! Given the sources of one extension, visits each source and, iteratively,
//! the local headers it includes (each file once per source; read, hashed
//! with BLAKE3 and lexed once per scan, however many sources include it),
//! and reports per-source file lists, missing and computed includes,
//! Python-ABI evidence and torch-header facts. Text inside comments and
//! string or character literals is never an include or a marker.
//!
//! The crate reads files; it knows nothing of torch versions or caches.

#![deny(missing_docs)]

mod report;

pub use report::{
    ComputedInclude, Location, PythonMarker, ScanReport, ScannedFile, SourceReport, TorchInclude,
};

//! The crate's one test binary.

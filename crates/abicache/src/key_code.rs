//! The key-code fingerprint: which sources it covers and its value in this
//! build (see `key_code_roots.rs` beside `build.rs`).

include!("../key_code_roots.rs");

/// `<version>-<fingerprint>` of the sources of [`KEY_CODE_ROOTS`], as
/// `build.rs` computed it for this build with
/// `abicache_source_fingerprint::fingerprint` (base: this crate's directory).
pub const KEY_CODE_FINGERPRINT: &str = env!("ABICACHE_KEY_CODE_FINGERPRINT");

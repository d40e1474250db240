// The one list of what the key-code fingerprint covers: `build.rs` hashes
// it into `ABICACHE_KEY_CODE_FINGERPRINT`, and the library re-exports it
// (`abicache::key_code::KEY_CODE_ROOTS`) for the test that recomputes it
// (`tests/it/key_code_fingerprint.rs`). Both `include!` this file.

/// The sources of the code that turns a scan into a key, relative to the
/// `abicache` crate's directory: a directory (every `.rs` file below it) or
/// one file. A key memo (and the warm-load record that rests on it) is
/// answered only under the fingerprint of these; an edit anywhere else (the
/// fleet tools, the layers, the build) leaves them warm.
///
/// - `abicache-key`: the spec's scan configuration, the payload and the
///   key (`compute_key`);
/// - `abicache-isa`: what the compile flags require, part of the payload;
/// - `src/session.rs`: `Session::prepare`, which scans with the spec's
///   configuration and keys the scan (`configure_scan`, `compute_key`);
/// - `src/session/warm_key.rs`: the memo's input digest and its value.
///
/// The scanner has its own fingerprint (`abicache_scan::SCANNER_FINGERPRINT`),
/// also in the memo's inputs. The environment's completion (nvcc, CUDA
/// archs, `host_cpu`) is not key code: the completed environment itself
/// is in the memo's inputs.
pub const KEY_CODE_ROOTS: &[&str] = &[
    "../abicache-key/src",
    "../abicache-isa/src",
    "src/session.rs",
    "src/session/warm_key.rs",
];

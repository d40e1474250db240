//! Fingerprints the code that turns a scan into a key (this crate's,
//! `abicache-key`'s and `abicache-isa`'s sources) into `ABICACHE_KEY_CODE_FINGERPRINT`, so a key
//! memo written by another version of that code is never answered.

use std::path::Path;

fn main() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    abicache_source_fingerprint::emit(
        "ABICACHE_KEY_CODE_FINGERPRINT",
        env!("CARGO_PKG_VERSION"),
        manifest,
        &[
            manifest.join("src"),
            manifest.join("../abicache-key/src"),
            manifest.join("../abicache-isa/src"),
        ],
    );
}

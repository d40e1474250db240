//! Fingerprints the code that turns a scan into a key (this crate's,
//! `abicache-key`'s and `abicache-isa`'s sources) into `ABICACHE_KEY_CODE_FINGERPRINT`, so a key
//! memo written by another version of that code is never answered.

use std::path::Path;

fn main() {
    // Read when the script runs (`env!` would name the checkout the
    // script was compiled in: a target directory shared by checkouts at
    // other paths reuses it).
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let manifest = Path::new(&manifest);
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

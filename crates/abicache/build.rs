//! Fingerprints the code that turns a scan into a key (the roots of
//! `key_code_roots.rs`: `abicache-key`'s and `abicache-isa`'s sources and
//! the keying modules of this crate) into `ABICACHE_KEY_CODE_FINGERPRINT`,
//! so a key memo written by another version of that code is never answered.

use std::path::Path;

include!("key_code_roots.rs");

fn main() {
    // Read when the script runs (`env!` would name the checkout the
    // script was compiled in: a target directory shared by checkouts at
    // other paths reuses it).
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let manifest = Path::new(&manifest);
    let roots: Vec<_> = KEY_CODE_ROOTS.iter().map(|r| manifest.join(r)).collect();
    println!("cargo:rerun-if-changed=key_code_roots.rs");
    abicache_source_fingerprint::emit(
        "ABICACHE_KEY_CODE_FINGERPRINT",
        env!("CARGO_PKG_VERSION"),
        manifest,
        &roots,
    );
}

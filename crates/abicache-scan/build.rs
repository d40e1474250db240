//! Fingerprints the scanner's own source (every `src/**/*.rs`) into
//! `ABICACHE_SCAN_FINGERPRINT`, so the stat cache never serves per-file
//! facts computed by a different lexer: any edit to the crate's code changes
//! the fingerprint, and a cache file with another one is ignored.

use std::path::Path;

fn main() {
    // Read when the script runs (`env!` would name the checkout the
    // script was compiled in: a target directory shared by checkouts at
    // other paths reuses it).
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let src = Path::new(&manifest).join("src");
    abicache_source_fingerprint::emit(
        "ABICACHE_SCAN_FINGERPRINT",
        env!("CARGO_PKG_VERSION"),
        &src,
        std::slice::from_ref(&src),
    );
}

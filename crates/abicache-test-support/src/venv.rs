//! The repository and the project's Python venvs, which the tests run
//! against (`scripts/setup-venv.sh dev compat` creates them).

use std::path::{Path, PathBuf};

/// The repository's root directory, canonical: two levels above the
/// running test's crate (`crates/<name>`), which `cargo test` and `cargo
/// nextest` name in `CARGO_MANIFEST_DIR` when they run it.
///
/// Read at run time, never with `env!`: the per-machine target directory
/// is shared by every checkout on the machine (CI clones into a new folder
/// each time), and cargo reuses a test binary built in another checkout
/// when this one's sources are older than it, so a path compiled in names
/// that other checkout, which may be gone or hold other code.
pub fn repo_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect(
        "CARGO_MANIFEST_DIR is unset: run the tests with `cargo nextest run` or `cargo test`",
    );
    Path::new(&manifest)
        .join("../..")
        .canonicalize()
        .expect("the repository root exists")
}

/// `<repo>/<venv>/bin/python` (`venv` is `.venv` or `.venv-compat`); the
/// test fails, naming the set-up script, when it is missing.
pub fn venv_python(venv: &str) -> PathBuf {
    let python = repo_root().join(venv).join("bin/python");
    assert!(
        python.exists(),
        "`{}` is missing: these tests need the project's venvs (torch 2.15 with the pip nvcc in \
         `.venv`, torch 2.12 in `.venv-compat`); create them with `scripts/setup-venv.sh dev compat`",
        python.display()
    );
    python
}

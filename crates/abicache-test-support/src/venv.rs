//! The repository and the project's Python venvs, which the tests run
//! against (`scripts/setup-venv.sh dev compat` creates them).

use std::path::{Path, PathBuf};

/// The repository's root directory, canonical.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
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

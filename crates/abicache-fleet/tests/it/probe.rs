//! The interpreter probe against the project's real venvs.

use std::path::Path;

use abicache_fleet::probe_interpreter;
use abicache_test_support::venv_python;

#[test]
fn probe_reads_torch_without_importing_it() {
    let probed = probe_interpreter(&venv_python(".venv"), None).unwrap();
    let env = &probed.environment;
    assert!(
        env.torch_version.starts_with("2.15."),
        "{}",
        env.torch_version
    );
    assert_eq!(env.torch_cuda.as_deref(), Some("13.2"));
    assert!(env.cxx11_abi);
    assert!(env
        .python_soabi
        .as_deref()
        .unwrap()
        .starts_with("cpython-311"));
    assert!(env
        .torch_dir
        .as_ref()
        .unwrap()
        .join("include/torch/library.h")
        .exists());
    assert!(env
        .python_include
        .as_ref()
        .unwrap()
        .join("Python.h")
        .exists());
    assert!(!probed.site_packages.is_empty());
}

/// Regression: `--python venv/bin/python` names different interpreters from
/// different directories, and a venv's `bin/python` is a symlink to a base
/// interpreter other venvs share, so a probe cache keyed on the argument or
/// on the resolved executable handed one venv's torch to another.
#[test]
fn probe_cache_keeps_venvs_sharing_a_base_interpreter_apart() {
    // It changes the current directory: alone in its process.
    if !abicache_test_support::alone_in_process(
        "probe::probe_cache_keeps_venvs_sharing_a_base_interpreter_apart",
    ) {
        return;
    }
    // It changes the current directory: alone in its process.
    if !abicache_test_support::alone_in_process(
        "probe::probe_cache_keeps_venvs_sharing_a_base_interpreter_apart",
    ) {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let dirs = tempfile::tempdir().unwrap();
    let (a, b) = (dirs.path().join("a"), dirs.path().join("b"));
    for (dir, venv) in [(&a, ".venv"), (&b, ".venv-compat")] {
        std::fs::create_dir(dir).unwrap();
        let real = venv_python(venv)
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .to_path_buf();
        std::os::unix::fs::symlink(real, dir.join("venv")).unwrap();
    }
    let relative = Path::new("venv/bin/python");
    std::env::set_current_dir(&a).unwrap();
    let dev = probe_interpreter(relative, Some(cache.path())).unwrap();
    std::env::set_current_dir(&b).unwrap();
    let compat = probe_interpreter(relative, Some(cache.path())).unwrap();
    assert!(
        dev.environment.torch_version.starts_with("2.15."),
        "{}",
        dev.environment.torch_version
    );
    assert!(
        compat.environment.torch_version.starts_with("2.12."),
        "{}",
        compat.environment.torch_version
    );
    // Cached answers are the same answers.
    let again = probe_interpreter(relative, Some(cache.path())).unwrap();
    assert_eq!(again, compat);
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 2);
}

#[test]
fn probe_of_a_missing_interpreter_names_it() {
    let err = probe_interpreter(Path::new("/nonexistent/bin/python"), None).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent/bin/python"), "{msg}");
    assert!(
        msg.contains("pass the path of a Python executable"),
        "{msg}"
    );
}

#[test]
fn probe_of_an_interpreter_without_torch_says_so() {
    // A fresh venv of the same interpreter, without torch.
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new(venv_python(".venv"))
        .args(["-m", "venv", "--without-pip"])
        .arg(dir.path().join("bare"))
        .status()
        .unwrap();
    assert!(status.success());
    let err = probe_interpreter(&dir.path().join("bare/bin/python"), None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("torch is not installed"), "{err}");
}

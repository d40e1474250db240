//! Issue 15: the stable-ABI runtime floor and the spec's validity are
//! checked by the session before the cache is opened, so `abicache key` and
//! `abicache build` refusing a stable target above the running torch leave
//! nothing on disk (no cache root, no interpreter probe record).

use crate::common;

use common::{python_compat, repo_path, stderr, Cache};

#[test]
fn key_and_build_refusing_a_too_new_stable_target_create_nothing() {
    let cache = Cache::new();
    let project = cache.dir.with_file_name("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::copy(
        repo_path("examples/stable_scale/scale.cpp"),
        project.join("scale.cpp"),
    )
    .unwrap();
    // The compat venv runs torch 2.12: a 2.15 target is above it.
    let spec = project.join("abicache.toml");
    std::fs::write(
        &spec,
        "[[extension]]\nname = \"stable_scale\"\nsources = [\"scale.cpp\"]\n\
         torch_stable_abi_target = \"2.15\"\n",
    )
    .unwrap();
    let python = python_compat();
    for command in ["key", "build"] {
        let out = cache.run(args![command, spec, "--python", python]);
        assert!(
            !out.status.success(),
            "`abicache {command}` accepted a too-new target"
        );
        let message = stderr(&out);
        assert!(
            message.contains("2.15") && message.contains("2.12"),
            "`abicache {command}` should name the target and the running torch:\n{message}"
        );
        assert!(
            !cache.dir.exists(),
            "`abicache {command}` created `{}` before refusing",
            cache.dir.display()
        );
    }
}

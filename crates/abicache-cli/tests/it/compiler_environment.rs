//! What the compilers and launchers abicache starts are given (issue 46,
//! finding 8): how many run at once, which variables they inherit, and which
//! paths a distributing launcher sends to other machines.
//!
//! The compiler is the real `c++` behind a wrapper script (`CXX=wrapper`, as
//! Cray's or Spack's wrappers are); the launcher is a script that records
//! what it was given and runs the rest of its command line, standing in for
//! distcc (a real process; the farm itself is `tests/it/distributed.rs`).

use crate::common;

use std::path::{Path, PathBuf};

use common::*;

/// An executable shell script at `dir/name`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A spec of `units` tiny units (no torch header) in `dir`.
fn many_units(dir: &Path, units: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let mut sources = Vec::new();
    for n in 0..units {
        let name = format!("unit{n}.cpp");
        std::fs::write(
            dir.join(&name),
            format!("extern \"C\" int unit{n}() {{ return {n}; }}\n"),
        )
        .unwrap();
        sources.push(format!("\"{name}\""));
    }
    let spec = dir.join("abicache.toml");
    std::fs::write(
        &spec,
        format!(
            "[[extension]]\nname = \"many\"\nsources = [{}]\n",
            sources.join(", ")
        ),
    )
    .unwrap();
    spec
}

/// Finding 8a: `MAX_JOBS=8` ran 8 compilers at once on one core. Now the
/// jobs are capped at 2 per core, with a line naming the variable, the value,
/// the cap and the cores. The build runs on one core (`taskset -c 0`); the
/// compiler wrapper counts the compiles running when it starts.
#[test]
fn max_jobs_over_twice_the_cores_is_capped_with_a_line_naming_it() {
    if std::process::Command::new("taskset")
        .arg("--version")
        .output()
        .is_err()
    {
        abicache_test_support::skip("`taskset` (util-linux) is not installed; install util-linux");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let spec = many_units(&work.path().join("ext"), 8);
    let running = work.path().join("running");
    std::fs::create_dir(&running).unwrap();
    let peaks = work.path().join("peaks");
    // A compile registers itself, records how many are registered, holds
    // on for a second so that the others overlap it, compiles and leaves.
    let cxx = script(
        work.path(),
        "cxx-wrapper",
        &format!(
            "case \" $* \" in *' -c '*) ;; *) exec c++ \"$@\" ;; esac\n\
             touch {running}/$$\n\
             ls {running} | wc -l >> {peaks}\n\
             sleep 1\n\
             c++ \"$@\"; status=$?\n\
             rm -f {running}/$$\n\
             exit $status\n",
            running = running.display(),
            peaks = peaks.display()
        ),
    );
    let python = python();
    let cache = Cache::new();
    let mut build = cache.cmd(args![
        "build", &spec, "--python", &python, "--json", "--quiet"
    ]);
    let program = build.get_program().to_owned();
    let args: Vec<_> = build.get_args().map(|a| a.to_owned()).collect();
    // Same environment and directory, on core 0 only.
    let mut on_one_core = std::process::Command::new("taskset");
    on_one_core
        .args([std::ffi::OsStr::new("-c"), "0".as_ref(), &program])
        .args(&args)
        .envs(
            build
                .get_envs()
                .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v.to_owned()))),
        )
        .current_dir(repo());
    for (k, v) in build.get_envs() {
        if v.is_none() {
            on_one_core.env_remove(k);
        }
    }
    build = on_one_core;
    let out = build
        .env("CXX", &cxx)
        .env("MAX_JOBS", "8")
        .output()
        .unwrap();
    assert_success(&out);
    let peaks: Vec<usize> = std::fs::read_to_string(&peaks)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(peaks.len(), 8, "every unit compiled once: {peaks:?}");
    let peak = peaks.iter().max().copied().unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        peak <= 2,
        "{peak} compiles ran at once on one core with MAX_JOBS=8 (the cap is 2 per core): \
         {peaks:?}\n{answer}\n{}",
        stderr(&out)
    );
    let line = "`MAX_JOBS=8` asks for more parallel compile jobs than this machine can run: \
                capped at 2 (2 per core, 1 core); set it to 2 or less";
    let said = format!("{}{answer}", stderr(&out));
    assert!(said.contains(line), "no line naming the cap:\n{said}");
}

/// Finding 8b: the compiler and the launcher inherited the signing key and
/// the cloud credentials. Both are scripts that write their environment to a
/// file and run the rest; a build with a remote and a signing key set (a
/// builder that uploads) must leave every secret out of both.
#[test]
fn compilers_and_launchers_get_no_signing_key_and_no_cloud_secrets() {
    let work = tempfile::tempdir().unwrap();
    let dumps = work.path().join("env");
    std::fs::create_dir(&dumps).unwrap();
    let cxx = script(
        work.path(),
        "cxx-wrapper",
        &format!("env > {}/cxx.$$\nexec c++ \"$@\"\n", dumps.display()),
    );
    let launcher = script(
        work.path(),
        "launcher",
        &format!("env > {}/launcher.$$\nexec \"$@\"\n", dumps.display()),
    );
    let python = python();
    let cache = Cache::new();
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("signing");
    cache.json(args!["keygen", "--out", &key, "--json"]);
    let remote = work.path().join("remote");
    std::fs::create_dir(&remote).unwrap();
    let secrets = [
        ("ABICACHE_SIGNING_KEY", key.display().to_string()),
        ("ABICACHE_REMOTE", format!("file://{}", remote.display())),
        ("AWS_ACCESS_KEY_ID", "AKIATESTKEYID".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "aws-secret-canary".to_string()),
        ("AWS_SESSION_TOKEN", "aws-session-canary".to_string()),
        (
            "AWS_CONTAINER_AUTHORIZATION_TOKEN",
            "aws-container-canary".to_string(),
        ),
    ];
    let spec = repo_path("tests/fixtures/tiny/abicache.toml");
    let out = cache
        .cmd(args![
            "build", &spec, "--python", &python, "--json", "--quiet"
        ])
        .env("CXX", &cxx)
        .env("ABICACHE_COMPILER_LAUNCHER", &launcher)
        .envs(secrets.iter().map(|(k, v)| (k, v)))
        .env("NOT_A_SECRET", "passed-on")
        .output()
        .unwrap();
    assert_success(&out);
    let mut seen = std::collections::BTreeSet::new();
    for dump in std::fs::read_dir(&dumps).unwrap().flatten() {
        let name = dump.file_name().to_string_lossy().into_owned();
        seen.insert(name.split('.').next().unwrap().to_owned());
        let env = std::fs::read_to_string(dump.path()).unwrap();
        assert!(
            env.lines().any(|l| l == "NOT_A_SECRET=passed-on"),
            "{name}: the environment was not passed on:\n{env}"
        );
        for (secret, value) in &secrets {
            let leaked: Vec<&str> = env
                .lines()
                .filter(|l| l.starts_with(&format!("{secret}=")) || l.contains(value.as_str()))
                .collect();
            assert!(leaked.is_empty(), "{name} inherited `{secret}`: {leaked:?}");
        }
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        ["cxx", "launcher"],
        "both the compiler and the launcher ran"
    );
}

/// Every object under a cache's object store, by name, with its bytes.
fn objects(cache: &Cache) -> std::collections::BTreeMap<String, Vec<u8>> {
    let dir = cache.dir.join("v1/objects");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "o"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// Finding 8c: distcc was sent `-o <cache>/v1/objects/…` and
/// `-ffile-prefix-map=<checkout>=.`: absolute paths of this machine. The
/// launcher here is a script named `distcc` that records its argv and runs
/// the rest of it (a real process standing in for distcc, which sends that
/// argv, minus the preprocessor's flags, to its server). Now no argument
/// names the checkout or the cache, the source, the object and the in-tree
/// include directory are relative, and the object is byte for byte the one
/// a local build makes.
#[test]
fn a_distributing_launcher_gets_relative_paths_and_makes_the_local_objects() {
    let work = tempfile::tempdir().unwrap();
    let ext = work.path().join("checkout/ext");
    std::fs::create_dir_all(ext.join("src")).unwrap();
    std::fs::create_dir_all(ext.join("include")).unwrap();
    std::fs::write(
        ext.join("include/paths.h"),
        "#pragma once\ninline const char* paths_header() { return __FILE__; }\n",
    )
    .unwrap();
    std::fs::write(
        ext.join("src/ops.cpp"),
        "#include \"paths.h\"\n\
         extern \"C\" const char* paths_source() { return __FILE__; }\n\
         extern \"C\" const char* paths_included() { return paths_header(); }\n",
    )
    .unwrap();
    let spec = ext.join("abicache.toml");
    std::fs::write(
        &spec,
        "[[extension]]\nname = \"paths\"\nsources = [\"src/ops.cpp\"]\n\
         extra_include_paths = [\"include\"]\n",
    )
    .unwrap();
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let logs = work.path().join("argv");
    std::fs::create_dir(&logs).unwrap();
    let distcc = script(
        &bin,
        "distcc",
        &format!(
            "log={}/argv.$$\nfor a in \"$@\"; do printf '%s\\n' \"$a\" >> \"$log\"; done\nexec \"$@\"\n",
            logs.display()
        ),
    );
    let python = python();
    let through = Cache::new();
    let out = through
        .cmd(args![
            "build", &spec, "--python", &python, "--json", "--quiet"
        ])
        .env("ABICACHE_COMPILER_LAUNCHER", &distcc)
        .output()
        .unwrap();
    assert_success(&out);
    let built_there: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let local = Cache::new();
    let built_here = local.build(&spec, &python, &[]);
    assert_eq!(built_there["key"], built_here["key"]);

    let argvs: Vec<Vec<String>> = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        })
        .collect();
    assert_eq!(argvs.len(), 1, "one unit, one launch: {argvs:?}");
    let argv = &argvs[0];
    let local_paths = [
        work.path().display().to_string(),
        through.dir.display().to_string(),
    ];
    for arg in argv {
        for local in &local_paths {
            assert!(
                !arg.contains(local.as_str()),
                "`{arg}` names `{local}`, a path of this machine: {argv:#?}"
            );
        }
    }
    let after = |flag: &str| {
        let at = argv.iter().position(|a| a == flag).unwrap();
        Path::new(&argv[at + 1]).to_path_buf()
    };
    assert!(after("-c").is_relative(), "{argv:#?}");
    assert!(after("-o").is_relative(), "{argv:#?}");
    assert!(
        argv.iter()
            .any(|a| a.starts_with("-I") && Path::new(&a[2..]).is_relative()),
        "the in-tree include directory is relative: {argv:#?}"
    );
    let (here, there) = (objects(&local), objects(&through));
    assert_eq!(here.len(), 1);
    assert!(
        here == there,
        "the object compiled through the launcher differs from the local one"
    );
}

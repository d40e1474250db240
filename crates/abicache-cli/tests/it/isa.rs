//! Issue 27: `-march=native` keys on what it resolves to (`host_cpu`,
//! probed once per compiler and CPU), and a bundle whose library requires
//! instruction-set extensions this CPU lacks is refused by `abicache
//! import` (exit 2, nothing imported) unless `ABICACHE_ISA_CHECK=0`.
//!
//! The flag this CPU lacks is chosen at run time from its `/proc/cpuinfo`
//! flags by `tests/fixtures/isa/pick.py`.

use crate::common;

use std::path::{Path, PathBuf};

use common::{assert_exit, assert_success, python, repo_path, stderr, strings, Cache};

/// A project with the stable-ABI example built with `flags`.
fn project(cache: &Cache, name: &str, flags: &[&str]) -> PathBuf {
    let dir = cache.dir.with_file_name(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo_path("examples/stable_scale/scale.cpp"),
        dir.join("scale.cpp"),
    )
    .unwrap();
    let flags: Vec<String> = flags.iter().map(|f| format!("{f:?}")).collect();
    let spec = dir.join("abicache.toml");
    std::fs::write(
        &spec,
        format!(
            "[[extension]]\nname = \"stable_scale\"\nsources = [\"scale.cpp\"]\n\
             torch_stable_abi_target = \"2.10\"\nextra_cflags = [{}]\n",
            flags.join(", ")
        ),
    )
    .unwrap();
    spec
}

fn payload_line(key: &serde_json::Value, field: &str) -> Option<String> {
    strings(&key["payload"])
        .into_iter()
        .find_map(|l| l.strip_prefix(&format!("{field}=")).map(str::to_owned))
}

fn env_file(dir: &Path, name: &str, host_cpu: Option<&str>) -> PathBuf {
    let path = dir.with_file_name(name);
    let mut text = "python_version = \"3.13.1\"\npython_soabi = \"cpython-313-x86_64-linux-gnu\"\n\
                    torch_version = \"2.15.0+cpu\"\ncxx11_abi = true\n"
        .to_owned();
    if let Some(v) = host_cpu {
        text.push_str(&format!("host_cpu = {v:?}\n"));
    }
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn march_native_keys_on_the_resolved_cpu_probed_once_per_compiler() {
    let cache = Cache::new();
    assert_success(&cache.run(["ls"])); // the cache exists: probes are remembered in it
    let spec = project(&cache, "native", &["-O2", "-march=native"]);
    // A compiler that logs each run; older than the racy window, so its answer is remembered.
    let log = cache.dir.with_file_name("cxx.log");
    let cxx = cache.dir.with_file_name("logging-c++");
    std::fs::write(
        &cxx,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec c++ \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&cxx, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let key = |env: &[(&str, &Path)], extra: &[&std::ffi::OsStr]| {
        let mut cmd = cache.cmd(args!["key", spec, "--json"]);
        cmd.args(extra).env("CXX", &cxx);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert_success(&out);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let python = python();
    let probed = key(&[], &["--python".as_ref(), python.as_os_str()]);
    let host_cpu = payload_line(&probed, "host_cpu").expect("a host_cpu line");
    println!("host_cpu={host_cpu}");
    assert!(
        host_cpu.contains("-march=") && !host_cpu.contains("native"),
        "{host_cpu}"
    );
    let runs = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("-march=native"))
            .count()
    };
    assert_eq!(runs(), 1, "one probe");
    // A warm key in a new process runs no compiler.
    let again = key(&[], &["--python".as_ref(), python.as_os_str()]);
    assert_eq!(again["key"], probed["key"]);
    assert_eq!(
        runs(),
        1,
        "the probe's answer is remembered under the cache"
    );

    // An environment file: without host_cpu this machine's is probed; a
    // described one keys for that machine.
    let here = env_file(&spec, "here.toml", None);
    let there = env_file(
        &spec,
        "there.toml",
        Some("-march=skylake-avx512 -mtune=skylake-avx512"),
    );
    let from_here = key(&[], &["--env".as_ref(), here.as_os_str()]);
    let from_there = key(&[], &["--env".as_ref(), there.as_os_str()]);
    assert_eq!(
        payload_line(&from_here, "host_cpu").as_deref(),
        Some(host_cpu.as_str())
    );
    assert_eq!(
        payload_line(&from_there, "host_cpu").as_deref(),
        Some("-march=skylake-avx512 -mtune=skylake-avx512")
    );
    assert_ne!(from_here["key"], from_there["key"]);
    assert_eq!(runs(), 1);
    // Building the other machine's key here is refused (the compiler would
    // resolve -march=native for this CPU).
    let out = cache.run(args!["build", spec, "--env", there]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("cannot be built here with `-march=native`"),
        "{}",
        stderr(&out)
    );

    // A spec without a native flag has no host_cpu line.
    let plain = project(&cache, "plain", &["-O2"]);
    let out = cache.run(args!["key", plain, "--json", "--env", here]);
    assert_success(&out);
    let plain: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(payload_line(&plain, "host_cpu"), None);
}

/// `(lacking flag, its feature)` for this CPU, if any candidate is lacking.
fn lacking_flag() -> Option<(String, String)> {
    let out = std::process::Command::new(python())
        .arg(repo_path("tests/fixtures/isa/pick.py"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let words: Vec<&str> = text.split_whitespace().collect();
    (words.len() == 4 && words[0] != "-").then(|| (words[0].to_owned(), words[1].to_owned()))
}

#[test]
fn a_bundle_this_cpu_cannot_run_is_refused_by_import_and_nothing_is_imported() {
    let Some((flag, feature)) = lacking_flag() else {
        abicache_test_support::skip_for_hardware(
            "a CPU lacking one of the candidate extensions (this one has them all)",
        );
        return;
    };
    let builder = Cache::new();
    let spec = project(&builder, "lacking", &[&flag]);
    let built = builder.build(&spec, &python(), &[]);
    // Building is not loading: the build machine may build for others.
    let key = built["key"].as_str().unwrap().to_owned();
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            builder
                .dir
                .join("v1/entries")
                .join(&key)
                .join("manifest.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert!(
        manifest["isa"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!({"feature": feature, "flag": flag})),
        "{}",
        manifest["isa"]
    );
    let bundle = builder.dir.with_file_name("lacking.abicache");
    assert_success(&builder.run(args!["export", "-o", bundle]));

    let node = Cache::new();
    let out = node.run(args!["import", bundle]);
    assert_exit(&out, 2);
    let message = stderr(&out);
    assert!(
        message.contains(&format!("built with {flag}; this CPU lacks {feature}")),
        "{message}"
    );
    assert!(message.contains("nothing was imported"), "{message}");
    assert!(node.ls().is_empty(), "a refused bundle imported something");
    // The guard off: imported.
    let out = node
        .cmd(args!["import", bundle])
        .env("ABICACHE_ISA_CHECK", "0")
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(node.ls().len(), 1);
}

/// `CXX=script` that runs `c++` with `extra` first, as Cray's and Spack's
/// wrappers add target flags, logging each run's arguments to `log`.
fn wrapper(dir: &Path, name: &str, extra: &str, log: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.with_file_name(name);
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec c++ {extra} \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn manifest_of(cache: &Cache, key: &str) -> (PathBuf, serde_json::Value) {
    let path = cache.dir.join("v1/entries").join(key).join("manifest.json");
    let value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    (path, value)
}

/// Issue 46 finding 3b: the target flags a `CXX` wrapper adds are in
/// neither the key nor `isa` on the old code. A wrapper adding `-mavx512f`
/// gets another key than the plain compiler (its `compiler_isa` line names
/// `avx512f`), and the library it builds records `avx512f`, attributed to
/// the compiler's own target.
#[test]
fn a_cxx_wrapper_adding_a_target_flag_gets_another_key_and_records_it() {
    let cache = Cache::new();
    let spec = project(&cache, "wrapped", &["-O2"]);
    assert_success(&cache.run(["ls"])); // the cache exists: probes are remembered in it
    let log = cache.dir.with_file_name("cxx.log");
    let avx512 = wrapper(&cache.dir, "avx512-c++", "-mavx512f", &log);
    let plain_cxx = wrapper(
        &cache.dir,
        "plain-c++",
        "",
        &cache.dir.with_file_name("plain.log"),
    );
    // Older than the racy window: the probe's answer is remembered.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let probes = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("-dM"))
            .count()
    };
    let python = python();
    let run = |cxx: &Path, command: &str| {
        let mut cmd = cache.cmd(args![command, spec, "--json", "--python", python]);
        cmd.env("CXX", cxx);
        let out = cmd.output().unwrap();
        assert_success(&out);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let plain = run(&plain_cxx, "key");
    let wrapped = run(&avx512, "key");
    assert_ne!(plain["key"], wrapped["key"], "the wrapper's flag is keyed");
    assert_eq!(probes(), 1, "one probe of the compiler's own target");
    // A warm key in a new process runs no compiler.
    assert_eq!(run(&avx512, "key")["key"], wrapped["key"]);
    assert_eq!(
        probes(),
        1,
        "the probe's answer is remembered under the cache"
    );
    let compiler_isa = payload_line(&wrapped, "compiler_isa").expect("a compiler_isa line");
    assert!(
        compiler_isa.split(' ').any(|f| f == "avx512f"),
        "{compiler_isa}"
    );
    assert!(
        payload_line(&plain, "compiler_isa").is_none_or(|v| !v.contains("avx512f")),
        "{plain}"
    );
    // Built with the wrapper: the manifest records avx512f.
    let built = run(&avx512, "build");
    let key = built["key"].as_str().unwrap().to_owned();
    assert_eq!(key, wrapped["key"].as_str().unwrap());
    let (_, manifest) = manifest_of(&cache, &key);
    let isa = manifest["isa"].as_array().unwrap();
    assert!(
        isa.iter().any(|r| r["feature"] == "avx512f"
            && r["flag"]
                .as_str()
                .unwrap()
                .contains(avx512.to_str().unwrap())),
        "{manifest}"
    );
}

/// Issue 46 finding 3a: on the old code a manifest without `isa` meant
/// "requires nothing", so an entry whose requirements were never recorded
/// (written before the guard, or a manifest stripped of the field) was
/// served. Now such an entry is unknown: not a hit, rebuilt locally, and the
/// rebuilt manifest records the requirement again.
#[test]
fn an_entry_whose_manifest_records_no_isa_is_not_served() {
    let cache = Cache::new();
    let spec = project(&cache, "unrecorded", &["-O2", "-mavx2"]);
    let python = python();
    let built = cache.build(&spec, &python, &[]);
    let key = built["key"].as_str().unwrap().to_owned();
    let (path, mut manifest) = manifest_of(&cache, &key);
    assert!(
        manifest["isa"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["feature"] == "avx2"),
        "{manifest}"
    );
    // The manifest as an older abicache (or a hand-made layer) writes it.
    manifest.as_object_mut().unwrap().remove("isa");
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let again = cache.build(&spec, &python, &[]);
    assert_eq!(again["key"], built["key"]);
    assert_eq!(
        again["hit"], false,
        "an entry without recorded requirements was served: {again}"
    );
    let (_, rebuilt) = manifest_of(&cache, &key);
    assert!(
        rebuilt["isa"]
            .as_array()
            .is_some_and(|isa| isa.iter().any(|r| r["feature"] == "avx2")),
        "{rebuilt}"
    );
}

/// Issue 46 finding 3a, as an attacker does it: a read-only layer (a
/// shared directory named in `ABICACHE_READONLY_DIRS`) holding a library
/// built with a flag this CPU lacks, whose manifest does not record `isa`
/// (written by an older abicache, or by hand). On the old code such a
/// manifest meant "requires nothing": the layer served the library, which
/// crashes with SIGILL when its code runs. Now the entry is unknown: the
/// layer is skipped with a warning, and the library is built locally, its
/// manifest recording the requirement (which the load's guard refuses).
#[test]
fn a_layer_entry_whose_manifest_records_no_isa_is_not_served() {
    let (flag, feature) = lacking_flag().unwrap_or_else(|| ("-mavx2".into(), "avx2".into()));
    let python = python();
    let layer = Cache::new();
    let spec = project(&layer, "layered", &["-O2", &flag]);
    let built = layer.build(&spec, &python, &[]);
    let key = built["key"].as_str().unwrap().to_owned();
    let (path, mut manifest) = manifest_of(&layer, &key);
    // The manifest as an older abicache writes it, or as a hand-made layer has it.
    let object = manifest.as_object_mut().unwrap();
    object.remove("isa");
    object.insert("format".into(), 1.into());
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();

    let local = Cache::new();
    let out = local
        .cmd(args![
            "build", spec, "--python", python, "--json", "--quiet"
        ])
        .env("ABICACHE_READONLY_DIRS", &layer.dir)
        .output()
        .unwrap();
    assert_success(&out);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["key"], built["key"]);
    let served = answer["path"].as_str().unwrap();
    assert!(
        !Path::new(served).starts_with(&layer.dir),
        "the layer served an entry whose requirements it never recorded: {answer}"
    );
    assert_eq!(answer["hit"], false, "{answer}");
    let warnings = strings(&answer["warnings"]);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("read-only cache layer") && w.contains(&key)),
        "the skipped layer entry is named: {answer}"
    );
    let (_, rebuilt) = manifest_of(&local, &key);
    assert!(
        rebuilt["isa"]
            .as_array()
            .is_some_and(|isa| isa.iter().any(|r| r["feature"] == feature.as_str())),
        "{rebuilt}"
    );

    // A hand-made manifest claiming the current format, without `isa`: not
    // served either.
    manifest
        .as_object_mut()
        .unwrap()
        .insert("format".into(), 2.into()); // abicache_store::MANIFEST_FORMAT
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
    let other = Cache::new();
    let out = other
        .cmd(args![
            "build", spec, "--python", python, "--json", "--quiet"
        ])
        .env("ABICACHE_READONLY_DIRS", &layer.dir)
        .output()
        .unwrap();
    assert_success(&out);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["hit"], false, "{answer}");
    assert!(!Path::new(answer["path"].as_str().unwrap()).starts_with(&layer.dir));
}

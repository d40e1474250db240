//! `abicache prebuild`, `export` and `import` end to end: real venvs (torch
//! 2.15 in `.venv`, torch 2.12 in `.venv-compat`), real compiles, real
//! bundles, and Python processes that load the imported libraries with no
//! compiler on `PATH`.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{
    assert_exit, assert_success, python, python_compat, repo_path, stderr, stdout, u64_of, Cache,
};
use serde_json::Value;

fn cpu_spec() -> PathBuf {
    repo_path("examples/cpu_muladd/abicache.toml")
}

fn stable_spec() -> PathBuf {
    repo_path("examples/stable_scale/abicache.toml")
}

/// The cells of a coverage table as (environment, extension) → cell.
fn cell<'a>(coverage: &'a Value, python: &Path, extension: &str) -> &'a Value {
    coverage["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["environment"] == python.display().to_string() && c["extension"] == extension)
        .unwrap_or_else(|| {
            panic!(
                "no cell for {} × {extension} in {coverage}",
                python.display()
            )
        })
}

/// Loads both examples through the Python package in `python`, from the
/// cache `dir`, with `PATH` holding no compiler and `CXX`/`CC` unset; runs
/// both ops and returns what `TorchOpsExtension.load()` reported.
fn load_without_compiler(python: &Path, dir: &Path) -> Value {
    let empty_path = dir.with_file_name("empty-bin");
    std::fs::create_dir_all(&empty_path).unwrap();
    let code = r#"
import json, sys, warnings
warnings.simplefilter("ignore")
import torch, abicache
ex = sys.argv[1]
cpu = abicache.TorchOpsExtension("muladd_example", [ex + "/cpu_muladd/ops.cpp", ex + "/cpu_muladd/kernel.cpp"],
                                 required_ops=["muladd"])
stable = abicache.TorchOpsExtension("stable_scale", [ex + "/stable_scale/scale.cpp"],
                                    required_ops=["scale_shift"], torch_stable_abi_target="2.10")
paths = [cpu.load(), stable.load()]
a = torch.ones(3)
muladd = torch.ops.muladd_example.muladd(a, a, 2.0).tolist()
print(json.dumps({"paths": paths, "muladd": muladd, "torch": torch.__version__}))
"#;
    let out = Command::new(python)
        .arg("-c")
        .arg(code)
        .arg(repo_path("examples"))
        .env_clear()
        .env("PATH", &empty_path)
        .env("HOME", dir.with_file_name("home"))
        .env("ABICACHE_DIR", dir)
        .env("XDG_CONFIG_HOME", dir.with_file_name("config"))
        .env("LC_ALL", "C")
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "loading with no compiler failed in `{}`:\n{}\n{}",
        python.display(),
        stdout(&out),
        stderr(&out)
    );
    serde_json::from_slice(out.stdout.trim_ascii()).unwrap()
}

#[test]
fn two_venvs_by_two_extensions_compile_three_libraries_and_a_bundle_loads_without_a_compiler() {
    let builder = Cache::new();
    // Relative to the repository root (where `Cache` runs abicache), so the
    // table's labels and column widths do not depend on the checkout's path.
    let _ = (python(), python_compat()); // asserts both venvs exist
    let (dev, compat) = (
        PathBuf::from(".venv/bin/python"),
        PathBuf::from(".venv-compat/bin/python"),
    );
    let prebuild = args![
        "prebuild",
        cpu_spec(),
        stable_spec(),
        "--python",
        dev,
        "--python",
        compat,
        "--json",
    ];
    let coverage = builder.json(&prebuild);
    // Four cells, three distinct keys: the CPU op once per torch release,
    // the stable-ABI op once for both.
    assert_eq!(coverage["cells"].as_array().unwrap().len(), 4, "{coverage}");
    assert_eq!(u64_of(&coverage, "distinct_keys"), 3, "{coverage}");
    assert_eq!(u64_of(&coverage, "built"), 3, "{coverage}");
    assert_eq!(u64_of(&builder.stats(), "builds"), 3);
    let stable_dev = cell(&coverage, &dev, "stable_scale");
    let stable_compat = cell(&coverage, &compat, "stable_scale");
    assert_eq!(stable_dev["key"], stable_compat["key"]);
    assert_eq!(stable_compat["status"], "built");
    assert_eq!(stable_compat["built_by"], dev.display().to_string());
    assert_ne!(
        cell(&coverage, &dev, "muladd_example")["key"],
        cell(&coverage, &compat, "muladd_example")["key"]
    );

    // Again: nothing compiles, the table says so.
    let again = builder.run(&prebuild[..prebuild.len() - 1]);
    assert_success(&again);
    let table = stdout(&again).replace(&dev.display().to_string(), "[DEV]");
    let table = table.replace(&compat.display().to_string(), "[COMPAT]");
    builder
        .settings()
        .bind(|| insta::assert_snapshot!("prebuild_table_cached", table));
    assert_eq!(u64_of(&builder.stats(), "builds"), 3);

    // Export everything, import into an empty cache.
    let bundle = builder.dir.with_file_name("fleet.abicache");
    let exported = builder.run(args!["export", "-o", bundle]);
    assert_success(&exported);
    assert!(
        stdout(&exported).contains("unsigned"),
        "{}",
        stdout(&exported)
    );
    let node = Cache::new();
    let imported = node.json(args!["import", bundle, "--json"]);
    let results: Vec<&str> = imported["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["result"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["published"; 3], "{imported}");

    // Both venvs load both ops from the imported entries, with no compiler.
    let from_dev = load_without_compiler(&python(), &node.dir);
    let from_compat = load_without_compiler(&python_compat(), &node.dir);
    assert_eq!(from_dev["muladd"], serde_json::json!([3.0, 3.0, 3.0]));
    assert_eq!(from_compat["muladd"], serde_json::json!([3.0, 3.0, 3.0]));
    assert_eq!(
        from_dev["paths"][1], from_compat["paths"][1],
        "one stable library for both"
    );
    let stats = node.stats();
    assert_eq!(u64_of(&stats, "builds"), 0, "{stats}");
    assert_eq!(u64_of(&stats, "hits"), 4, "{stats}");

    // The same bundle through stdin into a third cache.
    let third = Cache::new();
    let out = third
        .cmd(["import"])
        .stdin(std::fs::File::open(&bundle).unwrap())
        .output()
        .unwrap();
    assert_success(&out);
    assert_eq!(third.ls().len(), 3);
}

/// An environment file for torch 2.15 without a torch installation.
fn keyed_only_env(dir: &Path) -> PathBuf {
    let path = dir.with_file_name("no-torch.toml");
    std::fs::write(
        &path,
        "python_version = \"3.13.1\"\npython_soabi = \"cpython-313-x86_64-linux-gnu\"\n\
         torch_version = \"2.15.0+cpu\"\ncxx11_abi = true\n",
    )
    .unwrap();
    path
}

#[test]
fn an_env_without_torch_is_keyed_only_and_signed_bundles_need_a_trusted_signer() {
    let cache = Cache::new();
    let env = keyed_only_env(&cache.dir);
    let only_keyed = cache.json(args!["prebuild", stable_spec(), "--env", env, "--json"]);
    assert_eq!(only_keyed["cells"][0]["status"], "key-only", "{only_keyed}");
    assert_eq!(u64_of(&only_keyed, "key_only"), 1);
    assert_eq!(only_keyed["environments"][0]["can_build"], false);
    // With a venv that shares the key, it is built there, once, for both.
    let shared = cache.json(args![
        "prebuild",
        stable_spec(),
        "--env",
        env,
        "--python",
        python(),
        "--json"
    ]);
    assert_eq!(u64_of(&shared, "built"), 1, "{shared}");
    assert_eq!(shared["cells"][0]["status"], "built");
    assert_eq!(
        shared["cells"][0]["built_by"],
        python().display().to_string()
    );
    assert_eq!(shared["cells"][0]["key"], only_keyed["cells"][0]["key"]);

    // Two key pairs: the builder's and a stranger's.
    let keys = cache.dir.with_file_name("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (ours, theirs) = (keys.join("ours.key"), keys.join("theirs.key"));
    assert_success(&cache.run(args!["keygen", "--out", ours]));
    assert_success(&cache.run(args!["keygen", "--out", theirs]));
    let public = |key: &Path| {
        std::fs::read_to_string(format!("{}.pub", key.display()))
            .unwrap()
            .trim()
            .to_owned()
    };
    let signed = cache.dir.with_file_name("signed.abicache");
    let out = cache
        .cmd(args!["export", "-o", signed, "stable_scale"])
        .env("ABICACHE_SIGNING_KEY", &ours)
        .output()
        .unwrap();
    assert_success(&out);
    assert!(stdout(&out).contains(&format!("signed by {}", public(&ours))));

    let node = Cache::new();
    let import_trusting = |key: &str| {
        node.cmd(args!["import", signed])
            .env("ABICACHE_TRUSTED_KEYS", key)
            .output()
            .unwrap()
    };
    let refused = import_trusting(&public(&theirs));
    assert_exit(&refused, 2);
    assert!(
        stderr(&refused).contains("which is not one of `ABICACHE_TRUSTED_KEYS`"),
        "{}",
        stderr(&refused)
    );
    assert!(node.ls().is_empty(), "a refused bundle imported something");
    let accepted = import_trusting(&public(&ours));
    assert_success(&accepted);
    assert!(stdout(&accepted).contains(&format!("signed by trusted key {}", public(&ours))));
    assert_eq!(node.ls().len(), 1);

    // An unsigned bundle is refused where trusted keys are configured.
    let unsigned = cache.dir.with_file_name("unsigned.abicache");
    assert_success(&cache.run(args!["export", "-o", unsigned]));
    let strict = Cache::new();
    let out = strict
        .cmd(args!["import", unsigned])
        .env("ABICACHE_TRUSTED_KEYS", public(&ours))
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains("it is not signed"),
        "{}",
        stderr(&out)
    );

    // A tampered bundle is refused, whoever signed it, and nothing is imported.
    let bytes = std::fs::read(&signed).unwrap();
    for pos in [bytes.len() / 3, bytes.len() / 2, bytes.len() - 10] {
        let mut bad = bytes.clone();
        bad[pos] ^= 0x01;
        let tampered = cache.dir.with_file_name("tampered.abicache");
        std::fs::write(&tampered, bad).unwrap();
        let fresh = Cache::new();
        let out = fresh.run(args!["import", tampered]);
        assert_exit(&out, 2);
        assert!(
            stderr(&out).contains("nothing was imported"),
            "{}",
            stderr(&out)
        );
        assert!(fresh.ls().is_empty());
    }
}

/// An entry imported from an unsigned bundle records that nothing signed it;
/// once `ABICACHE_TRUSTED_KEYS` is set it is no longer served (rebuilt
/// locally), where before the keys only guarded the next import.
#[test]
fn an_entry_imported_unsigned_is_rebuilt_not_served_once_trusted_keys_are_set() {
    let cache = Cache::new();
    let built = cache.json(args![
        "prebuild",
        stable_spec(),
        "--python",
        python(),
        "--json"
    ]);
    assert_eq!(u64_of(&built, "built"), 1, "{built}");
    let key = built["cells"][0]["key"].as_str().unwrap().to_owned();
    let bundle = cache.dir.with_file_name("unsigned.abicache");
    assert_success(&cache.run(args!["export", "-o", bundle]));
    let node = Cache::new();
    assert_success(&node.run(args!["import", bundle]));
    let provenance: Value = serde_json::from_slice(
        &std::fs::read(node.dir.join(format!("v1/entries/{key}/provenance.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(provenance["source"], "bundle");
    assert_eq!(provenance["origin"], bundle.display().to_string());
    assert_eq!(provenance["signed_by"], Value::Null);
    let again = node.json(args![
        "prebuild",
        stable_spec(),
        "--python",
        python(),
        "--json"
    ]);
    assert_eq!(again["cells"][0]["status"], "cached", "{again}");

    let keys = cache.dir.with_file_name("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let ours = keys.join("ours.key");
    assert_success(&cache.run(args!["keygen", "--out", ours]));
    let public = std::fs::read_to_string(format!("{}.pub", ours.display())).unwrap();
    let out = node
        .cmd(args![
            "prebuild",
            stable_spec(),
            "--python",
            python(),
            "--json"
        ])
        .env("ABICACHE_TRUSTED_KEYS", public.trim())
        .output()
        .unwrap();
    let strict: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        strict["cells"][0]["status"],
        "built",
        "{strict}\n{}",
        stderr(&out)
    );
    assert!(
        !node
            .dir
            .join(format!("v1/entries/{key}/provenance.json"))
            .exists(),
        "the pulled entry was replaced by a local build"
    );
}

/// A bundle that cannot be written is an I/O error naming the directory
/// and the OS error (it used to be worded as bad input), with the exit code
/// of every I/O error; nothing is left behind.
#[test]
fn an_export_into_a_missing_directory_is_an_io_error_naming_it() {
    let cache = Cache::new();
    let missing = cache.dir.join("no/such/dir");
    let out = cache.run(args!["export", "-o", missing.join("out.bundle")]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "cannot create a file for the bundle in `{}`",
            missing.display()
        )) && err.contains("No such file or directory"),
        "{err}"
    );
    assert!(!missing.exists());
}

/// The façade words prebuild's errors without flags (Python's
/// `abicache.prebuild` shows them too); the command line adds the flag.
#[test]
fn prebuild_errors_name_the_flag_on_the_command_line() {
    let cache = Cache::new();
    let out = cache.run(args!["prebuild", cpu_spec()]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("no environment to prebuild for: name an interpreter with torch")
            && err.contains("; pass `--python PATH` or `--env FILE`"),
        "{err}"
    );
    let env = keyed_only_env(&cache.dir);
    let out = cache.run(args![
        "prebuild",
        cpu_spec(),
        "--env",
        env,
        "--extension",
        "nope"
    ]);
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains(
            "no extension named `nope` in the given spec files (they define `muladd_example`)"
        ) && err.ends_with("; fix or drop `--extension nope`\n"),
        "{err}"
    );
}

//! `abicache export --wheel`: a pip-installable wheel whose installed files
//! are a read-only cache layer. Installed here with the venv's real pip
//! (`--target`, no index), then used through `ABICACHE_READONLY_DIRS`; the
//! Python package's automatic discovery is tested in
//! tests/python/test_cache_wheel.py.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

fn pip_install(python: &Path, wheel: &Path, target: &Path) {
    let out = Command::new(python)
        .args(["-m", "pip", "install", "--quiet", "--no-deps", "--no-index"])
        .arg("--target")
        .arg(target)
        .arg(wheel)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pip install failed:\n{}{}",
        stdout(&out),
        stderr(&out)
    );
}

#[test]
fn an_exported_wheel_installs_with_pip_and_serves_its_entry_as_a_read_only_layer() {
    let python = python();
    let ci = Cache::new();
    let spec = repo_path("tests/fixtures/tiny/abicache.toml");
    let built = ci.build(&spec, &python, &[]);
    let out_dir = tempfile::tempdir().unwrap();
    let exported = ci.json(args![
        "export",
        "--wheel",
        "tiny-kernels-cache==1.0.0",
        "--out",
        out_dir.path(),
        "--json"
    ]);
    let wheel = PathBuf::from(exported["path"].as_str().unwrap());
    let tag = exported["tag"].as_str().unwrap();
    assert!(
        tag.starts_with("py3-none-manylinux_2_") && tag.ends_with(std::env::consts::ARCH),
        "{tag}"
    );
    assert_eq!(
        wheel.file_name().unwrap().to_str().unwrap(),
        format!("tiny_kernels_cache-1.0.0-{tag}.whl")
    );
    // Python's own zip reader agrees with the archive and its RECORD.
    let listed = Command::new(&python)
        .args([
            "-c",
            "import sys, zipfile, hashlib, base64\n\
             z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None\n\
             rec = z.read('tiny_kernels_cache-1.0.0.dist-info/RECORD').decode().splitlines()\n\
             for line in rec:\n\
             \x20   name, h, size = line.rsplit(',', 2)\n\
             \x20   if h:\n\
             \x20       d = base64.urlsafe_b64encode(hashlib.sha256(z.read(name)).digest()).rstrip(b'=').decode()\n\
             \x20       assert h == 'sha256=' + d, name\n\
             print(z.read('tiny_kernels_cache-1.0.0.dist-info/entry_points.txt').decode())",
        ])
        .arg(&wheel)
        .output()
        .unwrap();
    assert_success(&listed);
    assert!(
        stdout(&listed)
            .contains("[abicache.caches]\ntiny_kernels_cache = _abicache_cache_tiny_kernels_cache"),
        "{}",
        stdout(&listed)
    );

    let site = tempfile::tempdir().unwrap();
    pip_install(&python, &wheel, site.path());
    let layer = site.path().join("_abicache_cache_tiny_kernels_cache/cache");
    let local = Cache::new();
    let run = || {
        local
            .cmd(args![
                "build", &spec, "--python", &python, "--json", "--quiet"
            ])
            .env("ABICACHE_READONLY_DIRS", &layer)
            .output()
            .unwrap()
    };
    // Loaded in place from the installed wheel.
    assert_hit_under(&run(), &built["key"], &layer);

    // A tampered manifest (consistent with a tampered library, so only the
    // wheel's index can tell) is refused with one warning, and built here.
    let entry = layer
        .join("v1/entries")
        .join(built["key"].as_str().unwrap());
    let manifest_path = entry.join("manifest.json");
    let manifest = std::fs::read_to_string(&manifest_path).unwrap();
    std::fs::write(&manifest_path, manifest.replace("\"units\"", " \"units\"")).unwrap();
    let out = run();
    assert_success(&out);
    let rebuilt: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rebuilt["hit"], false, "{rebuilt}");
    let warnings: Vec<String> = strings(&rebuilt["warnings"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("index"), "{warnings:?}");
}

#[test]
fn a_signed_wheel_with_a_forged_index_is_refused_when_keys_are_trusted() {
    let python = python();
    let ci = Cache::new();
    let keys = tempfile::tempdir().unwrap();
    let keygen = ci.json(args!["keygen", "--out", keys.path().join("k"), "--json"]);
    let public = keygen["public_key"].as_str().unwrap().to_owned();
    let secret = keys.path().join("k");
    let spec = repo_path("tests/fixtures/tiny/abicache.toml");
    ci.build(&spec, &python, &[]);
    let out_dir = tempfile::tempdir().unwrap();
    let exported = ci
        .cmd(args![
            "export",
            "--wheel",
            "signed==2",
            "--out",
            out_dir.path(),
            "--json"
        ])
        .env("ABICACHE_SIGNING_KEY", &secret)
        .output()
        .unwrap();
    assert_success(&exported);
    let exported: serde_json::Value = serde_json::from_slice(&exported.stdout).unwrap();
    assert_eq!(exported["signed_by"].as_str(), Some(public.as_str()));
    let site = tempfile::tempdir().unwrap();
    pip_install(
        &python,
        Path::new(exported["path"].as_str().unwrap()),
        site.path(),
    );
    let layer = site.path().join("_abicache_cache_signed/cache");
    let local = Cache::new();
    let run = || {
        let out = local
            .cmd(args![
                "build", &spec, "--python", &python, "--json", "--quiet"
            ])
            .env("ABICACHE_READONLY_DIRS", &layer)
            .env("ABICACHE_TRUSTED_KEYS", &public)
            .output()
            .unwrap();
        assert_success(&out);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    assert_eq!(run()["hit"], true);
    // Rewriting the index (to cover a changed manifest) breaks the signature.
    let index_path = layer.join("abicache-index.json");
    let index = std::fs::read_to_string(&index_path).unwrap();
    std::fs::write(&index_path, index.replace("\"format\"", " \"format\"")).unwrap();
    let rebuilt = run();
    assert_eq!(rebuilt["hit"], false, "{rebuilt}");
    let warnings = strings(&rebuilt["warnings"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("signature"), "{warnings:?}");
}

/// A key pair made by `abicache keygen` in `cache`: (secret key file, public key hex).
fn keygen(cache: &Cache, dir: &Path) -> (PathBuf, String) {
    let keygen = cache.json(args!["keygen", "--out", dir.join("k"), "--json"]);
    let public = keygen["public_key"].as_str().unwrap().to_owned();
    (dir.join("k"), public)
}

/// `cache`'s entries exported as the cache wheel `name==1` signed with
/// `secret`, installed with pip: the installed cache's root.
fn signed_wheel(python: &Path, cache: &Cache, name: &str, secret: &Path, site: &Path) -> PathBuf {
    let out_dir = tempfile::tempdir().unwrap();
    let exported = cache
        .cmd(args![
            "export",
            "--wheel",
            format!("{name}==1"),
            "--out",
            out_dir.path(),
            "--json"
        ])
        .env("ABICACHE_SIGNING_KEY", secret)
        .output()
        .unwrap();
    assert_success(&exported);
    let exported: serde_json::Value = serde_json::from_slice(&exported.stdout).unwrap();
    pip_install(python, Path::new(exported["path"].as_str().unwrap()), site);
    site.join(format!("_abicache_cache_{name}/cache"))
}

/// `abicache build` of the tiny fixture with `layer` as its only layer and
/// `public` as the only trusted key: the outcome.
fn build_trusting(python: &Path, layer: &Path, public: &str) -> serde_json::Value {
    let spec = repo_path("tests/fixtures/tiny/abicache.toml");
    let out = Cache::new()
        .cmd(args![
            "build", &spec, "--python", python, "--json", "--quiet"
        ])
        .env("ABICACHE_READONLY_DIRS", layer)
        .env("ABICACHE_TRUSTED_KEYS", public)
        .output()
        .unwrap();
    assert_success(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Issue 46, finding 1, as an attacker does it: a signed cache wheel whose
/// index (and signature) were deleted. With trusted keys set it serves
/// nothing: the key is built locally, with the gate's one refusal.
#[test]
fn with_trusted_keys_a_wheel_whose_index_was_deleted_serves_nothing() {
    let python = python();
    let ci = Cache::new();
    let keys = tempfile::tempdir().unwrap();
    let (secret, public) = keygen(&ci, keys.path());
    ci.build(
        &repo_path("tests/fixtures/tiny/abicache.toml"),
        &python,
        &[],
    );
    let site = tempfile::tempdir().unwrap();
    let layer = signed_wheel(&python, &ci, "indexless", &secret, site.path());
    assert_eq!(build_trusting(&python, &layer, &public)["hit"], true);
    std::fs::remove_file(layer.join("abicache-index.json")).unwrap();
    std::fs::remove_file(layer.join("abicache-index.sig")).unwrap();
    let built = build_trusting(&python, &layer, &public);
    assert_eq!(
        built["hit"], false,
        "a layer without a signed index served: {built}"
    );
    let warnings = strings(&built["warnings"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!(
            "read-only cache layer `{}` refused: it is not signed",
            layer.display()
        )),
        "{warnings:?}"
    );
}

/// Issue 46, finding 2: a cache that pulled an entry unsigned (here from an
/// unsigned bundle) refuses it itself once trusted keys are set; used as a
/// layer, even one with an index signed by a trusted key, it must refuse it
/// the same way (provenance binds layers as it binds the local cache).
#[test]
fn with_trusted_keys_a_layer_entry_pulled_unsigned_is_refused() {
    let python = python();
    let builder = Cache::new();
    builder.build(
        &repo_path("tests/fixtures/tiny/abicache.toml"),
        &python,
        &[],
    );
    let bundle = builder.dir.with_file_name("unsigned.abicache");
    assert_success(&builder.run(args!["export", "-o", bundle]));
    let mirror = Cache::new();
    assert_success(&mirror.run(args!["import", bundle]));
    // The mirror's own root, with an index signed by a trusted key: the
    // index of an unsigned wheel of it (`export --wheel` refuses to sign an
    // entry pulled unsigned), signed here directly.
    let out_dir = tempfile::tempdir().unwrap();
    let exported = mirror.json(args![
        "export",
        "--wheel",
        "mirror==1",
        "--out",
        out_dir.path(),
        "--json"
    ]);
    let site = tempfile::tempdir().unwrap();
    pip_install(
        &python,
        Path::new(exported["path"].as_str().unwrap()),
        site.path(),
    );
    let index = std::fs::read(
        site.path()
            .join("_abicache_cache_mirror/cache/abicache-index.json"),
    )
    .unwrap();
    let pair = abicache::remote::KeyPair::generate().unwrap();
    let signature = pair
        .secret
        .sign(&abicache::gate::index_signature_message(&index));
    std::fs::write(mirror.dir.join("abicache-index.json"), &index).unwrap();
    std::fs::write(
        mirror.dir.join("abicache-index.sig"),
        serde_json::to_vec(&signature).unwrap(),
    )
    .unwrap();
    let public = pair.public.to_string();
    let built = build_trusting(&python, &mirror.dir, &public);
    assert_eq!(
        built["hit"], false,
        "an entry pulled unsigned was served: {built}"
    );
    let warnings = strings(&built["warnings"]);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("refused: it was pulled from bundle")
            && warnings[0].contains("unsigned"),
        "{warnings:?}"
    );
}

/// A cache that imported the tiny fixture's entry from an unsigned bundle
/// (an attacker's, say): the cache, the entry's key and a key pair made by
/// `abicache keygen` (secret key file, public key hex) in `keys`.
fn cache_with_an_entry_pulled_unsigned(keys: &Path) -> (Cache, String, PathBuf, String) {
    let attacker = Cache::new();
    attacker.build(
        &repo_path("tests/fixtures/tiny/abicache.toml"),
        &python(),
        &[],
    );
    let bundle = attacker.dir.with_file_name("planted.abicache");
    assert_success(&attacker.run(args!["export", "-o", bundle]));
    let release = Cache::new();
    assert_success(&release.run(args!["import", bundle]));
    let entries = release.ls();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let key = entries[0]["key"].as_str().unwrap().to_owned();
    let (secret, public) = keygen(&release, keys);
    (release, key, secret, public)
}

/// Issue 46, finding 2 (second half), as an attacker does it: an unsigned
/// bundle imported into the release cache. `export --wheel` (and `export`)
/// with the release key signed it, so consumers trusting only that key
/// loaded the attacker's library. Now the signed export is refused, whatever
/// the exporter's `ABICACHE_TRUSTED_KEYS`, says why and what to do, writes
/// nothing and keeps the entry.
#[test]
fn a_signed_export_refuses_an_entry_pulled_unsigned_and_keeps_it() {
    let keys = tempfile::tempdir().unwrap();
    let (release, key, secret, public) = cache_with_an_entry_pulled_unsigned(keys.path());
    let out_dir = tempfile::tempdir().unwrap();
    let bundle = out_dir.path().join("release.abicache");
    for trusted in [None, Some(public.as_str())] {
        for export in [
            args!["export", "--wheel", "release==1", "--out", out_dir.path()],
            args!["export", "-o", &bundle],
        ] {
            let mut cmd = release.cmd(export);
            cmd.env("ABICACHE_SIGNING_KEY", &secret);
            if let Some(trusted) = trusted {
                cmd.env("ABICACHE_TRUSTED_KEYS", trusted);
            }
            let out = cmd.output().unwrap();
            assert_exit(&out, 2);
            let err = stderr(&out);
            assert!(
                err.contains(&format!(
                    "refusing to sign the entry `tiny` ({key}): it was pulled from bundle `"
                )) && err.contains("planted.abicache` unsigned"),
                "{err}"
            );
            assert!(
                err.contains(&format!("Rebuild it locally (`abicache rm {key}`"))
                    && err.contains("or export it unsigned (without `ABICACHE_SIGNING_KEY`)"),
                "{err}"
            );
            let written: Vec<_> = std::fs::read_dir(out_dir.path()).unwrap().collect();
            assert!(written.is_empty(), "{written:?}");
            assert_eq!(release.ls().len(), 1, "the entry was removed: {err}");
        }
    }
}

/// Issue 46, UX note: exporting with trusted keys set deleted an entry
/// pulled unsigned from the exporting cache and called it corrupt. An
/// unsigned export carries it (its consumers decide), and it stays.
#[test]
fn exporting_with_trusted_keys_set_keeps_an_entry_pulled_unsigned() {
    let keys = tempfile::tempdir().unwrap();
    let (release, key, _, public) = cache_with_an_entry_pulled_unsigned(keys.path());
    let out_dir = tempfile::tempdir().unwrap();
    let out = release
        .cmd(args![
            "export",
            "-o",
            out_dir.path().join("unsigned.abicache")
        ])
        .env("ABICACHE_TRUSTED_KEYS", &public)
        .output()
        .unwrap();
    assert_success(&out);
    assert!(
        stdout(&out).contains(&format!("exported  tiny {key}")),
        "{}",
        stdout(&out)
    );
    let entries = release.ls();
    assert_eq!(entries.len(), 1, "the exporting cache lost its entry");
    assert_eq!(entries[0]["key"], key.as_str());
}

/// Issue 46, finding 12: `kill -9` during `export --wheel` left its
/// temporary file in `--out` for good. The export stops itself (SIGSTOP,
/// the test-only `ABICACHE_TEST_ONLY_STOP_BEFORE_RENAME`) with its
/// temporary written and not yet renamed; the test kills it with SIGKILL,
/// ages the file past the 10 minutes a partial file is kept, and the next
/// export into `--out` removes it.
#[test]
fn a_wheel_export_killed_mid_write_leaves_nothing_after_the_next_export() {
    use std::os::unix::process::ExitStatusExt;
    let cache = Cache::new();
    cache.build(
        &repo_path("tests/fixtures/tiny/abicache.toml"),
        &python(),
        &[],
    );
    let out_dir = tempfile::tempdir().unwrap();
    let export = || args!["export", "--wheel", "killed==1", "--out", out_dir.path()];
    let mut child = cache
        .cmd(export())
        .env("ABICACHE_TEST_ONLY_STOP_BEFORE_RENAME", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stat = format!("/proc/{}/stat", child.id());
    let stopped = (0..600).any(|_| {
        let state = std::fs::read_to_string(&stat).unwrap_or_default();
        let stopped = state
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('T'));
        if !stopped {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        stopped
    });
    assert!(stopped, "the export never reached its stop point");
    let left = |dir: &Path| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
    };
    let partial = left(out_dir.path());
    assert_eq!(partial.len(), 1, "{partial:?}");
    assert!(std::fs::metadata(&partial[0]).unwrap().len() > 0);
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(9));
    assert_eq!(
        left(out_dir.path()),
        partial,
        "the killed export's file stays"
    );
    // Last written 11 minutes ago, by a process that is gone.
    std::fs::File::options()
        .write(true)
        .open(&partial[0])
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(11 * 60))
        .unwrap();
    assert_success(&cache.run(export()));
    let files = left(out_dir.path());
    assert_eq!(files.len(), 1, "the stale partial file stayed: {files:?}");
    assert!(
        files[0].extension().is_some_and(|e| e == "whl"),
        "{files:?}"
    );
}

//! The client against real backends without a compiler: a shared directory
//! (`file://`), a Redis server on a free loopback port, and servers that are
//! down or never answer.

use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, Instant};

use abicache_key::Payload;
use abicache_remote::{
    entry_blob, signature_message, KeyPair, Mode, Remote, RemoteConfig, RemoteError, Upload,
};
use abicache_store::Manifest;
use abicache_test_support::{free_port, Server};

fn config(url: &str) -> RemoteConfig {
    RemoteConfig {
        url: url.into(),
        mode: Mode::ReadWrite,
        timeout: Duration::from_secs(5),
        trusted_keys: Vec::new(),
        signing_key: None,
        max_size: abicache_remote::DEFAULT_MAX_SIZE,
    }
}

/// A manifest for a made-up payload and a library file holding `bytes`.
fn entry(dir: &Path, name: &str, bytes: &[u8]) -> (Manifest, std::path::PathBuf) {
    let payload = format!("format=1\nname={name}\n");
    let key = Payload::parse(&payload).unwrap().key();
    let mut manifest = Manifest::new(key, name, payload);
    manifest.library = format!("{name}.so");
    manifest.size = bytes.len() as u64;
    manifest.library_blake3 = blake3::hash(bytes).to_hex().to_string();
    let library = dir.join(format!("{name}.so"));
    fs_err::write(&library, bytes).unwrap();
    (manifest, library)
}

/// Upload, fetch, idempotence, overwrite and (where the backend lists) names.
fn round_trip(remote: &Remote, lists: bool) {
    let work = tempfile::tempdir().unwrap();
    let (manifest, library) = entry(work.path(), "ext", b"\x7fELF pretend library");
    assert!(
        remote.fetch(&manifest.key, work.path()).unwrap().is_none(),
        "empty remote misses"
    );
    assert!(
        matches!(remote.upload(&manifest, &library, false).unwrap(), Upload::Uploaded { bytes } if bytes > 20)
    );
    assert_eq!(
        remote.upload(&manifest, &library, false).unwrap(),
        Upload::AlreadyThere
    );
    let into = tempfile::tempdir().unwrap();
    let fetched = remote
        .fetch(&manifest.key, into.path())
        .unwrap()
        .expect("uploaded entry is found");
    assert_eq!(fetched.library, into.path().join("ext.so"));
    assert_eq!(
        fs_err::read(&fetched.library).unwrap(),
        b"\x7fELF pretend library"
    );
    assert_eq!(fetched.manifest, manifest);
    if lists {
        assert_eq!(
            remote.keys_named("ext").unwrap(),
            vec![manifest.key.clone()]
        );
        assert!(remote.keys_named("other").unwrap().is_empty());
    } else {
        assert!(matches!(
            remote.keys_named("ext"),
            Err(RemoteError::CannotList { .. })
        ));
    }
    // A corrupt entry blob is an error, and nothing is written.
    let mut bytes = remote.read_entry(&manifest.key).unwrap().unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    remote.write_entry(&manifest.key, bytes).unwrap();
    let into = tempfile::tempdir().unwrap();
    let err = remote.fetch(&manifest.key, into.path()).unwrap_err();
    assert!(
        matches!(err, RemoteError::Corrupt { .. }) && !err.is_unavailable(),
        "{err}"
    );
    assert_eq!(fs_err::read_dir(into.path()).unwrap().count(), 0);
    // Overwriting replaces it.
    remote.upload(&manifest, &library, true).unwrap();
    assert!(remote.fetch(&manifest.key, into.path()).unwrap().is_some());
}

#[test]
fn file_backend_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Remote::open(config(&format!("file://{}/shared", dir.path().display()))).unwrap();
    round_trip(&remote, true);
    assert!(dir.path().join("shared/v1").is_dir());
}

#[test]
fn redis_backend_round_trip() {
    let redis = Server::redis();
    let remote = Remote::open(config(&format!("redis://127.0.0.1:{}/3", redis.port()))).unwrap();
    round_trip(&remote, false);
}

/// The client hands a signed entry out with its signature and the
/// manifest's exact bytes, unchecked: whether it is trusted is the gate's
/// to decide (`abicache::gate`, tested there with a real remote).
#[test]
fn a_signed_upload_comes_back_with_its_signature_over_the_exact_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let (signer, other) = (KeyPair::generate().unwrap(), KeyPair::generate().unwrap());
    let writer = Remote::open(RemoteConfig {
        signing_key: Some(signer.secret.clone()),
        ..config(&url)
    })
    .unwrap();
    let (manifest, library) = entry(dir.path(), "signed", b"lib");
    writer.upload(&manifest, &library, false).unwrap();
    let reader = Remote::open(RemoteConfig {
        trusted_keys: vec![other.public],
        ..config(&url)
    })
    .unwrap();
    let into = tempfile::tempdir().unwrap();
    let fetched = reader.fetch(&manifest.key, into.path()).unwrap().unwrap();
    let signature = fetched.signature.expect("the upload was signed");
    assert_eq!(signature.public_key, signer.public.to_string());
    let message = signature_message(&manifest.key, &fetched.manifest_json);
    assert!(signer.public.verifies(&message, &signature));
    assert!(!other.public.verifies(&message, &signature));
}

#[test]
fn read_only_remote_refuses_uploads() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Remote::open(RemoteConfig {
        mode: Mode::ReadOnly,
        ..config(&format!("file://{}", dir.path().display()))
    })
    .unwrap();
    let (manifest, library) = entry(dir.path(), "ro", b"lib");
    insta::assert_snapshot!(
        remote.upload(&manifest, &library, false).unwrap_err().to_string().replace(&dir.path().display().to_string(), "[DIR]"),
        @"remote cache `file://[DIR]` is read-only (`ABICACHE_REMOTE_MODE=read-only`); set `ABICACHE_REMOTE_MODE=read-write` to upload"
    );
}

#[test]
fn stopped_redis_is_an_unavailable_error_at_once() {
    let port = free_port(); // nothing listens there
    let remote = Remote::open(config(&format!("redis://127.0.0.1:{port}/0"))).unwrap();
    let started = Instant::now();
    let err = remote
        .fetch(&"0".repeat(32), Path::new("/nonexistent"))
        .unwrap_err();
    assert!(
        matches!(err, RemoteError::Unreachable { .. }) && err.is_unavailable(),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn server_that_never_answers_times_out_within_the_bound() {
    // Accepts connections (the kernel's backlog) and never replies.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let remote = Remote::open(RemoteConfig {
        timeout: Duration::from_millis(700),
        ..config(&format!("redis://127.0.0.1:{port}/0"))
    })
    .unwrap();
    let started = Instant::now();
    let err = remote
        .fetch(&"0".repeat(32), Path::new("/nonexistent"))
        .unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, RemoteError::Timeout { .. }), "{err}");
    assert!(
        took >= Duration::from_millis(700) && took < Duration::from_secs(3),
        "took {took:?}"
    );
    insta::assert_snapshot!(err.to_string().replace(&port.to_string(), "[PORT]").replace(&"0".repeat(32), "[KEY]"),
        @"remote cache `redis://127.0.0.1:[PORT]/0` did not answer within 700ms (while trying to read `v1/[KEY]`); is the server reachable? Set `ABICACHE_REMOTE_TIMEOUT` (seconds) to wait longer");
    drop(listener);
}

/// Writes `header` then `library_len` bytes of `chunk(i)` as `key`'s entry blob
/// straight into a `file://` remote rooted at `root`, never holding the
/// library in memory.
fn plant_entry(root: &Path, key: &str, header: &entry_blob::Header, chunks: usize) {
    use std::io::Write;
    let dir = root.join(abicache_remote::ENTRY_DIR);
    fs_err::create_dir_all(&dir).unwrap();
    let mut out = std::io::BufWriter::new(fs_err::File::create(dir.join(key)).unwrap());
    out.write_all(&header.encode()).unwrap();
    for i in 0..chunks {
        out.write_all(&chunk(i)).unwrap();
    }
    out.flush().unwrap();
}

const CHUNK: usize = 1 << 20;

fn chunk(i: usize) -> Vec<u8> {
    vec![(i % 251) as u8; CHUNK]
}

/// A manifest for a library of `chunks` MiB made of [`chunk`]s.
fn large_manifest(name: &str, chunks: usize) -> Manifest {
    let payload = format!("format=1\nname={name}\n");
    let key = Payload::parse(&payload).unwrap().key();
    let mut hasher = blake3::Hasher::new();
    for i in 0..chunks {
        hasher.update(&chunk(i));
    }
    let mut manifest = Manifest::new(key, name, payload);
    manifest.library = format!("{name}.so");
    manifest.size = (chunks * CHUNK) as u64;
    manifest.library_blake3 = hasher.finalize().to_hex().to_string();
    manifest
}

/// Peak resident memory of this process (`VmHWM`), in bytes.
fn peak_rss() -> u64 {
    let status = fs_err::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

/// Finding 6 of issue 11: a remote object was read whole into memory (a
/// 1 GiB object took 2.1 GB of RSS). Now it streams to a file: fetching a
/// 192 MiB library raises the process's peak memory by far less than that.
#[test]
fn a_large_remote_entry_is_streamed_to_disk_not_held_in_memory() {
    let chunks = 192;
    let dir = tempfile::tempdir().unwrap();
    let manifest = large_manifest("big", chunks);
    plant_entry(
        dir.path(),
        &manifest.key,
        &entry_blob::Header::new(&manifest, None),
        chunks,
    );
    let remote = Remote::open(config(&format!("file://{}", dir.path().display()))).unwrap();
    let into = tempfile::tempdir().unwrap();
    let before = peak_rss();
    let fetched = remote
        .fetch(&manifest.key, into.path())
        .unwrap()
        .expect("the planted entry verifies");
    let grew = peak_rss().saturating_sub(before);
    assert_eq!(
        fs_err::metadata(&fetched.library).unwrap().len(),
        manifest.size
    );
    assert!(
        grew < 48 << 20,
        "fetching a {chunks} MiB object raised peak memory by {} MiB",
        grew >> 20
    );
}

/// Finding 6 of issue 11: `ABICACHE_REMOTE_MAX_SIZE` bounds what a download
/// reads; a larger entry is refused (a warning and a local build for the
/// façade) and leaves nothing behind.
#[test]
fn an_entry_over_the_size_cap_is_refused_and_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = large_manifest("huge", 8);
    plant_entry(
        dir.path(),
        &manifest.key,
        &entry_blob::Header::new(&manifest, None),
        8,
    );
    let remote = Remote::open(RemoteConfig {
        max_size: 3 << 20,
        ..config(&format!("file://{}", dir.path().display()))
    })
    .unwrap();
    let into = tempfile::tempdir().unwrap();
    let err = remote.fetch(&manifest.key, into.path()).unwrap_err();
    assert!(
        matches!(err, RemoteError::TooLarge { .. }) && !err.is_unavailable(),
        "{err}"
    );
    assert!(
        err.to_string().contains("ABICACHE_REMOTE_MAX_SIZE"),
        "{err}"
    );
    assert_eq!(fs_err::read_dir(into.path()).unwrap().count(), 0);
    // A library longer than its manifest says is cut off and refused too.
    let mut short = manifest.clone();
    short.size = CHUNK as u64;
    plant_entry(
        dir.path(),
        &short.key,
        &entry_blob::Header::new(&short, None),
        2,
    );
    let remote = Remote::open(config(&format!("file://{}", dir.path().display()))).unwrap();
    let err = remote.fetch(&short.key, into.path()).unwrap_err();
    assert!(
        matches!(&err, RemoteError::Corrupt { reason, .. } if reason.contains("longer than")),
        "{err}"
    );
    assert_eq!(fs_err::read_dir(into.path()).unwrap().count(), 0);
}

/// Finding 5 of issue 11: a remote manifest naming its library `last-used`
/// (or anything else the local store refuses) passed the remote's own name
/// check and then failed the build at publish. The one rule now rejects it
/// at download: a corrupt entry, nothing written.
#[test]
fn a_remote_library_named_like_an_entry_file_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Remote::open(config(&format!("file://{}", dir.path().display()))).unwrap();
    for name in ["last-used", "manifest.json", "../up.so", ".hidden.so"] {
        let (mut manifest, library) = entry(dir.path(), "named", b"lib");
        manifest.library = name.into();
        let header = entry_blob::Header::new(&manifest, None);
        remote
            .write_entry(
                &manifest.key,
                entry_blob::encode(&header, &fs_err::read(&library).unwrap()),
            )
            .unwrap();
        let into = tempfile::tempdir().unwrap();
        let err = remote.fetch(&manifest.key, into.path()).unwrap_err();
        assert!(
            matches!(&err, RemoteError::Corrupt { reason, .. } if reason.contains("invalid library file name")),
            "{name}: {err}"
        );
        assert_eq!(fs_err::read_dir(into.path()).unwrap().count(), 0);
    }
}

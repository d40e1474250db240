//! The remote cache against real servers on loopback: S3 (moto) and Redis
//! (Debian's `redis-server`), each started on a free port by the test and
//! stopped when it ends. Installed by `scripts/setup-services.sh`.
//!
//! Every "node" is its own cache directory sharing one remote; the stable
//! example (one unit, ~2 s) keeps the compiles cheap.

use crate::common;

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use abicache::remote::{entry_blob, Mode, Remote, RemoteConfig};
use abicache_test_support::{Server, S3_BUCKET};
use common::{assert_success, python, python_run, repo_path, stderr, u64_of, Cache};
use serde_json::Value;

const CALL_SCALE_SHIFT: &str = "import sys, torch
torch.ops.load_library(sys.argv[1])
print(torch.ops.stable_scale.scale_shift(torch.arange(4.0), 2.0, 1.0).tolist())";

const SCALED: &str = "[1.0, 3.0, 5.0, 7.0]";

/// What a node needs to reach a remote.
#[derive(Clone)]
struct RemoteEnv {
    url: String,
    vars: Vec<(String, String)>,
}

impl RemoteEnv {
    fn redis(server: &Server) -> Self {
        RemoteEnv {
            url: format!("redis://127.0.0.1:{}/0", server.port()),
            vars: Vec::new(),
        }
    }

    fn s3(server: &Server) -> Self {
        let vars = [
            (
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", server.port()),
            ),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
        ];
        RemoteEnv {
            url: format!("s3://{S3_BUCKET}/team/cache"),
            vars: vars.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }
    }

    fn with(mut self, name: &str, value: &str) -> Self {
        self.vars.push((name.into(), value.into()));
        self
    }

    /// A client for inspecting and tampering with the remote (the test's own
    /// process has none of the node's variables, so S3 settings are set here).
    fn client(&self) -> Remote {
        for (name, value) in &self.vars {
            if name.starts_with("AWS_") {
                // Each test's node variables are passed to its commands; only this
                // in-process client reads the process environment.
                std::env::set_var(name, value);
            }
        }
        let config = RemoteConfig {
            url: self.url.clone(),
            mode: Mode::ReadWrite,
            timeout: Duration::from_secs(10),
            trusted_keys: Vec::new(),
            signing_key: None,
            max_size: abicache::remote::DEFAULT_MAX_SIZE,
        };
        Remote::open(config).unwrap()
    }
}

/// One machine: its own cache, the shared remote.
struct Node {
    cache: Cache,
    remote: RemoteEnv,
}

impl Node {
    fn new(remote: &RemoteEnv) -> Node {
        Node {
            cache: Cache::new(),
            remote: remote.clone(),
        }
    }

    fn cmd(&self, args: Vec<std::ffi::OsString>) -> Command {
        let mut cmd = self.cache.cmd(args);
        cmd.env("ABICACHE_REMOTE", &self.remote.url)
            .env("ABICACHE_CONFIG", "/nonexistent/abicache.toml");
        for var in [
            "ABICACHE_TRUSTED_KEYS",
            "ABICACHE_SIGNING_KEY",
            "ABICACHE_REMOTE_MODE",
            "ABICACHE_REMOTE_TIMEOUT",
        ] {
            cmd.env_remove(var);
        }
        for (name, value) in &self.remote.vars {
            cmd.env(name, value);
        }
        cmd
    }

    fn build_cmd(&self) -> Command {
        self.cmd(args![
            "build",
            repo_path("examples/stable_scale/abicache.toml"),
            "--python",
            python(),
            "--json",
            "--quiet"
        ])
    }

    /// Builds the stable example; returns the outcome and stderr.
    fn build(&self) -> (Value, String) {
        parse_build(self.build_cmd().output().unwrap())
    }

    fn stats(&self) -> Value {
        let out = self.cmd(args!["stats", "--json"]).output().unwrap();
        assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

fn parse_build(out: Output) -> (Value, String) {
    assert_success(&out);
    let outcome: Value = serde_json::from_slice(&out.stdout).unwrap();
    (outcome, stderr(&out))
}

fn library(outcome: &Value) -> PathBuf {
    PathBuf::from(outcome["path"].as_str().unwrap())
}

fn key(outcome: &Value) -> String {
    outcome["key"].as_str().unwrap().to_string()
}

fn warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .collect()
}

/// Counters that matter here, as one comparable tuple:
/// (builds, remote hits, remote misses, remote errors, remote uploads).
fn counters(stats: &Value) -> (u64, u64, u64, u64, u64) {
    (
        u64_of(stats, "builds"),
        u64_of(stats, "remote_hits"),
        u64_of(stats, "remote_misses"),
        u64_of(stats, "remote_errors"),
        u64_of(stats, "remote_uploads"),
    )
}

/// Node A builds and uploads; node B gets the library with zero compiles and the op runs.
fn second_node_downloads_instead_of_compiling(remote: &RemoteEnv) -> (Node, Node, String) {
    let a = Node::new(remote);
    let (built, err) = a.build();
    assert!(warnings(&err).is_empty(), "{err}");
    assert_eq!(built["hit"], false);
    assert_eq!(counters(&a.stats()), (1, 0, 1, 0, 1));

    let b = Node::new(remote);
    let (got, err) = b.build();
    assert!(warnings(&err).is_empty(), "{err}");
    assert_eq!(
        (got["hit"].clone(), got["remote"].clone()),
        (Value::Bool(true), Value::Bool(true))
    );
    assert_eq!(key(&got), key(&built));
    let stats = b.stats();
    assert_eq!(
        counters(&stats),
        (0, 1, 0, 0, 0),
        "node B compiled nothing and downloaded once: {stats}"
    );
    assert!(u64_of(&stats, "remote_bytes_down") > 0);
    assert!(library(&got).starts_with(&b.cache.dir));
    assert_eq!(
        std::fs::read(library(&got)).unwrap(),
        std::fs::read(library(&built)).unwrap()
    );
    assert_eq!(
        python_run(&python(), CALL_SCALE_SHIFT, &library(&got)),
        SCALED
    );

    // A third call on node B is a plain local hit.
    let (again, _) = b.build();
    assert_eq!(
        (again["hit"].clone(), again.get("remote").cloned()),
        (Value::Bool(true), None)
    );
    (a, b, key(&built))
}

#[test]
fn s3_second_node_downloads_instead_of_compiling_then_push_and_pull_by_name() {
    let server = Server::s3(&python());
    let remote = RemoteEnv::s3(&server);
    let (a, _b, key) = second_node_downloads_instead_of_compiling(&remote);

    // Pushing what is already there uploads nothing.
    let out = a.cmd(args!["push", "--json"]).output().unwrap();
    assert_success(&out);
    let pushed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pushed[0]["result"], "already-there");

    // A fresh node prebuilds its cache by name (S3 lists), then builds with zero compiles.
    let c = Node::new(&remote);
    let out = c
        .cmd(args!["pull", "stable_scale", "--json"])
        .output()
        .unwrap();
    assert_success(&out);
    let pulled: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (pulled[0]["result"].as_str(), pulled[0]["key"].as_str()),
        (Some("downloaded"), Some(key.as_str()))
    );
    let (got, _) = c.build();
    assert_eq!(
        (got["hit"].clone(), got.get("remote").cloned()),
        (Value::Bool(true), None)
    );
    assert_eq!(counters(&c.stats()), (0, 1, 0, 0, 0));
    let human = c.cmd(args!["stats"]).output().unwrap();
    assert_success(&human);
    c.cache
        .settings()
        .bind(|| insta::assert_snapshot!("stats_after_a_pull", common::stdout(&human)));
}

#[test]
fn redis_second_node_downloads_instead_of_compiling() {
    let server = Server::redis();
    second_node_downloads_instead_of_compiling(&RemoteEnv::redis(&server));
}

#[test]
fn tampered_remote_library_is_detected_never_loaded_and_replaced() {
    let server = Server::redis();
    let remote = RemoteEnv::redis(&server);
    let a = Node::new(&remote);
    let (built, _) = a.build();
    let key = key(&built);

    // Flip one byte of the library inside the stored entry blob.
    let client = remote.client();
    let mut bytes = client.read_entry(&key).unwrap().expect("node A uploaded");
    let last = bytes.len() - 100;
    bytes[last] ^= 0x40;
    client.write_entry(&key, bytes).unwrap();

    let b = Node::new(&remote);
    let (got, err) = b.build();
    let warned = warnings(&err);
    assert_eq!(warned.len(), 1, "{err}");
    assert!(
        warned[0].contains("is corrupt")
            && warned[0].contains("BLAKE3")
            && warned[0].ends_with("building locally"),
        "{err}"
    );
    assert_eq!(got["hit"], false, "node B built locally");
    assert_eq!(
        counters(&b.stats()),
        (1, 0, 0, 1, 1),
        "and replaced the corrupt remote entry"
    );
    assert!(library(&got).starts_with(&b.cache.dir));
    assert_eq!(
        python_run(&python(), CALL_SCALE_SHIFT, &library(&got)),
        SCALED
    );

    // The remote entry verifies again: a third node gets it.
    let c = Node::new(&remote);
    let (fixed, err) = c.build();
    assert!(warnings(&err).is_empty(), "{err}");
    assert_eq!(fixed["remote"], true);
}

#[test]
fn signed_mode_ignores_an_untrusted_signer_and_uses_a_trusted_one() {
    let server = Server::s3(&python());
    let keys = tempfile::tempdir().unwrap();
    let remote = RemoteEnv::s3(&server);
    let keygen = |name: &str| -> (PathBuf, String) {
        let out = Cache::new()
            .cmd(args!["keygen", "--out", keys.path().join(name), "--json"])
            .output()
            .unwrap();
        assert_success(&out);
        let json: Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            keys.path().join(name),
            json["public_key"].as_str().unwrap().to_string(),
        )
    };
    let (untrusted_secret, _) = keygen("untrusted.key");
    let (trusted_secret, trusted_public) = keygen("trusted.key");

    // A stranger with write access uploads an entry signed by their own key.
    let stranger = Node::new(
        &remote
            .clone()
            .with("ABICACHE_SIGNING_KEY", untrusted_secret.to_str().unwrap()),
    );
    stranger.build();

    // A builder that trusts only `trusted` ignores it, builds, and uploads a signed entry over it.
    let builder_env = remote
        .clone()
        .with("ABICACHE_TRUSTED_KEYS", &trusted_public)
        .with("ABICACHE_SIGNING_KEY", trusted_secret.to_str().unwrap());
    let builder = Node::new(&builder_env);
    let (built, err) = builder.build();
    let warned = warnings(&err);
    // The stranger's entry, then the stranger's object of the one unit.
    assert_eq!(warned.len(), 2, "{err}");
    // The entry is refused by the gate, in the wording every source shares.
    assert!(
        warned[0].contains("refused: it is signed by")
            && warned[0].contains("which is not one of `ABICACHE_TRUSTED_KEYS`"),
        "{err}"
    );
    assert!(
        warned[1].contains("is not trusted") && warned[1].contains("which is not a trusted key"),
        "{err}"
    );
    assert!(
        warned[1].ends_with("compiling `scale.cpp` locally"),
        "{err}"
    );
    assert_eq!(built["hit"], false);
    assert_eq!(counters(&builder.stats()), (1, 0, 0, 2, 1));

    // A reader that trusts `trusted` uses the signed entry.
    let reader = Node::new(
        &remote
            .clone()
            .with("ABICACHE_TRUSTED_KEYS", &trusted_public),
    );
    let (got, err) = reader.build();
    assert!(warnings(&err).is_empty(), "{err}");
    assert_eq!(got["remote"], true);
    assert_eq!(counters(&reader.stats()), (0, 1, 0, 0, 0));
    assert_eq!(
        python_run(&python(), CALL_SCALE_SHIFT, &library(&got)),
        SCALED
    );
}

#[test]
fn server_stopped_mid_build_is_one_warning_and_the_load_succeeds() {
    let mut server = Server::redis();
    // A short bound: the upload to the stopped server waits for it.
    let node = Node::new(&RemoteEnv::redis(&server).with("ABICACHE_REMOTE_TIMEOUT", "2"));
    let child = node
        .build_cmd()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The build directory appears once the key's lock is held; the remote
    // lookup follows at once, then the compile takes about two seconds.
    let tmp = node.cache.dir.join("v1/tmp");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !tmp.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        assert!(Instant::now() < deadline, "the build never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    server.stop();
    let (got, err) = parse_build(child.wait_with_output().unwrap());
    let warned = warnings(&err);
    assert_eq!(warned.len(), 1, "{err}");
    assert!(warned[0].contains("the entry was not uploaded"), "{err}");
    assert_eq!(got["hit"], false);
    assert_eq!(counters(&node.stats()), (1, 0, 1, 1, 0));
    assert_eq!(
        python_run(&python(), CALL_SCALE_SHIFT, &library(&got)),
        SCALED
    );

    // With the server gone from the start, the lookup fails: still one warning.
    let late = Node::new(&node.remote);
    let (got, err) = late.build();
    let warned = warnings(&err);
    assert_eq!(warned.len(), 1, "{err}");
    assert!(warned[0].contains("building locally"), "{err}");
    assert_eq!(counters(&late.stats()), (1, 0, 0, 1, 0));
    assert_eq!(
        python_run(&python(), CALL_SCALE_SHIFT, &library(&got)),
        SCALED
    );
}

#[test]
fn two_nodes_building_the_same_key_at_once_leave_one_valid_entry() {
    let server = Server::s3(&python());
    let remote = RemoteEnv::s3(&server);
    let (a, b) = (Node::new(&remote), Node::new(&remote));
    let children: Vec<Child> = [&a, &b]
        .iter()
        .map(|n| {
            n.build_cmd()
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outcomes: Vec<Value> = children
        .into_iter()
        .map(|c| parse_build(c.wait_with_output().unwrap()).0)
        .collect();
    assert_eq!(key(&outcomes[0]), key(&outcomes[1]));
    for outcome in &outcomes {
        assert_eq!(
            python_run(&python(), CALL_SCALE_SHIFT, &library(outcome)),
            SCALED
        );
    }
    let client = remote.client();
    assert_eq!(
        client.keys_named("stable_scale").unwrap(),
        vec![key(&outcomes[0])]
    );
    let (header, library) =
        entry_blob::decode(&client.read_entry(&key(&outcomes[0])).unwrap().unwrap())
            .map(|(h, l)| (h, abicache::remote::Digest::of(l)))
            .unwrap();
    abicache::remote::verify_entry(&key(&outcomes[0]), header, &library)
        .expect("the remote entry verifies");
}

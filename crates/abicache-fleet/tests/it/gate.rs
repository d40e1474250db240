//! The gate end to end: entries offered by each outside source — a
//! read-only layer, an installed cache wheel, a remote cache (a real
//! `file://` remote through the client), a bundle file — are refused by the
//! same checks in the same words. Real stores, real files, real signatures.

use std::path::Path;
use std::time::Duration;

use abicache::gate::{Refusal, Source};
use abicache::key::Payload;
use abicache::layers::{self, Layer};
use abicache::remote::{KeyPair, Keys, Mode, Remote, RemoteConfig, SecretKey};
use abicache::store::{Manifest, ReadOnlyLayer, Store};
use abicache::{Pulled, RemoteCache, Warning};
use abicache_fleet::Error;

/// A cache holding one entry whose manifest's payload hashes to another key
/// than the one it is stored under (a layer or remote someone edited).
fn cache_with_a_moved_payload(dir: &Path) -> (Store, String, String) {
    let store = Store::open(dir.join("cache")).unwrap();
    let payload = "format=1\nname=moved\n";
    let payload_key = Payload::parse(payload).unwrap().key();
    let key = Payload::parse("format=1\nname=other\n").unwrap().key();
    let guard = store.begin_build(&key).unwrap();
    std::fs::write(guard.temp_dir().join("libmoved.so"), b"library bytes").unwrap();
    let mut manifest = Manifest::new(&key, "moved", payload);
    manifest.audit = Some(serde_json::json!({"verdict": "ok"}));
    let _ = guard.publish("libmoved.so", manifest).unwrap();
    (store, key, payload_key)
}

fn remote(
    url: &str,
    trusted: Vec<abicache::remote::PublicKey>,
    signing: Option<SecretKey>,
) -> RemoteCache {
    RemoteCache::new(
        Remote::open(RemoteConfig {
            url: url.into(),
            mode: Mode::ReadWrite,
            timeout: Duration::from_secs(5),
            trusted_keys: trusted,
            signing_key: signing,
            max_size: abicache::remote::DEFAULT_MAX_SIZE,
        })
        .unwrap(),
    )
}

fn layer_refusals(root: &Path, source: Source, key: &str) -> Vec<String> {
    let layer = Layer {
        store: ReadOnlyLayer::new(root),
        source,
    };
    let (hit, warnings) = layers::lookup(&[layer], key, &Default::default());
    assert!(hit.is_none(), "a refused entry was served");
    warnings
        .into_iter()
        .map(|w| match w {
            Warning::Refused(refused) => refused.to_string(),
            other => panic!("not the gate's refusal: {other}"),
        })
        .collect()
}

fn bundle_refusal(
    from: &Store,
    signing: Option<&SecretKey>,
    trusted: Vec<abicache::remote::PublicKey>,
    file: &Path,
) -> (Error, Store) {
    let entries = abicache_fleet::bundle::select_entries(from, &[]).unwrap();
    abicache_fleet::bundle::export_to_file(from, &entries, signing, file).unwrap();
    let into = Store::open(file.with_extension("import")).unwrap();
    let keys = Keys {
        trusted,
        signing: None,
    };
    let input = std::fs::File::open(file).unwrap();
    let err = abicache_fleet::bundle::import_from(&into, &keys, input, &file.display().to_string())
        .unwrap_err();
    (err, into)
}

/// One entry whose payload hashes to another key, offered by every source:
/// each refuses it, publishes nothing, and words the reason identically.
#[test]
fn a_payload_that_hashes_elsewhere_is_refused_by_every_source_in_one_wording() {
    let tmp = tempfile::tempdir().unwrap();
    let (store, key, payload_key) = cache_with_a_moved_payload(tmp.path());
    let reason = Refusal::PayloadKeyMismatch {
        payload_key: payload_key.clone(),
    }
    .to_string();
    let root = store.root().to_path_buf();
    let mut messages = Vec::new();

    messages.extend(layer_refusals(&root, Source::Layer(root.clone()), &key));
    messages.extend(layer_refusals(&root, Source::Wheel(root.clone()), &key));

    let url = format!("file://{}", tmp.path().join("remote").display());
    let hit = store.lookup(&key).unwrap().hit.unwrap();
    remote(&url, Vec::new(), None)
        .remote()
        .upload(&hit.manifest, &hit.library, false)
        .unwrap();
    let puller = Store::open(tmp.path().join("puller")).unwrap();
    match remote(&url, Vec::new(), None).pull(&puller, &key).unwrap() {
        Pulled::Rejected { warning } => messages.push(warning),
        other => panic!("pulled: {other:?}"),
    }
    assert!(
        puller.lookup(&key).unwrap().hit.is_none(),
        "nothing published"
    );

    let (err, imported) = bundle_refusal(&store, None, Vec::new(), &tmp.path().join("b.abicache"));
    assert!(
        matches!(&err, Error::Refused(r) if r.key.as_deref() == Some(key.as_str())),
        "{err}"
    );
    messages.push(err.to_string());
    assert!(imported.list().unwrap().is_empty(), "nothing imported");

    assert_eq!(messages.len(), 4, "{messages:#?}");
    for message in &messages {
        assert!(
            message.contains(&format!("entry `{key}` refused: {reason}; ")),
            "{message}"
        );
    }
    let shown = messages
        .join("\n")
        .replace(&tmp.path().display().to_string(), "[TMP]")
        .replace(&key, "[KEY]")
        .replace(&payload_key, "[PAYLOAD_KEY]");
    insta::assert_snapshot!(shown);
}

/// An entry signed by a key that is not trusted: the remote's entry and the
/// bundle's index are refused with the same reason.
#[test]
fn a_signer_that_is_not_trusted_is_refused_by_the_remote_and_a_bundle_alike() {
    let tmp = tempfile::tempdir().unwrap();
    let store = Store::open(tmp.path().join("cache")).unwrap();
    let payload = "format=1\nname=signed\n";
    let key = Payload::parse(payload).unwrap().key();
    let guard = store.begin_build(&key).unwrap();
    std::fs::write(guard.temp_dir().join("libsigned.so"), b"library bytes").unwrap();
    let mut manifest = Manifest::new(&key, "signed", payload);
    manifest.audit = Some(serde_json::json!({"verdict": "ok"}));
    let _ = guard.publish("libsigned.so", manifest).unwrap();
    let (ours, stranger) = (KeyPair::generate().unwrap(), KeyPair::generate().unwrap());
    let reason = Refusal::UntrustedSigner {
        signer: stranger.public.to_string(),
    }
    .to_string();

    let url = format!("file://{}", tmp.path().join("remote").display());
    let hit = store.lookup(&key).unwrap().hit.unwrap();
    remote(&url, Vec::new(), Some(stranger.secret.clone()))
        .remote()
        .upload(&hit.manifest, &hit.library, false)
        .unwrap();
    let puller = Store::open(tmp.path().join("puller")).unwrap();
    let warning = match remote(&url, vec![ours.public], None)
        .pull(&puller, &key)
        .unwrap()
    {
        Pulled::Rejected { warning } => warning,
        other => panic!("pulled: {other:?}"),
    };
    assert!(
        puller.lookup(&key).unwrap().hit.is_none(),
        "nothing published"
    );

    let (err, imported) = bundle_refusal(
        &store,
        Some(&stranger.secret),
        vec![ours.public],
        &tmp.path().join("b.abicache"),
    );
    assert!(imported.list().unwrap().is_empty(), "nothing imported");
    let bundle = err.to_string();
    for message in [&warning, &bundle] {
        assert!(
            message.contains(&format!(" refused: {reason}; ")),
            "{message}"
        );
    }
    assert!(
        warning.starts_with(&format!("remote cache `{url}`: entry `{key}` refused")),
        "{warning}"
    );
    assert!(bundle.contains("nothing was imported"), "{bundle}");
}

//! Issue 46, UX note: an entry skipped in an installed cache wheel told the
//! user to edit `ABICACHE_READONLY_DIRS`, which a wheel is not in. A real
//! layer laid out as an installed wheel (`_abicache_cache_<dist>/cache`)
//! with an unreadable manifest: the warning names pip and the distribution.

use std::path::Path;

use abicache::layers;
use abicache::settings::RemoteSettings;

const KEY: &str = "0123456789abcdef0123456789abcdef";

/// A layer at `root` whose entry `KEY` has a manifest that is not JSON.
fn layer_with_a_bad_manifest(root: &Path) {
    let entry = root.join("v1/entries").join(KEY);
    std::fs::create_dir_all(&entry).unwrap();
    std::fs::write(entry.join("manifest.json"), b"not json").unwrap();
}

#[test]
fn a_skipped_wheel_entry_names_the_wheels_fix_not_the_layer_variable() {
    let site = tempfile::tempdir().unwrap();
    let wheel = site.path().join("_abicache_cache_ops/cache");
    layer_with_a_bad_manifest(&wheel);
    let configured = tempfile::tempdir().unwrap();
    layer_with_a_bad_manifest(configured.path());
    let found = layers::resolve(
        &[configured.path().to_path_buf()],
        std::slice::from_ref(&wheel),
    );
    let (hit, warnings) = layers::lookup(&found, KEY, &RemoteSettings::default());
    assert!(hit.is_none());
    let texts: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    let layer = &texts[0];
    assert!(
        layer.contains(&format!(
            "`{}`: entry `{KEY}` skipped",
            configured.path().display()
        )) && layer.contains("remove it from `ABICACHE_READONLY_DIRS`"),
        "{layer}"
    );
    let wheel_text = &texts[1];
    assert!(
        wheel_text.contains(&format!("`{}`: entry `{KEY}` skipped", wheel.display())),
        "{wheel_text}"
    );
    assert!(
        !wheel_text.contains("ABICACHE_READONLY_DIRS"),
        "a wheel is not in ABICACHE_READONLY_DIRS: {wheel_text}"
    );
    assert!(
        wheel_text.contains(
            "reinstall the cache wheel (`pip install --force-reinstall ops`), or uninstall it \
             (`pip uninstall ops`)"
        ),
        "{wheel_text}"
    );
}

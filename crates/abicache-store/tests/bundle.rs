//! Bundles on real stores in real temp dirs: a round trip publishes every
//! entry; any damaged, unlisted or missing byte refuses the whole bundle
//! and leaves the target store untouched.

mod common;

use std::io::Write;

use abicache_store::{write_bundle, Imported, StoreError, UnpackedBundle};
use common::{key, publish, temp_store};

fn no_signature(_: &[u8]) -> Option<Vec<u8>> {
    None
}

/// A bundle of two entries (one library of 64 KiB so the archive spans
/// many zstd blocks) and the hits it was made from.
fn two_entry_bundle(store: &abicache_store::Store) -> Vec<u8> {
    let big: Vec<u8> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let a = publish(store, &key("a"), "alpha", &big);
    let b = publish(store, &key("b"), "beta", b"\x7fELF beta library");
    let mut bytes = Vec::new();
    write_bundle(&mut bytes, &[a, b], &no_signature).unwrap();
    bytes
}

#[test]
fn round_trip_publishes_every_entry_and_a_second_import_finds_them_local() {
    let (_d1, source) = temp_store();
    let bundle = two_entry_bundle(&source);
    let (_d2, target) = temp_store();
    let unpacked = UnpackedBundle::unpack(&target, &bundle[..]).unwrap();
    assert!(unpacked.signature.is_none());
    assert_eq!(unpacked.index.entries.len(), 2);
    let done = unpacked.publish(&target).unwrap();
    assert_eq!(
        done,
        vec![
            (key("a"), Imported::Published),
            (key("b"), Imported::Published)
        ]
    );
    for k in [key("a"), key("b")] {
        let theirs = source.lookup(&k).unwrap().hit.unwrap();
        let ours = target.lookup(&k).unwrap().hit.unwrap();
        assert_eq!(
            std::fs::read(&theirs.library).unwrap(),
            std::fs::read(&ours.library).unwrap()
        );
        assert_eq!(theirs.manifest.payload, ours.manifest.payload);
    }
    let again = UnpackedBundle::unpack(&target, &bundle[..])
        .unwrap()
        .publish(&target)
        .unwrap();
    assert!(again.iter().all(|(_, r)| *r == Imported::AlreadyLocal));
    // The staging directories are gone.
    let tmp: Vec<_> = std::fs::read_dir(target.layout().tmp_dir())
        .unwrap()
        .collect();
    assert!(tmp.is_empty(), "{tmp:?}");
}

#[test]
fn the_signature_callback_sees_the_index_and_its_bytes_come_back() {
    let (_d, store) = temp_store();
    let hit = publish(&store, &key("s"), "signed", b"library");
    let mut bytes = Vec::new();
    let sign = |index: &[u8]| Some(blake3::hash(index).as_bytes().to_vec());
    write_bundle(&mut bytes, &[hit], &sign).unwrap();
    let unpacked = UnpackedBundle::unpack(&store, &bytes[..]).unwrap();
    assert_eq!(
        unpacked.signature.as_deref(),
        Some(&blake3::hash(&unpacked.index_bytes).as_bytes()[..])
    );
}

#[test]
fn every_flipped_byte_refuses_the_bundle_and_imports_nothing() {
    let (_d1, source) = temp_store();
    let bundle = two_entry_bundle(&source);
    let (_d2, target) = temp_store();
    // Every byte of the first and last 128 (frame header, archive header
    // and index, checksum, seal) and a spread of the library's bytes.
    let n = bundle.len();
    let mut positions: Vec<usize> = (0..128).chain(n - 128..n).collect();
    positions.extend((128..n - 128).step_by(n / 61));
    for pos in positions {
        let mut bad = bundle.clone();
        bad[pos] ^= 0x20;
        match UnpackedBundle::unpack(&target, &bad[..]) {
            Ok(_) => panic!("a bundle with byte {pos} flipped was accepted"),
            Err(StoreError::Bundle(_)) => {}
            Err(other) => panic!("byte {pos}: not a bundle error: {other}"),
        }
    }
    assert!(target.list().unwrap().is_empty());
}

#[test]
fn truncated_and_foreign_input_is_refused_with_a_reason() {
    let (_d1, source) = temp_store();
    let bundle = two_entry_bundle(&source);
    let (_d2, target) = temp_store();
    let err = UnpackedBundle::unpack(&target, &bundle[..bundle.len() / 2]).unwrap_err();
    assert!(err.to_string().contains("nothing was imported"), "{err}");
    let err = UnpackedBundle::unpack(&target, &b"GIF89a not a bundle"[..]).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("the bundle is damaged or is not an abicache bundle"),
        "{err}"
    );
    assert!(target.list().unwrap().is_empty());
}

/// A tar whose members are given as (path, bytes), zstd-compressed and
/// sealed as the format says (a skippable frame with the BLAKE3 of the rest).
fn handmade(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut tar = tar::Builder::new(Vec::new());
    for (path, data) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        // Set the name bytes directly: `set_path` refuses `..`, an attacker does not.
        header.as_old_mut().name[..path.len()].copy_from_slice(path.as_bytes());
        header.set_cksum();
        tar.append(&header, *data).unwrap();
    }
    let raw = tar.into_inner().unwrap();
    let mut out = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    out.write_all(&raw).unwrap();
    let mut bytes = out.finish().unwrap();
    let seal = blake3::hash(&bytes);
    bytes.extend_from_slice(&[0x5A, 0x2A, 0x4D, 0x18, 32, 0, 0, 0]);
    bytes.extend_from_slice(seal.as_bytes());
    bytes
}

#[test]
fn a_member_the_index_does_not_list_is_refused() {
    let (_d, store) = temp_store();
    let index = br#"{"format": 1, "entries": []}"#;
    let bundle = handmade(&[
        ("abicache-bundle/index.json", index),
        ("entries/../../evil.so", b"x"),
    ]);
    let err = UnpackedBundle::unpack(&store, &bundle[..]).unwrap_err();
    assert!(
        err.to_string().contains("which its index does not list"),
        "{err}"
    );
}

#[test]
fn a_listed_file_missing_from_the_archive_is_refused() {
    let (_d, store) = temp_store();
    let k = key("m");
    let index = format!(
        r#"{{"format": 1, "entries": [{{"key": "{k}", "name": "m", "files": [
            {{"name": "manifest.json", "size": 2, "blake3": "{h}"}},
            {{"name": "libm.so", "size": 1, "blake3": "{h}"}}]}}]}}"#,
        h = blake3::hash(b"").to_hex()
    );
    let bundle = handmade(&[("abicache-bundle/index.json", index.as_bytes())]);
    let err = UnpackedBundle::unpack(&store, &bundle[..]).unwrap_err();
    assert!(
        err.to_string().contains("does not match its index"),
        "{err}"
    );
}

#[test]
fn a_newer_format_is_refused_naming_both_formats() {
    let (_d, store) = temp_store();
    let bundle = handmade(&[(
        "abicache-bundle/index.json",
        br#"{"format": 9, "entries": []}"#,
    )]);
    let err = UnpackedBundle::unpack(&store, &bundle[..]).unwrap_err();
    insta::assert_snapshot!(err.to_string(), @"the bundle has format 9, but this abicache reads format 1; nothing was imported. Export it with the same abicache release that imports it");
}

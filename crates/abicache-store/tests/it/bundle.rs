//! Bundles on real stores in real temp dirs: a round trip publishes every
//! entry; any damaged, unlisted or missing byte refuses the whole bundle
//! and leaves the target store untouched.

use crate::common;

use std::io::Write;

use abicache_store::{
    write_bundle, BundleError, BundleLimits, Imported, StoreError, UnpackedBundle,
};
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

/// Raw tar bytes, zstd-compressed and sealed as the format says.
fn sealed(raw: &[u8]) -> Vec<u8> {
    let mut out = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    out.write_all(raw).unwrap();
    let mut bytes = out.finish().unwrap();
    let seal = blake3::hash(&bytes);
    bytes.extend_from_slice(&[0x5A, 0x2A, 0x4D, 0x18, 32, 0, 0, 0]);
    bytes.extend_from_slice(seal.as_bytes());
    bytes
}

fn limits(max_bytes: u64) -> BundleLimits {
    BundleLimits { max_bytes }
}

/// The tar reader read a GNU long name's data into memory whatever its
/// size: a 0.5 MiB bundle claiming a 16 GiB long name got `abicache import`
/// killed. Only the first 40 MiB are really there, and none of it is read.
#[test]
fn a_gnu_long_name_bomb_is_refused_without_reading_it() {
    let (_d, store) = temp_store();
    let mut header = tar::Header::new_gnu();
    header.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
    header.set_entry_type(tar::EntryType::GNULongName);
    header.set_size(16 << 30);
    header.set_cksum();
    let mut raw = header.as_bytes().to_vec();
    raw.resize(512 + (40 << 20), b'a');
    let bundle = sealed(&raw);
    assert!(bundle.len() < 1 << 20, "{} bytes", bundle.len());
    let checked = std::cell::Cell::new(false);
    let err = UnpackedBundle::unpack_with(&store, &bundle[..], limits(1 << 40), &|_| {
        checked.set(true);
        Ok(())
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("a member's long name is 17179869184 bytes, more than 4096"),
        "{err}"
    );
    assert!(!checked.get());
}

/// Sizes came from the unsigned index with no total cap: an index claiming
/// a 1 TiB library filled the disk under `v1/tmp/.bundle-*`.
#[test]
fn an_index_listing_more_than_the_limit_is_refused_before_anything_is_extracted() {
    let (_d, store) = temp_store();
    let k = key("huge");
    let h = "0".repeat(64);
    let index = format!(
        r#"{{"format": 1, "entries": [{{"key": "{k}", "name": "huge", "files": [
            {{"name": "manifest.json", "size": 10, "blake3": "{h}"}},
            {{"name": "huge.so", "size": 1099511627776, "blake3": "{h}"}}]}}]}}"#
    );
    let bundle = handmade(&[("abicache-bundle/index.json", index.as_bytes())]);
    let err = UnpackedBundle::unpack(&store, &bundle[..]).unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("refusing to import the bundle: its index lists more than"),
        "{text}"
    );
    assert!(
        matches!(err, StoreError::Bundle(BundleError::TooLarge(_))),
        "{err:?}"
    );
    // A bundle file larger than the limit is not even decompressed.
    let (_d2, source) = temp_store();
    let two = two_entry_bundle(&source);
    let err = UnpackedBundle::unpack_with(&store, &two[..], limits(1000), &|_| Ok(())).unwrap_err();
    assert!(
        err.to_string()
            .contains("the bundle is larger than 1000 bytes"),
        "{err}"
    );
    let tmp: Vec<_> = std::fs::read_dir(store.layout().tmp_dir())
        .unwrap()
        .collect();
    assert!(tmp.is_empty(), "staging removed: {tmp:?}");
}

/// `abicache import` extracted every member before it checked the seal
/// and the signature.
#[test]
fn seal_then_index_and_signature_are_checked_before_any_library_is_extracted() {
    let (_d1, source) = temp_store();
    let bundle = two_entry_bundle(&source);
    let (_d2, target) = temp_store();
    let tmp = target.layout().tmp_dir();
    let extracted = || -> Vec<std::path::PathBuf> {
        let mut found = Vec::new();
        for staging in std::fs::read_dir(&tmp).unwrap().flatten() {
            for entry in std::fs::read_dir(staging.path()).unwrap().flatten() {
                if entry.path().is_dir() {
                    found.extend(
                        std::fs::read_dir(entry.path())
                            .unwrap()
                            .map(|e| e.unwrap().path()),
                    );
                }
            }
        }
        found
    };
    let seen = std::cell::Cell::new(None);
    let err = UnpackedBundle::unpack_with(&target, &bundle[..], limits(1 << 30), &|meta| {
        assert_eq!(meta.index.entries.len(), 2);
        assert!(meta.signature.is_none());
        seen.set(Some(extracted()));
        Err(StoreError::Io(std::io::Error::other("untrusted signer")))
    })
    .unwrap_err();
    assert!(err.to_string().contains("untrusted signer"), "{err}");
    assert_eq!(
        seen.take(),
        Some(vec![]),
        "no library extracted before the check"
    );
    // A broken seal: refused before the index is even read.
    let mut bad = bundle.clone();
    *bad.last_mut().unwrap() ^= 1;
    let called = std::cell::Cell::new(false);
    let err = UnpackedBundle::unpack_with(&target, &bad[..], limits(1 << 30), &|_| {
        called.set(true);
        Ok(())
    })
    .unwrap_err();
    assert!(err.to_string().contains("do not match its seal"), "{err}");
    assert!(!called.get());
}

/// Long-name members are read by this reader now (bounded): a library whose
/// archive path is longer than a tar header's 100 bytes still round-trips.
#[test]
fn a_library_with_a_long_name_round_trips() {
    let (_d1, source) = temp_store();
    let name = "x".repeat(120);
    let hit = publish(&source, &key("long"), &name, b"\x7fELF long");
    let mut bytes = Vec::new();
    write_bundle(&mut bytes, &[hit], &no_signature).unwrap();
    let (_d2, target) = temp_store();
    let done = UnpackedBundle::unpack(&target, &bytes[..])
        .unwrap()
        .publish(&target)
        .unwrap();
    assert_eq!(done, vec![(key("long"), Imported::Published)]);
    let ours = target.lookup(&key("long")).unwrap().hit.unwrap();
    assert_eq!(ours.library.file_name().unwrap().len(), 126);
    assert_eq!(std::fs::read(&ours.library).unwrap(), b"\x7fELF long");
}

#[test]
fn an_imported_cuda_entry_is_in_the_arch_free_index_so_it_can_cover_gpus() {
    let payload = "format=1\nname=k\ncuda_archs=-gencode=arch=compute_80,code=sm_80 \
                   -gencode=arch=compute_90,code=sm_90\nnvcc=13.0\n";
    let (_d1, source) = temp_store();
    let guard = source.begin_build(&key("cuda")).unwrap();
    std::fs::write(guard.temp_dir().join("libk.so"), b"\x7fELF k").unwrap();
    let hit = guard
        .publish(
            "libk.so",
            abicache_store::Manifest::new(key("cuda"), "k", payload),
        )
        .unwrap()
        .hit;
    let mut bundle = Vec::new();
    write_bundle(&mut bundle, &[hit], &no_signature).unwrap();

    let (_d2, target) = temp_store();
    let arch_free = abicache_store::arch_free_key(payload).unwrap();
    assert!(target.arch_free_entries(&arch_free).is_empty());
    UnpackedBundle::unpack(&target, &bundle[..])
        .unwrap()
        .publish(&target)
        .unwrap();
    let listed = target.arch_free_entries(&arch_free);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].key, key("cuda"));
    assert_eq!(listed[0].images, ["sm_80", "sm_90"]);
}

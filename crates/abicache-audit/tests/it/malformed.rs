//! Files that are not (whole) ELF shared libraries: clear errors, never a panic.

use crate::support;

use std::path::Path;

use abicache_audit::{audit_bytes, audit_file, AuditError};
use proptest::prelude::*;
use support::real_library_bytes;

/// Writes `bytes` to `dir/name` and audits it, expecting an error.
fn audit_error(dir: &Path, name: &str, bytes: &[u8]) -> AuditError {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    let error = audit_file(&path).expect_err("auditing should fail");
    // The in-memory reader agrees on the kind of failure.
    let in_memory = audit_bytes(bytes).expect_err("auditing bytes should fail");
    assert_eq!(
        std::mem::discriminant(&error),
        std::mem::discriminant(&in_memory),
        "{error} vs {in_memory}"
    );
    error
}

/// Snapshots `message` with the tempdir replaced by `[TMP]`.
macro_rules! assert_message {
    ($dir:expr, $message:expr) => {{
        let dir = $dir.to_str().unwrap().to_owned();
        insta::with_settings!({ filters => vec![(dir.as_str(), "[TMP]")] }, {
            insta::assert_snapshot!($message.to_string());
        });
    }};
}

#[test]
fn first_100_bytes_of_a_real_library_is_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let error = audit_error(dir.path(), "lib100.so", &real_library_bytes()[..100]);
    assert!(matches!(error, AuditError::Malformed { .. }), "{error:?}");
    assert_message!(dir.path(), error);
}

#[test]
fn first_half_of_a_real_library_is_malformed() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = real_library_bytes();
    let half = bytes.len() / 2;
    let error = audit_error(dir.path(), "libhalf.so", &bytes[..half]);
    assert!(matches!(error, AuditError::Malformed { .. }), "{error:?}");
    // The size depends on the toolchain; the snapshot pins the wording.
    let message = error
        .to_string()
        .replace(&format!("{half} bytes"), "[SIZE] bytes");
    assert_message!(dir.path(), message);
}

#[test]
fn two_bytes_of_elf_magic_is_malformed_not_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let error = audit_error(dir.path(), "libtiny.so", b"\x7fE");
    assert!(matches!(error, AuditError::Malformed { .. }), "{error:?}");
    assert_message!(dir.path(), error);
}

#[test]
fn shell_script_is_not_elf_and_shows_its_first_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let error = audit_error(dir.path(), "libfake.so", b"#!/bin/sh\necho hi\n");
    assert!(matches!(error, AuditError::NotElf { .. }), "{error:?}");
    assert_message!(dir.path(), error);
}

#[test]
fn empty_file_is_not_elf() {
    let dir = tempfile::tempdir().unwrap();
    let error = audit_error(dir.path(), "libempty.so", b"");
    assert!(matches!(error, AuditError::NotElf { .. }), "{error:?}");
    assert_message!(dir.path(), error);
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let error = audit_file(&dir.path().join("libmissing.so")).unwrap_err();
    assert!(matches!(error, AuditError::Io { .. }), "{error:?}");
    assert_message!(dir.path(), error);
}

#[test]
fn directory_is_an_io_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let error = audit_file(dir.path()).unwrap_err();
    assert!(matches!(error, AuditError::Io { .. }), "{error:?}");
    assert!(
        error.to_string().contains(dir.path().to_str().unwrap()),
        "{error}"
    );
}

#[test]
fn in_memory_errors_name_in_memory() {
    let error = audit_bytes(b"MZ\x90\x00").unwrap_err();
    insta::assert_snapshot!(error.to_string());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let _ = audit_bytes(&bytes);
    }

    #[test]
    fn random_bytes_after_an_elf_ident_never_panic(
        class in 1u8..=2,
        data in 1u8..=2,
        tail in prop::collection::vec(any::<u8>(), 0..4096),
    ) {
        let mut bytes = vec![0x7f, b'E', b'L', b'F', class, data, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        bytes.extend(tail);
        let _ = audit_bytes(&bytes);
    }

    #[test]
    fn corrupted_real_library_never_panics(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..32),
        header_flips in prop::collection::vec((0usize..64, any::<u8>()), 0..4),
        truncate in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let mut bytes = real_library_bytes().to_vec();
        for (index, value) in flips {
            let i = index.index(bytes.len());
            bytes[i] = value;
        }
        for (i, value) in header_flips {
            bytes[i] ^= value;
        }
        if let Some(at) = truncate {
            bytes.truncate(at.index(bytes.len()));
        }
        let _ = audit_bytes(&bytes);
    }

    /// Corruptions confined to the parts the audit reads: the section header
    /// table at the end and the dynamic string and symbol tables.
    #[test]
    fn corrupted_tables_of_a_real_library_never_panic(
        flips in prop::collection::vec((0.0f64..1.0, any::<u8>()), 1..16),
    ) {
        let mut bytes = real_library_bytes().to_vec();
        let len = bytes.len();
        for (position, value) in flips {
            // Half the flips in the first 4 KiB (headers, .dynsym, .dynstr,
            // versions), half in the last 2 KiB (section headers).
            let i = if value % 2 == 0 {
                (position * 4096f64.min(len as f64)) as usize
            } else {
                len - 1 - (position * 2048f64.min(len as f64)) as usize
            };
            bytes[i.min(len - 1)] = value;
        }
        let _ = audit_bytes(&bytes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The lazily read file path, on corrupted and truncated copies.
    #[test]
    fn corrupted_real_library_file_never_panics(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..32),
        truncate in proptest::option::of(any::<prop::sample::Index>()),
    ) {
        let mut bytes = real_library_bytes().to_vec();
        for (index, value) in flips {
            let i = index.index(bytes.len());
            bytes[i] = value;
        }
        if let Some(at) = truncate {
            bytes.truncate(at.index(bytes.len()));
        }
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), &bytes).unwrap();
        let from_file = audit_file(file.path());
        let from_bytes = audit_bytes(&bytes);
        prop_assert_eq!(from_file.is_ok(), from_bytes.is_ok());
        if let (Ok(a), Ok(b)) = (from_file, from_bytes) {
            prop_assert_eq!(a, b);
        }
    }
}

/// Regression (found by `corrupted_real_library_file_never_panics` in CI):
/// one flipped bit made `.gnu.version`'s and `.dynamic`'s file offsets odd.
/// The in-memory audit refused the misaligned tables while the file audit,
/// which copies them out, accepted them. A misaligned table is malformed
/// for both now.
#[test]
fn misaligned_dynamic_tables_are_malformed_from_file_and_memory_alike() {
    let orig = real_library_bytes().to_vec();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("misaligned.so");
    // The section header table: find `.dynamic`'s header by its type and bump its offset.
    let shoff = u64::from_le_bytes(orig[0x28..0x30].try_into().unwrap()) as usize;
    let shnum = u16::from_le_bytes(orig[0x3c..0x3e].try_into().unwrap()) as usize;
    let dynamic = (0..shnum)
        .map(|k| shoff + 64 * k)
        .find(
            |&h| u32::from_le_bytes(orig[h + 4..h + 8].try_into().unwrap()) == 6, /* SHT_DYNAMIC */
        )
        .expect("a .dynamic section");
    let mut bytes = orig.clone();
    bytes[dynamic + 0x18] |= 1; // sh_offset, low byte: now odd
    std::fs::write(&path, &bytes).unwrap();
    let from_file = audit_file(&path).unwrap_err().to_string();
    let from_bytes = audit_bytes(&bytes).unwrap_err().to_string();
    assert!(from_file.contains("not 8-byte aligned"), "{from_file}");
    assert!(from_bytes.contains("not 8-byte aligned"), "{from_bytes}");
}

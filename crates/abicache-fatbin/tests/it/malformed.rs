//! Hostile and truncated fat binaries and ELF files: an error naming the
//! file, never a panic, a hang or a huge allocation.
//!
//! The fuzz test corrupts real libraries built here in 2,000 deterministic
//! ways (a fixed seed): truncations, bit flips, huge sizes, zero sizes,
//! overlapping offsets, corrupted wrappers and section headers, and runs
//! each case on its own thread with a time limit.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use abicache_fatbin::{images_in_elf, images_in_elf_bytes, images_in_fatbin, DeviceImage, Error};
use abicache_test_support::skip;
use object::{Object, ObjectSection};

use crate::nvidia_agreement::rename_first;
use crate::support::built_libraries;

/// How long one case may take before it counts as a hang (a real one
/// takes microseconds; the limit allows for a loaded machine).
const CASE_LIMIT: Duration = Duration::from_secs(10);
const CASES: u64 = 2_000;

/// A real library and where its fat binaries lie.
struct Target {
    name: String,
    bytes: Vec<u8>,
    /// The fat binary section's file range.
    section: Range<usize>,
    /// The file offset of that section's ELF section header (ELF64).
    section_header: usize,
    /// File offsets of the fat binary headers and image headers in it.
    fatbin_headers: Vec<usize>,
    image_headers: Vec<usize>,
    /// A shared library with `.nv_fatbin` renamed, so its wrappers are
    /// followed, the file range of its `.nvFatBinSegment` and the file
    /// offset of that section's header.
    renamed: Option<(Vec<u8>, Range<usize>, usize)>,
}

fn targets() -> Option<Vec<Target>> {
    let libraries = match built_libraries() {
        Ok(libraries) => libraries,
        Err(why) => {
            skip(&why);
            return None;
        }
    };
    let wanted = [
        "arch_8.0_9.0+PTX",
        "relocatable_8.0_9.0+PTX",
        "family_100f",
        "no_compress_8.6+PTX",
    ];
    let targets = libraries
        .iter()
        .filter(|l| wanted.contains(&l.name))
        .map(|library| {
            let bytes = std::fs::read(&library.path).unwrap();
            let file = object::File::parse(&*bytes).unwrap();
            let section = file
                .sections()
                .find(|s| matches!(s.name(), Ok(".nv_fatbin" | "__nv_relfatbin")))
                .expect("a fat binary section");
            let (offset, size) = section.file_range().unwrap();
            let section_header = u64_at(&bytes, 0x28) as usize + 64 * section.index().0;
            let range = offset as usize..(offset + size) as usize;
            let (fatbin_headers, image_headers) = walk(&bytes, range.clone());
            let renamed = try_rename(&bytes).map(|renamed| {
                let wrappers = section_range(&renamed, ".nvFatBinSegment");
                let header = section_header_offset(&renamed, ".nvFatBinSegment");
                (renamed, wrappers, header)
            });
            Target {
                name: library.name.to_string(),
                bytes,
                section: range,
                section_header,
                fatbin_headers,
                image_headers,
                renamed,
            }
        })
        .collect::<Vec<_>>();
    assert_eq!(targets.len(), wanted.len());
    Some(targets)
}

/// The header offsets of a well-formed fat binary section.
fn walk(bytes: &[u8], range: Range<usize>) -> (Vec<usize>, Vec<usize>) {
    let (mut fatbins, mut images) = (Vec::new(), Vec::new());
    let mut pos = range.start;
    while pos + 16 <= range.end {
        if bytes[pos..pos + 4] != 0xBA55_ED50u32.to_le_bytes() {
            pos += 8;
            continue;
        }
        fatbins.push(pos);
        let header = u16_at(bytes, pos + 6) as usize;
        let end = pos + header + u64_at(bytes, pos + 8) as usize;
        let mut image = pos + header;
        while image < end {
            images.push(image);
            image += u32_at(bytes, image + 4) as usize + u64_at(bytes, image + 8) as usize;
        }
        pos = end;
    }
    assert!(!fatbins.is_empty() && !images.is_empty());
    (fatbins, images)
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}
fn put(b: &mut [u8], at: usize, value: &[u8]) {
    let end = (at + value.len()).min(b.len());
    b[at..end].copy_from_slice(&value[..end - at]);
}

/// SplitMix64: a fixed, dependency-free stream of pseudo-random numbers.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const HUGE_U64: &[u64] = &[
    u64::MAX,
    u64::MAX - 15,
    1 << 63,
    1 << 40,
    0xFFFF_FFFF,
    0x7FFF_FFFF_FFFF_FFFF,
];
const HUGE_U32: &[u32] = &[u32::MAX, u32::MAX - 63, 1 << 31, 0x0100_0000];

/// One corrupted input and which reader it is fed to.
enum Input {
    /// The fat binary section's bytes alone, to `images_in_fatbin`.
    Fatbin(Vec<u8>),
    /// A whole library, to `images_in_elf_bytes` (and `images_in_elf` on a
    /// file when `also_file`, which must agree).
    Elf { bytes: Vec<u8>, also_file: bool },
}

/// The `case`-th corruption of `target`; the text says what was done.
fn corrupt(target: &Target, case: u64, rng: &mut Rng) -> (Input, String) {
    let section = &target.bytes[target.section.clone()];
    let mut lib = target.bytes.clone();
    let fatbin_header = *rng.pick(&target.fatbin_headers);
    let image_header = *rng.pick(&target.image_headers);
    let elf = |bytes| Input::Elf {
        bytes,
        also_file: false,
    };
    match case % 10 {
        0 => {
            let at = rng.below(section.len());
            (
                Input::Fatbin(section[..at].to_vec()),
                format!("fat binary truncated to {at} bytes"),
            )
        }
        1 => {
            let flips = 1 + rng.below(8);
            for _ in 0..flips {
                let at = target.section.start + rng.below(section.len());
                lib[at] ^= 1 << rng.below(8);
            }
            let fatbin = lib[target.section.clone()].to_vec();
            if case % 20 == 1 {
                (
                    Input::Fatbin(fatbin),
                    format!("{flips} bit flips in the fat binary"),
                )
            } else {
                (
                    elf(lib),
                    format!("{flips} bit flips in the fat binary section"),
                )
            }
        }
        2 => {
            let huge = *rng.pick(HUGE_U64);
            put(&mut lib, fatbin_header + 8, &huge.to_le_bytes());
            (
                elf(lib),
                format!("fat binary at {fatbin_header:#x} declares {huge:#x} bytes of images"),
            )
        }
        3 => {
            if rng.below(2) == 0 {
                let huge = *rng.pick(HUGE_U64);
                put(&mut lib, image_header + 8, &huge.to_le_bytes());
                (
                    elf(lib),
                    format!("image at {image_header:#x} declares a {huge:#x}-byte payload"),
                )
            } else {
                let huge = *rng.pick(HUGE_U32);
                put(&mut lib, image_header + 4, &huge.to_le_bytes());
                (
                    elf(lib),
                    format!("image at {image_header:#x} declares a {huge:#x}-byte header"),
                )
            }
        }
        4 => {
            let (what, at, width) = *rng.pick(&[
                ("image header size", image_header + 4, 4),
                ("image payload size", image_header + 8, 8),
                ("fat binary header size", fatbin_header + 6, 2),
                ("fat binary images size", fatbin_header + 8, 8),
                ("fat binary section size", target.section_header + 32, 8),
            ]);
            put(&mut lib, at, &vec![0; width]);
            (elf(lib), format!("{what} set to zero"))
        }
        5 => {
            let (what, at) = *rng.pick(&[("sh_offset", 24), ("sh_size", 32)]);
            let value = if rng.below(2) == 0 {
                *rng.pick(HUGE_U64)
            } else {
                (lib.len() - rng.below(64)) as u64
            };
            put(&mut lib, target.section_header + at, &value.to_le_bytes());
            (
                Input::Elf {
                    bytes: lib,
                    also_file: true,
                },
                format!("fat binary section's {what} set to {value:#x}"),
            )
        }
        6 => {
            if rng.below(2) == 0 {
                // The section moved onto other bytes of the file, overlapping whatever lies there.
                let offset = rng.below(lib.len()) as u64;
                let size = rng.below(lib.len() - offset as usize + 1) as u64;
                put(&mut lib, target.section_header + 24, &offset.to_le_bytes());
                put(&mut lib, target.section_header + 32, &size.to_le_bytes());
                (
                    Input::Elf {
                        bytes: lib,
                        also_file: true,
                    },
                    format!("fat binary section moved to {offset:#x}, {size:#x} bytes"),
                )
            } else {
                // An image header that swallows part of the next image or fat binary.
                let header = 64 + rng.below(4096) as u32;
                put(&mut lib, image_header + 4, &header.to_le_bytes());
                (
                    elf(lib),
                    format!("image at {image_header:#x} declares a {header}-byte header"),
                )
            }
        }
        7 => {
            // The wrappers are followed when the fat binary section has another name.
            let Some((renamed, wrappers, wrappers_header)) = &target.renamed else {
                return (
                    elf(lib),
                    "no .nv_fatbin to rename (an object): unchanged".into(),
                );
            };
            let mut lib = renamed.clone();
            if rng.below(4) == 0 {
                let (what, at) = *rng.pick(&[("sh_offset", 24), ("sh_size", 32)]);
                let value = *rng.pick(HUGE_U64);
                put(&mut lib, wrappers_header + at, &value.to_le_bytes());
                return (
                    Input::Elf {
                        bytes: lib,
                        also_file: true,
                    },
                    format!("`.nvFatBinSegment`'s {what} set to {value:#x}"),
                );
            }
            let record = wrappers.start + 24 * rng.below(wrappers.len() / 24);
            let pointer = u64_at(&lib, record + 8);
            let value = match rng.below(5) {
                4 => u64_at(&lib, wrappers.start + 8), // the first wrapper's fat binary, again
                0 => *rng.pick(HUGE_U64),
                1 => pointer + 1 + rng.below(64) as u64,
                2 => pointer.wrapping_sub(1 + rng.below(64) as u64),
                _ => rng.next(),
            };
            put(&mut lib, record + 8, &value.to_le_bytes());
            if rng.below(4) == 0 {
                put(&mut lib, record, &(rng.next() as u32).to_le_bytes());
            }
            (
                elf(lib),
                format!("wrapper at {record:#x} points at {value:#x}"),
            )
        }
        8 => {
            let at = rng.below(lib.len());
            lib.truncate(at);
            (
                Input::Elf {
                    bytes: lib,
                    also_file: true,
                },
                format!("library truncated to {at} bytes"),
            )
        }
        _ => {
            let (what, at) = *rng.pick(&[
                ("architecture", 28),
                ("flags", 40),
                ("flags high word", 44),
                ("kind", 0),
            ]);
            let value = match rng.below(3) {
                0 => rng.next() as u32,
                1 => 0x30_0000,
                _ => rng.below(12) as u32,
            };
            put(&mut lib, image_header + at, &value.to_le_bytes());
            (
                elf(lib),
                format!("image at {image_header:#x}: {what} set to {value:#x}"),
            )
        }
    }
}

fn try_rename(lib: &[u8]) -> Option<Vec<u8>> {
    let needle = b"\0.nv_fatbin\0";
    lib.windows(needle.len())
        .any(|w| w == needle)
        .then(|| rename_first(lib, needle, b"\0.nv_fatbiX\0"))
}

/// The file offset of the ELF64 section header of section `name`.
fn section_header_offset(bytes: &[u8], name: &str) -> usize {
    let file = object::File::parse(bytes).unwrap();
    let index = file.section_by_name(name).unwrap().index().0;
    u64_at(bytes, 0x28) as usize + 64 * index
}

fn section_range(bytes: &[u8], name: &str) -> Range<usize> {
    let file = object::File::parse(bytes).unwrap();
    let (offset, size) = file.section_by_name(name).unwrap().file_range().unwrap();
    offset as usize..(offset + size) as usize
}

/// What happened to one case.
enum Outcome {
    Images(Vec<DeviceImage>),
    Refused(String),
}

/// Runs `read` on its own thread: `None` on a hang, `Err` on a panic.
fn bounded<F>(read: F) -> Option<Result<Result<Vec<DeviceImage>, Error>, String>>
where
    F: FnOnce() -> Result<Vec<DeviceImage>, Error> + Send + 'static,
{
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(read));
        let _ = send.send(result.map_err(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        }));
    });
    receive.recv_timeout(CASE_LIMIT).ok()
}

#[test]
fn two_thousand_corrupted_fatbins_give_errors_naming_the_file_and_never_panic_or_hang() {
    let Some(targets) = targets() else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x00ab_1cac_4e48);
    let (mut ok, mut refused, mut panics, mut hangs, mut unnamed, mut disagree) =
        (0, 0, 0, 0, 0, 0);
    let mut slowest = Duration::ZERO;
    let mut failures = Vec::new();
    let started = Instant::now();
    for case in 0..CASES {
        let target = &targets[case as usize % targets.len()];
        let (input, what) = corrupt(target, case / targets.len() as u64, &mut rng);
        let path = PathBuf::from(format!("/fuzz/case-{case}/{}.so", target.name));
        let shown = path.display().to_string();
        let t0 = Instant::now();
        let (result, file_result) = match input {
            Input::Fatbin(bytes) => {
                let p = path.clone();
                (bounded(move || images_in_fatbin(&bytes, &p)), None)
            }
            Input::Elf { bytes, also_file } => {
                let file_result = also_file.then(|| {
                    let file = dir.path().join(format!("case-{case}.so"));
                    std::fs::write(&file, &bytes).unwrap();
                    let f = file.clone();
                    let result = bounded(move || images_in_elf(&f));
                    std::fs::remove_file(&file).unwrap();
                    (file, result)
                });
                let p = path.clone();
                (
                    bounded(move || images_in_elf_bytes(&bytes, &p)),
                    file_result,
                )
            }
        };
        slowest = slowest.max(t0.elapsed());
        let outcome = match result {
            None => {
                hangs += 1;
                failures.push(format!(
                    "case {case} ({what}): no answer within {CASE_LIMIT:?}"
                ));
                continue;
            }
            Some(Err(panic)) => {
                panics += 1;
                failures.push(format!("case {case} ({what}): panicked: {panic}"));
                continue;
            }
            Some(Ok(Ok(images))) => Outcome::Images(images),
            Some(Ok(Err(error))) => Outcome::Refused(error.to_string()),
        };
        match &outcome {
            Outcome::Images(_) => ok += 1,
            Outcome::Refused(message) => {
                refused += 1;
                if !message.contains(&format!("`{shown}`")) {
                    unnamed += 1;
                    failures.push(format!(
                        "case {case} ({what}): the error does not name the file: {message}"
                    ));
                }
            }
        }
        if let Some((file, file_result)) = file_result {
            let agrees = match (&outcome, file_result) {
                (Outcome::Images(a), Some(Ok(Ok(b)))) => *a == b,
                (Outcome::Refused(_), Some(Ok(Err(e)))) => {
                    let named = e.to_string().contains(&format!("`{}`", file.display()));
                    if !named {
                        unnamed += 1;
                    }
                    named
                }
                _ => false,
            };
            if !agrees {
                disagree += 1;
                failures.push(format!(
                    "case {case} ({what}): the file and in-memory readers disagree"
                ));
            }
        }
    }
    eprintln!(
        "{CASES} corrupted inputs in {:.1?}: {ok} read, {refused} refused with an error, \
         {panics} panics, {hangs} hangs, {unnamed} errors not naming the file, \
         {disagree} file/memory disagreements; slowest case {slowest:.1?}",
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(ok + refused, CASES);
    // The corruptions reach the reader: most are refused.
    assert!(refused > CASES / 2, "only {refused} of {CASES} refused");
}

/// Specific corruptions, each with the reason its error gives.
#[test]
fn each_kind_of_damage_has_its_own_reason() {
    let Some(targets) = targets() else { return };
    let target = &targets[0];
    let section = &target.bytes[target.section.clone()];
    let path = Path::new("/lib/ops.so");
    let fatbin_error = |bytes: &[u8]| images_in_fatbin(bytes, path).unwrap_err().to_string();
    let image = target.image_headers[0] - target.section.start;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (section[..10].to_vec(), "too few for a fat binary header"),
        (b"\x50\xed\x55\xbaXXXXXXXXXXXX".to_vec(), "declares"),
        (
            b"garbage!garbage!".to_vec(),
            "where a fat binary starts with 0xba55ed50",
        ),
        (section[..image + 20].to_vec(), "declares 0x"),
        (
            {
                let mut b = section.to_vec();
                b[image + 4..image + 8].copy_from_slice(&8u32.to_le_bytes());
                b
            },
            "shorter than the 64 bytes every image header has",
        ),
        (
            {
                let mut b = section.to_vec();
                b[image + 8..image + 16].copy_from_slice(&u64::MAX.to_le_bytes());
                b
            },
            "payload, but only",
        ),
        (
            {
                let mut b = section.to_vec();
                b[image + 28..image + 32].copy_from_slice(&7u32.to_le_bytes());
                b
            },
            "names architecture 7, which is no GPU architecture",
        ),
        (
            {
                let mut b = section.to_vec();
                b[image + 40..image + 48].copy_from_slice(&0x30_0011u64.to_le_bytes());
                b
            },
            "both arch-specific and family-specific",
        ),
    ];
    for (bytes, reason) in cases {
        let message = fatbin_error(&bytes);
        assert!(message.contains("`/lib/ops.so`"), "{message}");
        assert!(message.contains(reason), "want {reason:?} in: {message}");
        assert!(message.contains("Rebuild the library"), "{message}");
    }
    // Empty and all-zero input carry no images.
    assert_eq!(images_in_fatbin(&[], path).unwrap(), []);
    assert_eq!(images_in_fatbin(&[0; 100], path).unwrap(), []);
}

#[test]
fn files_that_are_not_elf_or_cannot_be_read_are_errors_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("libfake.so");
    std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
    let error = images_in_elf(&script).unwrap_err();
    assert!(matches!(error, Error::NotElf { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains(&format!("`{}`", script.display())),
        "{message}"
    );
    assert!(
        message.contains("starts with 23 21 2f 62 (\"#!/b\")"),
        "{message}"
    );

    let missing = dir.path().join("libmissing.so");
    let error = images_in_elf(&missing).unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error:?}");
    assert!(error
        .to_string()
        .contains(&format!("`{}`", missing.display())));

    let error = images_in_elf_bytes(b"\x7fEL", Path::new("short.so")).unwrap_err();
    assert!(matches!(error, Error::MalformedElf { .. }), "{error:?}");
    assert!(error.to_string().contains("`short.so`"), "{error}");
    assert!(
        error.to_string().contains("shorter than the ELF header"),
        "{error}"
    );

    let error = images_in_elf_bytes(b"", Path::new("empty.so")).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("`empty.so` is not an ELF file: it is empty"),
        "{error}"
    );
}

/// A second section header naming the same `.nv_fatbin` bytes is read once;
/// one naming bytes that overlap them is refused.
#[test]
fn sections_naming_the_same_bytes_are_read_once_and_overlapping_ones_refused() {
    let Some(targets) = targets() else { return };
    let target = targets
        .iter()
        .find(|t| t.name == "arch_8.0_9.0+PTX")
        .unwrap();
    let path = Path::new("/lib/ops.so");
    let want = images_in_elf_bytes(&target.bytes, path).unwrap();
    // `__nv_module_id`'s header becomes a second `.nv_fatbin` header.
    let other = section_header_offset(&target.bytes, "__nv_module_id");
    let fatbin = target.section_header;
    let mut twice = target.bytes.clone();
    twice.copy_within(fatbin..fatbin + 64, other);
    assert_eq!(images_in_elf_bytes(&twice, path).unwrap(), want);

    let mut overlapping = twice.clone();
    let shifted = u64_at(&overlapping, other + 24) + 16;
    put(&mut overlapping, other + 24, &shifted.to_le_bytes());
    let message = images_in_elf_bytes(&overlapping, path)
        .unwrap_err()
        .to_string();
    assert!(message.contains("`/lib/ops.so`"), "{message}");
    assert!(
        message.contains("overlaps section `.nv_fatbin`"),
        "{message}"
    );
}

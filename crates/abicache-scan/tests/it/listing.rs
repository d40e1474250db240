//! Directory listings in include resolution: once many names were looked up
//! in one directory it is listed once and answered from memory. The answers
//! must be exactly those of one lookup per name (files, absences, symlinks,
//! dangling symlinks, directories named like headers, odd spellings), and a
//! header created after a scan listed its directory is found by the next
//! scan, with or without the stat cache.

use std::fs;
use std::path::Path;
use std::time::Duration;

use abicache_fs::RACY_WINDOW;
use abicache_scan::{scan, scan_cached, ScanConfig, ScanReport, StatCache};
use abicache_test_support::write;

/// Headers in the big directory: far more lookups than it takes to list it.
const MANY: usize = 150;

/// Names whose lookups are unusual: their answers are compared between a
/// directory with few lookups (never listed) and one already listed.
const ODD: &[&str] = &[
    "sub.h",
    "link.h",
    "dangling.h",
    "upper.h",
    "UPPER.h",
    "absent.h",
    "h001.h/",
    "./h002.h",
    "sub.h/inner.h",
    "looped.h",
];

/// Writes `dir` with the odd entries (a directory named like a header, a
/// symlink, a dangling one, a symlink loop, an upper-case file) and, when
/// `many`, [`MANY`] plain headers, plus `s.cpp` including the plain
/// headers first (so the directory is listed before the odd names are
/// asked) and then every odd name.
fn populate(dir: &Path, many: bool) {
    fs::create_dir_all(dir.join("sub.h")).unwrap();
    write(&dir.join("sub.h/inner.h"), "int inner;\n");
    write(&dir.join("target.h"), "int target;\n");
    write(&dir.join("UPPER.h"), "int upper;\n");
    write(&dir.join("h001.h"), "int h001;\n");
    write(&dir.join("h002.h"), "int h002;\n");
    std::os::unix::fs::symlink("target.h", dir.join("link.h")).unwrap();
    std::os::unix::fs::symlink("nowhere.h", dir.join("dangling.h")).unwrap();
    std::os::unix::fs::symlink("looped.h", dir.join("looped.h")).unwrap();
    let mut source = String::new();
    if many {
        for k in 0..MANY {
            write(&dir.join(format!("p{k:03}.h")), &format!("int p{k};\n"));
            source.push_str(&format!("#include \"p{k:03}.h\"\n"));
        }
    }
    for name in ODD {
        source.push_str(&format!("#include \"{name}\"\n#include <{name}>\n"));
    }
    write(&dir.join("s.cpp"), &source);
}

/// The report's files and missing includes with the directory prefix
/// `prefix/` taken off, without the plain headers.
fn outcome(report: &ScanReport, prefix: &str) -> (Vec<String>, Vec<String>) {
    let strip = |s: &str| s.strip_prefix(prefix).unwrap_or(s).to_owned();
    let source = &report.sources[0];
    let files = source
        .files
        .iter()
        .map(|f| strip(&f.path))
        .filter(|f| !f.starts_with('p'))
        .collect();
    let missing = source.missing_includes.iter().map(|m| strip(m)).collect();
    (files, missing)
}

#[test]
fn a_listed_directory_answers_every_name_as_one_lookup_each_would() {
    let t = tempfile::tempdir().unwrap();
    let (small, big) = (t.path().join("small"), t.path().join("big"));
    populate(&small, false);
    populate(&big, true);
    let config = ScanConfig::new(t.path());
    let small_report = scan(&[small.join("s.cpp")], &config).unwrap();
    let big_report = scan(&[big.join("s.cpp")], &config).unwrap();
    let expected = outcome(&small_report, "small/");
    assert_eq!(big_report.sources[0].files.len(), MANY + expected.0.len());
    assert_eq!(outcome(&big_report, "big/"), expected);
    // What one lookup each gives, spelled out (`h001.h/` is applied
    // lexically, as every relative include is).
    assert_eq!(
        expected.0,
        [
            "s.cpp",
            "target.h",
            "UPPER.h",
            "h001.h",
            "h002.h",
            "sub.h/inner.h"
        ]
    );
    assert_eq!(
        expected.1,
        [
            "s.cpp:sub.h",
            "s.cpp:dangling.h",
            "s.cpp:upper.h",
            "s.cpp:absent.h",
            "s.cpp:looped.h"
        ]
    );
}

/// Waits until every file written so far is older than the racy window.
fn age_files() {
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
}

#[test]
fn a_header_created_in_a_listed_directory_is_found_by_the_next_scan() {
    let t = tempfile::tempdir().unwrap();
    let big = t.path().join("big");
    populate(&big, true);
    let source = big.join("s.cpp");
    let text = fs::read_to_string(&source).unwrap() + "#include \"late.h\"\n";
    write(&source, &text);
    // Through an include path too: the candidate `inc/late.h` is listed.
    let inc = t.path().join("inc");
    for k in 0..MANY {
        write(&inc.join(format!("q{k:03}.h")), "");
    }
    let text = text
        + &(0..MANY)
            .map(|k| format!("#include <q{k:03}.h>\n"))
            .collect::<String>()
        + "#include <later.h>\n";
    write(&source, &text);
    let config = ScanConfig::new(t.path()).include_path(&inc);
    let sources = [source];
    let cold = || scan(&sources, &config).unwrap();
    let has = |r: &ScanReport, name: &str| r.sources[0].files.iter().any(|f| &*f.path == name);
    age_files();
    let mut cache = StatCache::in_memory();
    for round in ["the first scan", "an unchanged tree"] {
        let cached = scan_cached(&sources, &config, &mut cache).unwrap();
        assert_eq!(cached, cold(), "{round}");
        assert!(!has(&cached, "big/late.h") && !has(&cached, "inc/later.h"));
    }
    write(&big.join("late.h"), "int late;\n");
    write(&inc.join("later.h"), "int later;\n");
    let cached = scan_cached(&sources, &config, &mut cache).unwrap();
    assert_eq!(cached, cold(), "after creating the headers");
    assert!(has(&cached, "big/late.h") && has(&cached, "inc/later.h"));
    // Remembered once old enough, then removed again.
    age_files();
    assert_eq!(scan_cached(&sources, &config, &mut cache).unwrap(), cold());
    fs::remove_file(big.join("late.h")).unwrap();
    let cached = scan_cached(&sources, &config, &mut cache).unwrap();
    assert_eq!(cached, cold(), "after removing one");
    assert!(!has(&cached, "big/late.h") && has(&cached, "inc/later.h"));
}

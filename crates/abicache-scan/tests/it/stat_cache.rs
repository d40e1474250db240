//! The stat cache (issue 12): after any edit, a scan through the cache is
//! exactly a cold scan of the same files — in-place edits of the same size,
//! edits within the same timestamp tick, replacements by rename with the old
//! mtime put back, truncations, new and deleted headers — and a warm scan of
//! unchanged files reads none of them. Real files, real clock: the tests
//! that need trusted stamps wait out the racy window once.

use std::fs::{self, File};
use std::path::PathBuf;
use std::time::Duration;

use abicache_fs::RACY_WINDOW;
use abicache_scan::{scan, scan_cached, ScanConfig, ScanReport, StatCache};
use abicache_test_support::write;

struct Project {
    dir: tempfile::TempDir,
    sources: Vec<PathBuf>,
    config: ScanConfig,
}

impl Project {
    fn new() -> Project {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path();
        write(
            &base.join("src/a.cpp"),
            "#include \"h1.h\"\n#include <lib/h2.h>\n#include \"gone.h\"\nint a;\n",
        );
        write(&base.join("src/b.cpp"), "#include \"h1.h\"\nint b;\n");
        write(&base.join("src/h1.h"), "// h1 aaaa\n#include \"h3.h\"\n");
        write(&base.join("inc/lib/h2.h"), "PyObject* two; // h2 aaaa\n");
        write(&base.join("src/h3.h"), "STABLE_TORCH_LIBRARY(x, m) {}\n");
        let sources = vec![base.join("src/a.cpp"), base.join("src/b.cpp")];
        let config = ScanConfig::new(base).include_path(base.join("inc"));
        Project {
            dir,
            sources,
            config,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    fn cold(&self) -> ScanReport {
        scan(&self.sources, &self.config).unwrap()
    }

    /// Scans through `cache` and checks the report is exactly the cold one;
    /// returns how many files were read in full.
    fn cached_equals_cold(&self, cache: &mut StatCache, what: &str) -> usize {
        let reads = cache.stats().reads;
        let warm = scan_cached(&self.sources, &self.config, cache).unwrap();
        assert_eq!(
            warm,
            self.cold(),
            "after {what}: the stat-cached scan differs"
        );
        cache.stats().reads - reads
    }
}

/// Waits until every file written so far is older than the racy window.
fn age_files() {
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
}

#[test]
fn fresh_files_are_read_every_time_and_never_remembered() {
    let p = Project::new();
    let mut cache = StatCache::in_memory();
    assert_eq!(p.cached_equals_cold(&mut cache, "a first scan"), 5);
    assert!(
        cache.is_empty(),
        "stamps inside the racy window were stored"
    );
    assert_eq!(p.cached_equals_cold(&mut cache, "a second scan"), 5);
}

#[test]
fn edits_in_the_same_tick_are_never_missed() {
    // Same length, written back to back: on a filesystem with coarse
    // timestamps both writes can carry the same mtime and ctime, and only
    // the racy rule keeps the second one from being served stale.
    let p = Project::new();
    let mut cache = StatCache::in_memory();
    for n in 0..40 {
        write(
            &p.dir.path().join("src/h1.h"),
            &format!("// h1 {n:04}\n#include \"h3.h\"\n"),
        );
        p.cached_equals_cold(&mut cache, &format!("same-tick edit {n}"));
        let text = if n % 2 == 0 {
            "PyObject* two;"
        } else {
            "int not_py_one;"
        };
        write(
            &p.dir.path().join("inc/lib/h2.h"),
            &format!("{text} // h2 {n:04}\n"),
        );
        p.cached_equals_cold(&mut cache, &format!("same-tick edit {n} of h2"));
    }
}

#[test]
fn after_every_kind_of_edit_the_cached_scan_is_the_cold_scan() {
    let p = Project::new();
    age_files();
    let mut cache = StatCache::in_memory();
    assert_eq!(p.cached_equals_cold(&mut cache, "the first scan"), 5);
    assert_eq!(cache.len(), 5, "aged files are remembered");
    assert_eq!(p.cached_equals_cold(&mut cache, "no edit"), 0);

    // In place, same size: only ctime (and mtime) move.
    write(
        &p.dir.path().join("src/h1.h"),
        "// h1 bbbb\n#include \"h3.h\"\n",
    );
    assert_eq!(p.cached_equals_cold(&mut cache, "an in-place edit"), 1);
    // Again, at once (same second, maybe the same tick): read again, since
    // the previous read was too recent to be trusted.
    write(
        &p.dir.path().join("src/h1.h"),
        "// h1 cccc\n#include \"h3.h\"\n",
    );
    assert_eq!(
        p.cached_equals_cold(&mut cache, "a second edit in the same second"),
        1
    );

    // Replaced by rename, same size, with the old mtime put back.
    let h2 = p.path("inc/lib/h2.h");
    let old_mtime = fs::metadata(&h2).unwrap().modified().unwrap();
    let tmp = p.path("inc/lib/.h2.tmp");
    fs::write(&tmp, "int py_free_two; // h2aaaa\n").unwrap();
    File::options()
        .write(true)
        .open(&tmp)
        .unwrap()
        .set_modified(old_mtime)
        .unwrap();
    fs::rename(&tmp, &h2).unwrap();
    assert_eq!(fs::metadata(&h2).unwrap().modified().unwrap(), old_mtime);
    assert!(p.cached_equals_cold(&mut cache, "a replacement by rename") >= 1);
    assert!(p.cold().python_markers.is_empty(), "the new h2 is read");

    // Truncated, then the same bytes written back.
    let h3 = p.path("src/h3.h");
    let text = fs::read_to_string(&h3).unwrap();
    File::options()
        .write(true)
        .open(&h3)
        .unwrap()
        .set_len(0)
        .unwrap();
    fs::write(&h3, &text).unwrap();
    // h3, and h1 and h2 again: their last reads were inside the racy window.
    assert_eq!(
        p.cached_equals_cold(&mut cache, "a truncate and rewrite"),
        3
    );

    // A missing header created, then a header deleted.
    write(&p.dir.path().join("src/gone.h"), "// now here\n");
    assert!(p.cached_equals_cold(&mut cache, "creating a missing header") >= 1);
    fs::remove_file(p.path("src/gone.h")).unwrap();
    p.cached_equals_cold(&mut cache, "deleting a header");

    // Touching mtime back on an in-place edit of an aged file cannot hide it either.
    age_files();
    p.cached_equals_cold(&mut cache, "re-stamping");
    let h3_mtime = fs::metadata(&h3).unwrap().modified().unwrap();
    fs::write(&h3, text.replace("x, m", "y, m")).unwrap();
    File::options()
        .write(true)
        .open(&h3)
        .unwrap()
        .set_modified(h3_mtime)
        .unwrap();
    assert_eq!(
        p.cached_equals_cold(&mut cache, "an edit with the mtime set back"),
        1
    );
}

#[test]
fn a_saved_cache_serves_the_next_process_and_a_stale_one_is_harmless() {
    let p = Project::new();
    let file = p.path("cache/scan-facts.bin");
    fs::create_dir_all(file.parent().unwrap()).unwrap();
    age_files();
    let mut first = StatCache::open(&file);
    p.cached_equals_cold(&mut first, "the first scan");
    assert!(first.save().unwrap());

    let mut second = StatCache::open(&file);
    assert_eq!(second.stats().loaded, 5);
    assert_eq!(
        p.cached_equals_cold(&mut second, "a warm scan from the file"),
        0
    );
    assert!(!second.save().unwrap(), "a warm scan changes nothing");

    // The file saved before an edit still holds the old stamp: ignored.
    write(
        &p.dir.path().join("src/h3.h"),
        "STABLE_TORCH_LIBRARY(z, m) {}\n",
    );
    let mut third = StatCache::open(&file);
    assert_eq!(
        p.cached_equals_cold(&mut third, "an edit after the save"),
        1
    );
    assert!(
        third.save().unwrap(),
        "the racy read dropped the stale entry"
    );
    assert_eq!(StatCache::open(&file).len(), 4);
}

#[test]
fn a_header_created_where_a_lookup_failed_is_found_at_once() {
    // Failed lookups are remembered by directory stamp: creating a header
    // that shadows one found later in the search order, a missing one, one
    // in a new subdirectory, or one under a system root must all be seen.
    let p = Project::new();
    let sys = p.path("sysroot");
    fs::create_dir_all(sys.join("lib")).unwrap();
    write(
        &p.dir.path().join("src/c.cpp"),
        "#include \"shadow.h\"\n#include \"sub/late.h\"\n#include <lib/sys.h>\n\
         #include \"deep/er/later.h\"\n",
    );
    write(&p.dir.path().join("inc/shadow.h"), "int from_inc;\n");
    write(&p.dir.path().join("inc/lib/sys.h"), "int local_sys;\n");
    let mut sources = p.sources.clone();
    sources.push(p.path("src/c.cpp"));
    let p = Project {
        sources,
        config: p.config.clone().system_root(&sys),
        ..p
    };
    age_files();
    let mut cache = StatCache::in_memory();
    p.cached_equals_cold(&mut cache, "the first scan");
    assert_eq!(p.cached_equals_cold(&mut cache, "no edit"), 0);

    write(&p.dir.path().join("src/shadow.h"), "int from_src;\n");
    p.cached_equals_cold(&mut cache, "a header shadowing the include path's");
    assert!(p.cold().sources[2]
        .files
        .iter()
        .any(|f| &*f.path == "src/shadow.h"));

    write(&p.dir.path().join("src/sub/late.h"), "int late;\n");
    p.cached_equals_cold(&mut cache, "a missing header created in a new directory");
    assert_eq!(
        p.cold().sources[2].missing_includes,
        ["src/c.cpp:deep/er/later.h"]
    );

    write(&p.dir.path().join("inc/deep/er/later.h"), "int later;\n");
    p.cached_equals_cold(&mut cache, "a header created two missing directories deep");
    assert!(p.cold().sources[2].missing_includes.is_empty());

    fs::write(sys.join("lib/sys.h"), "int system;\n").unwrap();
    p.cached_equals_cold(&mut cache, "a header created under a system root");
    assert!(!p.cold().sources[2]
        .files
        .iter()
        .any(|f| f.path.ends_with("sys.h")));

    // All of it again once the new files are old enough to be remembered.
    age_files();
    p.cached_equals_cold(&mut cache, "re-stamping");
    assert_eq!(p.cached_equals_cold(&mut cache, "no edit"), 0);
    fs::remove_file(p.path("src/shadow.h")).unwrap();
    p.cached_equals_cold(&mut cache, "removing the shadowing header");
    assert!(p.cold().sources[2]
        .files
        .iter()
        .any(|f| &*f.path == "inc/shadow.h"));

    // A remembered header replaced by a symlink to another one, once aged.
    age_files();
    p.cached_equals_cold(&mut cache, "re-stamping");
    write(&p.dir.path().join("inc/other.h"), "PyObject* other;\n");
    let link = p.path("inc/link.tmp");
    std::os::unix::fs::symlink(p.path("inc/other.h"), &link).unwrap();
    fs::rename(&link, p.path("inc/shadow.h")).unwrap();
    p.cached_equals_cold(&mut cache, "a header replaced by a symlink");
    assert!(p.cold().sources[2]
        .files
        .iter()
        .any(|f| &*f.path == "inc/other.h"));
}

#[test]
fn a_dangling_symlink_under_a_system_root_is_seen_once_its_target_appears() {
    // A dangling symlink is an entry, not an absence: its target can appear
    // without its directory changing, so the cache must not remember the
    // name as missing there.
    let p = Project::new();
    let sys = p.path("sysroot");
    fs::create_dir_all(sys.join("lib")).unwrap();
    std::os::unix::fs::symlink(p.path("elsewhere/dang.h"), sys.join("lib/dang.h")).unwrap();
    write(&p.dir.path().join("src/d.cpp"), "#include <lib/dang.h>\n");
    write(&p.dir.path().join("inc/lib/dang.h"), "int local_dang;\n");
    let mut sources = p.sources.clone();
    sources.push(p.path("src/d.cpp"));
    let p = Project {
        sources,
        config: p.config.clone().system_root(&sys),
        ..p
    };
    let local = |p: &Project| {
        p.cold().sources[2]
            .files
            .iter()
            .any(|f| &*f.path == "inc/lib/dang.h")
    };
    age_files();
    let mut cache = StatCache::in_memory();
    p.cached_equals_cold(&mut cache, "the first scan");
    assert_eq!(p.cached_equals_cold(&mut cache, "no edit"), 0);
    assert!(local(&p), "a dangling system header is no header");

    write(&p.dir.path().join("elsewhere/dang.h"), "int system_dang;\n");
    p.cached_equals_cold(&mut cache, "the symlink's target created");
    assert!(!local(&p), "the system header now wins");
}

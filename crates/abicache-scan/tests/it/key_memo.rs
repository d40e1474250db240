//! The key memo (issue 12): a value remembered with a scan's dependencies
//! is answered only while a cold scan would give the same report. Each edit
//! kind runs on its own copy of one project (all copies aged past the racy
//! window once): in-place edits, edits with the mtime put back, truncations,
//! rename-over, a header appearing earlier in the include path or where a
//! lookup failed, a deleted header, a repointed symlink, an include path
//! that appears, an outside directory renamed and replaced by a symlink to
//! itself. After each, the memo either misses or answers the cold scan's
//! value; and changes that cannot matter (a new file next to the root, in
//! an ancestor directory) keep it answering. Real files, real clock.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use abicache_fs::RACY_WINDOW;
use abicache_scan::{
    scan, scan_learning, scan_recorded, KeyMemo, ScanConfig, ScanReport, StatCache,
};
use abicache_test_support::write;

/// A project under `base/project` with headers from `base/outside/x/inc`
/// (outside the fingerprint root, so named by absolute canonical path), an
/// empty first include path `inc0`, a missing one `late`, and a symlinked
/// header `src/link.h -> ../alt/one.h`.
struct Tree {
    base: PathBuf,
    sources: Vec<PathBuf>,
    config: ScanConfig,
}

impl Tree {
    fn new(base: PathBuf) -> Tree {
        let p = base.join("project");
        write(
            &p.join("src/a.cpp"),
            "#include \"h1.h\"\n#include <lib/h2.h>\n#include \"gone.h\"\n\
             #include \"link.h\"\n#include \"late.h\"\n#include \"deep/er/nested.h\"\n\
             #include \"gone_dir/../h3.h\"\nint a;\n",
        );
        write(&p.join("src/h1.h"), "// h1 aaaa\n#include \"h3.h\"\n");
        write(&p.join("src/h3.h"), "STABLE_TORCH_LIBRARY(x, m) {}\n");
        write(&p.join("alt/one.h"), "int one;\n");
        write(&p.join("alt/two.h"), "PyObject* two;\n");
        symlink("../alt/one.h", p.join("src/link.h")).unwrap();
        fs::create_dir_all(p.join("inc0")).unwrap();
        write(&base.join("outside/x/inc/lib/h2.h"), "int h2; // aaaa\n");
        let config = ScanConfig::new(&p)
            .include_path(p.join("inc0"))
            .include_path(base.join("outside/x/inc"))
            .include_path(p.join("late"));
        Tree {
            sources: vec![p.join("src/a.cpp")],
            base,
            config,
        }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    fn cold(&self) -> ScanReport {
        scan(&self.sources, &self.config).unwrap()
    }
}

/// What a caller would derive from a report (the key, in the façade).
fn value(report: &ScanReport) -> String {
    blake3::hash(format!("{report:?}").as_bytes())
        .to_hex()
        .to_string()
}

const INPUTS: [u8; 32] = [7; 32];

/// Replaces `path` by a new file (another inode) with `content`, by rename.
fn rename_over(path: &Path, content: &str) {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, content).unwrap();
    fs::rename(&tmp, path).unwrap();
}

type Edit = fn(&Tree);

/// Edits after which a cold scan differs: the memo must miss.
const CHANGING: &[(&str, Edit)] = &[
    ("an in-place edit of the same size, same tick", |t| {
        fs::write(
            t.path("project/src/h3.h"),
            "STABLE_TORCH_LIBRARY(y, m) {}\n",
        )
        .unwrap();
    }),
    ("an edit with the old mtime put back", |t| {
        let path = t.path("project/src/h1.h");
        let old = fs::metadata(&path).unwrap().modified().unwrap();
        fs::write(&path, "// h1 bbbb\n#include \"h3.h\"\n").unwrap();
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
    }),
    ("a truncation", |t| {
        fs::File::options()
            .write(true)
            .open(t.path("project/src/h1.h"))
            .unwrap()
            .set_len(4)
            .unwrap();
    }),
    ("a rename-over with new content", |t| {
        rename_over(&t.path("project/src/h3.h"), "int h3_new;\n");
    }),
    ("a header appearing earlier in the include path", |t| {
        write(&t.path("project/inc0/lib/h2.h"), "int shadow;\n");
    }),
    ("a deleted header", |t| {
        fs::remove_file(t.path("project/src/h3.h")).unwrap();
    }),
    ("a header created where a lookup failed", |t| {
        write(&t.path("project/src/gone.h"), "int found;\n");
    }),
    ("a symlinked header repointed", |t| {
        let link = t.path("project/src/link.h");
        fs::remove_file(&link).unwrap();
        symlink("../alt/two.h", &link).unwrap();
    }),
    ("the target of a symlinked header edited", |t| {
        fs::write(t.path("project/alt/one.h"), "int uno;\n").unwrap();
    }),
    (
        "a header created in a new subtree where a whole directory was missing",
        |t| {
            write(&t.path("project/inc0/deep/er/nested.h"), "int nested;\n");
        },
    ),
    ("a directory created on a `dir/..` include's path", |t| {
        fs::create_dir_all(t.path("project/src/gone_dir")).unwrap();
    }),
    ("an include path that appears", |t| {
        write(&t.path("project/late/late.h"), "int late;\n");
    }),
    (
        "an outside directory renamed and replaced by a symlink to it",
        |t| {
            fs::rename(t.path("outside/x"), t.path("outside/y")).unwrap();
            symlink("y", t.path("outside/x")).unwrap();
        },
    ),
    ("an outside header edited", |t| {
        fs::write(t.path("outside/x/inc/lib/h2.h"), "int h2; // bbbb\n").unwrap();
    }),
];

/// Edits a cold scan cannot see: the memo keeps answering.
const NEUTRAL: &[(&str, Edit)] = &[
    (
        "a new file next to the fingerprint root's sources' directory",
        |t| {
            write(&t.path("project/README"), "notes\n");
        },
    ),
    (
        "a new file in an ancestor of an outside include path",
        |t| {
            write(&t.path("outside/notes.txt"), "notes\n");
        },
    ),
    ("an unrelated file edited", |t| {
        fs::write(t.path("project/alt/two.h"), "int two_b;\n").unwrap();
    }),
];

#[test]
fn the_memo_answers_only_what_a_cold_scan_gives_after_every_kind_of_edit() {
    let dir = tempfile::tempdir().unwrap();
    let edits: Vec<(&str, Edit, bool)> = CHANGING
        .iter()
        .map(|&(what, edit)| (what, edit, true))
        .chain(NEUTRAL.iter().map(|&(what, edit)| (what, edit, false)))
        .collect();
    let trees: Vec<Tree> = (0..edits.len())
        .map(|k| Tree::new(dir.path().join(format!("t{k}"))))
        .collect();
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
    for ((what, edit, changes), tree) in edits.into_iter().zip(&trees) {
        let mut cache = StatCache::in_memory();
        let (report, deps) = scan_recorded(&tree.sources, &tree.config, &mut cache).unwrap();
        assert_eq!(
            report,
            tree.cold(),
            "{what}: the recorded scan is the cold scan"
        );
        let deps = deps.unwrap_or_else(|| panic!("{what}: aged files are trusted"));
        let memo = KeyMemo::new(tree.path("memo"));
        memo.put(&INPUTS, &value(&report), &deps).unwrap();
        assert_eq!(memo.get(&INPUTS), Some(value(&report)), "{what}: before");
        edit(tree);
        let cold = tree.cold();
        assert_eq!(
            cold != report,
            changes,
            "{what}: the edit changes the report"
        );
        match memo.get(&INPUTS) {
            Some(answer) => {
                assert!(!changes, "{what}: the memo answered a stale value");
                assert_eq!(answer, value(&cold), "{what}");
            }
            None => assert!(changes, "{what}: a needless miss"),
        }
    }
}

/// What a scan learnt may be stored later, on another thread (the façade
/// writes it after the key is known): an edit between the scan and the
/// storing must never leave dependencies that still hold, since they
/// would answer the pre-edit report.
#[test]
fn what_a_scan_learnt_stored_after_an_edit_never_answers_the_old_report() {
    let dir = tempfile::tempdir().unwrap();
    let trees: Vec<Tree> = (0..CHANGING.len())
        .map(|k| Tree::new(dir.path().join(format!("t{k}"))))
        .collect();
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
    for (&(what, edit), tree) in CHANGING.iter().zip(&trees) {
        let mut cache = StatCache::in_memory();
        let (report, learnt) = scan_learning(&tree.sources, &tree.config, &cache).unwrap();
        edit(tree);
        assert_ne!(report, tree.cold(), "{what}: the edit changes the report");
        if let Some(deps) = learnt.into_cache(&mut cache) {
            assert!(!deps.unchanged(), "{what}: stale dependencies hold");
        }
        // Once stored, the cache still gives the cold scan's report.
        let again = scan_recorded(&tree.sources, &tree.config, &mut cache)
            .unwrap()
            .0;
        assert_eq!(again, tree.cold(), "{what}: the stat cache after the edit");
    }
}

#[test]
fn a_scan_of_fresh_files_records_nothing_and_a_foreign_memo_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let tree = Tree::new(dir.path().join("t"));
    let mut cache = StatCache::in_memory();
    let (report, deps) = scan_recorded(&tree.sources, &tree.config, &mut cache).unwrap();
    assert_eq!(report, tree.cold());
    assert!(
        deps.is_none(),
        "files written within the racy window cannot be remembered"
    );
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
    let (_, deps) = scan_recorded(&tree.sources, &tree.config, &mut cache).unwrap();
    let deps = deps.expect("trusted once aged");
    // Every file read, every directory looked in, and the outside ancestors.
    let paths: Vec<&Path> = deps.iter().map(|(p, _)| p).collect();
    for must in [
        "project/src/h3.h",
        "project/inc0",
        "project/late",
        "outside/x/inc/lib",
        "outside",
    ] {
        let must = tree.path(must).canonicalize().unwrap_or(tree.path(must));
        assert!(
            paths.contains(&must.as_path()),
            "`{}` recorded",
            must.display()
        );
    }
    let memo = KeyMemo::new(tree.path("memo"));
    memo.put(&INPUTS, "v", &deps).unwrap();
    assert_eq!(memo.get(&INPUTS).as_deref(), Some("v"));
    assert_eq!(memo.get(&[8; 32]), None, "another input digest");
    // A damaged memo file is a miss, never an error.
    let file = fs::read_dir(tree.path("memo"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = fs::read(&file).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs::write(&file, &bytes).unwrap();
    assert_eq!(memo.get(&INPUTS), None);
}

#[test]
fn gc_removes_memos_that_cannot_answer_and_keeps_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let kept = Tree::new(dir.path().join("kept"));
    let edited = Tree::new(dir.path().join("edited"));
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));
    let memo = KeyMemo::new(dir.path().join("memo"));
    for (tree, inputs) in [(&kept, [1u8; 32]), (&edited, [2u8; 32])] {
        let mut cache = StatCache::in_memory();
        let (report, deps) = scan_recorded(&tree.sources, &tree.config, &mut cache).unwrap();
        memo.put(&inputs, &value(&report), &deps.unwrap()).unwrap();
    }
    fs::write(edited.path("project/src/h3.h"), "// edited\n").unwrap();
    fs::write(dir.path().join("memo/not-a-memo"), b"garbage").unwrap();
    let damaged = dir.path().join("memo").join("03".repeat(32));
    fs::write(&damaged, [0u8; 40]).unwrap();

    assert_eq!(
        memo.remove_stale(Duration::from_secs(3600)),
        0,
        "all recent"
    );
    assert_eq!(
        memo.remove_stale(Duration::ZERO),
        3,
        "stale, garbage, damaged"
    );
    assert_eq!(
        memo.get(&[1; 32]),
        Some(value(&kept.cold())),
        "the memo that still answers is kept"
    );
    let left: Vec<_> = fs::read_dir(dir.path().join("memo")).unwrap().collect();
    assert_eq!(left.len(), 1);
}

/// A scan of many files works its dependencies out on a second thread
/// while the cache is filled and saved, and a warm check of many
/// dependencies `stat`s them on two: both results are whole, and the
/// dependencies notice an edit to a file in either half of them.
#[test]
fn a_big_scans_dependencies_worked_out_and_checked_beside_are_whole() {
    const HEADERS: usize = 300;
    let dir = tempfile::tempdir().unwrap();
    // One project per edit: a header early in the (path-ordered) checks, one late.
    let edits = ["inc/h005.h", "inc/h287.h"];
    let roots: Vec<PathBuf> = (0..edits.len())
        .map(|k| dir.path().join(format!("p{k}")))
        .collect();
    for root in &roots {
        let includes: String = (0..HEADERS)
            .map(|k| format!("#include \"inc/h{k:03}.h\"\n"))
            .collect();
        write(&root.join("a.cpp"), &includes);
        for k in 0..HEADERS {
            write(
                &root.join(format!("inc/h{k:03}.h")),
                &format!("int h{k};\n"),
            );
        }
    }
    std::thread::sleep(RACY_WINDOW + Duration::from_millis(100));

    for (root, edited) in roots.iter().zip(edits) {
        let (sources, config) = (vec![root.join("a.cpp")], ScanConfig::new(root));
        let facts = root.with_extension("facts.bin");
        let mut cache = StatCache::open(&facts);
        let (report, learnt) = scan_learning(&sources, &config, &cache).unwrap();
        let (deps, saved) = learnt.into_cache_then(&mut cache, StatCache::save);
        assert!(saved.unwrap(), "the filled cache is saved");
        let deps = deps.expect("every file was trusted");
        assert!(deps.len() > HEADERS, "one check per file at least");
        assert!(deps.unchanged());
        assert_eq!(report, scan(&sources, &config).unwrap());

        // The saved cache holds every file: the next scan reads none.
        let mut reopened = StatCache::open(&facts);
        assert_eq!(reopened.len(), HEADERS + 1);
        let (again, _) = scan_recorded(&sources, &config, &mut reopened).unwrap();
        assert_eq!(again, report);
        assert_eq!(reopened.stats().reads, 0);

        write(&root.join(edited), "int edited;\n");
        assert!(!deps.unchanged(), "{edited} was edited");
    }
}

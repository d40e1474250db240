//! Regressions of the scanner, each named after what broke. One changes the
//! process's current directory, in a process of its own
//! (`abicache_test_support::alone_in_process`).

use std::path::PathBuf;

use abicache_scan::{scan, ScanConfig};

/// `abicache scan m.cpp` (a bare file name, as typed in the source's own
/// directory) looked for `#include "a.h"` in the empty path and reported it
/// missing; `./m.cpp` found it.
#[test]
fn bare_source_name_resolves_includes_next_to_it() {
    if !abicache_test_support::alone_in_process(
        "regression::bare_source_name_resolves_includes_next_to_it",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.cpp"), "#include \"a.h\"\n").unwrap();
    std::fs::write(dir.path().join("a.h"), "int a();\n").unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    let report = scan(&[PathBuf::from("m.cpp")], &ScanConfig::new(".")).unwrap();
    let files: Vec<&str> = report.sources[0].files.iter().map(|f| &*f.path).collect();
    assert_eq!(files, ["m.cpp", "a.h"]);
    assert!(
        report.sources[0].missing_includes.is_empty(),
        "{:?}",
        report.sources[0].missing_includes
    );
}

/// A tree whose headers include `"../dNN/h.h"` made the resolver's directory
/// paths grow along the chain (`d00/../d01/../d02/…`), so no cache ever hit
/// and one key cost ~150 000 `readlink` calls (23× the raw read+hash floor on
/// the generated 3000-header benchmark tree). Directories are now held
/// canonically and leading `..` applied lexically.
#[test]
fn parent_relative_include_chain_resolves_through_short_canonical_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path();
    const DEPTH: usize = 60;
    for k in 0..DEPTH {
        let d = base.join(format!("d{k:02}"));
        std::fs::create_dir(&d).unwrap();
        let body = if k + 1 < DEPTH {
            format!("#include \"../d{:02}/h.h\"\n", k + 1)
        } else {
            String::new()
        };
        std::fs::write(d.join("h.h"), body).unwrap();
    }
    std::fs::write(base.join("m.cpp"), "#include \"d00/h.h\"\n").unwrap();
    let report = scan(&[base.join("m.cpp")], &ScanConfig::new(base)).unwrap();
    let files: Vec<&str> = report.sources[0].files.iter().map(|f| &*f.path).collect();
    assert_eq!(files.len(), DEPTH + 1);
    assert_eq!(files[1], "d00/h.h");
    assert_eq!(files[DEPTH], format!("d{:02}/h.h", DEPTH - 1));
    let mut resolver = abicache_scan::Resolver::new(vec![], vec![]);
    let d05 = resolver.dir(&base.join("d05"));
    let abicache_scan::Resolution::Local { dir, .. } =
        resolver.resolve(d05, "../d06/h.h", abicache_scan::IncludeKind::Quoted)
    else {
        panic!("../d06/h.h not found from d05");
    };
    let found_in = resolver.dir_path(dir);
    assert_eq!(
        found_in,
        std::fs::canonicalize(base.join("d06")).unwrap(),
        "no `..` left in {found_in:?}"
    );
}

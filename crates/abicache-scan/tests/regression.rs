//! Regressions of the scanner, each named after what broke. Kept in their own
//! test binary because they change the process's current directory.

use std::path::PathBuf;

use abicache_scan::{scan, ScanConfig};

/// `abicache scan m.cpp` (a bare file name, as typed in the source's own
/// directory) looked for `#include "a.h"` in the empty path and reported it
/// missing; `./m.cpp` found it.
#[test]
fn bare_source_name_resolves_includes_next_to_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("m.cpp"), "#include \"a.h\"\n").unwrap();
    std::fs::write(dir.path().join("a.h"), "int a();\n").unwrap();
    std::env::set_current_dir(dir.path()).unwrap();
    let report = scan(&[PathBuf::from("m.cpp")], &ScanConfig::new(".")).unwrap();
    let files: Vec<&str> = report.sources[0].files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(files, ["m.cpp", "a.h"]);
    assert!(report.sources[0].missing_includes.is_empty(), "{:?}", report.sources[0].missing_includes);
}

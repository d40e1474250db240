//! Issue 11, finding 1: a corrupt object in the object cache (emptied, one
//! byte flipped, truncated) used to be linked as is, or to fail every build
//! with `ld: file too short`. Now every reused object is verified first; a
//! bad one is discarded with a warning and compiled again, and the library
//! has what the source defines. Real compiles (a plain C++ unit, fast) and
//! real links against the venv's torch.

use std::path::{Path, PathBuf};
use std::process::Command;

use abicache_build::{build, BuildOptions, BuildPlan, Toolchain, ToolchainEnv, Unit};

fn torch_dir() -> Option<PathBuf> {
    let lib = abicache_test_support::repo_root().join(".venv/lib");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(lib)
        .ok()?
        .flatten()
        .map(|e| e.path().join("site-packages/torch"))
        .filter(|p| p.join("lib").is_dir())
        .collect();
    dirs.sort();
    dirs.pop()
}

/// Damages the object at the path, given its good bytes.
type Damage = fn(&Path, &[u8]);

const UNIT: &str = r#"
extern "C" int abicache_object_probe(int x) { return 3 * x + 1; }
extern "C" int abicache_object_other(int x) { return x - 7; }
"#;

/// The dynamic symbols `library` defines.
fn defined_symbols(library: &Path) -> String {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(library)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The cached objects (not records, not temporaries).
fn objects(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.ends_with(".o") && !name.starts_with('.')
        })
        .collect()
}

#[test]
fn a_corrupt_cached_object_is_recompiled_with_a_warning_never_linked() {
    let Some(torch) = torch_dir() else {
        return abicache_test_support::skip("no venv with torch; run scripts/setup-venv.sh");
    };
    let t = tempfile::tempdir().unwrap();
    let source = t.path().join("probe.cpp");
    std::fs::write(&source, UNIT).unwrap();
    let plan = BuildPlan {
        name: "abicache_object_probe".into(),
        sources: vec![Unit {
            source: source.clone(),
            files: vec![("probe.cpp".into(), "h".into())],
            uses_extension_name: false,
        }],
        cxx11_abi: true,
        torch_dir: torch,
        abi_fields: "python_abi=agnostic\n".into(),
        ..Default::default()
    };
    let tc = Toolchain::discover(&ToolchainEnv::from_process(), &[], false).unwrap();
    let cache = t.path().join("objects");
    let opts = BuildOptions {
        jobs: Some(1),
        ..Default::default()
    };
    let run = |out: &str| build(&plan, &tc, &cache, &t.path().join(out), &opts, &|_| {}).unwrap();

    let first = run("out0");
    assert_eq!(first.units_compiled.len(), 1);
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);
    let [object] = objects(&cache).try_into().unwrap();
    let good = std::fs::read(&object).unwrap();
    let second = run("out1");
    assert_eq!((second.units_cached, second.units_compiled.len()), (1, 0));

    let damages: [(&str, Damage); 3] = [
        ("emptied", |p, _| std::fs::write(p, b"").unwrap()),
        ("flipped", |p, good| {
            let mut bytes = good.to_vec();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x40;
            std::fs::write(p, bytes).unwrap();
        }),
        ("truncated", |p, good| {
            std::fs::write(p, &good[..good.len() / 3]).unwrap()
        }),
    ];
    for (i, (what, damage)) in damages.into_iter().enumerate() {
        damage(&object, &good);
        let report = run(&format!("damaged{i}"));
        assert_eq!(
            (report.units_cached, report.units_compiled.len()),
            (0, 1),
            "{what} object was reused"
        );
        assert_eq!(report.warnings.len(), 1, "{what}: {:?}", report.warnings);
        assert!(
            report.warnings[0].contains("is corrupt") && report.warnings[0].contains(".o"),
            "{what}: {}",
            report.warnings[0]
        );
        let symbols = defined_symbols(&report.library);
        assert!(
            symbols.contains("abicache_object_probe") && symbols.contains("abicache_object_other"),
            "{what}: the library lacks the unit's functions:\n{symbols}"
        );
        assert_eq!(
            std::fs::read(&object).unwrap(),
            good,
            "{what}: not recompiled"
        );
        // And the recompiled object is trusted again.
        let again = run(&format!("again{i}"));
        assert_eq!(again.units_cached, 1, "{what}");
        assert!(again.warnings.is_empty());
    }
}

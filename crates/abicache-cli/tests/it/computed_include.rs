//! Issue 9, tried as a new user would: a local header reached only through
//! a computed include (`#define PICK(x) <hidden/x.h>` / `#include PICK(value)`)
//! is part of the key, so editing it rebuilds and the new code is loaded,
//! never the stale library. Real compiler, real torch, real load.
//!
//! The torch unit (`ops.cpp`) compiles once; the unit that reaches the
//! hidden header is plain C++, so the rebuild after the edit is cheap.

use crate::common;

use std::fs;

use common::*;

const CALL_PICKED: &str = r#"
import sys, torch
torch.ops.load_library(sys.argv[1])
print(torch.ops.pick_ext.picked())
"#;

#[test]
fn editing_a_header_reached_only_through_a_computed_include_serves_the_new_code() {
    let cache = Cache::new();
    let python = python();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let write = |rel: &str, text: &str| {
        let path = dir.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    };
    write(
        "abicache.toml",
        "[[extension]]\nname = \"pick_ext\"\nsources = [\"ops.cpp\", \"value.cpp\"]\n\
         extra_include_paths = [\"inc\"]\nrequired_ops = [\"picked\"]\n",
    );
    write(
        "ops.cpp",
        "#include <torch/library.h>\nextern \"C\" int picked_value();\n\
         int64_t picked() { return picked_value(); }\n\
         TORCH_LIBRARY(pick_ext, m) { m.def(\"picked\", &picked); }\n",
    );
    write("pick.h", "#pragma once\n#define PICK(x) <hidden/x.h>\n");
    write(
        "value.cpp",
        "#include \"pick.h\"\n#include PICK(value)\nextern \"C\" int picked_value() { return VALUE; }\n",
    );
    write("inc/hidden/value.h", "#define VALUE 1\n");
    let spec = dir.join("abicache.toml");

    let first = cache.build(&spec, &python, &[]);
    let library = std::path::PathBuf::from(first["path"].as_str().unwrap());
    assert_eq!(python_run(&python, CALL_PICKED, &library), "1");
    let key = cache.json(args!["key", spec, "--python", python, "--json"]);
    let payload = strings(&key["payload"]);
    assert!(
        payload.iter().any(|l| l.ends_with(" inc/hidden/value.h")),
        "the hidden header is hashed: {payload:?}"
    );
    assert!(
        !payload.iter().any(|l| l.starts_with("computed_include=")),
        "a resolved computed include is not conservative: {payload:?}"
    );
    assert_eq!(key["python_abi"], "agnostic", "{key}");

    write("inc/hidden/value.h", "#define VALUE 2\n");
    let second = cache.build(&spec, &python, &[]);
    assert_eq!(second["hit"], false, "{second}");
    assert_ne!(second["key"], first["key"]);
    assert_eq!(strings(&second["compiled"]), ["value.cpp"], "{second}");
    let library = std::path::PathBuf::from(second["path"].as_str().unwrap());
    assert_eq!(python_run(&python, CALL_PICKED, &library), "2");
}

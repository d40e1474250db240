//! Precompiled umbrella headers: which units can use one, the key of one, how it is
//! built (in the background, never in a build's way) and how a unit is compiled against it.
//!
//! A host unit whose *first directive* is `#include <H>` for an umbrella header `H` (with
//! only whitespace and comments before it) is compiled with
//! `-include <dir>/abicache-pch.h -Winvalid-pch`, where `<dir>` holds
//! `abicache-pch.h.gch`, GCC's precompiled form of `#include <H>`, and `abicache-pch.h`
//! itself is only `#error`. GCC reads the `.gch` when it is valid for the command and falls
//! back to the header otherwise, silently unless `-Winvalid-pch`; the `#error` turns that
//! silent fallback into a failure that [`crate::build`] sees, so it recompiles the unit
//! without the PCH and reports the PCH as rejected. A unit is therefore never compiled
//! against a PCH GCC did not accept, and never compiled differently because of one: the
//! object key is the same with and without it (GCC produces the same object).
//!
//! The PCH is built with the unit's host flags minus `-DTORCH_EXTENSION_NAME=` (GCC
//! accepts a unit that defines a macro the PCH never saw, so one PCH serves every
//! extension; torch's own PCH is keyed by the whole command and is rebuilt for each
//! extension name). Its key ([`PchRequest::key`]) covers the compiler's path and version,
//! those flags, the header and the plan's ABI fields; the files it was built from are
//! recorded ([`parse_depfile`]) so the store can refuse a PCH whose headers changed.
//!
//! Only host units: nvcc runs the host compiler as `gcc -E` (where GCC reads no PCH) and
//! then on cudafe++'s fully preprocessed output, where a PCH cannot apply; measured, the
//! parts a PCH could touch at all are none of a `.cu` unit's time (`benches/README.md`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Serialize;

use crate::flags::{host_flags, unit_kind, BuildPlan, UnitKind};
use crate::quote::{shell_join, shell_quote};
use crate::toolchain::Toolchain;

/// Bump when a PCH key's inputs or the PCH directory's layout change.
pub const PCH_KEY_FORMAT: u32 = 1;

/// Umbrella headers worth a PCH by default: each costs seconds to parse in every unit.
/// `torch/library.h` is lighter but still pays: a registration unit starting with it took
/// 8.3 s of CPU without and 3.3 s with its PCH (249 MiB, 16.5 s to build; see
/// `benches/README.md`).
pub const DEFAULT_UMBRELLA_HEADERS: &[&str] = &[
    "torch/extension.h",
    "torch/all.h",
    "ATen/ATen.h",
    "torch/library.h",
];

/// The header named by `-include`; inside a published PCH directory it is only `#error`.
pub const PCH_HEADER: &str = "abicache-pch.h";
/// GCC's precompiled form of [`PCH_HEADER`], next to it.
pub const PCH_FILE: &str = "abicache-pch.h.gch";
/// The dependency list (make syntax) written while building the PCH.
pub const PCH_DEPFILE: &str = "abicache-pch.d";
/// The compiler's output of the PCH build.
pub const PCH_LOG: &str = "abicache-pch.log";

/// The text of [`PCH_HEADER`] in a published PCH directory: reached only when GCC
/// rejects the `.gch`, and then it stops the compile with this message.
pub const PCH_STUB: &str =
    "#error \"abicache: precompiled header not used (see the -Winvalid-pch warning above)\"\n";

/// The marker [`PCH_STUB`] leaves in a compiler's output.
pub(crate) const PCH_REJECTED_MARKER: &str = "abicache: precompiled header not used";

/// One PCH a plan can use: for which header, built how, used by which units.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PchRequest {
    /// BLAKE3 hex of the PCH's inputs (see the module docs).
    pub key: String,
    /// The umbrella header, as included (`torch/extension.h`).
    pub header: String,
    /// The compiler.
    pub compiler: PathBuf,
    /// The flags of the PCH compile (the host flags without `-DTORCH_EXTENSION_NAME=`).
    pub flags: Vec<String>,
    /// Flags that only rewrite recorded paths (`-ffile-prefix-map`).
    pub unkeyed_flags: Vec<String>,
    /// The directory the compiler runs in (the plan's root, for its relative `-I`s).
    pub dir: PathBuf,
    /// Display paths of the plan's units that would use it.
    pub units: Vec<String>,
}

impl PchRequest {
    /// The argv that compiles `#include <header>` in `<out_dir>/abicache-pch.h` into
    /// `<out_dir>/abicache-pch.h.gch`, writing the dependency list next to it.
    pub fn argv(&self, out_dir: &Path) -> Vec<String> {
        let mut argv = vec![self.compiler.display().to_string()];
        argv.extend(self.flags.iter().cloned());
        argv.extend(self.unkeyed_flags.iter().cloned());
        argv.extend(["-x".into(), "c++-header".into()]);
        argv.push(out_dir.join(PCH_HEADER).display().to_string());
        argv.extend(["-o".into(), out_dir.join(PCH_FILE).display().to_string()]);
        argv.extend(["-MD".into(), "-MF".into()]);
        argv.push(out_dir.join(PCH_DEPFILE).display().to_string());
        argv
    }

    /// Writes the wrapper header into `out_dir` and compiles it there, waiting for the
    /// compiler; then replaces the wrapper by [`PCH_STUB`]. Used by tests and by callers
    /// that want a PCH now; builds use [`spawn_background_build`].
    pub fn build_now(&self, out_dir: &Path) -> std::io::Result<std::process::Output> {
        fs_err::create_dir_all(out_dir)?;
        fs_err::write(out_dir.join(PCH_HEADER), self.wrapper_text())?;
        let argv = self.argv(out_dir);
        let out = crate::run::without_secrets(&mut Command::new(&argv[0]))
            .args(&argv[1..])
            .current_dir(&self.dir)
            .output()?;
        if out.status.success() {
            fs_err::write(out_dir.join(PCH_HEADER), PCH_STUB)?;
        }
        Ok(out)
    }

    fn wrapper_text(&self) -> String {
        format!("#include <{}>\n", self.header)
    }
}

/// Where a background PCH build works and what it produces, as the store lays it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PchSlot {
    /// The PCH's own lock, held by the build while it runs (an OS lock, released when it
    /// dies; passed to [`spawn_background_build`] already locked).
    pub lock: PathBuf,
    /// A private directory to build in (created by the build, on the final directory's
    /// filesystem).
    pub temp_dir: PathBuf,
    /// Where the finished directory is renamed to (without its manifest; the store adds
    /// it when it first adopts the PCH).
    pub built_dir: PathBuf,
    /// Where a failed build's directory (with the compiler's log) is renamed to, so the
    /// same PCH is not attempted again until it is removed.
    pub failed_dir: PathBuf,
    /// How long the compile may run ([`PCH_BUILD_DEADLINE`] by default); past it the
    /// compiler is killed and the build counts as failed, its log saying so.
    pub deadline: std::time::Duration,
}

/// The default [`PchSlot::deadline`]: a PCH of `torch/extension.h` takes 15-40 s to
/// build, so a compile still running after this long is stuck (or swapping), not slow.
pub const PCH_BUILD_DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);

/// Starts building `request`'s PCH in a detached, low-priority process group
/// (`sh -c ...`, the compile under `nice`), and returns at once. `held` are the locked
/// files the caller acquired for this build (the PCH's own lock, the cache's and a machine
/// slot: `abicache_store::PchPermit`): the builder inherits them (as its standard streams,
/// moved at once to descriptors 3-5) and so do its children, so the locks stay held until
/// the last of them exits, and are released by the kernel when they die. A builder that
/// finds the PCH (or its failure) already published exits without doing anything. The
/// compile runs under `timeout` ([`PchSlot::deadline`], then `SIGKILL` 10 s later). It
/// writes only into [`PchSlot::temp_dir`]; the finished directory is published with
/// `mv -T` (a `rename(2)` that cannot nest), so a build killed at any point leaves no
/// half-written PCH (only a temporary directory, which the store removes as stale); a
/// builder that finds the name taken removes its own directory. The process outlives the
/// caller; its output goes to [`PCH_LOG`] in the directory it produces.
pub fn spawn_background_build(
    request: &PchRequest,
    slot: &PchSlot,
    held: [std::fs::File; 3],
) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    let tmp = &slot.temp_dir;
    let q = |p: &Path| shell_quote(&p.display().to_string());
    let deadline = slot.deadline.as_secs().max(1);
    // Under the lock: nothing to do when the PCH (or its failure) was published
    // meanwhile. `mv -T` renames onto a name that must not be a non-empty directory,
    // so a loser removes its own directory instead of nesting it in the winner's.
    let script = format!(
        "exec 3<&0 4>&1 5>&2 </dev/null >/dev/null 2>&1\n\
         if test -e {built} || test -e {failed}; then exit 0; fi\n\
         mkdir -p {tmp_q} && printf '%s\\n' {wrapper} > {header} && cd {dir} || exit 1\n\
         timeout -k 10 {deadline} nice -n 10 {compile} > {log} 2>&1\n\
         status=$?\n\
         if test $status -eq 0; then\n\
         printf '%s\\n' {stub} > {tmp_q}/stub && mv {tmp_q}/stub {header} && \
         mv -T {tmp_q} {built} 2>/dev/null || rm -rf {tmp_q}\n\
         else\n\
         if test $status -eq 124 || test $status -eq 137; then echo {timed_out} >> {log}; fi\n\
         mv -T {tmp_q} {failed} 2>/dev/null || rm -rf {tmp_q}\n\
         fi\n",
        timed_out = shell_quote(&format!(
            "abicache: the precompiled header build ran past its deadline of {deadline} s \
             and was killed"
        )),
        tmp_q = q(tmp),
        wrapper = shell_quote(request.wrapper_text().trim_end()),
        header = q(&tmp.join(PCH_HEADER)),
        dir = q(&request.dir),
        compile = shell_join(request.argv(tmp)),
        log = q(&tmp.join(PCH_LOG)),
        stub = shell_quote(PCH_STUB.trim_end()),
        built = q(&slot.built_dir),
        failed = q(&slot.failed_dir),
    );
    let [own, cache, machine] = held;
    let mut child = crate::run::without_secrets(&mut Command::new("sh"))
        .args(["-c", &script])
        .stdin(Stdio::from(own))
        .stdout(Stdio::from(cache))
        .stderr(Stdio::from(machine))
        .process_group(0)
        .spawn()?;
    // Reap it when it ends, if this process is still alive then (no zombie in a
    // long-running Python process); the build itself does not depend on this thread.
    std::thread::spawn(move || {
        let _ = child.wait();
    });
    Ok(())
}

/// The PCHs `plan`'s host units could use: one request per umbrella header (of
/// `umbrellas`) that is the first directive of at least one unit. A source that cannot be
/// read simply asks for none (the compile reports it).
pub fn pch_requests(
    plan: &BuildPlan,
    toolchain: &Toolchain,
    umbrellas: &[String],
) -> Vec<PchRequest> {
    let mut requests: Vec<PchRequest> = Vec::new();
    for unit in &plan.sources {
        let Some(header) = umbrella_of(&unit.source, umbrellas) else {
            continue;
        };
        if let Some(existing) = requests.iter_mut().find(|r| r.header == header) {
            existing.units.push(unit.display());
            continue;
        }
        let flags: Vec<String> = host_flags(plan)
            .into_iter()
            .filter(|f| !f.starts_with("-DTORCH_EXTENSION_NAME="))
            .collect();
        let key = pch_key(plan, toolchain, &header, &flags);
        requests.push(PchRequest {
            key,
            header,
            compiler: toolchain.cxx.path.clone(),
            flags,
            unkeyed_flags: plan.relocation_flags(UnitKind::Host),
            dir: plan.compile_dir(Path::new(".")),
            units: vec![unit.display()],
        });
    }
    requests
}

/// The umbrella header `source` starts with, if it is a host unit whose first directive is
/// `#include <H>` with `H` in `umbrellas`.
pub fn umbrella_of(source: &Path, umbrellas: &[String]) -> Option<String> {
    if unit_kind(source) != UnitKind::Host {
        return None;
    }
    let mut head = Vec::with_capacity(8192);
    use std::io::Read;
    std::fs::File::open(source)
        .ok()?
        .take(64 * 1024)
        .read_to_end(&mut head)
        .ok()?;
    let header = leading_include(&String::from_utf8_lossy(&head))?;
    umbrellas.contains(&header).then_some(header)
}

/// The `<x>` of `text`'s first token when that is an `#include <x>` directive: only
/// whitespace, comments and line continuations may come before it. `"x"` includes and
/// anything else (a `#define`, a `#pragma`, code) give `None`.
pub fn leading_include(text: &str) -> Option<String> {
    let rest = skip_blank(text);
    let rest = skip_blank_in_line(rest.strip_prefix('#')?);
    let rest = rest.strip_prefix("include")?;
    let rest = skip_blank_in_line(rest);
    let rest = rest.strip_prefix('<')?;
    let end = rest.find(['>', '\n'])?;
    (rest.as_bytes()[end] == b'>' && end > 0).then(|| rest[..end].to_string())
}

/// Skips whitespace, comments and line continuations.
fn skip_blank(mut s: &str) -> &str {
    loop {
        let t = s.trim_start();
        if let Some(r) = t.strip_prefix("//") {
            s = r.find('\n').map_or("", |i| &r[i..]);
        } else if let Some(r) = t.strip_prefix("/*") {
            s = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else if let Some(r) = t.strip_prefix("\\\n") {
            s = r;
        } else {
            return t;
        }
    }
}

/// Skips spaces, tabs, block comments and line continuations, but not a newline.
fn skip_blank_in_line(mut s: &str) -> &str {
    loop {
        let t = s.trim_start_matches([' ', '\t']);
        if let Some(r) = t.strip_prefix("/*") {
            s = r.find("*/").map_or("", |i| &r[i + 2..]);
        } else if let Some(r) = t.strip_prefix("\\\n") {
            s = r;
        } else {
            return t;
        }
    }
}

/// BLAKE3 over the compiler identity, the PCH flags, the header and the ABI fields.
fn pch_key(plan: &BuildPlan, toolchain: &Toolchain, header: &str, flags: &[String]) -> String {
    let mut h = abicache_fs::FieldHasher::new();
    let mut field = |name: &str, value: &str| {
        h.named(name, value);
    };
    field("format", &PCH_KEY_FORMAT.to_string());
    field("cxx", &toolchain.cxx.path.display().to_string());
    field("cxx_version", &toolchain.cxx.version);
    field("header", header);
    for flag in flags {
        field("flag", flag);
    }
    field("abi", &plan.abi_fields);
    h.finalize().to_hex().to_string()
}

/// The files of a make-syntax dependency list (`target: dep dep \` ...), as written by
/// `-MD -MF`: escaped spaces kept, the target left out.
pub fn parse_depfile(text: &str) -> Vec<PathBuf> {
    let joined = text.replace("\\\n", " ");
    let Some((_, deps)) = joined.split_once(": ") else {
        return Vec::new();
    };
    let mut files = Vec::new();
    let mut current = String::new();
    let mut chars = deps.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&' ') => {
                current.push(' ');
                chars.next();
            }
            c if c.is_whitespace() => {
                if !current.is_empty() {
                    files.push(PathBuf::from(std::mem::take(&mut current)));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        files.push(PathBuf::from(current));
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_directive_must_be_the_angle_include() {
        let cases = [
            (
                "#include <torch/extension.h>\nint x;",
                Some("torch/extension.h"),
            ),
            (
                "// c\n/* multi\nline */\n  #  include  <a/b.h> // x\n",
                Some("a/b.h"),
            ),
            ("#include \"torch/extension.h\"\n", None),
            ("#define X 1\n#include <torch/extension.h>\n", None),
            ("int x;\n#include <torch/extension.h>\n", None),
            ("#pragma once\n#include <a.h>\n", None),
            ("#include <>\n", None),
            ("#include <a.h\n>", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(leading_include(text).as_deref(), want, "{text:?}");
        }
    }

    #[test]
    fn depfiles_split_on_unescaped_spaces_and_continuations() {
        let text = "x.gch: /a/b.h \\\n /c/with\\ space.h\\\n /d.h\n";
        assert_eq!(
            parse_depfile(text),
            vec![
                PathBuf::from("/a/b.h"),
                PathBuf::from("/c/with space.h"),
                PathBuf::from("/d.h")
            ]
        );
    }
}

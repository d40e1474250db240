//! Times `audit_file` on the shared library given as the first argument.
//!
//! `cargo run --release -p abicache-audit --example audit_time -- path/to/libtorch_cpu.so`
//! Add `--human` to print the full rendering after the timing.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: audit_time <library.so> [--human]");
        return ExitCode::from(2);
    };
    let human = args.any(|a| a == "--human");
    let start = Instant::now();
    let result = abicache_audit::audit_file(&path);
    let elapsed = start.elapsed();
    match result {
        Ok(report) => {
            println!(
                "audited `{}` in {:.3} s",
                path.display(),
                elapsed.as_secs_f64()
            );
            println!("needed: {}", report.needed.join(", "));
            println!("glibcxx_max: {:?}", report.glibcxx_max);
            for group in abicache_audit::Group::ALL {
                let count = report.imports.group(group).len();
                println!("{:>16}: {count}", group.name());
            }
            if human {
                print!("{}", abicache_audit::render_human(&report));
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error after {:.3} s: {error}", elapsed.as_secs_f64());
            ExitCode::FAILURE
        }
    }
}

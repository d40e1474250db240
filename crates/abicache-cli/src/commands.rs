//! One function per subcommand: call the façade, print the result.

use std::path::{Path, PathBuf};

use abicache::build::{progress_reporter, ProgressMode};
use abicache::key::{Environment, SpecFile};
use abicache::scan::ScanConfig;
use abicache::store::{parse_size, Layout, Store};
use abicache::{probe_interpreter, Error, Session, SessionOptions};
use anyhow::{Context, Result};

use crate::args::{
    AuditArgs, BuildArgs, Cli, Command, EnvArgs, GcArgs, JsonArgs, RmArgs, ScanArgs, SpecArgs,
};
use crate::render;

/// Runs the parsed command line.
pub fn run(cli: Cli) -> Result<()> {
    let cache_dir = cli.cache_dir;
    let remote = cli.remote;
    match cli.command {
        Command::Scan(args) => scan(args),
        Command::Key(args) => key(cache_dir, args),
        Command::Build(args) => build(cache_dir, remote.as_deref(), args),
        Command::Ls(args) => ls(cache_dir, args),
        Command::Explain(args) => explain(cache_dir, args),
        Command::Gc(args) => gc(cache_dir, args),
        Command::Rm(args) => rm(cache_dir, args),
        Command::Stats(args) => stats(cache_dir, args),
        Command::Audit(args) => audit(args),
        Command::Push(args) => {
            crate::remote_cmds::push(open_store(cache_dir)?, remote.as_deref(), args)
        }
        Command::Pull(args) => {
            crate::remote_cmds::pull(open_store(cache_dir)?, remote.as_deref(), args)
        }
        Command::Keygen(args) => crate::remote_cmds::keygen(args),
    }
}

pub(crate) fn print_json(value: &impl serde::Serialize) -> Result<()> {
    emit(&format!("{}\n", serde_json::to_string_pretty(value)?))
}

/// Writes to stdout; a closed pipe (`abicache ls | head`) ends the command
/// quietly instead of panicking like `print!` does.
pub(crate) fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        other => Ok(other?),
    }
}

pub(crate) fn open_store(cache_dir: Option<PathBuf>) -> Result<Store, Error> {
    Ok(match cache_dir {
        Some(dir) => Store::open(dir)?,
        None => Store::open_default()?,
    })
}

/// The extension a spec argument names, its fingerprint root, and a session
/// for the environment given by `--env` or `--python`. The cache is opened
/// by the session when first needed, after its checks ([`Session::check`]).
fn session_for(
    cache_dir: Option<PathBuf>,
    spec: &SpecArgs,
    options: SessionOptions,
) -> Result<(SpecFile, String, Session), Error> {
    let file = SpecFile::load(&spec.spec)?;
    let name = file.extension(spec.extension.as_deref())?.name.clone();
    let session = environment_session(cache_dir, &spec.env)?.with_options(options);
    Ok((file, name, session))
}

fn environment_session(cache_dir: Option<PathBuf>, env: &EnvArgs) -> Result<Session, Error> {
    if let Some(python) = &env.python {
        let probed = probe_interpreter(python, probe_cache_dir(cache_dir.as_deref())?.as_deref())?;
        return Ok(Session::open_lazily(cache_dir, probed.environment)
            .with_site_packages(probed.site_packages));
    }
    let path = env.env.as_deref().expect("clap requires --env or --python");
    Ok(Session::open_lazily(cache_dir, Environment::load(path)?))
}

/// Where interpreter probes are remembered: inside the cache, and only once
/// the cache exists (probing never creates it; see [`Session::check`]).
fn probe_cache_dir(cache_dir: Option<&Path>) -> Result<Option<PathBuf>, Error> {
    let root = match cache_dir {
        Some(dir) => dir.to_path_buf(),
        None => abicache::store::root_from_env()?,
    };
    let version_dir = Layout::new(root).version_dir().to_path_buf();
    Ok(version_dir
        .is_dir()
        .then(|| version_dir.join("interpreters")))
}

fn scan(args: ScanArgs) -> Result<()> {
    let root = match args.root {
        Some(root) => root,
        None => std::env::current_dir()
            .context("cannot read the current directory; pass `--root DIR`")?,
    };
    let config = args
        .include
        .iter()
        .fold(ScanConfig::new(&root), |c, dir| c.include_path(dir));
    let report = abicache::scan::scan(&args.sources, &config).map_err(Error::from)?;
    if args.json {
        print_json(&render::scan_json(&report))
    } else {
        emit(&abicache::scan::render_summary(&report))
    }
}

fn key(cache_dir: Option<PathBuf>, args: SpecArgs) -> Result<()> {
    let (file, name, session) = session_for(cache_dir, &args, SessionOptions::default())?;
    let spec = file.extension(Some(&name)).map_err(Error::from)?;
    let prepared = session.prepare(spec, &file.root)?;
    if args.json {
        print_json(&render::key_json(&prepared.keyed))
    } else {
        emit(&render::key_human(&prepared.keyed))
    }
}

fn build(cache_dir: Option<PathBuf>, remote: Option<&str>, args: BuildArgs) -> Result<()> {
    let options = SessionOptions {
        rebuild: args.rebuild,
        jobs: args.jobs,
    };
    let (file, name, session) = session_for(cache_dir, &args.spec, options)?;
    let session = session.with_remote(crate::remote_cmds::remote_for_build(remote, args.no_upload));
    let spec = file.extension(Some(&name)).map_err(Error::from)?;
    let mode = if args.quiet {
        ProgressMode::Quiet
    } else {
        ProgressMode::Auto
    };
    let progress = progress_reporter(mode);
    let outcome = session.build(spec, &file.root, &progress)?;
    for warning in &outcome.warnings {
        eprintln!("warning: {warning}");
    }
    if args.spec.json {
        print_json(&outcome)
    } else {
        emit(&format!("{}\n", outcome.path.display()))
    }
}

fn explain(cache_dir: Option<PathBuf>, args: SpecArgs) -> Result<()> {
    let (file, name, session) = session_for(cache_dir, &args, SessionOptions::default())?;
    let spec = file.extension(Some(&name)).map_err(Error::from)?;
    let prepared = session.prepare(spec, &file.root)?;
    let explanation = abicache::explain(&session, &prepared)?;
    if args.json {
        print_json(&explanation)
    } else {
        emit(&abicache::render_explanation(&explanation))
    }
}

fn ls(cache_dir: Option<PathBuf>, args: JsonArgs) -> Result<()> {
    let store = open_store(cache_dir)?;
    let entries = store.list().map_err(Error::from)?;
    if args.json {
        print_json(&entries.iter().map(render::entry_json).collect::<Vec<_>>())
    } else {
        emit(&render::entries_human(&entries))
    }
}

fn gc(cache_dir: Option<PathBuf>, args: GcArgs) -> Result<()> {
    let max = parse_size(&args.max_size).map_err(Error::from)?;
    let store = open_store(cache_dir)?;
    let report = store.gc(max).map_err(Error::from)?;
    if args.json {
        print_json(&report)
    } else {
        emit(&render::gc_human(&report))
    }
}

fn rm(cache_dir: Option<PathBuf>, args: RmArgs) -> Result<()> {
    let store = open_store(cache_dir)?;
    let removed = store.remove(&args.target).map_err(Error::from)?;
    if args.json {
        return print_json(&serde_json::json!({ "removed": removed }));
    }
    if removed == 0 {
        eprintln!(
            "no entry named or keyed `{}` (see `abicache ls`)",
            args.target
        );
    } else {
        emit(&format!(
            "removed {removed} entr{}\n",
            if removed == 1 { "y" } else { "ies" }
        ))?;
    }
    Ok(())
}

fn stats(cache_dir: Option<PathBuf>, args: JsonArgs) -> Result<()> {
    let store = open_store(cache_dir)?;
    let stats = store.stats().map_err(Error::from)?;
    if args.json {
        print_json(&stats)
    } else {
        emit(&render::stats_human(&stats, store.root()))
    }
}

fn audit(args: AuditArgs) -> Result<()> {
    let report =
        abicache::audit_crate::audit_file(Path::new(&args.library)).map_err(Error::from)?;
    if args.json {
        print_json(&report)
    } else {
        emit(&abicache::audit_crate::render_human(&report))
    }
}

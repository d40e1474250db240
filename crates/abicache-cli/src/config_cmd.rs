//! `abicache config`: every effective setting and where it came from (a
//! flag, the environment, the config file, or the default), like
//! `sccache --show-config`. The variables come from the one table,
//! `abicache::env_vars::ENV_VARS`; secrets are shown only as set.

use std::path::PathBuf;

use abicache::env_vars::{self, EnvVar, ENV_VARS};
use abicache::settings::{config_file_settings, config_path};
use abicache::Error;
use anyhow::Result;
use serde::Serialize;

use crate::args::JsonArgs;
use crate::interpreter;
use crate::output::print_json_or;

/// One effective setting.
#[derive(Debug, Serialize)]
struct Setting {
    /// The setting (`cache_dir`, `python`, `config_file`) or variable name.
    name: String,
    /// Its effective value (`null` when unset and without a default value).
    value: Option<String>,
    /// Where the value came from: `flag`, `env`, `config file`, `default`.
    source: &'static str,
    /// The flag, variable or config key that set it, or the default's description.
    detail: String,
}

/// Runs `abicache config`.
pub fn config(cache_dir: Option<PathBuf>, remote: Option<&str>, args: &JsonArgs) -> Result<()> {
    let config_file = config_path();
    let from_file = match &config_file {
        Some(path) => config_file_settings(path)?,
        None => Vec::new(),
    };
    let mut settings = vec![
        cache_dir_setting(cache_dir)?,
        config_file_setting(config_file),
        python_setting(),
    ];
    for var in ENV_VARS {
        let file_value = from_file.iter().find(|(name, _)| *name == var.name);
        let flag = (var.name == env_vars::ABICACHE_REMOTE)
            .then_some(remote)
            .flatten();
        settings.push(variable_setting(
            var,
            flag,
            file_value.map(|(_, v)| v.clone()),
        ));
    }
    print_json_or(args.json, &settings, || render(&settings))
}

fn cache_dir_setting(flag: Option<PathBuf>) -> Result<Setting> {
    if let Some(dir) = flag {
        return Ok(setting(
            "cache_dir",
            Some(dir.display().to_string()),
            "flag",
            "--cache-dir",
        ));
    }
    let root = abicache::store::root_from_env().map_err(Error::from)?;
    let xdg_absolute = env_vars::var_os(env_vars::XDG_CACHE_HOME)
        .is_some_and(|x| std::path::Path::new(&x).is_absolute());
    let (source, detail) = if env_vars::var_os(env_vars::ABICACHE_DIR).is_some() {
        ("env", env_vars::ABICACHE_DIR.to_string())
    } else if xdg_absolute {
        ("env", format!("{}/abicache", env_vars::XDG_CACHE_HOME))
    } else {
        ("default", "~/.cache/abicache".to_string())
    };
    Ok(setting(
        "cache_dir",
        Some(root.display().to_string()),
        source,
        &detail,
    ))
}

fn config_file_setting(path: Option<PathBuf>) -> Setting {
    let Some(path) = path else {
        return setting(
            "config_file",
            None,
            "default",
            "no HOME, XDG_CONFIG_HOME or ABICACHE_CONFIG",
        );
    };
    let found = if path.is_file() { "" } else { " (not found)" };
    let (source, detail) = if env_vars::var_os(env_vars::ABICACHE_CONFIG).is_some() {
        ("env", env_vars::ABICACHE_CONFIG.to_string())
    } else if env_vars::var_os(env_vars::XDG_CONFIG_HOME).is_some() {
        (
            "env",
            format!("{}/abicache/config.toml", env_vars::XDG_CONFIG_HOME),
        )
    } else {
        ("default", "~/.config/abicache/config.toml".to_string())
    };
    let value = format!("{}{found}", path.display());
    setting("config_file", Some(value), source, &detail)
}

fn python_setting() -> Setting {
    match interpreter::choose(None) {
        Ok(chosen) => {
            let source = match chosen.source {
                interpreter::Source::VirtualEnv => "env",
                _ => "default",
            };
            let value = Some(chosen.path.display().to_string());
            setting("python", value, source, &chosen.source.to_string())
        }
        Err(_) => setting(
            "python",
            None,
            "default",
            "none found: pass --python or --env",
        ),
    }
}

fn variable_setting(var: &EnvVar, flag: Option<&str>, file_value: Option<String>) -> Setting {
    let shown = |value: String| {
        if var.secret {
            "(set, hidden)".to_string()
        } else {
            value
        }
    };
    if let Some(value) = flag {
        return setting(var.name, Some(shown(value.to_owned())), "flag", "--remote");
    }
    if let Some(value) = env_vars::var(var.name) {
        return setting(var.name, Some(shown(value)), "env", var.name);
    }
    if let (Some(value), Some(key)) = (file_value, var.config_key) {
        return setting(var.name, Some(shown(value)), "config file", key);
    }
    setting(var.name, None, "default", &var.default.replace('`', ""))
}

fn setting(name: &str, value: Option<String>, source: &'static str, detail: &str) -> Setting {
    Setting {
        name: name.to_owned(),
        value,
        source,
        detail: detail.to_owned(),
    }
}

/// One line per setting: `NAME  VALUE  (SOURCE: DETAIL)`; a default shows
/// its description in place of a value.
fn render(settings: &[Setting]) -> String {
    let width = settings.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut out = String::new();
    for s in settings {
        let line = match (&s.value, s.source) {
            (Some(value), "default") => format!("{value}  (default: {})", s.detail),
            (Some(value), source) => format!("{value}  ({source}: {})", s.detail),
            (None, _) => format!("-  (default: {})", s.detail),
        };
        out.push_str(&format!("{:width$}  {line}\n", s.name));
    }
    out
}

//! Every environment variable abicache reads, in one table (as uv's
//! `uv-static` does): its name, its default, the format of its value, what an
//! empty value means, and where it may also be set in the config file.
//!
//! This is the lowest crate of the workspace (no dependencies), so every
//! crate that reads a variable reads it through [`var`] or [`var_os`] and
//! names it with one of the constants here; the documentation's reference
//! page ([`reference_page`]) and `abicache config` are generated from
//! [`ENV_VARS`].
//!
//! Guarantees:
//! - a name not in [`ENV_VARS`] cannot be read through this crate (debug
//!   builds panic, release builds read it with [`Empty::Unset`]);
//! - an empty or all-blank value means the same for every variable with
//!   [`Empty::Unset`]: unset, so the default applies.
//!
//! ```
//! use abicache_env_vars::{lookup, Empty, ABICACHE_DIR};
//! assert_eq!(lookup(ABICACHE_DIR).unwrap().empty, Empty::Unset);
//! ```

#![deny(missing_docs)]

mod names;
mod parse;
mod read;
mod table;

pub use names::*;
pub use parse::{
    intercept_refusal, parse_flag, parse_intercept, parse_seconds, parse_size, Intercept,
};
pub use read::{var, var_os};
pub use table::{
    lookup, markdown_table, reference_page, Empty, EnvVar, ValueFormat, ENV_VARS,
    REFERENCE_PAGE_COMMAND, REFERENCE_PAGE_PATH,
};

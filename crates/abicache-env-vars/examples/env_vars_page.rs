//! Prints the documentation site's environment-variable reference, generated
//! from `ENV_VARS`:
//!
//! ```sh
//! cargo run -p abicache-env-vars --example env_vars_page > docs/reference/env-vars.md
//! ```

fn main() {
    print!("{}", abicache_env_vars::reference_page());
}

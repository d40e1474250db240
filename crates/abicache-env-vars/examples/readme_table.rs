//! Prints the README's environment-variable table from `ENV_VARS`
//! (paste it under "## Environment variables").

fn main() {
    print!("{}", abicache_env_vars::markdown_table());
}

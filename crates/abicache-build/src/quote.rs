//! POSIX shell quoting for commands shown to users (error messages, reports).

/// Quotes one argument so that a POSIX shell reads it back unchanged.
/// Arguments made only of safe characters are left as they are.
pub fn shell_quote(arg: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-+=/.,:@%^".contains(c);
    if !arg.is_empty() && arg.chars().all(safe) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// Joins arguments into one shell command line, each quoted with [`shell_quote`].
pub fn shell_join<I, S>(args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    args.into_iter()
        .map(|a| shell_quote(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_leaves_plain_arguments_and_quotes_the_rest() {
        assert_eq!(
            shell_join(["c++", "-DX=1", "-o", "a b", "it's", ""]),
            r"c++ -DX=1 -o 'a b' 'it'\''s' ''"
        );
    }
}

//! The agent command line (`--acp-agent "COMMAND [ARGS…]"`), split into words as a POSIX shell
//! would split it, without running a shell: no variables, globs, pipes or redirections.
//!
//! Words are separated by unquoted whitespace. Single quotes keep everything up to the next
//! single quote; double quotes keep everything up to the next unescaped double quote, where a
//! backslash escapes `"`, `\`, `$` and `` ` `` (and is kept before anything else); outside
//! quotes a backslash keeps the next character. `''` and `""` are empty words.

use std::fmt;

/// Why a command line cannot be split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommandError {
    /// The line has no words.
    Empty,
    /// A quote was not closed (`'` or `"`).
    UnclosedQuote(char),
    /// The line ends with a backslash that escapes nothing.
    TrailingBackslash,
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::Empty => f.write_str("the agent command is empty"),
            CommandError::UnclosedQuote(q) => {
                write!(f, "the agent command has an unclosed {q} quote")
            }
            CommandError::TrailingBackslash => {
                f.write_str("the agent command ends with a backslash that escapes nothing")
            }
        }
    }
}

impl std::error::Error for CommandError {}

/// Splits `line` into the program and its arguments.
pub fn split_command(line: &str) -> Result<Vec<String>, CommandError> {
    let mut words = Vec::new();
    let mut word = String::new();
    // Whether a word has started (so that `''` is an empty word, not nothing).
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(CommandError::UnclosedQuote('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some('\n') => {}
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(CommandError::UnclosedQuote('"')),
                        },
                        Some(c) => word.push(c),
                        None => return Err(CommandError::UnclosedQuote('"')),
                    }
                }
            }
            '\\' => match chars.next() {
                // A backslash-newline joins lines.
                Some('\n') => {}
                Some(c) => {
                    in_word = true;
                    word.push(c);
                }
                None => return Err(CommandError::TrailingBackslash),
            },
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    if words.is_empty() {
        return Err(CommandError::Empty);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> Vec<String> {
        split_command(line).unwrap()
    }

    #[test]
    fn words_are_split_on_unquoted_whitespace() {
        assert_eq!(
            split("copilot --acp --stdio"),
            ["copilot", "--acp", "--stdio"]
        );
        assert_eq!(
            split("  npx\t-y  @zed-industries/claude-code-acp \n"),
            ["npx", "-y", "@zed-industries/claude-code-acp"]
        );
    }

    #[test]
    fn quotes_and_escapes_keep_what_a_shell_keeps() {
        assert_eq!(
            split(r#"agent --name 'my agent' "a \"b\" \$c \d""#),
            ["agent", "--name", "my agent", r#"a "b" $c \d"#]
        );
        assert_eq!(split(r"path\ with\ spaces x"), ["path with spaces", "x"]);
        assert_eq!(split("a '' \"\" b"), ["a", "", "", "b"]);
        assert_eq!(split("pre'quoted'post"), ["prequotedpost"]);
        // Nothing is expanded.
        assert_eq!(
            split("echo $HOME *.rs | cat"),
            ["echo", "$HOME", "*.rs", "|", "cat"]
        );
    }

    #[test]
    fn malformed_lines_are_refused_with_the_reason() {
        assert_eq!(split_command(""), Err(CommandError::Empty));
        assert_eq!(split_command("   "), Err(CommandError::Empty));
        assert_eq!(
            split_command("a 'b"),
            Err(CommandError::UnclosedQuote('\''))
        );
        assert_eq!(
            split_command("a \"b\\\""),
            Err(CommandError::UnclosedQuote('"'))
        );
        assert_eq!(split_command("a \\"), Err(CommandError::TrailingBackslash));
        assert_eq!(
            CommandError::UnclosedQuote('\'').to_string(),
            "the agent command has an unclosed ' quote"
        );
    }
}

//! What the model's built-in tools do to text, with no I/O: number the lines of a viewed
//! file, apply an exact-string edit, match globs, search contents, and word a command's
//! result. The host (or an ACP client) moves the bytes; these functions decide the answer,
//! so the same call gives the same result wherever the files live.

use regex::{Regex, RegexBuilder};

use super::builtin::GrepQuery;

/// Most lines a `view` returns without a range.
pub const VIEW_LINE_LIMIT: usize = 2000;
/// Most files a `glob` or `grep` reports.
pub const SEARCH_RESULT_LIMIT: usize = 1000;

/// A file's text as `view` shows it: `N. line` for each line from the 1-based `line` (at
/// most `limit` lines, [`VIEW_LINE_LIMIT`] by default), with a note when lines were left out.
pub fn view_text(content: &str, line: Option<u32>, limit: Option<u32>) -> String {
    // Every `\n` ends a line, so a final newline shows as a last, empty line (as the
    // runtime's `view` numbers it).
    let lines: Vec<&str> = if content.is_empty() {
        Vec::new()
    } else {
        content
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect()
    };
    let start = line.map_or(1, |l| l.max(1) as usize);
    let limit = limit.map_or(VIEW_LINE_LIMIT, |l| l as usize);
    let mut out = String::new();
    for (i, text) in lines.iter().enumerate().skip(start - 1).take(limit) {
        out.push_str(&format!("{}. {text}\n", i + 1));
    }
    let shown_to = (start - 1 + limit).min(lines.len());
    if line.is_none() && limit == VIEW_LINE_LIMIT && shown_to < lines.len() {
        out.push_str(&format!(
            "[{} more lines; view a range to see them]\n",
            lines.len() - shown_to
        ));
    }
    if lines.is_empty() {
        out.push_str("[the file is empty]\n");
    }
    out
}

/// Text already cut to the lines asked for, numbered from `first` (`N. text`), as
/// [`view_text`] shows them.
pub fn number_lines(content: &str, first: u32) -> String {
    let mut out = String::new();
    for (i, text) in content.lines().enumerate() {
        out.push_str(&format!("{}. {text}\n", first as usize + i));
    }
    out
}

/// A directory's entries as `view` shows them, one per line (directories end with `/`).
pub fn view_dir(entries: &[String]) -> String {
    let mut sorted = entries.to_vec();
    sorted.sort();
    sorted.into_iter().map(|e| e + "\n").collect()
}

/// Applies an `edit`: replaces the one occurrence of `old_str` in `content` with `new_str`.
/// Returns the new content and the model's answer, or why nothing was changed.
pub fn apply_edit(
    content: &str,
    path: &str,
    old_str: &str,
    new_str: &str,
) -> Result<(String, String), String> {
    if old_str.is_empty() {
        return Err(format!(
            "old_str must not be empty (use create to write a new file): {path}"
        ));
    }
    match content.matches(old_str).count() {
        0 => Err(format!("No match found for old_str in {path}")),
        1 => Ok((
            content.replacen(old_str, new_str, 1),
            format!("File {path} updated with changes."),
        )),
        n => Err(format!(
            "old_str occurs {n} times in {path}; include more context so it matches once"
        )),
    }
}

/// The regular expression a glob stands for, matched against a whole `/`-separated
/// relative path: `**` any number of directories, `*` and `?` within one name, `{a,b}`
/// alternatives, `[...]` classes. A pattern without `/` matches the file name at any depth.
pub fn glob_regex(pattern: &str) -> Result<Regex, String> {
    let pattern = pattern.trim_start_matches("./");
    let anywhere = !pattern.contains('/');
    let chars: Vec<char> = pattern.chars().collect();
    let mut re = String::from(if anywhere { "^(?:.*/)?" } else { "^" });
    let mut i = 0;
    let mut braces = 0usize;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                if chars.get(i + 2) == Some(&'/') {
                    re.push_str("(?:.*/)?");
                    i += 3;
                } else {
                    re.push_str(".*");
                    i += 2;
                }
                continue;
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '{' => {
                braces += 1;
                re.push_str("(?:");
            }
            '}' if braces > 0 => {
                braces -= 1;
                re.push(')');
            }
            ',' if braces > 0 => re.push('|'),
            '[' => match chars[i..].iter().position(|&c| c == ']') {
                Some(end) if end > 1 => {
                    let class: String = chars[i + 1..i + end].iter().collect();
                    let class = class
                        .strip_prefix('!')
                        .map_or(class.clone(), |c| format!("^{c}"));
                    re.push('[');
                    re.push_str(&class.replace('\\', "\\\\"));
                    re.push(']');
                    i += end + 1;
                    continue;
                }
                _ => re.push_str("\\["),
            },
            c => re.push_str(&regex::escape(&c.to_string())),
        }
        i += 1;
    }
    if braces > 0 {
        return Err(format!("unclosed '{{' in glob {pattern:?}"));
    }
    re.push('$');
    Regex::new(&re).map_err(|e| format!("invalid glob {pattern:?}: {e}"))
}

/// The files (relative paths) a `glob` matches, sorted, at most [`SEARCH_RESULT_LIMIT`].
pub fn glob_files(files: &[String], pattern: &str) -> Result<Vec<String>, String> {
    let re = glob_regex(pattern)?;
    let mut out: Vec<String> = files.iter().filter(|f| re.is_match(f)).cloned().collect();
    out.sort();
    out.truncate(SEARCH_RESULT_LIMIT);
    Ok(out)
}

/// The model's answer to a `glob`.
pub fn glob_answer(matches: &[String], pattern: &str) -> String {
    if matches.is_empty() {
        return format!("No files matched the pattern {pattern:?}.");
    }
    // Relative to the searched directory, as `./PATH` (the runtime's form).
    matches.iter().map(|m| format!("./{m}\n")).collect()
}

/// The candidate files of a `grep` (those its `glob` admits), sorted.
pub fn grep_candidates(files: &[String], query: &GrepQuery) -> Result<Vec<String>, String> {
    let mut out = match &query.glob {
        Some(g) => glob_files(files, g)?,
        None => files.to_vec(),
    };
    out.sort();
    Ok(out)
}

/// Compiles a `grep` pattern.
pub fn grep_regex(query: &GrepQuery) -> Result<Regex, String> {
    RegexBuilder::new(&query.pattern)
        .case_insensitive(query.case_insensitive)
        .build()
        .map_err(|e| format!("invalid regular expression {:?}: {e}", query.pattern))
}

/// Searches `files` (relative path, content) as `grep` does, in the query's output mode.
pub fn grep_answer(query: &GrepQuery, files: &[(String, String)]) -> Result<String, String> {
    let re = grep_regex(query)?;
    let mut lines: Vec<String> = Vec::new();
    for (path, content) in files {
        let text: Vec<&str> = content.lines().collect();
        let hits: Vec<usize> = (0..text.len()).filter(|&i| re.is_match(text[i])).collect();
        if hits.is_empty() {
            continue;
        }
        match query.output_mode.as_str() {
            "content" => {
                let mut shown = vec![false; text.len()];
                for &h in &hits {
                    let from = h.saturating_sub(query.before);
                    let to = (h + query.after).min(text.len() - 1);
                    shown[from..=to].iter_mut().for_each(|s| *s = true);
                }
                for (i, line) in text.iter().enumerate().filter(|(i, _)| shown[*i]) {
                    lines.push(if query.line_numbers {
                        format!("{path}:{}:{line}", i + 1)
                    } else {
                        format!("{path}:{line}")
                    });
                }
            }
            "count" => lines.push(format!("{path}:{}", hits.len())),
            _ => lines.push(path.clone()),
        }
    }
    if let Some(limit) = query.head_limit {
        lines.truncate(limit);
    }
    if lines.is_empty() {
        return Ok(format!("No matches found for {:?}.", query.pattern));
    }
    Ok(lines.into_iter().map(|l| l + "\n").collect())
}

/// The model's answer to a `bash` call: the command's output, then its exit.
/// `timed_out`: the command was stopped because it ran longer than this many milliseconds.
pub fn bash_answer(output: &str, exit_code: Option<i32>, timed_out: Option<u64>) -> String {
    let mut out = output.to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    match (exit_code, timed_out) {
        (_, Some(ms)) => out.push_str(&format!(
            "<command timed out after {} and was stopped>",
            duration_words(ms)
        )),
        (Some(code), None) => out.push_str(&format!("<exited with exit code {code}>")),
        (None, None) => out.push_str("<killed by a signal>"),
    }
    out
}

/// `30 seconds`, `1 second`, `1.5 seconds`, `250 milliseconds`.
fn duration_words(ms: u64) -> String {
    match ms {
        1000 => "1 second".to_owned(),
        ms if ms % 1000 == 0 => format!("{} seconds", ms / 1000),
        ms if ms < 1000 => format!("{ms} milliseconds"),
        ms => format!("{} seconds", ms as f64 / 1000.0),
    }
}

/// Removes `.` and `..` components of a `/`-separated path without touching a file system
/// (`/a/./b/../c` → `/a/c`; `..` never climbs above the root).
pub fn normalize_path(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else if joined.is_empty() {
        ".".to_owned()
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn view_numbers_lines_and_ranges() {
        assert_eq!(
            view_text("a\nb\nc\n", None, None),
            "1. a\n2. b\n3. c\n4. \n"
        );
        assert_eq!(view_text("a\r\nb", None, None), "1. a\n2. b\n");
        assert_eq!(view_text("a\nb\nc\n", Some(2), Some(1)), "2. b\n");
        assert_eq!(view_text("", None, None), "[the file is empty]\n");
        assert_eq!(number_lines("b\nc", 2), "2. b\n3. c\n");
    }

    #[test]
    fn edits_need_exactly_one_match() {
        let (out, msg) = apply_edit("x = 1\ny = 2\n", "/p/f", "y = 2", "y = 3").unwrap();
        assert_eq!(out, "x = 1\ny = 3\n");
        assert!(msg.contains("/p/f"));
        assert!(apply_edit("a a", "f", "a", "b")
            .unwrap_err()
            .contains("2 times"));
        assert!(apply_edit("a", "f", "z", "b")
            .unwrap_err()
            .contains("No match"));
        assert!(apply_edit("a", "f", "", "b").is_err());
    }

    #[test]
    fn globs() {
        let all = files(&["a.rs", "src/b.rs", "src/x/c.rs", "README.md", "src/d.txt"]);
        assert_eq!(
            glob_files(&all, "**/*.rs").unwrap(),
            files(&["a.rs", "src/b.rs", "src/x/c.rs"])
        );
        assert_eq!(
            glob_files(&all, "*.rs").unwrap().len(),
            3,
            "no slash: any depth"
        );
        assert_eq!(glob_files(&all, "src/*.rs").unwrap(), files(&["src/b.rs"]));
        assert_eq!(
            glob_files(&all, "src/**/*.{rs,txt}").unwrap(),
            files(&["src/b.rs", "src/d.txt", "src/x/c.rs"])
        );
        assert_eq!(
            glob_files(&all, "[A-Z]*.md").unwrap(),
            files(&["README.md"])
        );
        assert!(glob_files(&all, "{a").is_err());
    }

    #[test]
    fn grep_modes() {
        let data = vec![
            ("a.txt".to_owned(), "one\nTwo\nthree\n".to_owned()),
            ("b.txt".to_owned(), "nope\n".to_owned()),
        ];
        let mut q = GrepQuery {
            pattern: "t[wh]".into(),
            output_mode: "files_with_matches".into(),
            ..GrepQuery::default()
        };
        assert_eq!(grep_answer(&q, &data).unwrap(), "a.txt\n");
        q.output_mode = "content".into();
        q.line_numbers = true;
        assert_eq!(grep_answer(&q, &data).unwrap(), "a.txt:3:three\n");
        q.case_insensitive = true;
        q.output_mode = "count".into();
        assert_eq!(grep_answer(&q, &data).unwrap(), "a.txt:2\n");
        q.pattern = "zzz".into();
        assert!(grep_answer(&q, &data).unwrap().starts_with("No matches"));
        q.pattern = "(".into();
        assert!(grep_answer(&q, &data).is_err());
    }

    #[test]
    fn paths_normalize_lexically() {
        assert_eq!(normalize_path("/a/./b/../c"), "/a/c");
        assert_eq!(normalize_path("/../x"), "/x");
        assert_eq!(normalize_path("a/../../b"), "../b");
        assert_eq!(
            bash_answer("hi", Some(0), None),
            "hi\n<exited with exit code 0>"
        );
    }

    #[test]
    fn a_timeout_says_so() {
        assert_eq!(
            bash_answer("partial\n", None, Some(30_000)),
            "partial\n<command timed out after 30 seconds and was stopped>"
        );
        assert_eq!(
            bash_answer("", None, Some(1_000)),
            "<command timed out after 1 second and was stopped>"
        );
        assert_eq!(
            bash_answer("", None, Some(1_500)),
            "<command timed out after 1.5 seconds and was stopped>"
        );
        assert_eq!(
            bash_answer("", None, Some(250)),
            "<command timed out after 250 milliseconds and was stopped>"
        );
        assert_eq!(bash_answer("", None, None), "<killed by a signal>");
    }
}

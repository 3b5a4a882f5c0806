//! Lays out the lines of the `wf trace` tree: in aligned columns and whole
//! ([`align`]: piped, or `--wide`), or fitted to a terminal's width
//! ([`fit`]): the start offset, duration and bar stay in their column and a
//! span's details continue on lines beneath it, under the tree's bars,
//! broken between details (a detail longer than a whole line between its
//! words, a word longer than that cut with `…`). Names, ids and times are
//! never broken.

/// One line of the tree before the columns are aligned.
pub(super) struct Line {
    /// Tree drawing and span name.
    pub head: String,
    /// The tree drawing beneath this line's span: its children's lines start
    /// with it.
    pub indent: String,
    /// Whether lines of the span's children follow (a continuation line
    /// then carries their bar).
    pub kids: bool,
    /// Start offset, duration and waterfall bar (none for a run without its root yet).
    pub timing: Option<String>,
    /// Space-separated details.
    pub details: Vec<String>,
}

/// The narrowest a terminal is taken to be.
const MIN_WIDTH: usize = 40;

/// The fewest columns a continuation line has for details, however deep
/// the tree (deeper, the line is wider than the terminal).
const MIN_TEXT: usize = 20;

/// Continuation lines keep to the details column while it is at least this
/// wide (a `trace=` id is 38 characters); else they start under the name.
const HANG_MIN: usize = 40;

fn count(s: &str) -> usize {
    s.chars().count()
}

fn pad(line: &mut String, to: usize) {
    let n = to.saturating_sub(count(line));
    line.extend(std::iter::repeat_n(' ', n));
}

/// The lines in columns, whole: the name column as wide as the widest name
/// (and 3 more), then the timing column, then the details.
pub(super) fn align(lines: Vec<Line>) -> Vec<String> {
    let width = lines.iter().map(|l| count(&l.head)).max().unwrap_or(0) + 3;
    let timing_width = lines
        .iter()
        .filter_map(|l| l.timing.as_deref().map(count))
        .max()
        .unwrap_or(0);
    lines
        .into_iter()
        .map(|l| {
            let mut line = l.head;
            let timing = l.timing.unwrap_or_default();
            if timing_width > 0 || !l.details.is_empty() {
                pad(&mut line, width);
            }
            if timing_width > 0 {
                line.push_str(&timing);
                pad(&mut line, width + timing_width);
                if !l.details.is_empty() {
                    line.push_str("  ");
                }
            }
            line.push_str(&l.details.join("  "));
            line.trim_end().to_string()
        })
        .collect()
}

/// The lines as [`align`] puts them, each at most `width` characters
/// (unless a name with its tree drawing is wider): the timing column as
/// far right as the widest name, or as `width` allows; what does not fit
/// on a span's line continues on lines beneath it.
pub(super) fn fit(lines: Vec<Line>, width: usize) -> Vec<String> {
    let width = width.max(MIN_WIDTH);
    let longest = lines.iter().map(|l| count(&l.head)).max().unwrap_or(0);
    let timing_width = lines
        .iter()
        .filter_map(|l| l.timing.as_deref().map(count))
        .max()
        .unwrap_or(0);
    let col = (longest + 3).min(width.saturating_sub(timing_width));
    let details_col = if timing_width > 0 {
        col + timing_width + 2
    } else {
        col
    };
    let mut out = Vec::new();
    for l in lines {
        let mut flow = Flow {
            out: &mut out,
            line: l.head,
            fresh: false,
            sep: false,
            width,
            bar: format!("{}{}", l.indent, if l.kids { "│" } else { "" }),
            hang: if width.saturating_sub(details_col) >= HANG_MIN {
                details_col
            } else {
                count(&l.indent) + 4
            },
        };
        let mut atoms = Vec::new();
        match l.timing {
            Some(t) if count(&flow.line) + 2 <= col => {
                pad(&mut flow.line, col);
                flow.line.push_str(&t);
                if !l.details.is_empty() && count(&flow.line) + 2 <= width {
                    pad(&mut flow.line, details_col);
                } else {
                    flow.sep = true;
                }
            }
            Some(t) => {
                flow.sep = true;
                atoms.push(t);
            }
            None if !l.details.is_empty() && count(&flow.line) + 2 <= details_col => {
                pad(&mut flow.line, details_col);
            }
            None => flow.sep = true,
        }
        atoms.extend(l.details);
        for atom in atoms {
            flow.place(&atom);
        }
        let last = flow.line.trim_end().to_string();
        out.push(last);
    }
    out
}

/// The lines of one span being filled.
struct Flow<'a> {
    out: &'a mut Vec<String>,
    /// The line being filled.
    line: String,
    /// It is a continuation line with nothing on it yet.
    fresh: bool,
    /// What is placed next needs two spaces before it.
    sep: bool,
    width: usize,
    /// The tree's bars a continuation line starts with.
    bar: String,
    /// The column continuation lines' details start at.
    hang: usize,
}

impl Flow<'_> {
    fn place(&mut self, atom: &str) {
        let gap = if self.sep { 2 } else { 0 };
        if count(&self.line) + gap + count(atom) <= self.width {
            self.push(atom);
            return;
        }
        let room = self.width.saturating_sub(self.hang).max(MIN_TEXT);
        if count(atom) <= room {
            self.next_line();
            self.push(atom);
            return;
        }
        // Longer than a whole line: between its words.
        for piece in wrap(atom, room) {
            self.next_line();
            self.push(&piece);
        }
    }

    fn push(&mut self, atom: &str) {
        if self.sep {
            self.line.push_str("  ");
        }
        self.line.push_str(atom);
        self.sep = true;
        self.fresh = false;
    }

    /// Starts a continuation line (unless the current one is one, empty).
    fn next_line(&mut self) {
        if self.fresh {
            return;
        }
        let done = std::mem::replace(&mut self.line, self.bar.clone());
        self.out.push(done.trim_end().to_string());
        pad(&mut self.line, self.hang);
        self.fresh = true;
        self.sep = false;
    }
}

/// `text` in lines of at most `width` characters, broken between words; a
/// word longer than that is cut, ending in `…`.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(2);
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let word = if count(word) > width {
            let mut cut: String = word.chars().take(width - 1).collect();
            cut.push('…');
            cut
        } else {
            word.to_string()
        };
        if !line.is_empty() && count(&line) + 1 + count(&word) > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(head: &str, indent: &str, kids: bool, timing: Option<&str>, details: &[&str]) -> Line {
        Line {
            head: head.into(),
            indent: indent.into(),
            kids,
            timing: timing.map(String::from),
            details: details.iter().map(ToString::to_string).collect(),
        }
    }

    const T: &str = "  +0ms  10ms ▕████▏";

    #[test]
    fn details_continue_under_the_bars_and_never_break_an_id() {
        let trace = "trace=00000000000000000000000000000002";
        let lines = vec![
            line(
                "f/workflow",
                "",
                true,
                Some(T),
                &["run 2", "link -> run 1", "outcome=sleeping", trace],
            ),
            line(
                "├── step-one",
                "│   ",
                false,
                Some(T),
                &[
                    "attempt=1",
                    "outcome=retry",
                    "ERROR",
                    "error.type=user.declined",
                ],
            ),
            line("└── two", "    ", false, Some(T), &["attempt=1"]),
        ];
        let got = fit(lines, 48);
        assert_eq!(
            got,
            [
                "f/workflow       +0ms  10ms ▕████▏  run 2",
                "│   link -> run 1  outcome=sleeping",
                "│   trace=00000000000000000000000000000002",
                "├── step-one     +0ms  10ms ▕████▏  attempt=1",
                "│       outcome=retry  ERROR",
                "│       error.type=user.declined",
                "└── two          +0ms  10ms ▕████▏  attempt=1",
            ],
        );
        for l in &got {
            assert!(count(l) <= 48, "{l}");
        }
    }

    #[test]
    fn a_detail_longer_than_a_line_is_wrapped_and_a_long_word_cut() {
        let lines = vec![line(
            "f/workflow",
            "",
            false,
            Some(T),
            &[
                "ERROR",
                "the collector at a host far away refused the connection",
                "https://example.org/a/very/long/path/that/goes/on/and/on/and/on",
            ],
        )];
        let got = fit(lines, 40);
        for l in &got {
            assert!(count(l) <= 40, "{l}: {got:#?}");
        }
        assert_eq!(got[0], "f/workflow     +0ms  10ms ▕████▏  ERROR");
        assert_eq!(
            got[1..],
            [
                "    the collector at a host far away",
                "    refused the connection",
                "    https://example.org/a/very/long/pat…",
            ]
        );
    }

    #[test]
    fn wide_terminals_keep_continuations_in_the_details_column() {
        let lines = vec![line(
            "f/workflow",
            "",
            false,
            Some(T),
            &[
                "run 1",
                "outcome=completed",
                "trace=00000000000000000000000000000001",
            ],
        )];
        let got = fit(lines, 80);
        assert_eq!(
            got,
            [
                "f/workflow     +0ms  10ms ▕████▏  run 1  outcome=completed",
                "                                  trace=00000000000000000000000000000001",
            ]
        );
    }
}

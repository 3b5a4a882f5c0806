//! All output goes through the [`Printer`]: data to stdout, diagnostics and
//! progress to stderr, colour only on a terminal and never with `NO_COLOR`.
//! It also implements the engine's [`Observer`]: an indicatif progress display
//! on a terminal, plain lines elsewhere.

use crate::engine::{Failure, Observer};
use crate::vocab::{AttemptOutcome, InstanceId, ShownKey, Timestamp};
use crate::workflow::duration::human;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

#[derive(Clone)]
pub struct Printer {
    quiet: bool,
    /// Colour on stderr (diagnostics, progress).
    color: bool,
    /// Colour on stdout (tables).
    color_out: bool,
    stderr_tty: bool,
    times: TimeFormat,
}

/// `--color`: when to colour output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set
    #[default]
    Auto,
    Always,
    Never,
}

/// `--time-format`: how tables show times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum TimeFormat {
    /// `5m ago`
    #[default]
    Relative,
    /// `2026-12-03 07:27:29` (UTC)
    Iso,
}

impl Printer {
    pub fn new(quiet: bool) -> Printer {
        Printer::with(quiet, ColorChoice::Auto, TimeFormat::Relative)
    }

    pub fn with(quiet: bool, color: ColorChoice, times: TimeFormat) -> Printer {
        let stderr_tty = std::io::stderr().is_terminal();
        let stdout_tty = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let on = |tty: bool| match color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => tty && !no_color,
        };
        Printer {
            quiet,
            color: on(stderr_tty),
            color_out: on(stdout_tty),
            stderr_tty,
            times,
        }
    }

    /// Whether diagnostics are off (`--quiet`).
    pub fn is_quiet(&self) -> bool {
        self.quiet
    }

    /// A time for a table cell, as `--time-format` says.
    pub fn when(&self, t: Timestamp) -> String {
        let t = t.to_chrono();
        match self.times {
            TimeFormat::Iso => t.format("%Y-%m-%d %H:%M:%S").to_string(),
            TimeFormat::Relative => {
                let ahead = (t - chrono::Utc::now()).num_milliseconds();
                if ahead > 0 {
                    // Round up: a fire time 200 ms away is "in 1s".
                    let s = (ahead + 999) / 1000;
                    return match s {
                        0..=59 => format!("in {s}s"),
                        60..=3599 => format!("in {}m", s / 60),
                        3600..=86_399 => format!("in {}h", s / 3600),
                        _ => format!("in {}d", s / 86_400),
                    };
                }
                let ago = (chrono::Utc::now() - t).num_seconds().max(0);
                match ago {
                    0..=59 => format!("{ago}s ago"),
                    60..=3599 => format!("{}m ago", ago / 60),
                    3600..=86_399 => format!("{}h ago", ago / 3600),
                    _ => format!("{}d ago", ago / 86_400),
                }
            }
        }
    }

    /// A status as a table cell, coloured when colour is on.
    pub fn status_cell(&self, status: &str) -> comfy_table::Cell {
        use comfy_table::Color;
        let cell = comfy_table::Cell::new(status);
        if !self.color_out {
            return cell;
        }
        match status {
            "completed" | "ok" | "cached" => cell.fg(Color::Green),
            "failed" | "timeout" | "crashed" => cell.fg(Color::Red),
            "running" => cell.fg(Color::Cyan),
            "pending" | "sleeping" | "waiting" | "retrying" | "retry" | "interrupted" => {
                cell.fg(Color::Yellow)
            }
            "canceled" | "skipped" => cell.fg(Color::DarkGrey),
            _ => cell,
        }
    }

    /// A line of data on stdout.
    pub fn data(&self, text: &str) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{text}");
    }

    /// Stdout for output written piece by piece (buffered; flush when done).
    pub fn data_writer(&self) -> std::io::BufWriter<std::io::StdoutLock<'static>> {
        std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock())
    }

    /// JSON on stdout, pretty-printed: a view (`crate::views`), or a value.
    pub fn json<T: serde::Serialize + ?Sized>(&self, value: &T) {
        self.data(&serde_json::to_string_pretty(value).unwrap_or_default());
    }

    /// JSON on stdout on one line (`wf worker --json`'s log).
    pub fn json_line<T: serde::Serialize + ?Sized>(&self, value: &T) {
        self.data(&serde_json::to_string(value).unwrap_or_default());
    }

    /// Raw bytes on stdout (captured logs).
    pub fn raw(&self, bytes: &[u8]) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(bytes);
        let _ = out.flush();
    }

    /// Whether [`Printer::info`] prints (not with `--quiet`): what only an
    /// info line needs is not worth computing otherwise.
    pub fn informs(&self) -> bool {
        !self.quiet
    }

    /// A bar on stderr for work of `len` units (`wf db copy`), drawn only
    /// on a terminal and not with `--quiet`; hidden otherwise.
    pub fn progress_bar(&self, what: &str, len: u64) -> ProgressBar {
        if self.quiet || !self.stderr_tty {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{msg} [{bar:30}] {pos}/{len} instances, {per_sec}, {eta} left",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(what.to_string());
        bar
    }

    /// A diagnostic line on stderr.
    pub fn info(&self, text: &str) {
        if !self.quiet {
            eline(text);
        }
    }

    /// A warning on stderr: something worked, but likely not as meant
    /// (printed even with `--quiet`).
    pub fn warn(&self, text: &str) {
        let prefix = self.paint("warning:", "1;33");
        eline(&format!("{prefix} {text}"));
    }

    pub fn error(&self, text: &str) {
        let prefix = self.paint("error:", "1;31");
        // One line: a multi-line cause is folded so scripts can grep it.
        let text = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        eline(&format!("{prefix} {text}"));
    }

    /// Colours `text` with an ANSI SGR code when colour is on.
    pub fn paint(&self, text: &str, sgr: &str) -> String {
        if self.color {
            format!("\x1b[{sgr}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    /// A table styled for the terminal (or plain ASCII when piped).
    pub fn table(&self) -> comfy_table::Table {
        let mut t = comfy_table::Table::new();
        if std::io::stdout().is_terminal() {
            t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
        } else {
            t.load_preset(comfy_table::presets::NOTHING);
            t.force_no_tty();
        }
        if self.color_out {
            t.enforce_styling();
        }
        t.set_content_arrangement(comfy_table::ContentArrangement::Dynamic);
        t
    }

    /// The terminal's width when stdout is one (tables and one-line texts
    /// fit it); None when piped (nothing is cut).
    pub fn width(&self) -> Option<usize> {
        if !std::io::stdout().is_terminal() {
            return None;
        }
        comfy_table::Table::new().width().map(usize::from)
    }

    /// A table of `header` and `rows` that fits the terminal: every column
    /// but `flexible` keeps its content's width (ids, times and step names
    /// never break), `flexible` wraps but stays at least `min` wide, and
    /// while that does not fit, the columns in `drop` are left out, in that
    /// order. Returns the table and which columns it kept.
    pub fn fitted(
        &self,
        header: &[&str],
        rows: Vec<Vec<comfy_table::Cell>>,
        flexible: Option<usize>,
        min: usize,
        drop: &[usize],
    ) -> (comfy_table::Table, Vec<bool>) {
        let build = |kept: &[bool], rows: Vec<Vec<comfy_table::Cell>>| {
            let pick = |cells: Vec<comfy_table::Cell>| -> Vec<comfy_table::Cell> {
                cells
                    .into_iter()
                    .zip(kept)
                    .filter_map(|(c, k)| k.then_some(c))
                    .collect()
            };
            let mut table = self.table();
            table.set_header(pick(header.iter().map(comfy_table::Cell::new).collect()));
            for row in rows {
                table.add_row(pick(row));
            }
            // `flexible`'s place among the kept columns.
            let flex = flexible
                .filter(|f| kept.get(*f) == Some(&true))
                .map(|f| kept[..f].iter().filter(|k| **k).count());
            self.keep_columns(&mut table, flex);
            (table, flex)
        };
        let mut kept = vec![true; header.len()];
        if self.width().is_none() {
            // Piped: nothing wraps, every column stays; the rows are moved
            // in, not copied (10,000 steps' rows are megabytes).
            return (build(&kept, rows).0, kept);
        }
        let mut drop = drop.iter();
        loop {
            let (table, flex) = build(&kept, rows.clone());
            if self.fits(&table, flex, min) {
                return (table, kept);
            }
            match drop.next() {
                Some(&d) if d < kept.len() => kept[d] = false,
                Some(_) => {}
                None => return (table, kept),
            }
        }
    }

    /// Whether `table` fits the terminal with column `flexible` at least
    /// `min` wide (always, when piped: nothing wraps).
    fn fits(&self, table: &comfy_table::Table, flexible: Option<usize>, min: usize) -> bool {
        let Some(width) = self.width() else {
            return true;
        };
        let widths = table.column_max_content_widths();
        let content: usize = widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if Some(i) == flexible {
                    min.min(usize::from(*w))
                } else {
                    usize::from(*w)
                }
            })
            .sum();
        // A border each side of every column, one space of padding each side.
        let frame = widths.len() + 1 + 2 * widths.len();
        content + frame <= width
    }

    /// Keeps every column but `flexible` at its content's width, so that on
    /// a narrow terminal only that one wraps (ids, times and step names never
    /// break).
    pub fn keep_columns(&self, table: &mut comfy_table::Table, flexible: Option<usize>) {
        for i in 0..table.column_count() {
            if Some(i) != flexible
                && let Some(c) = table.column_mut(i)
            {
                c.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
            }
        }
    }

    /// The progress observer for a run: live bars on a terminal, lines otherwise.
    pub fn progress(&self) -> Progress {
        Progress {
            live: (self.stderr_tty && !self.quiet).then(|| {
                let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
                let counter = multi.add(ProgressBar::new(0));
                counter.set_style(
                    ProgressStyle::with_template(
                        "{prefix:.bold} [{bar:30}] {pos}/{len} steps done  {elapsed}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                Live {
                    multi,
                    counter,
                    bars: Mutex::new(HashMap::new()),
                    saved_termios: Mutex::new(quiet_control_echo()),
                }
            }),
            quiet: self.quiet,
            color: self.color,
        }
    }
}

struct Live {
    multi: MultiProgress,
    counter: ProgressBar,
    bars: Mutex<HashMap<String, ProgressBar>>,
    /// The terminal's settings before the display turned off the echo of
    /// control characters, restored by `finish`.
    saved_termios: Mutex<Option<nix::sys::termios::Termios>>,
}

/// Turns off the terminal's echo of control characters (`^C`) while the
/// live display runs: the echo lands inside the display and leaves a stale
/// frame on screen once it is cleared. Returns the settings to restore.
fn quiet_control_echo() -> Option<nix::sys::termios::Termios> {
    use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
    let tty = std::io::stderr();
    let saved = tcgetattr(&tty).ok()?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHOCTL);
    tcsetattr(&tty, SetArg::TCSANOW, &quiet).ok()?;
    Some(saved)
}

pub struct Progress {
    live: Option<Live>,
    quiet: bool,
    color: bool,
}

impl Progress {
    fn line(&self, text: &str) {
        if self.quiet {
            return;
        }
        match &self.live {
            Some(l) => {
                let _ = l.multi.println(text);
            }
            None => eline(text),
        }
    }

    fn paint(&self, text: &str, sgr: &str) -> String {
        if self.color {
            format!("\x1b[{sgr}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    pub fn finish(&self) {
        if let Some(l) = &self.live {
            for (_, b) in l
                .bars
                .lock()
                .map(|mut b| b.drain().collect::<Vec<_>>())
                .unwrap_or_default()
            {
                b.finish_and_clear();
            }
            l.counter.finish_and_clear();
            if let Some(saved) = l.saved_termios.lock().ok().and_then(|mut s| s.take()) {
                let _ = nix::sys::termios::tcsetattr(
                    std::io::stderr(),
                    nix::sys::termios::SetArg::TCSANOW,
                    &saved,
                );
            }
        }
    }
}

impl Observer for Progress {
    fn run_started(&self, instance: &InstanceId, workflow: &str, run: i64, total_steps: usize) {
        if let Some(l) = &self.live {
            l.counter.set_length(total_steps as u64);
            l.counter.set_prefix(workflow.to_string());
            l.counter.enable_steady_tick(Duration::from_millis(200));
        }
        self.line(&format!("{workflow} {instance} run {run}"));
    }

    fn step_started(&self, key: &ShownKey, attempt: i64) {
        match &self.live {
            Some(l) => {
                let bar = l.multi.add(ProgressBar::new_spinner());
                bar.set_style(
                    ProgressStyle::with_template("  {spinner} {msg} {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar.set_message(if attempt > 1 {
                    format!("{key} (attempt {attempt})")
                } else {
                    key.to_string()
                });
                bar.enable_steady_tick(Duration::from_millis(100));
                if let Ok(mut bars) = l.bars.lock() {
                    bars.insert(key.to_string(), bar);
                }
            }
            None if !self.quiet => eline(&format!("  {key}: started (attempt {attempt})")),
            None => {}
        }
    }

    fn step_finished(
        &self,
        key: &ShownKey,
        attempt: i64,
        outcome: AttemptOutcome,
        error: Option<&Failure>,
        elapsed: Duration,
    ) {
        let outcome = outcome.as_str();
        if let Some(l) = &self.live
            && let Ok(mut bars) = l.bars.lock()
            && let Some(bar) = bars.remove(key.as_str())
        {
            bar.finish_and_clear();
            l.multi.remove(&bar);
        }
        let mark = match outcome {
            "ok" => self.paint("ok", "32"),
            "cached" => self.paint("cached", "32"),
            "retry" => self.paint("retry", "33"),
            "interrupted" => self.paint("interrupted", "33"),
            other => self.paint(other, "31"),
        };
        let detail = error
            .map(|e| {
                if e.message == outcome {
                    format!("  {}", e.error_type)
                } else {
                    format!("  {}", error_text(&e.error_type.text(), Some(&e.message)))
                }
            })
            .filter(|d| d.trim() != outcome)
            .unwrap_or_default();
        self.line(&format!(
            "  {key}: {mark} (attempt {attempt}, {}){detail}",
            human(elapsed)
        ));
        // The counter counts steps: for_each items and compensations are parts of one.
        if (outcome == "ok" || outcome == "cached")
            && key.is_step()
            && let Some(l) = &self.live
        {
            l.counter.inc(1);
        }
    }

    fn fan_out_finished(&self, key: &ShownKey, items: usize) {
        self.line(&format!("  {key}: {items} item(s) done"));
        if let Some(l) = &self.live {
            l.counter.inc(1);
        }
    }

    fn step_skipped(&self, key: &ShownKey) {
        self.line(&format!("  {key}: skipped"));
        if let Some(l) = &self.live {
            l.counter.inc(1);
        }
    }

    fn steps_replayed(&self, count: usize) {
        if let Some(l) = &self.live {
            l.counter.inc(count as u64);
        }
        self.line(&format!(
            "  {count} completed step(s) replayed from history"
        ));
    }

    fn step_retrying(
        &self,
        key: &ShownKey,
        next_attempt: i64,
        try_n: i64,
        max_attempts: u32,
        delay: Duration,
    ) {
        // A fresh budget (`--retry-failed`, a restart) counts from 1 again,
        // and interrupted attempts do not count; history's numbers go on.
        let count = if try_n == next_attempt {
            format!("attempt {next_attempt}/{max_attempts}")
        } else {
            format!("attempt {next_attempt}, try {try_n}/{max_attempts}")
        };
        self.line(&format!(
            "  {key}: {} ({count})",
            self.paint(&format!("retrying in {}", human(delay)), "33")
        ));
    }

    fn message(&self, text: &str) {
        self.line(text);
    }
}

/// One line on stderr, in one write. Stderr is unbuffered, so `eprintln!`
/// writes each piece of its format on its own: five system calls for a
/// step's "started" line, on the path between two steps. A failed write
/// (stderr closed) is not an error of the run.
fn eline(text: &str) {
    let mut line = String::with_capacity(text.len() + 1);
    line.push_str(text);
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// An error as `type: message`, or the type alone when the message only
/// says it again (`interrupted: interrupted` says it once) or there is none.
pub fn error_text(error_type: &str, message: Option<&str>) -> String {
    match message {
        Some(m) if m != error_type && !m.is_empty() => format!("{error_type}: {m}"),
        _ => error_type.to_string(),
    }
}

//! Workflow definitions: the YAML model, its validation into a checked step
//! graph, durations and the `${{ }}` expression language. Everything here is
//! pure (no I/O besides reading the file), so the engine can trust a
//! [`Workflow`] completely once it has one.

pub mod duration;
pub mod expr;
pub mod model;
pub mod template;
pub mod validate;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use template::Template;

pub use model::Object;

/// A definition error: what is wrong, and where (`file:line:col`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}:{line}:{col}: {message}")]
pub struct DefinitionError {
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub message: String,
}

/// A checked workflow: ids are unique, `needs` resolved to indices, the graph
/// is acyclic, durations parsed and every expression parsed.
#[derive(Debug)]
pub struct Workflow {
    pub name: String,
    pub description: Option<String>,
    pub inputs: BTreeMap<String, InputSpec>,
    pub secrets: Vec<String>,
    pub env: Vec<(String, Template)>,
    pub state: Object,
    pub concurrency: usize,
    pub timeout: Option<Duration>,
    pub steps: Vec<Step>,
    /// The exact text the workflow was parsed from; pinned by each instance.
    pub source: String,
    /// SHA-256 of `source`, hex.
    pub hash: String,
}

#[derive(Debug, Clone)]
pub struct InputSpec {
    pub required: bool,
    pub default: Option<Value>,
    pub description: Option<String>,
}

#[derive(Debug)]
pub struct Step {
    pub id: String,
    /// Indices into `Workflow::steps`.
    pub needs: Vec<usize>,
    pub action: Action,
    pub dir: Option<String>,
    pub env: Vec<(String, Template)>,
    pub timeout: Option<Duration>,
    pub retry: RetryPolicy,
    /// Exit code -> error type (`user.<name>`).
    pub errors: BTreeMap<i32, String>,
    // The optional parts are boxed: a step is in memory for the whole run,
    // and most steps have few of them (10,000 steps: 7.6 MB unboxed).
    pub set_state: Option<Box<Value>>,
    pub compensate: Option<Box<Compensation>>,
    pub condition: Option<Box<Condition>>,
    pub for_each: Option<Box<Value>>,
    pub max_parallel: Option<usize>,
    pub continue_on_error: bool,
}

#[derive(Debug)]
pub enum Action {
    Run(RunCmd),
    Http(Box<HttpSpec>),
    Sleep(SleepSpec),
    WaitForEvent {
        name: String,
        timeout: Option<Duration>,
    },
    /// No action: a pure `set_state` (or marker) step.
    Noop,
}

#[derive(Debug)]
pub enum RunCmd {
    /// A string run with `sh -c`; expressions become environment variables.
    Shell(Template),
    /// An argv list exec'd without a shell; each element is one argument.
    Argv(Vec<Template>),
}

#[derive(Debug)]
pub struct HttpSpec {
    pub method: String,
    pub url: Template,
    pub headers: Vec<(String, Template)>,
    pub query: Vec<(String, Template)>,
    pub json: Option<Value>,
    pub body: Option<Template>,
    pub expect_status: Option<Vec<u16>>,
    pub idempotency_key: bool,
}

#[derive(Debug)]
pub enum SleepSpec {
    For(Duration),
    Until(Template),
}

#[derive(Debug)]
pub enum Condition {
    Literal(bool),
    Template(Template),
    Expr(expr::Expr),
}

#[derive(Debug)]
pub struct Compensation {
    pub action: Action,
    pub dir: Option<String>,
    pub env: Vec<(String, Template)>,
    pub timeout: Option<Duration>,
    pub retry: RetryPolicy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backoff {
    Fixed,
    Exponential,
}

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub backoff: Backoff,
    pub interval: Duration,
    pub multiplier: f64,
    pub max_interval: Duration,
    /// Error types (or `prefix.*` patterns) that fail the step at once.
    pub non_retryable: Vec<String>,
    /// Error types retried although not retryable by default (HTTP 4xx).
    pub retryable: Vec<String>,
}

impl RetryPolicy {
    /// The wait before attempt `next_attempt` (2 for the first retry).
    pub fn delay_before(&self, next_attempt: u32) -> Duration {
        let n = next_attempt.saturating_sub(2);
        let d = match self.backoff {
            Backoff::Fixed => self.interval,
            Backoff::Exponential => {
                let factor = self.multiplier.powi(n.min(1000) as i32);
                let secs = self.interval.as_secs_f64() * factor;
                if secs.is_finite() && secs < self.max_interval.as_secs_f64() {
                    Duration::from_secs_f64(secs)
                } else {
                    self.max_interval
                }
            }
        };
        d.min(self.max_interval.max(self.interval))
    }

    /// Whether an error of type `error_type` may be retried under this policy.
    pub fn is_retryable(&self, error_type: &str) -> bool {
        !self
            .non_retryable
            .iter()
            .any(|p| error_matches(p, error_type))
    }
}

/// `pattern` matches an error type exactly, or as `prefix.*`, or `*` for all.
pub fn error_matches(pattern: &str, error_type: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => error_type.starts_with(prefix),
        None => pattern == error_type,
    }
}

impl Workflow {
    /// Reads and validates a workflow file. Errors name the file as given.
    pub fn load(path: &Path) -> Result<Workflow, DefinitionError> {
        let label = path.display().to_string();
        let at_start = |message: String| DefinitionError {
            file: label.clone(),
            line: 1,
            col: 1,
            message,
        };
        let meta = std::fs::metadata(path)
            .map_err(|e| at_start(format!("cannot read workflow file: {}", io_reason(&e))))?;
        if meta.is_dir() {
            return Err(at_start("is a directory, not a workflow file".into()));
        }
        if meta.len() > validate::MAX_FILE_BYTES as u64 {
            return Err(at_start(format!(
                "file is {} bytes; workflow files are limited to {} bytes",
                meta.len(),
                validate::MAX_FILE_BYTES
            )));
        }
        // Read at most one byte over the limit: a device or pipe (`/dev/zero`)
        // reports no length but may never end.
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| {
                use std::io::Read as _;
                f.take(validate::MAX_FILE_BYTES as u64 + 1)
                    .read_to_end(&mut bytes)
            })
            .map_err(|e| at_start(format!("cannot read workflow file: {}", io_reason(&e))))?;
        if bytes.len() > validate::MAX_FILE_BYTES {
            return Err(at_start(format!(
                "file is over {} bytes; workflow files are limited to that",
                validate::MAX_FILE_BYTES
            )));
        }
        let source = String::from_utf8(bytes).map_err(|e| {
            let valid = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
            let pos = validate::pos_of(&text, text.len());
            DefinitionError {
                file: label.clone(),
                line: pos.line,
                col: pos.col,
                message: "file is not valid UTF-8".into(),
            }
        })?;
        validate::parse_source(&source, &label)
    }

    /// Re-parses a pinned definition (as stored by an instance).
    pub fn from_pinned(source: &str, label: &str) -> Result<Workflow, DefinitionError> {
        validate::parse_source(source, label)
    }

    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }
}

/// An I/O error's reason without the "(os error N)" noise.
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        _ => {
            let s = e.to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_string(),
                None => s,
            }
        }
    }
}

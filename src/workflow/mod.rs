//! Workflow definitions: the YAML model, its validation into a checked step
//! graph, durations and the `${{ }}` expression language. Everything here is
//! pure (no I/O besides reading the file), so the engine can trust a
//! [`Workflow`] completely once it has one.

mod children;
pub use children::{child_hashes, tree_hash};
pub mod duration;
pub mod expr;
pub mod matrix;
pub mod model;
pub mod queue;
pub mod shell;
pub mod template;
pub mod trigger;
pub mod validate;

use crate::vocab::ErrorType;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use template::Template;

pub use model::Object;

/// A definition error: what is wrong, and where (`file:line:col`).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{file}:{line}:{col}: {message}{}", more_note(.more))]
pub struct DefinitionError {
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub message: String,
    /// The other errors found in the same pass, in file order (`wf
    /// validate` prints each; the message above is the first).
    pub more: Vec<DefinitionError>,
}

/// What a one-line error adds when the pass found more (`wf validate`
/// prints them all).
fn more_note(more: &[DefinitionError]) -> String {
    match more.len() {
        0 => String::new(),
        1 => " (and 1 more error; `wf validate` lists every one)".into(),
        n => format!(" (and {n} more errors; `wf validate` lists every one)"),
    }
}

impl DefinitionError {
    /// This error and those found with it, in file order, each without the
    /// others.
    pub fn all(&self) -> Vec<DefinitionError> {
        let mut all = vec![DefinitionError {
            more: Vec::new(),
            ..self.clone()
        }];
        all.extend(self.more.iter().cloned());
        all
    }
}

/// The version of [`Workflow::compiled`]'s format: this crate's version, so a
/// new wf never reads what an older one compiled (it parses the YAML instead).
pub const COMPILED_FORMAT: &str = concat!("wf ", env!("CARGO_PKG_VERSION"), " compiled 9");

#[derive(serde::Serialize)]
struct Compiled<'a> {
    format: String,
    workflow: &'a Workflow,
}

/// A checked workflow: ids are unique, `needs` resolved to indices, the graph
/// is acyclic, durations parsed and every expression parsed.
///
/// Serde writes it compactly ([`Workflow::compiled`]): empty and default
/// parts are left out and read back as their defaults.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Workflow {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, InputSpec>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<(String, Template)>,
    /// `labels:`, rendered from the inputs when an instance starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub labels: Vec<(String, Template)>,
    /// `queue:`: the admission limits of its instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<queue::Queue>,
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub state: Object,
    pub concurrency: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// `trace: { per: instance }`: every run of an instance in one trace.
    #[serde(default, skip_serializing_if = "is_false")]
    pub trace_per_instance: bool,
    /// `outputs:`: rendered when the instance completes (a JSON object whose
    /// strings may hold `${{ }}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Value>,
    /// The steps whose results expressions read (`steps.X`); `None`: any
    /// may be (an expression reads `steps` whole or by a dynamic index).
    /// A run keeps only these in the expression context: 10,000 results
    /// nobody reads cost 3 MB.
    #[serde(default)]
    pub results_read: Option<std::collections::BTreeSet<String>>,
    /// `on.schedule`, in file order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub schedules: Vec<trigger::Schedule>,
    /// `on.webhook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<trigger::Webhook>,
    pub steps: Vec<Step>,
    /// The exact text the workflow was parsed from; pinned by each instance.
    #[serde(skip)]
    pub source: String,
    /// SHA-256 of `source`, hex.
    #[serde(skip)]
    pub hash: String,
    /// What validation found valid but likely not meant (`wf validate`
    /// prints them): expressions whose meaning changed with GitHub's rules.
    #[serde(skip)]
    pub warnings: Vec<DefinitionError>,
    /// The `workflow:` steps' call sites, in file order (see [`children`]).
    #[serde(skip)]
    pub calls: Vec<CallSite>,
    /// The workflows the `workflow:` steps call, by path as written: read
    /// from their files with this one ([`Workflow::load`]), or from the
    /// store with the pinned definition. Empty until then.
    #[serde(skip)]
    pub children: BTreeMap<String, std::sync::Arc<Workflow>>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct InputSpec {
    pub required: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Step {
    pub id: String,
    /// Indices into `Workflow::steps`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<usize>,
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<(String, Template)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// Left out when it is a step's without a `retry:` block, as most are
    /// (190 of a `/bin/true` step's 310 bytes in the compiled form).
    #[serde(
        default = "RetryPolicy::crash_recovery",
        skip_serializing_if = "RetryPolicy::is_crash_recovery"
    )]
    pub retry: RetryPolicy,
    /// Exit code -> error type (`user.<name>`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<i32, String>,
    // The optional parts are boxed: a step is in memory for the whole run,
    // and most steps have few of them (10,000 steps: 7.6 MB unboxed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_state: Option<Box<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compensate: Option<Box<Compensation>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<Box<Condition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<Box<Value>>,
    /// `matrix:` as written (its lists may be expressions), expanded when
    /// the step starts ([`matrix::expand`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<Box<Value>>,
    /// With `matrix`: a failed combination stops the open ones (`false`:
    /// they run on, and the step fails once they ended).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub fail_fast: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<usize>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub continue_on_error: bool,
    /// `lock:`: the semaphore each attempt holds while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<Box<queue::StepLock>>,
    /// `cache:`: the key a completed attempt's result is kept under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<Box<Cache>>,
}

/// `cache:`: a step that completes without running when an earlier
/// attempt of it with the same key completed (within `ttl`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Cache {
    pub key: Template,
    /// The `hashFiles(…)` calls of the key, their patterns, in order: the
    /// driver hashes the files before the key is rendered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Duration>,
    pub wait: bool,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum Action {
    Run(RunCmd),
    Http(Box<HttpSpec>),
    Sleep(SleepSpec),
    WaitForEvent {
        name: String,
        timeout: Option<Duration>,
    },
    /// A child instance of another workflow file.
    Workflow(Box<ChildCall>),
    /// No action: a pure `set_state` (or marker) step.
    Noop,
}

/// A `workflow:` step: the file it calls, the child's inputs, and what
/// becomes of the child when the parent ends first.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ChildCall {
    /// The file as written, relative to the calling file's folder: the key
    /// of [`Workflow::children`].
    pub path: String,
    /// The child's inputs: a JSON object whose strings may hold `${{ }}`.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub with: Object,
    #[serde(default, skip_serializing_if = "OnParentEnd::is_cancel")]
    pub on_parent_end: OnParentEnd,
}

/// What becomes of a child still open when its parent ends early (fails,
/// is canceled or terminated).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnParentEnd {
    /// Canceled, its compensations run (the default).
    #[default]
    Cancel,
    /// Terminated: canceled without compensations.
    Terminate,
    /// Left to run on its own.
    Abandon,
}

impl OnParentEnd {
    pub fn parse(s: &str) -> Option<OnParentEnd> {
        match s {
            "cancel" => Some(OnParentEnd::Cancel),
            "terminate" => Some(OnParentEnd::Terminate),
            "abandon" => Some(OnParentEnd::Abandon),
            _ => None,
        }
    }

    fn is_cancel(&self) -> bool {
        *self == OnParentEnd::Cancel
    }
}

/// Where a `workflow:` step names its file and the child's inputs: what the
/// checks against the child, once it is loaded, point at.
#[derive(Debug, Clone)]
pub struct CallSite {
    /// The step's id.
    pub step: String,
    /// The file as written.
    pub path: String,
    /// Where the file is named.
    pub at: validate::Pos,
    /// The `with:` keys and where each stands.
    pub with: Vec<(String, validate::Pos)>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum RunCmd {
    /// A string run with `sh -c`; expressions become environment variables.
    Shell(Template),
    /// A string written to a file and run by a `shell:` (an expression in
    /// it is a variable reference when the shell is POSIX, and cannot be
    /// there otherwise: validation refuses it).
    Script(Box<Script>),
    /// An argv list exec'd without a shell; each element is one argument.
    Argv(Vec<Template>),
}

/// A `run` string and the `shell:` that runs it.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Script {
    pub shell: shell::Shell,
    pub text: Template,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct HttpSpec {
    pub method: String,
    pub url: Template,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, Template)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub query: Vec<(String, Template)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Template>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_status: Option<Vec<u16>>,
    pub idempotency_key: bool,
    #[serde(default, skip_serializing_if = "Redirects::is_default")]
    pub follow_redirects: Redirects,
}

/// Which redirects an HTTP step follows. Whatever this says, a cross-origin
/// redirect is never followed by a request that carries a secret (docs/secrets.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Redirects {
    /// Any redirect (`follow_redirects: true`, the default).
    #[default]
    Follow,
    /// None: a 3xx response is the result (`false`).
    Never,
    /// Only to the same origin (`same-origin`).
    SameOrigin,
}

impl Redirects {
    fn is_default(&self) -> bool {
        *self == Redirects::Follow
    }
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum SleepSpec {
    For(Duration),
    Until(Template),
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum Condition {
    Literal(bool),
    Template(Template),
    Expr(expr::Expr),
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Compensation {
    pub action: Action,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<(String, Template)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    #[serde(default, skip_serializing_if = "RetryPolicy::is_default")]
    pub retry: RetryPolicy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Backoff {
    Fixed,
    Exponential,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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
    /// The policy of a step without a `retry:` block: only `crashed` is retried.
    #[serde(default, skip_serializing_if = "is_false")]
    pub crash_only: bool,
}

impl RetryPolicy {
    /// One attempt; were it retried: exponential backoff from 1 s,
    /// doubling, at most 1 h apart (docs/execution.md).
    pub const ONE_ATTEMPT: RetryPolicy = RetryPolicy {
        max_attempts: 1,
        backoff: Backoff::Exponential,
        interval: Duration::from_secs(1),
        multiplier: 2.0,
        max_interval: Duration::from_secs(3600),
        non_retryable: Vec::new(),
        retryable: Vec::new(),
        crash_only: false,
    };
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::ONE_ATTEMPT
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_true(b: &bool) -> bool {
    *b
}

fn yes() -> bool {
    true
}

impl RetryPolicy {
    fn is_default(&self) -> bool {
        *self == RetryPolicy::default()
    }

    fn is_crash_recovery(&self) -> bool {
        *self == RetryPolicy::crash_recovery()
    }

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

    /// The policy of a step that has no `retry:` block, its own or in
    /// `defaults`: up to 3 attempts, but only a crash of wf is retried.
    pub fn crash_recovery() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 3,
            crash_only: true,
            ..RetryPolicy::default()
        }
    }

    /// Whether an error of type `error_type` may be retried under this policy.
    pub fn is_retryable(&self, error_type: &ErrorType) -> bool {
        if self.crash_only {
            return *error_type == ErrorType::Crashed;
        }
        !self.non_retryable.iter().any(|p| error_type.matches(p))
    }
}

/// The JSON Schema of the workflow file, pretty-printed.
pub fn json_schema() -> String {
    let mut schema = schemars::schema_for!(model::RawWorkflow);
    schema.insert("title".into(), "wf workflow".into());
    schema.insert(
        "description".into(),
        "A workflow file of wf (docs/workflow-file.md): a YAML step graph".into(),
    );
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}

/// The candidate closest to `typed`, if one is close enough to be what was
/// meant (a typo, `-` for `_`, a missing or extra letter).
pub fn nearest<'a>(typed: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let norm = |s: &str| s.to_ascii_lowercase().replace('-', "_");
    let typed_n = norm(typed);
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(&typed_n, &norm(c)), c))
        .filter(|(d, c)| *d <= (c.len().max(typed.len()) / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// How messages and an instance's record name a workflow read from stdin
/// (`wf run -`).
pub const STDIN_LABEL: &str = "<stdin>";

/// Whether `FILE` is `-`: the workflow comes from stdin.
pub fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Where an instance (or a schedule) records its workflow as coming from,
/// and the folder its relative `dir:` and commands resolve against: the
/// file's absolute path and folder, or for stdin `<stdin>` and the current
/// directory.
pub fn origin(path: &Path) -> (String, std::path::PathBuf) {
    if is_stdin(path) {
        let cwd = std::env::current_dir().unwrap_or_default();
        return (STDIN_LABEL.to_string(), cwd);
    }
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let base_dir = abs.parent().map(Path::to_path_buf).unwrap_or_default();
    (abs.display().to_string(), base_dir)
}

impl Workflow {
    /// Reads and validates a workflow file (`-`: stdin) and the workflow
    /// files its `workflow:` steps call ([`Workflow::children`]). Errors
    /// name the file as given (stdin as `<stdin>`).
    pub fn load(path: &Path) -> Result<Workflow, DefinitionError> {
        children::load_tree(path, &mut Vec::new())
    }

    /// Whether any step takes a `lock:` (a run then gives back what the
    /// instance holds when it opens and when it closes).
    pub fn has_locks(&self) -> bool {
        self.steps.iter().any(|s| s.lock.is_some())
    }

    /// Reads and validates one workflow file, not the files it calls (but
    /// when it is invalid, names those it calls all the same).
    fn load_file(path: &Path) -> Result<Workflow, validate::Invalid> {
        let label = match is_stdin(path) {
            true => STDIN_LABEL.to_string(),
            false => path.display().to_string(),
        };
        let at_start = |message: String| DefinitionError {
            file: label.clone(),
            line: 1,
            col: 1,
            message,
            more: Vec::new(),
        };
        if is_stdin(path) {
            let mut bytes = Vec::new();
            use std::io::Read as _;
            std::io::stdin()
                .lock()
                .take(validate::MAX_FILE_BYTES as u64 + 1)
                .read_to_end(&mut bytes)
                .map_err(|e| at_start(format!("cannot read stdin: {}", io_reason(&e))))?;
            return Self::from_bytes(bytes, &label);
        }
        let meta = std::fs::metadata(path)
            .map_err(|e| at_start(format!("cannot read workflow file: {}", io_reason(&e))))?;
        if meta.is_dir() {
            return Err(at_start("is a directory, not a workflow file".into()).into());
        }
        if meta.len() > validate::MAX_FILE_BYTES as u64 {
            return Err(at_start(format!(
                "file is {} bytes; workflow files are limited to {} bytes",
                meta.len(),
                validate::MAX_FILE_BYTES
            ))
            .into());
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
        Self::from_bytes(bytes, &label)
    }

    /// Validates a workflow file's bytes (at most one over the limit).
    fn from_bytes(bytes: Vec<u8>, label: &str) -> Result<Workflow, validate::Invalid> {
        let at_start = |message: String| DefinitionError {
            file: label.to_string(),
            line: 1,
            col: 1,
            message,
            more: Vec::new(),
        };
        if bytes.len() > validate::MAX_FILE_BYTES {
            return Err(at_start(format!(
                "file is over {} bytes; workflow files are limited to that",
                validate::MAX_FILE_BYTES
            ))
            .into());
        }
        let source = String::from_utf8(bytes).map_err(|e| {
            let valid = e.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(&e.as_bytes()[..valid]).into_owned();
            let pos = validate::pos_of(&text, text.len());
            DefinitionError {
                file: label.to_string(),
                line: pos.line,
                col: pos.col,
                message: "file is not valid UTF-8".into(),
                more: Vec::new(),
            }
        })?;
        validate::parse_with_calls(&source, label)
    }

    /// Re-parses a pinned definition (as stored by an instance).
    pub fn from_pinned(source: &str, label: &str) -> Result<Workflow, DefinitionError> {
        validate::parse_source(source, label)
    }

    /// The validated workflow as JSON, stored beside the pinned text so a
    /// resume need not parse and validate the YAML again (for 10,000 steps
    /// that takes most of a resume). Tagged with [`COMPILED_FORMAT`].
    pub fn compiled(&self) -> Option<String> {
        serde_json::to_string(&Compiled {
            format: COMPILED_FORMAT.into(),
            workflow: self,
        })
        .ok()
    }

    /// The workflow of `source` from its [`Workflow::compiled`] form, if
    /// that was written by this version of wf and matches `source`;
    /// otherwise `None`, and the caller parses `source`.
    pub fn from_compiled(compiled: &str, source: &str) -> Option<Workflow> {
        #[derive(serde::Deserialize)]
        struct Owned {
            format: String,
            workflow: Workflow,
        }
        let c: Owned = serde_json::from_str(compiled).ok()?;
        if c.format != COMPILED_FORMAT {
            return None;
        }
        let mut wf = c.workflow;
        wf.source = source.to_string();
        wf.hash = validate::hash_source(source);
        Some(wf)
    }

    pub fn step(&self, id: &str) -> Option<&Step> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// Whether a completed `step` of this workflow has something to undo
    /// when a saga compensates: its own `compensate:`, or, a `workflow:`
    /// step without one, its child's compensations (down the tree).
    pub fn step_compensates(&self, step: &Step) -> bool {
        step.compensate.is_some()
            || (step.undone_by_its_child()
                && matches!(&step.action, Action::Workflow(call)
                    if self.children.get(&call.path).is_some_and(|c| c.compensates())))
    }

    /// Whether undoing a completed instance of this workflow runs anything.
    pub fn compensates(&self) -> bool {
        self.steps.iter().any(|s| self.step_compensates(s))
    }
}

impl Step {
    /// Whether the step runs as units of a list: a `for_each` step's items
    /// or a `matrix` step's combinations.
    pub fn fans_out(&self) -> bool {
        self.for_each.is_some() || self.matrix.is_some()
    }

    /// A `workflow:` step without a `compensate:` of its own: its
    /// compensation runs its child's (`engine::scheduler::child`).
    pub fn undone_by_its_child(&self) -> bool {
        self.compensate.is_none() && matches!(self.action, Action::Workflow(_))
    }
}

/// Why `name` cannot name a label, if it cannot: letters, digits, `_`,
/// `.` and `-`, 1 to 63 of them (the file's `labels:`, `--label`).
pub fn label_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 63 {
        Some("a label name has 1 to 63 characters")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    {
        Some("use letters, digits, `_`, `.` and `-`")
    } else if name.starts_with("wf.") {
        // (`wf.webhook`: the hook that started an instance.)
        Some("names starting with `wf.` are wf's own")
    } else {
        None
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

/// A label as `NAME=VALUE` (`wf run --label`, `wf list --label`, the
/// API's and the inspector's `label=`): the name checked as the file's
/// `labels:` names are. The error names the label, not where it came
/// from: clap says `--label`, the API the parameter.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    let Some((name, value)) = s.split_once('=') else {
        return Err(format!("label `{s}`: expected NAME=VALUE"));
    };
    if let Some(why) = crate::workflow::label_name_problem(name) {
        return Err(format!("label `{s}`: {why}"));
    }
    Ok((name.to_string(), value.to_string()))
}

/// A label filter (`wf list --label`, the API's `label=`): `NAME=VALUE`
/// as [`parse_label`] reads it, but a name of wf's own (`wf.webhook`) may
/// be matched though it may not be set.
pub fn parse_label_filter(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if name.starts_with("wf.") => {
            match label_name_problem(&name.replacen("wf.", "wf_", 1)) {
                Some(why) => Err(format!("label `{s}`: {why}")),
                None => Ok((name.to_string(), value.to_string())),
            }
        }
        _ => parse_label(s),
    }
}

#[cfg(test)]
mod tests;

//! The workflow file exactly as YAML spells it: serde types with
//! `deny_unknown_fields`, so a typo in a key is an error with a line and column
//! instead of a silently ignored setting. Checking what the values mean is
//! `validate`'s job; these types only give the file its shape.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use serde_saphyr::Spanned;
use std::collections::BTreeMap;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWorkflow {
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, RawInput>>")]
    pub inputs: Option<Spanned<BTreeMap<String, RawInput>>>,
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    pub secrets: Vec<Spanned<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, Value>,
    /// Each instance's labels, rendered from its inputs when it starts
    /// (`wf list --label`).
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, String>>")]
    pub labels: Option<Spanned<BTreeMap<String, String>>>,
    /// Admission control across instances: how many run at once per key,
    /// how often one starts, in what order.
    #[serde(default)]
    #[schemars(with = "Option<RawQueue>")]
    pub queue: Option<Spanned<RawQueue>>,
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub state: Option<Spanned<Value>>,
    #[serde(default)]
    pub defaults: Option<RawDefaults>,
    #[serde(default)]
    #[schemars(with = "Option<i64>")]
    pub concurrency: Option<Spanned<i64>>,
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub trace: Option<RawTrace>,
    /// Triggers run by `wf worker` (`on.schedule`, registered with `wf schedule add`).
    #[serde(default, rename = "on")]
    pub on: Option<RawOn>,
    /// The instance's result, rendered when it completes (`wf result`).
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    #[serde(default)]
    pub outputs: Option<Spanned<BTreeMap<String, Value>>>,
    #[schemars(with = "Vec<RawStep>")]
    pub steps: Spanned<Vec<Spanned<RawStep>>>,
}

/// `on:`: what starts instances by itself.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawOn {
    /// Fire times at which `wf worker` starts an instance.
    #[serde(default)]
    #[schemars(with = "Vec<RawSchedule>")]
    pub schedule: Vec<Spanned<RawSchedule>>,
    /// `POST /hooks/NAME` on `wf serve` starts an instance.
    #[serde(default)]
    #[schemars(with = "Option<RawWebhook>")]
    pub webhook: Option<Spanned<RawWebhook>>,
}

/// `on.webhook`: a signed HTTP request to `wf serve` starts an instance.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWebhook {
    /// The hook's name: `POST /hooks/NAME`.
    #[schemars(with = "String")]
    pub name: Spanned<String>,
    /// The environment variable of the server that holds the HMAC-SHA256 key
    /// (`X-Hub-Signature-256: sha256=...`, as GitHub signs).
    #[schemars(with = "String")]
    pub secret: Spanned<String>,
    /// Inputs of the instance, from the request: `body` (the JSON), `headers`
    /// (names in lower case) and `query`.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    pub inputs: Option<Spanned<Map<String, Value>>>,
    /// One instance per value: a redelivery returns the instance it started
    /// (default: the `Idempotency-Key` header).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub dedupe: Option<Spanned<String>>,
}

/// One `on.schedule` entry: `cron` (with `timezone`) or `every`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawSchedule {
    /// A 5-field cron expression (minute hour day-of-month month day-of-week).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub cron: Option<Spanned<String>>,
    /// A fixed interval (`30s`, `1h`), counted from the unix epoch.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub every: Option<Spanned<String>>,
    /// IANA time zone the cron expression is read in (default UTC).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub timezone: Option<Spanned<String>>,
    /// Inputs of the scheduled instances.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    pub inputs: Option<Spanned<Map<String, Value>>>,
    /// While the previous scheduled instance is still open: `skip` (default),
    /// `allow`, `buffer_one` or `cancel_previous`.
    #[serde(default)]
    pub overlap: Option<super::trigger::Overlap>,
    /// Fire times missed while no worker ran start late when at most this old.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub catchup: Option<Spanned<String>>,
}

/// `queue:`: admission control for the instances of this workflow.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawQueue {
    /// Instances with the same key share the limits (default: the workflow
    /// name); an expression may read `inputs`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub key: Option<Spanned<String>>,
    /// At most this many admitted (running) instances per key.
    #[serde(default)]
    #[schemars(with = "Option<i64>")]
    pub concurrency: Option<Spanned<i64>>,
    /// `N/period` (`10/1m`): at most N admissions per key in any window of the period.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub rate: Option<Spanned<String>>,
    /// 0 (admitted first) .. 9, default 5, FIFO within a priority: a number,
    /// or an expression over `inputs`.
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub priority: Option<Spanned<Value>>,
    /// While the key is full: `queue` (default), `skip` (end `skipped`), or
    /// `cancel_previous` (cancel the oldest admitted instance).
    #[serde(default)]
    pub on_full: Option<super::queue::OnFull>,
    /// A newer instance of the key skips the ones queued within this period
    /// before it, and waits this long before it is admitted.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub debounce: Option<Spanned<String>>,
    /// A sleeping or waiting instance keeps its slot (default: it gives it
    /// back and queues again when it is due).
    #[serde(default)]
    pub hold_while_suspended: bool,
}

/// `trace: { per: run | instance }`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTrace {
    /// `run` (default): a trace per run, linked; `instance`: one trace for
    /// every run of an instance, its id derived from the instance id.
    pub per: TracePer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TracePer {
    Run,
    Instance,
}

#[derive(Debug, Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawInput {
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub default: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDefaults {
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub timeout: Option<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Option<RawRetry>")]
    pub retry: Option<Spanned<RawRetry>>,
    /// `shell` and `working_directory` for every `run` step and compensation.
    #[serde(default)]
    pub run: Option<RawDefaultsRun>,
}

/// `defaults.run`, as GitHub Actions spells it (with `_`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDefaultsRun {
    /// What runs a `run` string (default `sh -c`): `bash`, `sh`, `python`,
    /// `pwsh`, or a command with `{0}` for the script file.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub shell: Option<Spanned<String>>,
    /// The working directory of a `run` step without a `dir`, relative to
    /// the workflow file's folder.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub working_directory: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, Clone, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawRetry {
    #[serde(default)]
    pub max_attempts: Option<i64>,
    #[serde(default)]
    pub backoff: Option<String>,
    #[serde(default)]
    pub interval: Option<String>,
    #[serde(default)]
    pub multiplier: Option<f64>,
    #[serde(default)]
    pub max_interval: Option<String>,
    #[serde(default)]
    pub non_retryable: Option<Vec<String>>,
    #[serde(default)]
    pub retryable: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
/// Optional parts are boxed: a workflow may have thousands of steps, and most
/// steps use few of them (an unboxed step is over 2 KiB).
pub struct RawStep {
    #[schemars(with = "String")]
    pub id: Spanned<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "run_schema")]
    pub run: Option<Box<Spanned<Value>>>,
    #[serde(default)]
    pub dir: Option<String>,
    /// What runs the `run` string (default `defaults.run.shell`, else `sh
    /// -c`): `bash`, `sh`, `python`, `pwsh`, or a command with `{0}`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub shell: Option<Spanned<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, Value>,
    #[serde(default)]
    pub needs: Option<Needs>,
    #[serde(default)]
    #[schemars(with = "Option<RawHttp>")]
    pub http: Option<Box<Spanned<RawHttp>>>,
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub sleep: Option<Box<Spanned<Value>>>,
    #[serde(default)]
    #[schemars(with = "Option<RawWait>")]
    pub wait_for_event: Option<Box<Spanned<RawWait>>>,
    /// A child instance of another workflow file, relative to this one.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub workflow: Option<Spanned<String>>,
    /// The child's inputs (with `workflow`); values may hold `${{ }}`, but
    /// not `secrets`: a child declares its own.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    pub with: Option<Box<Spanned<BTreeMap<String, Value>>>>,
    /// What becomes of a child still open when the parent ends early.
    #[serde(default)]
    #[schemars(with = "Option<OnParentEndName>")]
    pub on_parent_end: Option<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub timeout: Option<Spanned<String>>,
    #[serde(default)]
    #[schemars(with = "Option<RawRetry>")]
    pub retry: Option<Box<Spanned<RawRetry>>>,
    #[serde(default)]
    pub errors: BTreeMap<i64, String>,
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub set_state: Option<Box<Spanned<Value>>>,
    #[serde(default)]
    #[schemars(with = "Option<RawCompensate>")]
    pub compensate: Option<Box<Spanned<RawCompensate>>>,
    #[serde(default, rename = "if")]
    #[schemars(with = "Option<Value>")]
    pub if_: Option<Box<Spanned<Value>>>,
    #[serde(default)]
    #[schemars(with = "Option<Value>")]
    pub for_each: Option<Box<Spanned<Value>>>,
    /// One unit per combination of values: a map of lists (or of
    /// expressions that give lists), with `include` and `exclude`.
    #[serde(default)]
    #[schemars(with = "Option<BTreeMap<String, Value>>")]
    pub matrix: Option<Box<Spanned<Value>>>,
    /// With `matrix`: a failed combination stops the open ones (default true).
    #[serde(default)]
    #[schemars(with = "Option<bool>")]
    pub fail_fast: Option<Spanned<bool>>,
    #[serde(default)]
    #[schemars(with = "Option<i64>")]
    pub max_parallel: Option<Spanned<i64>>,
    #[serde(default)]
    pub continue_on_error: bool,
    /// Completes without running when a completed attempt of this step
    /// with the same key is kept (`key`, `ttl`, `wait`).
    #[serde(default)]
    #[schemars(with = "Option<RawCache>")]
    pub cache: Option<Box<Spanned<RawCache>>>,
    /// A counting semaphore shared by every instance on every host: each
    /// attempt takes it before it starts and gives it back when it ends.
    #[serde(default)]
    #[schemars(with = "Option<RawLock>")]
    pub lock: Option<Box<Spanned<RawLock>>>,
}

/// `cache: { key, ttl, wait }`.
#[derive(Debug, Deserialize, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCache {
    /// What the step's result depends on: an expression, or text holding
    /// expressions (`${{ hashFiles('src/**') }}`); no secrets.
    #[schemars(with = "String")]
    pub key: Spanned<String>,
    /// How long an entry is found after the attempt that made it (default:
    /// until replaced).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub ttl: Option<Spanned<String>>,
    /// Concurrent attempts with one key run the step once, the others
    /// waiting for its result (default true).
    #[serde(default)]
    pub wait: Option<bool>,
}

/// `lock: { key, limit }`.
#[derive(Debug, Deserialize, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawLock {
    /// The semaphore's name; expressions allowed (no secrets).
    #[schemars(with = "String")]
    pub key: Spanned<String>,
    /// How many attempts may hold it at once (default 1).
    #[serde(default)]
    #[schemars(with = "Option<i64>")]
    pub limit: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    #[serde(default)]
    pub method: Option<String>,
    pub url: String,
    #[serde(default)]
    pub headers: BTreeMap<String, Value>,
    #[serde(default)]
    pub query: BTreeMap<String, Value>,
    #[serde(default)]
    pub json: Option<Value>,
    #[serde(default)]
    pub body: Option<String>,
    #[serde(default)]
    pub expect_status: Option<Vec<u16>>,
    #[serde(default)]
    pub idempotency_key: bool,
    /// `true` (default), `false` or `same-origin`.
    #[serde(default)]
    pub follow_redirects: Option<Value>,
}

/// `on_parent_end`'s words, for the schema.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(
    dead_code,
    reason = "only its JSON Schema is used: `on_parent_end` is read as text and parsed by the checker, for its position"
)]
enum OnParentEndName {
    Cancel,
    Terminate,
    Abandon,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWait {
    /// The event's exact name (case-sensitive), without a comma or a control character.
    #[schemars(regex(pattern = r"^[^,\u0000-\u001F\u007F-\u009F]+$"))]
    pub name: String,
    #[serde(default)]
    pub timeout: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawCompensate {
    #[serde(default)]
    pub run: Option<Value>,
    #[serde(default)]
    pub http: Option<RawHttp>,
    #[serde(default)]
    pub dir: Option<String>,
    /// As a step's `shell` (default `defaults.run.shell`).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    pub shell: Option<Spanned<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, Value>,
    #[serde(default)]
    pub timeout: Option<String>,
    #[serde(default)]
    pub retry: Option<RawRetry>,
}

/// Convenience for the JSON object type used for state and outputs.
pub type Object = Map<String, Value>;

/// `needs:` as a list of step ids, or one id alone (`needs: build`).
#[derive(Debug)]
pub enum Needs {
    One(String),
    Many(Vec<Spanned<String>>),
}

impl<'de> Deserialize<'de> for Needs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Needs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a step id or a list of step ids")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Needs, E> {
                Ok(Needs::One(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Needs, A::Error> {
                let mut out = Vec::new();
                while let Some(id) = seq.next_element::<Spanned<String>>()? {
                    out.push(id);
                }
                Ok(Needs::Many(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Needs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Needs".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Steps this one runs after: a step id or a list of them ([] for none)",
            "oneOf": [
                { "type": "string" },
                { "type": "array", "items": { "type": "string" } }
            ]
        })
    }
}

/// `run:`: a shell string, or an argv list.
fn run_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "description": "A shell command (run with `sh -c`), or a list: the argv, exec'd without a shell",
        "oneOf": [
            { "type": "string" },
            { "type": "array", "items": { "type": "string" }, "minItems": 1 }
        ]
    })
}

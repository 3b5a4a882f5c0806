//! What `${{ }}` expressions see. One JSON object per run, updated in place as
//! steps complete (instead of rebuilt per step), so evaluating an expression
//! costs the same at step 10,000 as at step 1.

use crate::vocab::{InstanceId, StepStatus};
use serde_json::{Map, Value, json};

pub struct Context {
    root: Value,
    /// The step results expressions read (`None`: all); others are not kept.
    results_read: Option<std::collections::BTreeSet<String>>,
}

impl Context {
    pub fn new(
        instance_id: &str,
        parent: Option<&InstanceId>,
        workflow: &str,
        run: i64,
        inputs: &Value,
        secrets: Map<String, Value>,
    ) -> Context {
        Context {
            root: json!({
                "inputs": inputs,
                "env": {},
                "secrets": secrets,
                "state": {},
                "steps": {},
                "instance": { "id": instance_id, "parent": parent.map(InstanceId::as_str), "workflow": workflow },
                "run": { "number": run },
                "step": {},
            }),
            results_read: None,
        }
    }

    /// Keeps only the results of these steps (the ones expressions read).
    pub fn keep_results_of(&mut self, read: Option<std::collections::BTreeSet<String>>) {
        self.results_read = read;
    }

    pub fn set(&mut self, key: &str, value: Value) {
        if let Some(m) = self.root.as_object_mut() {
            m.insert(key.to_string(), value);
        }
    }

    pub fn remove(&mut self, key: &str) {
        if let Some(m) = self.root.as_object_mut() {
            m.remove(key);
        }
    }

    pub fn set_step_result(&mut self, id: &str, status: StepStatus, output: &Value) {
        if self.results_read.as_ref().is_some_and(|r| !r.contains(id)) {
            return;
        }
        if let Some(Value::Object(steps)) = self.root.get_mut("steps") {
            steps.insert(
                id.to_string(),
                json!({ "status": status.as_str(), "output": output }),
            );
        }
    }

    /// The context expressions are evaluated against.
    pub fn value(&self) -> &Value {
        &self.root
    }
}

/// Values of secrets, by name, from this process's environment.
pub fn secret_values(names: &[String]) -> Map<String, Value> {
    names
        .iter()
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), Value::String(v))))
        .collect()
}

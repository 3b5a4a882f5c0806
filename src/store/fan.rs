//! What a fan-out step's row pins: a `for_each` step's list as it is, a
//! `matrix` step's combinations under `matrix` (so that any reader of the
//! rows tells the two apart), and how a combination's units are shown.

use super::rows::{Sparse, StepRow};
use crate::vocab::UnitKey;
use serde_json::Value;

/// The key under which a `matrix` step's row pins its combinations
/// (`{"matrix": [...]}`); a `for_each` step pins its list as it is.
const MATRIX: &str = "matrix";

impl StepRow {
    /// What the step fans out over, as its row pinned it: a `for_each`
    /// step's items or a `matrix` step's combinations (None before it
    /// started, and for any other step).
    pub fn fan(&self) -> Option<&Vec<Value>> {
        match &*self.items {
            Value::Array(list) => Some(list),
            Value::Object(o) => o.get(MATRIX)?.as_array(),
            _ => None,
        }
    }

    /// The pinned form of a matrix's combinations (see [`StepRow::fan`]).
    pub fn pinned_matrix(combinations: Vec<Value>) -> Sparse {
        let mut o = serde_json::Map::new();
        o.insert(MATRIX.into(), Value::Array(combinations));
        Value::Object(o).into()
    }

    /// How unit `key` of this (step's own) row is shown: a matrix
    /// combination by its values, `build[os=linux,arch=arm64]` (and its
    /// compensation, `…:compensate`); None for any other unit (shown by
    /// its key) or an index past the list.
    pub fn unit_label(&self, key: UnitKey<'_>) -> Option<String> {
        let Value::Object(o) = &*self.items else {
            return None;
        };
        let combo = o.get(MATRIX)?.as_array()?.get(key.item?)?.as_object()?;
        let label = crate::workflow::matrix::label(&self.step_id, combo);
        Some(if key.compensation {
            label + crate::vocab::COMPENSATE_SUFFIX
        } else {
            label
        })
    }
}

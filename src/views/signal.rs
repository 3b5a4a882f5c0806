//! `wf signal ID EVENT --json`.

use crate::vocab::InstanceId;

/// `{id, event, delivered}`: the event is stored for the instance.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SignalView<'a> {
    pub id: &'a InstanceId,
    pub event: &'a str,
    /// Always true: a delivery that failed is an error, not a view.
    pub delivered: bool,
}

impl<'a> SignalView<'a> {
    /// Event `event` was stored for instance `id`.
    pub fn delivered(id: &'a InstanceId, event: &'a str) -> SignalView<'a> {
        SignalView {
            id,
            event,
            delivered: true,
        }
    }
}

//! `wf signal ID EVENT --json`.

use crate::vocab::InstanceId;

/// `{id, event, delivered}`: the event is stored for the instance.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct SignalView<'a> {
    pub id: &'a InstanceId,
    pub event: &'a str,
    /// Always true: a delivery that failed is an error, not a view.
    pub delivered: bool,
    /// Why no step will likely take it (a misspelt name); the event is kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<&'a str>,
}

impl<'a> SignalView<'a> {
    /// Event `event` was stored for instance `id`.
    pub fn delivered(id: &'a InstanceId, event: &'a str) -> SignalView<'a> {
        SignalView {
            id,
            event,
            delivered: true,
            warning: None,
        }
    }
}

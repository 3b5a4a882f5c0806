//! The order of `wf inspect --json`'s fields: what `wf` prints (serde_json
//! with `preserve_order`) is what the snapshots of `tests.rs` show.

use super::super::InstanceView;
use super::saga;
use serde_json::Value;

/// What `wf` prints is what the snapshots show: serde_json (with
/// `preserve_order`) writes the fields in the same order.
#[test]
fn printed_as_snapshotted() {
    let view = saga();
    let printed: Value = serde_json::from_str(
        &serde_json::to_string_pretty(&InstanceView::new(&view, true)).unwrap(),
    )
    .unwrap();
    let keys: Vec<&str> = printed
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "workflow",
            "status",
            "inputs",
            "labels",
            "state",
            "definition_hash",
            "error",
            "wake_at",
            "waiting_event",
            "created_at",
            "updated_at",
            "runs",
            "steps",
            "schedule",
            "events",
            "started_by",
            "actions"
        ]
    );
}

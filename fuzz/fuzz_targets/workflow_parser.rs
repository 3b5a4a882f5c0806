//! Fuzzes the workflow loader: any bytes must give a workflow or a
//! definition error with a position, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        match wf::workflow::Workflow::from_pinned(text, "fuzz.yaml") {
            Ok(wf) => assert!(!wf.steps.is_empty()),
            Err(e) => assert!(e.line >= 1 && e.col >= 1, "{e}"),
        }
    }
});

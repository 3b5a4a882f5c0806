//! `wf` as a library: the modules behind the `wf` binary, exposed so that fuzz
//! targets and benchmarks can drive the parser, the expression language and
//! the engine directly. The command line itself is `src/main.rs`.

pub mod commands;
pub mod engine;
pub mod error_kind;
pub mod exit;
pub mod printer;
pub mod serve;
pub mod store;
pub mod switches;
pub mod telemetry;
pub mod views;
pub mod vocab;
pub mod worker_log;
pub mod workflow;

//! Environment switches that turn off one of wf's Linux fast paths, for the
//! path wf already takes where the kernel or SQLite refuses it
//! (docs/commands.md, Environment variables):
//!
//! - `WF_NO_CLONE3`: a step's process is cloned with `clone`, not `clone3`
//!   (as where a seccomp filter or an old kernel refuses `clone3`;
//!   `engine::spawn`).
//! - `WF_NO_SPAWN_HOLD`: a step's process is started once its attempt is
//!   committed, not held at its exec by ptrace meanwhile (as where ptrace is
//!   refused; `engine::spawn::hold`).
//! - `WF_NO_WAL_VFS`: SQLite's default VFS, not `wf-wal` (as where it could
//!   not be registered): a commit's WAL frames are written two calls a frame,
//!   and the database file is synced at close (`store::sqlite::walbuf`,
//!   `closing`).
//!
//! Each is `1` or `true` (the path is turned off), `0`, `false` or empty
//! (it is not); anything else is refused before a command does anything
//! ([`check`]). They are read once, on first use, so that a step's spawn
//! asks nothing of the environment.

use std::sync::OnceLock;

/// What the switches say: true where the fast path is off.
#[derive(Clone, Copy, Debug, Default)]
pub struct Switches {
    pub no_clone3: bool,
    pub no_spawn_hold: bool,
    pub no_wal_vfs: bool,
}

/// The switches' names, in the order of [`Switches`]' fields.
pub const NAMES: [&str; 3] = ["WF_NO_CLONE3", "WF_NO_SPAWN_HOLD", "WF_NO_WAL_VFS"];

fn parsed() -> &'static Result<Switches, String> {
    static PARSED: OnceLock<Result<Switches, String>> = OnceLock::new();
    PARSED.get_or_init(|| {
        let [clone3, hold, vfs] = NAMES.map(|name| one(name, std::env::var_os(name)));
        Ok(Switches {
            no_clone3: clone3?,
            no_spawn_hold: hold?,
            no_wal_vfs: vfs?,
        })
    })
}

/// The value of switch `name`: whether it turns its path off.
fn one(name: &str, value: Option<std::ffi::OsString>) -> Result<bool, String> {
    let Some(value) = value else {
        return Ok(false);
    };
    match value.to_str().map(str::trim) {
        Some("1" | "true") => Ok(true),
        Some("0" | "false" | "") => Ok(false),
        _ => Err(format!(
            "{name} `{}`: expected 1 or true (turn it off), 0 or false (keep it)",
            value.to_string_lossy()
        )),
    }
}

/// The switches as set, read once. A value [`check`] refuses counts as
/// unset here (a command never gets that far).
pub fn get() -> Switches {
    parsed().as_ref().copied().unwrap_or_default()
}

/// Refuses a switch set to a value that is not one of those documented.
pub fn check() -> Result<(), String> {
    parsed().as_ref().map(|_| ()).map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::one;

    #[test]
    fn a_switch_is_on_off_or_refused() {
        for (value, want) in [
            (None, Ok(false)),
            (Some(""), Ok(false)),
            (Some("0"), Ok(false)),
            (Some("false"), Ok(false)),
            (Some("1"), Ok(true)),
            (Some(" true "), Ok(true)),
        ] {
            assert_eq!(one("WF_NO_X", value.map(Into::into)), want, "{value:?}");
        }
        for value in ["yes", "2", "TRUE", "on"] {
            let err = one("WF_NO_X", Some(value.into())).expect_err(value);
            assert_eq!(
                err,
                format!(
                    "WF_NO_X `{value}`: expected 1 or true (turn it off), 0 or false (keep it)"
                )
            );
        }
    }
}

//! What a `shell:` step needs before its process starts: its script
//! written to a file of the run's private folder (named with the extension
//! its shell needs), and whether a program is in the step's `PATH` (GitHub's
//! `python` is `python3` where only that is installed).

use std::path::Path;

/// Writes a `shell:` step's script to a new file in `folder` (the run's
/// private one), named with the extension its shell needs.
pub fn write(
    folder: &Path,
    shell: &crate::workflow::shell::Shell,
    text: &str,
) -> std::io::Result<tempfile::TempPath> {
    use std::io::Write;
    let mut file = tempfile::Builder::new()
        .prefix("wf-script-")
        .suffix(shell.extension())
        .tempfile_in(folder)?;
    file.write_all(text.as_bytes())?;
    Ok(file.into_temp_path())
}

/// Whether `program` is an executable file in the step's `PATH` (its own
/// `env`'s, else wf's).
pub fn on_path(program: &str, env: &[(String, String)]) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| std::ffi::OsString::from(v))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    std::env::split_paths(&path).any(|dir| {
        std::fs::metadata(dir.join(program))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

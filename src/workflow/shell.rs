//! `shell:`: what runs a `run` string other than wf's default `sh -c`,
//! named as GitHub Actions names its shells (`bash`, `sh`, `python`,
//! `pwsh`) or written as a command with `{0}` for the script file. Parsed
//! and checked here, with the file's validation; the engine only asks a
//! [`Shell`] for the words to run and the file's extension.

use serde::{Deserialize, Serialize};

/// A shell a step's `run` string is written to a file for, and run with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Shell {
    /// `bash --noprofile --norc -eo pipefail {0}`.
    Bash,
    /// `sh -e {0}`.
    Sh,
    /// `python {0}` (`python3` where there is no `python`).
    Python,
    /// `pwsh -command ". '{0}'"`.
    Pwsh,
    /// The words of a command, one or more of them holding `{0}`.
    Command(Vec<String>),
}

/// The programs whose quoting is POSIX `sh`'s, so that an expression can be
/// handed to the script as a variable reference rather than spliced in.
const POSIX: [&str; 5] = ["sh", "bash", "dash", "ksh", "zsh"];

impl Shell {
    /// Reads `shell:`'s text: a name, or a command with `{0}`.
    pub fn parse(text: &str) -> Result<Shell, String> {
        match text.trim() {
            "bash" => return Ok(Shell::Bash),
            "sh" => return Ok(Shell::Sh),
            "python" => return Ok(Shell::Python),
            "pwsh" => return Ok(Shell::Pwsh),
            _ => {}
        }
        if !text.contains("{0}") {
            return Err(format!(
                "unknown shell `{}`: use bash, sh, python, pwsh, or a command with `{{0}}` for the script file (`perl {{0}}`)",
                text.trim()
            ));
        }
        let words = shlex::split(text)
            .ok_or_else(|| format!("shell `{text}` has an unclosed quote or a trailing `\\`"))?;
        if words.first().is_none_or(|w| w.contains("{0}")) {
            return Err(format!(
                "shell `{text}` must start with the program that runs the script file `{{0}}`"
            ));
        }
        Ok(Shell::Command(words))
    }

    /// The command's words, `{0}` standing for the script file.
    pub fn template(&self) -> Vec<String> {
        let words: &[&str] = match self {
            Shell::Bash => &["bash", "--noprofile", "--norc", "-eo", "pipefail", "{0}"],
            Shell::Sh => &["sh", "-e", "{0}"],
            Shell::Python => &["python", "{0}"],
            Shell::Pwsh => &["pwsh", "-command", ". '{0}'"],
            Shell::Command(words) => return words.clone(),
        };
        words.iter().map(|w| (*w).to_string()).collect()
    }

    /// The program that runs the script (for spans and messages).
    pub fn program(&self) -> &str {
        match self {
            Shell::Bash => "bash",
            Shell::Sh => "sh",
            Shell::Python => "python",
            Shell::Pwsh => "pwsh",
            Shell::Command(words) => words.first().map_or("", String::as_str),
        }
    }

    /// The words to run with the script at `path`.
    pub fn argv(&self, path: &str) -> Vec<String> {
        self.template()
            .iter()
            .map(|w| w.replace("{0}", path))
            .collect()
    }

    /// The script file's extension (with its dot), which some shells need
    /// (pwsh runs only a `.ps1`).
    pub fn extension(&self) -> &'static str {
        match self {
            Shell::Bash | Shell::Sh => ".sh",
            Shell::Python => ".py",
            Shell::Pwsh => ".ps1",
            Shell::Command(_) => "",
        }
    }

    /// Whether the script is read by a POSIX shell, whose quoting wf knows:
    /// then an expression reaches it as a variable, never as code.
    pub fn quotes_posix(&self) -> bool {
        match self {
            Shell::Bash | Shell::Sh => true,
            Shell::Python | Shell::Pwsh => false,
            Shell::Command(words) => {
                let program = words
                    .first()
                    .map_or("", |w| w.rsplit('/').next().unwrap_or(w));
                POSIX.contains(&program)
            }
        }
    }

    /// How the shell is named in messages.
    pub fn name(&self) -> String {
        match self {
            Shell::Bash => "bash".into(),
            Shell::Sh => "sh".into(),
            Shell::Python => "python".into(),
            Shell::Pwsh => "pwsh".into(),
            Shell::Command(words) => shlex::try_join(words.iter().map(String::as_str))
                .unwrap_or_else(|_| words.join(" ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_shells_run_as_github_runs_them() {
        assert_eq!(
            Shell::parse("bash").unwrap().argv("/t/s.sh"),
            [
                "bash",
                "--noprofile",
                "--norc",
                "-eo",
                "pipefail",
                "/t/s.sh"
            ]
        );
        assert_eq!(
            Shell::parse("sh").unwrap().argv("/t/s.sh"),
            ["sh", "-e", "/t/s.sh"]
        );
        assert_eq!(
            Shell::parse("pwsh").unwrap().argv("/t/s.ps1"),
            ["pwsh", "-command", ". '/t/s.ps1'"]
        );
        assert_eq!(Shell::parse("python").unwrap().extension(), ".py");
    }

    #[test]
    fn a_command_is_split_as_a_shell_would() {
        let s = Shell::parse("perl -w '{0}' \"two words\"").unwrap();
        assert_eq!(s.argv("/x"), ["perl", "-w", "/x", "two words"]);
        assert!(!s.quotes_posix());
        assert!(Shell::parse("/bin/bash -x {0}").unwrap().quotes_posix());
    }

    #[test]
    fn a_shell_wf_cannot_run_is_refused_with_the_reason() {
        assert!(
            Shell::parse("zsh")
                .unwrap_err()
                .contains("unknown shell `zsh`")
        );
        assert!(
            Shell::parse("{0}")
                .unwrap_err()
                .contains("must start with the program")
        );
        assert!(
            Shell::parse("perl '{0}")
                .unwrap_err()
                .contains("unclosed quote")
        );
    }
}

//! The error types a failed attempt carries (docs/workflow-file.md, "Error
//! types"), as one enum by family: the retry rules and the HTTP defaults
//! match on the family, and the text (`exit.3`, `user.card_declined`,
//! `http.503`) exists only where it is stored, shown or matched against a
//! user's pattern.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// `exit.<code>`: a shell step exited non-zero.
    Exit(i32),
    /// `user.<name>`: an exit code the step's `errors:` maps.
    User(String),
    /// The command, program or `dir` was not found (exit 127/126).
    Spawn,
    /// The step's `timeout` (or the workflow's) passed, or no event came in
    /// a `wait_for_event`'s time.
    Timeout,
    /// `output.limit`: output over the cap.
    OutputLimit,
    /// `output.invalid`: a `$WF_OUTPUT` line that is not `name=value`.
    OutputInvalid,
    /// `http.<status>`: a status outside `expect_status`.
    Http(u16),
    /// `http.connect`: the connection or the transfer failed.
    HttpConnect,
    /// `http.request`: an invalid URL, method or scheme.
    HttpRequest,
    /// `http.redirect`: a redirect to another origin.
    HttpRedirect,
    /// An expression of the step could not be evaluated.
    Expression,
    /// `wf` died while the attempt ran.
    Crashed,
    /// Stopped by a signal to `wf`.
    Interrupted,
    /// Stopped by `wf cancel`.
    Canceled,
    /// `child.failed`: the child instance of a `workflow:` step failed.
    ChildFailed,
    /// `child.canceled`: the child instance of a `workflow:` step was canceled.
    ChildCanceled,
    /// A type this build does not know (written by another version of
    /// `wf`): kept as it was.
    Other(String),
}

impl ErrorType {
    /// The family's word alone, for a type that has no parameter.
    const fn fixed(&self) -> Option<&'static str> {
        Some(match self {
            ErrorType::Spawn => "spawn",
            ErrorType::Timeout => "timeout",
            ErrorType::OutputLimit => "output.limit",
            ErrorType::OutputInvalid => "output.invalid",
            ErrorType::HttpConnect => "http.connect",
            ErrorType::HttpRequest => "http.request",
            ErrorType::HttpRedirect => "http.redirect",
            ErrorType::Expression => "expression",
            ErrorType::Crashed => "crashed",
            ErrorType::Interrupted => "interrupted",
            ErrorType::Canceled => "canceled",
            ErrorType::ChildFailed => "child.failed",
            ErrorType::ChildCanceled => "child.canceled",
            ErrorType::Exit(_) | ErrorType::User(_) | ErrorType::Http(_) | ErrorType::Other(_) => {
                return None;
            }
        })
    }

    /// The type as text: `exit.3`, `http.503`, `timeout`.
    pub fn text(&self) -> std::borrow::Cow<'static, str> {
        match self.fixed() {
            Some(s) => s.into(),
            None => self.to_string().into(),
        }
    }

    /// Reads a stored or configured type. Never fails: a type not known here
    /// is [`ErrorType::Other`].
    pub fn parse(s: &str) -> ErrorType {
        let parsed = match s {
            "spawn" => Some(ErrorType::Spawn),
            "timeout" => Some(ErrorType::Timeout),
            "output.limit" => Some(ErrorType::OutputLimit),
            "output.invalid" => Some(ErrorType::OutputInvalid),
            "http.connect" => Some(ErrorType::HttpConnect),
            "http.request" => Some(ErrorType::HttpRequest),
            "http.redirect" => Some(ErrorType::HttpRedirect),
            "expression" => Some(ErrorType::Expression),
            "crashed" => Some(ErrorType::Crashed),
            "interrupted" => Some(ErrorType::Interrupted),
            "canceled" => Some(ErrorType::Canceled),
            "child.failed" => Some(ErrorType::ChildFailed),
            "child.canceled" => Some(ErrorType::ChildCanceled),
            _ => None,
        };
        parsed
            .or_else(|| {
                let (family, rest) = s.split_once('.')?;
                match family {
                    "exit" => canonical_number(rest).map(ErrorType::Exit),
                    "http" => canonical_number(rest).map(ErrorType::Http),
                    "user" if !rest.is_empty() => Some(ErrorType::User(rest.to_string())),
                    _ => None,
                }
            })
            .unwrap_or_else(|| ErrorType::Other(s.to_string()))
    }

    /// Whether the user's pattern (`http.402`, `user.*`, `*`) matches it.
    pub fn matches(&self, pattern: &str) -> bool {
        let text = self.text();
        match pattern.strip_suffix('*') {
            Some(prefix) => text.starts_with(prefix),
            None => pattern == text,
        }
    }

    /// Retried unless the step says otherwise; for HTTP steps, only
    /// connection failures, 429 and 5xx are (docs/workflow-file.md).
    pub fn http_default_retryable(&self) -> bool {
        match self {
            ErrorType::HttpConnect => true,
            ErrorType::Http(code) => *code == 429 || *code >= 500,
            ErrorType::HttpRequest | ErrorType::HttpRedirect => false,
            ErrorType::Other(s) => !s.starts_with("http."),
            _ => true,
        }
    }
}

/// A number written the way `wf` writes one (no sign, no leading zeros),
/// so that the type reads back to the same text.
fn canonical_number<T: std::str::FromStr + fmt::Display>(s: &str) -> Option<T> {
    let n: T = s.parse().ok()?;
    (n.to_string() == s).then_some(n)
}

impl fmt::Display for ErrorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorType::Exit(code) => write!(f, "exit.{code}"),
            ErrorType::User(name) => write!(f, "user.{name}"),
            ErrorType::Http(code) => write!(f, "http.{code}"),
            ErrorType::Other(s) => f.write_str(s),
            fixed => f.write_str(fixed.fixed().unwrap_or_default()),
        }
    }
}

impl std::str::FromStr for ErrorType {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<ErrorType, Self::Err> {
        Ok(ErrorType::parse(s))
    }
}

impl serde::Serialize for ErrorType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_reads_back_as_its_text() {
        for t in [
            "exit.1",
            "exit.255",
            "user.card_declined",
            "user.a.b",
            "spawn",
            "timeout",
            "output.limit",
            "output.invalid",
            "http.404",
            "http.503",
            "http.connect",
            "http.request",
            "http.redirect",
            "expression",
            "crashed",
            "interrupted",
            "canceled",
            // Not known here: kept as they are.
            "exit.01",
            "http.x",
            "user.",
            "lost",
        ] {
            let parsed = ErrorType::parse(t);
            assert_eq!(parsed.to_string(), t);
            assert_eq!(parsed.text(), t);
        }
        assert_eq!(ErrorType::parse("exit.3"), ErrorType::Exit(3));
        assert_eq!(ErrorType::parse("http.503"), ErrorType::Http(503));
        assert_eq!(
            ErrorType::parse("exit.01"),
            ErrorType::Other("exit.01".into())
        );
    }

    #[test]
    fn patterns_match_the_text() {
        let t = ErrorType::Http(402);
        assert!(t.matches("http.402"));
        assert!(t.matches("http.4*"));
        assert!(t.matches("*"));
        assert!(!t.matches("http.40"));
        assert!(ErrorType::User("x".into()).matches("user.*"));
    }

    #[test]
    fn http_defaults() {
        assert!(ErrorType::Http(429).http_default_retryable());
        assert!(ErrorType::Http(503).http_default_retryable());
        assert!(!ErrorType::Http(404).http_default_retryable());
        assert!(ErrorType::HttpConnect.http_default_retryable());
        assert!(!ErrorType::HttpRequest.http_default_retryable());
        assert!(!ErrorType::HttpRedirect.http_default_retryable());
        assert!(ErrorType::Timeout.http_default_retryable());
        assert!(ErrorType::OutputLimit.http_default_retryable());
    }
}

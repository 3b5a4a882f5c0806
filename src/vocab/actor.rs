//! Who asked for a change (SPEC §3 Actions are recorded): the actor every
//! recorded action and every run's root span (`wf.actor`) names. One type
//! with one spelling, `kind:name`, written and read only here.

use std::fmt;

/// Who asked: a person at a terminal, a token or a browser session of
/// `wf serve`, a webhook, a worker, a schedule.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Actor {
    /// `cli:USER@HOST`: the OS user that ran the command, and its host.
    Cli { user: String, host: String },
    /// `token:NAME`: a request with a bearer token of that name.
    Token(String),
    /// `session:NAME`: the inspector, signed in with token NAME.
    Session(String),
    /// `hook:NAME`: a webhook delivery to hook NAME.
    Hook(String),
    /// `worker:HOLDER`: a worker (its lease owner name).
    Worker(String),
    /// `schedule:NAME`: a schedule of workflow NAME firing.
    Schedule(String),
    /// A word this build does not know (written by a newer `wf`): kept as
    /// it was, shown as it is.
    Other(String),
}

impl Actor {
    /// The person running this command: `cli:USER@HOST`, USER the OS user
    /// of this process (its real uid's name, or the number when the system
    /// has no name for it: `$USER` is whatever the environment says).
    pub fn cli() -> Actor {
        let uid = nix::unistd::getuid();
        let user = nix::unistd::User::from_uid(uid)
            .ok()
            .flatten()
            .map_or_else(|| uid.to_string(), |u| u.name);
        Actor::Cli {
            user,
            host: crate::engine::lease::hostname(),
        }
    }

    /// The word before the colon.
    pub fn kind(&self) -> &str {
        match self {
            Actor::Cli { .. } => "cli",
            Actor::Token(_) => "token",
            Actor::Session(_) => "session",
            Actor::Hook(_) => "hook",
            Actor::Worker(_) => "worker",
            Actor::Schedule(_) => "schedule",
            Actor::Other(s) => s.split_once(':').map_or(s.as_str(), |(k, _)| k),
        }
    }

    /// Read back from its text (`kind:name`); an unknown kind is kept as
    /// [`Actor::Other`].
    pub fn parse(text: &str) -> Actor {
        let Some((kind, name)) = text.split_once(':') else {
            return Actor::Other(text.to_string());
        };
        let name = name.to_string();
        match kind {
            "cli" => match name.rsplit_once('@') {
                Some((user, host)) => Actor::Cli {
                    user: user.to_string(),
                    host: host.to_string(),
                },
                None => Actor::Other(text.to_string()),
            },
            "token" => Actor::Token(name),
            "session" => Actor::Session(name),
            "hook" => Actor::Hook(name),
            "worker" => Actor::Worker(name),
            "schedule" => Actor::Schedule(name),
            _ => Actor::Other(text.to_string()),
        }
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Actor::Cli { user, host } => write!(f, "cli:{user}@{host}"),
            Actor::Token(n) => write!(f, "token:{n}"),
            Actor::Session(n) => write!(f, "session:{n}"),
            Actor::Hook(n) => write!(f, "hook:{n}"),
            Actor::Worker(n) => write!(f, "worker:{n}"),
            Actor::Schedule(n) => write!(f, "schedule:{n}"),
            Actor::Other(s) => f.write_str(s),
        }
    }
}

impl serde::Serialize for Actor {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::Actor;

    #[test]
    fn each_kind_reads_back_as_written() {
        for a in [
            Actor::Cli {
                user: "ana".into(),
                host: "build-1".into(),
            },
            Actor::Token("deploy-bot".into()),
            Actor::Session("ana".into()),
            Actor::Hook("github".into()),
            Actor::Worker("h:12:ab12cd34:0f0f0f0f:4026531836".into()),
            Actor::Schedule("nightly".into()),
        ] {
            assert_eq!(Actor::parse(&a.to_string()), a);
        }
        assert_eq!(
            Actor::parse("robot:r2"),
            Actor::Other("robot:r2".into()),
            "a newer wf's kind is kept"
        );
        assert_eq!(Actor::parse("robot:r2").kind(), "robot");
        assert_eq!(Actor::parse("cli:nobody").to_string(), "cli:nobody");
    }

    #[test]
    fn the_cli_actor_names_a_user_and_a_host() {
        let Actor::Cli { user, host } = Actor::cli() else {
            panic!("not a cli actor")
        };
        assert!(!user.is_empty() && !host.is_empty());
    }
}

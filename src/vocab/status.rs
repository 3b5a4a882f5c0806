//! The states of instances, steps, attempts and runs, as enums: the words
//! a status column holds are spelled once, here, and read back through
//! `FromStr` at the database edge (an unknown word is a corrupt row, not a
//! state the engine silently does not match).

/// Declares an enum of words with `as_str`, `FromStr`, `Display`, serde as
/// the word, and `ALL` in declaration order.
macro_rules! words {
    ($(#[doc = $doc:literal])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $word:literal,)* }) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The word stored and shown.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)*
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = super::UnknownWord;
            fn from_str(s: &str) -> Result<$name, super::UnknownWord> {
                match s {
                    $($word => Ok($name::$variant),)*
                    _ => Err(super::UnknownWord {
                        what: stringify!($name),
                        word: s.to_string(),
                    }),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        super::schema::schema!(
            $name,
            super::schema::words(
                concat!($($doc, "\n",)*),
                &[$($word,)*],
            )
        );

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

words! {
    /// Where an instance is (docs/execution.md, "instance status").
    InstanceStatus {
        /// Recorded and due, not yet started by anyone (`wf run --detach`,
        /// the API, a webhook, a schedule's fire): the first worker with
        /// room takes it.
        Pending = "pending",
        /// Waiting for its queue to admit it (`queue:`): nothing of it runs.
        Queued = "queued",
        /// A process is driving it (or was, and died: `wf list` shows
        /// `interrupted` then).
        Running = "running",
        /// Suspended until a timer or a retry backoff is due.
        Sleeping = "sleeping",
        /// Suspended until an event arrives (or its wait times out).
        Waiting = "waiting",
        Completed = "completed",
        Failed = "failed",
        Canceled = "canceled",
        /// Ended by its queue before it ran (`on_full: skip`, `debounce`).
        Skipped = "skipped",
    }
}

impl InstanceStatus {
    /// Completed, failed, canceled or skipped: nothing more runs unless it
    /// is restarted.
    pub const fn is_ended(self) -> bool {
        matches!(
            self,
            InstanceStatus::Completed
                | InstanceStatus::Failed
                | InstanceStatus::Canceled
                | InstanceStatus::Skipped
        )
    }
}

words! {
    /// Where a unit (a step, a `for_each` item, a compensation) is.
    StepStatus {
        /// Not started (or reset by a restart, or by an interrupted attempt).
        Pending = "pending",
        Running = "running",
        /// Failed, with another attempt due at `retry_at`.
        Retrying = "retrying",
        /// A `sleep` step's timer runs until `retry_at`.
        Sleeping = "sleeping",
        /// A `wait_for_event` step waits for its event.
        Waiting = "waiting",
        Completed = "completed",
        Failed = "failed",
        /// Its `if` was false, or a step it needs was skipped or failed.
        Skipped = "skipped",
        Canceled = "canceled",
    }
}

impl StepStatus {
    /// Completed, skipped or failed: it has a result steps after it see.
    pub const fn is_ended(self) -> bool {
        matches!(
            self,
            StepStatus::Completed | StepStatus::Skipped | StepStatus::Failed
        )
    }

    /// Completed or skipped: replayed, never run again.
    pub const fn is_done(self) -> bool {
        matches!(self, StepStatus::Completed | StepStatus::Skipped)
    }

    /// Retrying, sleeping or waiting: held until a time (or an event).
    pub const fn is_timed(self) -> bool {
        matches!(
            self,
            StepStatus::Retrying | StepStatus::Sleeping | StepStatus::Waiting
        )
    }
}

words! {
    /// How an attempt ended (`attempts.outcome`, and a unit's last one).
    AttemptOutcome {
        Ok = "ok",
        /// Failed, and another attempt follows.
        Retry = "retry",
        /// Failed for good by its `timeout` (or the workflow's).
        Timeout = "timeout",
        /// Failed for good.
        Failed = "failed",
        /// Its step was skipped (a unit's outcome, never an attempt's).
        Skipped = "skipped",
        /// `wf` died while it ran; found by the next run.
        Crashed = "crashed",
        /// Stopped by a signal to `wf`: it does not count.
        Interrupted = "interrupted",
        /// Stopped by `wf cancel`: it does not count.
        Canceled = "canceled",
        /// A `cache:` step's attempt that took its result from an earlier
        /// one with the same key, without running.
        Cached = "cached",
    }
}

words! {
    /// How a run ended (`runs.outcome`).
    RunEnd {
        Completed = "completed",
        Failed = "failed",
        Sleeping = "sleeping",
        Waiting = "waiting",
        Canceled = "canceled",
        Interrupted = "interrupted",
        /// Its process died; found by the next run.
        Crashed = "crashed",
        /// Not a run's end (no run was opened): the queue did not admit
        /// the instance in time.
        Queued = "queued",
        /// Not a run's end (no run was opened): the queue ended the instance.
        Skipped = "skipped",
    }
}

/// What `wf cancel` asked of an instance, stored as 0, 1 or 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CancelRequest {
    #[default]
    None,
    /// Stop, then run the compensations.
    Cancel,
    /// Stop, and run nothing more (`--terminate`).
    Terminate,
}

impl CancelRequest {
    /// The number the `cancel_requested` column holds.
    pub const fn as_i64(self) -> i64 {
        match self {
            CancelRequest::None => 0,
            CancelRequest::Cancel => 1,
            CancelRequest::Terminate => 2,
        }
    }

    /// The column's number; anything above 2 is read as the strongest ask.
    pub const fn from_i64(n: i64) -> CancelRequest {
        match n {
            i64::MIN..=0 => CancelRequest::None,
            1 => CancelRequest::Cancel,
            _ => CancelRequest::Terminate,
        }
    }

    pub const fn is_asked(self) -> bool {
        !matches!(self, CancelRequest::None)
    }
}

/// An instance's status as shown: the stored one, except that a `running`
/// instance whose runner is gone (its lease expired, or its holder was a
/// process of this host that died) is `interrupted`, which `wf resume` or a
/// worker continues. Serializes as its word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShownStatus {
    Stored(InstanceStatus),
    Interrupted,
}

impl ShownStatus {
    /// Every status shown, in the order a list's filter offers them.
    pub const ALL: [ShownStatus; 10] = [
        ShownStatus::Stored(InstanceStatus::Pending),
        ShownStatus::Stored(InstanceStatus::Queued),
        ShownStatus::Stored(InstanceStatus::Running),
        ShownStatus::Interrupted,
        ShownStatus::Stored(InstanceStatus::Sleeping),
        ShownStatus::Stored(InstanceStatus::Waiting),
        ShownStatus::Stored(InstanceStatus::Completed),
        ShownStatus::Stored(InstanceStatus::Failed),
        ShownStatus::Stored(InstanceStatus::Canceled),
        ShownStatus::Stored(InstanceStatus::Skipped),
    ];

    /// The word shown.
    pub const fn as_str(self) -> &'static str {
        match self {
            ShownStatus::Stored(s) => s.as_str(),
            ShownStatus::Interrupted => "interrupted",
        }
    }
}

impl std::str::FromStr for ShownStatus {
    type Err = super::UnknownWord;
    fn from_str(s: &str) -> Result<ShownStatus, super::UnknownWord> {
        ShownStatus::ALL
            .into_iter()
            .find(|w| w.as_str() == s)
            .ok_or_else(|| super::UnknownWord {
                what: "status",
                word: s.to_string(),
            })
    }
}

impl std::fmt::Display for ShownStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for ShownStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_itself() {
        for s in InstanceStatus::ALL {
            assert_eq!(s.as_str().parse::<InstanceStatus>().unwrap(), *s);
        }
        for s in StepStatus::ALL {
            assert_eq!(s.as_str().parse::<StepStatus>().unwrap(), *s);
        }
        for s in AttemptOutcome::ALL {
            assert_eq!(s.as_str().parse::<AttemptOutcome>().unwrap(), *s);
        }
        for s in RunEnd::ALL {
            assert_eq!(s.as_str().parse::<RunEnd>().unwrap(), *s);
        }
    }

    #[test]
    fn an_unknown_word_is_an_error_naming_it() {
        let e = "Running".parse::<InstanceStatus>().unwrap_err();
        assert_eq!(e.to_string(), "unknown InstanceStatus `Running`");
        assert!(serde_json::from_str::<StepStatus>("\"done\"").is_err());
        assert_eq!(
            serde_json::to_string(&StepStatus::Retrying).unwrap(),
            "\"retrying\""
        );
    }

    #[test]
    fn a_cancel_request_round_trips_its_number() {
        for r in [
            CancelRequest::None,
            CancelRequest::Cancel,
            CancelRequest::Terminate,
        ] {
            assert_eq!(CancelRequest::from_i64(r.as_i64()), r);
        }
        assert_eq!(CancelRequest::from_i64(7), CancelRequest::Terminate);
    }
}

words! {
    /// What a recorded action did (`actions.action`; SPEC §3 Actions are
    /// recorded): every request that changes an instance or the registry.
    ActionKind {
        /// An instance was made (`wf run`, the API, a webhook, a schedule,
        /// a parent's `workflow:` step).
        Start = "start",
        Signal = "signal",
        Cancel = "cancel",
        /// `wf cancel --terminate`.
        Terminate = "terminate",
        /// A run of a suspended or interrupted instance (`wf resume`, a
        /// worker taking it up).
        Resume = "resume",
        /// `wf resume --retry-failed`.
        RetryFailed = "retry-failed",
        /// `wf restart --from STEP` (on a copy with `--as`).
        Restart = "restart",
        /// `wf upgrade`.
        Upgrade = "upgrade",
        /// A batch of `wf prune` (no instance: how many in its detail).
        Prune = "prune",
        /// `wf workflow add`.
        WorkflowAdd = "workflow-add",
        /// `wf workflow rm`.
        WorkflowRm = "workflow-rm",
        /// `wf schedule add`.
        ScheduleAdd = "schedule-add",
        /// `wf schedule rm`.
        ScheduleRm = "schedule-rm",
        /// `wf serve token add`.
        TokenAdd = "token-add",
        /// `wf serve token revoke`.
        TokenRevoke = "token-revoke",
    }
}

words! {
    /// What a token of `wf serve` may do (SPEC §8 Tokens and sessions), each
    /// scope all of the one before it and more.
    TokenScope {
        /// Sees everything, changes nothing.
        Read = "read",
        /// Also starts, signals, cancels, resumes, retries, restarts and
        /// upgrades instances.
        Operate = "operate",
        /// Also registers workflows, manages tokens and the database.
        Admin = "admin",
    }
}

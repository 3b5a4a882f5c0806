//! `cache:` in the run's decisions: before a unit of a `cache:` step
//! starts, the driver hashes the files its key names (`hashFiles`), the
//! key is rendered, the key's lock is taken (unless `wait: false`: the
//! attempts of other instances with that key then wait for this one), and
//! the driver looks the key up. An entry completes the unit at once,
//! `cached`, with its output and state patch; none lets it run, and its
//! success keeps an entry in the commit that records it. Each answer comes
//! back as an input; the unit starts again on the next tick.

use super::step::Started;
use super::*;
use crate::store::{CacheEntry, CachedFrom};
use crate::vocab::AttemptOutcome;
use crate::workflow::{Cache, Step};
use sha2::{Digest, Sha256};

/// Where a unit of a `cache:` step stands before its attempt.
#[derive(Debug)]
pub(super) enum CacheStep {
    /// The driver hashes the files of its key's `hashFiles` calls.
    Hashing,
    /// Their hashes, by the calls' patterns (one per line).
    Hashed(Map<String, Value>),
    /// The driver looks its key up.
    Looking,
    /// Found: the unit completes from it.
    Hit(Box<CacheEntry>),
    /// None kept: the unit runs (and keeps its result).
    Miss,
}

impl Scheduler {
    /// Where a unit of a `cache:` step is before its attempt: `None` when
    /// it runs as any unit does (no cache, a compensation, a key that
    /// renders empty, `--no-cache`, or none kept), else what its start
    /// came to.
    pub(super) fn start_cached(
        &mut self,
        unit: &Unit,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) -> Option<Started> {
        let wf = self.wf.clone();
        let step = &wf.steps[unit.idx];
        let cache = step.cache.as_ref()?;
        if unit.compensation {
            return None;
        }
        let key = unit.key(&wf);
        if let Some(message) = self.cache_failed.remove(&key) {
            let f = Failure::new(ErrorType::Expression, format!("`cache.key`: {message}"));
            self.fail_now(unit, f, now, spans);
            return Some(Started::Settled);
        }
        match self.cache.remove(&key) {
            Some(CacheStep::Miss) => {
                self.cache.insert(key, CacheStep::Miss);
                None
            }
            Some(CacheStep::Hit(entry)) => {
                self.settle_cached(unit, *entry, now, spans);
                Some(Started::Settled)
            }
            Some(s @ (CacheStep::Hashing | CacheStep::Looking)) => {
                self.cache.insert(key, s);
                Some(Started::Blocked)
            }
            None if !cache.files.is_empty() => {
                let dir = self.work_dir(&super::attempt::exec_of(step, unit));
                self.effects.push(Effect::HashFiles {
                    key: key.clone(),
                    dir,
                    calls: cache.files.clone(),
                });
                self.cache.insert(key, CacheStep::Hashing);
                Some(Started::Blocked)
            }
            Some(CacheStep::Hashed(files)) => {
                self.look_up(unit, (step, cache), key, files, now, spans)
            }
            None => self.look_up(unit, (step, cache), key, Map::new(), now, spans),
        }
    }

    /// Renders `step`'s `cache` key, takes its lock (`wait`), then asks
    /// for its entry.
    fn look_up(
        &mut self,
        unit: &Unit,
        (step, cache): (&Step, &Cache),
        key: UnitKeyBuf,
        files: Map<String, Value>,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) -> Option<Started> {
        self.ctx.set("__files", Value::Object(files.clone()));
        let rendered = cache.key.render_text(self.ctx.value());
        self.ctx.remove("__files");
        let text = match rendered {
            Ok(t) => t,
            Err(e) => {
                let f = Failure::new(ErrorType::Expression, format!("`cache.key`: {e}"));
                self.fail_now(unit, f, now, spans);
                return Some(Started::Settled);
            }
        };
        // No key: the step runs, and nothing is kept.
        if text.trim().is_empty() {
            self.cache.insert(key, CacheStep::Miss);
            return None;
        }
        // An item's or a combination's value is part of its key.
        let part = match unit.item {
            Some(i) => self
                .records
                .get(step.id.as_str())
                .and_then(|r| r.fan()?.get(i).cloned())
                .map(|v| hex::encode(Sha256::digest(v.to_string().as_bytes())))
                .unwrap_or_default(),
            None => String::new(),
        };
        // `--no-cache`: it runs, and its success is kept under its key.
        if self.run.no_cache {
            self.cache_keys.insert(key.clone(), (text, part));
            self.cache.insert(key, CacheStep::Miss);
            return None;
        }
        if cache.wait && !self.locks_held.contains(&key) {
            if !self.locks_asked.contains(&key) {
                let digest = Sha256::digest(format!("{text}\0{part}").as_bytes());
                let lock = format!(
                    "cache:{}/{}/{}",
                    self.wf.name,
                    step.id,
                    &hex::encode(digest)[..32]
                );
                self.locks_asked.insert(key.clone());
                self.effects.push(Effect::TakeLock {
                    key: key.clone(),
                    lock,
                    limit: 1,
                });
            }
            // Asked again with the lock: the hashes are kept meanwhile.
            self.cache.insert(key, CacheStep::Hashed(files));
            return Some(Started::Blocked);
        }
        self.effects.push(Effect::LookUpCache {
            key: key.clone(),
            workflow: self.wf.name.clone(),
            step: step.id.clone(),
            cache_key: text.clone(),
            part: part.clone(),
        });
        self.cache_keys.insert(key.clone(), (text, part));
        self.cache.insert(key, CacheStep::Looking);
        Some(Started::Blocked)
    }

    /// The driver's answer: the files' hashes, or the entry found (or not).
    pub(super) fn cache_answered(&mut self, key: UnitKeyBuf, answer: CacheAnswer) {
        match answer {
            CacheAnswer::Hashed(Ok(files)) => {
                self.cache.insert(key, CacheStep::Hashed(files));
            }
            CacheAnswer::Hashed(Err(message)) => {
                self.cache.remove(&key);
                self.cache_failed.insert(key, message);
            }
            CacheAnswer::Found(Some(entry)) => {
                self.cache.insert(key, CacheStep::Hit(entry));
            }
            CacheAnswer::Found(None) => {
                self.cache.insert(key, CacheStep::Miss);
            }
        }
        self.effects.push(Effect::Again);
    }

    /// Completes `unit` from `entry`: an attempt recorded `cached`, naming
    /// the attempt it came from, with that attempt's output and state patch.
    fn settle_cached(
        &mut self,
        unit: &Unit,
        entry: CacheEntry,
        now: Timestamp,
        spans: &mut dyn SpanIds,
    ) {
        let key = unit.key(&self.wf);
        self.enter(unit, None);
        let attempt = self.begin_attempt(unit, true, now, spans);
        if self.locks_held.remove(&key) {
            self.writes.push(Write::ReleaseLock { key: key.clone() });
        }
        self.cache_keys.remove(&key);
        self.writes.push(Write::EndAttempt {
            key: key.clone(),
            attempt,
            end: crate::store::AttemptEnd {
                outcome: AttemptOutcome::Cached,
                error_type: None,
                error_message: None,
                exit_code: None,
                finished_at: now,
                stdout: Vec::new(),
                stderr: Vec::new(),
            },
        });
        self.writes.push(Write::AttemptCachedFrom {
            key: key.clone(),
            attempt,
            from: entry.from.clone(),
        });
        self.seq += 1;
        let seq = self.seq;
        let rec = self.record(unit);
        rec.status = StepStatus::Completed;
        rec.outcome = Some(AttemptOutcome::Cached);
        rec.error_type = None;
        rec.error_message = None;
        rec.output = entry.output.clone();
        rec.finished_at = Some(now);
        rec.retry_at = None;
        rec.seq = Some(seq);
        rec.state_patch = entry.state_patch.clone().into();
        self.put(unit);
        self.record(unit).state_patch = Default::default();
        if !entry.state_patch.is_null() {
            let mut s = self.state.clone();
            crate::engine::output::merge_patch(&mut s, &entry.state_patch);
            self.state = s;
            self.state_dirty = true;
            self.ctx_state_current = false;
        }
        if unit.item.is_none() {
            self.ctx
                .set_step_result(&key, StepStatus::Completed, &entry.output);
        }
        self.effects.push(Effect::CachedFrom {
            key: key.clone(),
            from: entry.from.text(),
        });
        self.attempt_ended(&key, attempt, AttemptOutcome::Cached, None, Duration::ZERO);
    }

    /// The entry a unit's success keeps, when its step has a `cache:` and
    /// its key was looked up (`patch`: its `set_state` patch).
    pub(super) fn cache_entry_of(
        &mut self,
        unit: &Unit,
        attempt: i64,
        output: &Value,
        patch: &Value,
        now: Timestamp,
    ) -> Option<Write> {
        let key = unit.key(&self.wf);
        let (cache_key, part) = self.cache_keys.remove(&key)?;
        let step = &self.wf.steps[unit.idx];
        let cache = step.cache.as_ref()?;
        Some(Write::PutCache(Box::new(CacheEntry {
            workflow: self.wf.name.clone(),
            step_id: step.id.clone(),
            key: cache_key,
            part,
            from: CachedFrom {
                instance: self.run.id.clone(),
                attempt,
            },
            unit_key: key.to_string(),
            output: output.clone(),
            state_patch: patch.clone(),
            created_at: now,
            expires_at: cache.ttl.map(|t| now.plus(t)),
        })))
    }
}

/// What the driver answers a `cache:` unit.
#[derive(Debug)]
pub enum CacheAnswer {
    /// The hashes of its key's `hashFiles` calls, by their patterns (one
    /// per line), or why they could not be made.
    Hashed(Result<Map<String, Value>, String>),
    /// The entry kept for its key, if any.
    Found(Option<Box<CacheEntry>>),
}

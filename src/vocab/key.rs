//! What names a thing the history holds: an instance's id, and the key of a
//! unit (a step, one item of a `for_each` step, or a compensation), which
//! is stored as `id`, `id[3]`, `id:compensate` or `id[3]:compensate`.
//! The text is built and read here only; everything else asks the key.
//! Also the name of the event a child instance's end delivers to its
//! parent (`child:ID`), read by the engine, `wf signal` and validation.

use std::fmt;

/// An instance's id: 32 hex digits when `wf` made it, or the caller's
/// (`wf run --id`, `wf restart --as`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct InstanceId(String);

impl InstanceId {
    /// A new random id: 32 hex digits.
    pub fn random() -> InstanceId {
        InstanceId(uuid::Uuid::new_v4().simple().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<String> for InstanceId {
    fn from(s: String) -> InstanceId {
        InstanceId(s)
    }
}

impl From<&str> for InstanceId {
    fn from(s: &str) -> InstanceId {
        InstanceId(s.to_string())
    }
}

impl std::ops::Deref for InstanceId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for InstanceId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<std::path::Path> for InstanceId {
    fn as_ref(&self) -> &std::path::Path {
        self.0.as_ref()
    }
}

impl PartialEq<str> for InstanceId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for InstanceId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for InstanceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl serde::Serialize for InstanceId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

/// The suffix of a compensation's key.
pub const COMPENSATE_SUFFIX: &str = ":compensate";

/// A unit's key, parsed: which step, which item of it, and whether it is
/// the compensation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UnitKey<'a> {
    pub step: &'a str,
    pub item: Option<usize>,
    pub compensation: bool,
}

impl<'a> UnitKey<'a> {
    pub fn step(step: &'a str) -> UnitKey<'a> {
        UnitKey {
            step,
            item: None,
            compensation: false,
        }
    }

    pub fn item(step: &'a str, item: usize) -> UnitKey<'a> {
        UnitKey {
            step,
            item: Some(item),
            compensation: false,
        }
    }

    pub fn compensation(self) -> UnitKey<'a> {
        UnitKey {
            compensation: true,
            ..self
        }
    }

    /// Reads a stored key. Step ids hold no `[` or `:` (the validator allows
    /// letters, digits, `-` and `_`), so every key reads one way.
    pub fn parse(key: &'a str) -> UnitKey<'a> {
        let (rest, compensation) = match key.strip_suffix(COMPENSATE_SUFFIX) {
            Some(rest) => (rest, true),
            None => (key, false),
        };
        let (step, item) = match rest
            .strip_suffix(']')
            .and_then(|r| r.rsplit_once('['))
            .and_then(|(s, n)| Some((s, n.parse().ok()?)))
        {
            Some((s, n)) => (s, Some(n)),
            None => (rest, None),
        };
        UnitKey {
            step,
            item,
            compensation,
        }
    }

    /// A step's own unit: neither an item nor a compensation.
    pub fn is_step(&self) -> bool {
        self.item.is_none() && !self.compensation
    }
}

impl fmt::Display for UnitKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.step)?;
        if let Some(i) = self.item {
            write!(f, "[{i}]")?;
        }
        if self.compensation {
            f.write_str(COMPENSATE_SUFFIX)?;
        }
        Ok(())
    }
}

/// A unit's key as stored (`id`, `id[3]`, `id:compensate`), read once:
/// held in rows and as map keys, it says which step, item and whether a
/// compensation without being parsed again ([`UnitKeyBuf::parts`]). It
/// compares, hashes and orders as its text does, so a map keyed by it is
/// looked up by `&str` (`Borrow<str>`) and sorts as the stored keys do.
#[derive(Clone)]
pub struct UnitKeyBuf {
    text: String,
    /// The length of the step's id at the start of `text`.
    step_len: usize,
    item: Option<usize>,
    compensation: bool,
}

impl UnitKeyBuf {
    /// Reads a stored key (see [`UnitKey::parse`]).
    pub fn new(text: impl Into<String>) -> UnitKeyBuf {
        let text = text.into();
        let UnitKey {
            step,
            item,
            compensation,
        } = UnitKey::parse(&text);
        let step_len = step.len();
        UnitKeyBuf {
            text,
            step_len,
            item,
            compensation,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// What it names: the step, the item, whether the compensation.
    pub fn parts(&self) -> UnitKey<'_> {
        UnitKey {
            step: &self.text[..self.step_len],
            item: self.item,
            compensation: self.compensation,
        }
    }

    /// The id of the step it is a unit of.
    pub fn step(&self) -> &str {
        &self.text[..self.step_len]
    }

    /// Whether it is a compensation's unit.
    pub fn is_compensation(&self) -> bool {
        self.compensation
    }

    /// Whether it is a step's own unit: neither an item nor a compensation.
    pub fn is_step(&self) -> bool {
        self.parts().is_step()
    }
}

impl From<UnitKey<'_>> for UnitKeyBuf {
    fn from(k: UnitKey<'_>) -> UnitKeyBuf {
        // Written out rather than formatted: a step's own key (the common
        // case, made many times a step) is a copy of its id.
        let mut text = String::with_capacity(k.step.len());
        text.push_str(k.step);
        if let Some(i) = k.item {
            text.push('[');
            text.push_str(&i.to_string());
            text.push(']');
        }
        if k.compensation {
            text.push_str(COMPENSATE_SUFFIX);
        }
        UnitKeyBuf {
            text,
            step_len: k.step.len(),
            item: k.item,
            compensation: k.compensation,
        }
    }
}

impl From<String> for UnitKeyBuf {
    fn from(text: String) -> UnitKeyBuf {
        UnitKeyBuf::new(text)
    }
}

impl From<&str> for UnitKeyBuf {
    fn from(text: &str) -> UnitKeyBuf {
        UnitKeyBuf::new(text)
    }
}

impl From<&String> for UnitKeyBuf {
    fn from(text: &String) -> UnitKeyBuf {
        UnitKeyBuf::new(text.as_str())
    }
}

impl std::ops::Deref for UnitKeyBuf {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl std::borrow::Borrow<str> for UnitKeyBuf {
    fn borrow(&self) -> &str {
        &self.text
    }
}

impl AsRef<str> for UnitKeyBuf {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl PartialEq for UnitKeyBuf {
    fn eq(&self, other: &UnitKeyBuf) -> bool {
        self.text == other.text
    }
}

impl Eq for UnitKeyBuf {}

impl PartialEq<str> for UnitKeyBuf {
    fn eq(&self, other: &str) -> bool {
        self.text == other
    }
}

impl PartialEq<&str> for UnitKeyBuf {
    fn eq(&self, other: &&str) -> bool {
        self.text == *other
    }
}

impl PartialEq<String> for UnitKeyBuf {
    fn eq(&self, other: &String) -> bool {
        &self.text == other
    }
}

impl std::hash::Hash for UnitKeyBuf {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl PartialOrd for UnitKeyBuf {
    fn partial_cmp(&self, other: &UnitKeyBuf) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for UnitKeyBuf {
    fn cmp(&self, other: &UnitKeyBuf) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

impl fmt::Display for UnitKeyBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for UnitKeyBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.text, f)
    }
}

impl serde::Serialize for UnitKeyBuf {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// What the name of a child instance's end event starts with: the event
/// its last commit delivers to its parent (no one else may send or await
/// such a name).
pub const CHILD_EVENT_PREFIX: &str = "child:";

/// The event child `child`'s end delivers to its parent.
pub fn child_event(child: &InstanceId) -> String {
    format!("{CHILD_EVENT_PREFIX}{child}")
}

/// A waiting instance's `waiting_event` (names joined by commas) split into
/// the events it waits for and the children (by id) whose ends it waits for.
pub fn split_awaited(waiting: &str) -> (Vec<&str>, Vec<&str>) {
    let mut events = Vec::new();
    let mut children = Vec::new();
    for name in waiting.split(',') {
        match name.strip_prefix(CHILD_EVENT_PREFIX) {
            Some(child) => children.push(child),
            None => events.push(name),
        }
    }
    (events, children)
}

/// A unit's key and how it is shown to people: a `matrix` combination by
/// its values (`build[os=linux,arch=arm64]`), anything else by its key. It
/// reads as the key (`Deref`) and prints as the label (`Display`).
#[derive(Debug, Clone)]
pub struct ShownKey {
    pub key: UnitKeyBuf,
    pub label: Option<String>,
}

impl std::ops::Deref for ShownKey {
    type Target = UnitKeyBuf;
    fn deref(&self) -> &UnitKeyBuf {
        &self.key
    }
}

impl fmt::Display for ShownKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.label {
            Some(l) => f.write_str(l),
            None => f.write_str(self.key.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_back_as_written() {
        for (text, key) in [
            ("build", UnitKey::step("build")),
            ("build[3]", UnitKey::item("build", 3)),
            ("build:compensate", UnitKey::step("build").compensation()),
            (
                "build[0]:compensate",
                UnitKey::item("build", 0).compensation(),
            ),
            ("a-b_c", UnitKey::step("a-b_c")),
        ] {
            assert_eq!(UnitKey::parse(text), key, "{text}");
            assert_eq!(key.to_string(), text);
            let owned = UnitKeyBuf::new(text);
            assert_eq!(owned.parts(), key, "{text}");
            assert_eq!(UnitKeyBuf::from(key), owned);
            assert_eq!(owned.step(), key.step);
        }
        assert!(UnitKey::parse("x").is_step());
        assert!(!UnitKey::parse("x[1]").is_step());
        assert!(!UnitKey::parse("x:compensate").is_step());
    }
}

//! What a listing of instances asks the store for (`wf list`, the API's
//! instances and counts, the inspector's list): its filters, the id
//! prefix and error words as each backend's index reads them, and where
//! in a tree of instances the listed ones stand.

use crate::vocab::{InstanceId, InstanceStatus, Timestamp};

/// Which instances a listing shows.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub status: Option<InstanceStatus>,
    pub workflow: Option<String>,
    /// Created at or after this time.
    pub since: Option<Timestamp>,
    /// Roots only, or the children of one instance (`wf list --roots`,
    /// `--parent ID`).
    pub lineage: Lineage,
    /// Only instances with every one of these labels (`wf list --label`).
    pub labels: Vec<(String, String)>,
    /// Only instances of this queue key (`wf list --queue`).
    pub queue: Option<String>,
    /// Only instances whose id starts so.
    pub id_prefix: Option<IdPrefix>,
    /// Only instances whose error has these words.
    pub error_words: Option<ErrorWords>,
    /// Only instances listed after this one (older, or as old and made
    /// before it): the API's cursor.
    pub after: Option<InstanceId>,
    pub limit: Option<usize>,
}

impl ListFilter {
    /// Whether a text it compares holds a NUL, which no stored text does
    /// (PostgreSQL's text cannot, and would refuse the query): such a
    /// filter matches nothing, asked of neither backend.
    pub fn matches_nothing(&self) -> bool {
        let nul = |t: &str| t.contains('\0');
        self.workflow.as_deref().is_some_and(nul)
            || self.queue.as_deref().is_some_and(nul)
            || self.id_prefix.as_ref().is_some_and(|p| nul(&p.from))
            || self.after.as_deref().is_some_and(nul)
            || self.labels.iter().any(|(k, v)| nul(k) || nul(v))
            || matches!(&self.lineage, Lineage::ChildrenOf(p) if nul(p))
    }

    /// Whether [`Store::count_by_status`](super::Store::count_by_status)
    /// counts the first matches of an id prefix or an error's words in all
    /// (a sample, when more match than its cap) rather than each status's.
    pub fn counts_a_sample(&self) -> bool {
        self.id_prefix.is_some() || self.error_words.is_some()
    }
}

/// An id prefix as both backends compare it: ids from `from` (the prefix)
/// up to, not including, `to` (the least text after every id that starts
/// with it; none when there is no such text), so the primary key's index
/// finds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdPrefix {
    pub from: String,
    pub to: Option<String>,
}

impl IdPrefix {
    pub fn new(prefix: &str) -> IdPrefix {
        IdPrefix {
            from: prefix.to_string(),
            to: prefix_end(prefix),
        }
    }
}

/// Words an instance's error must hold, each as a word or the start of one
/// (`refus` finds `refused`), in any order; letters' case aside. Kept as
/// each backend's index reads them: an FTS5 query for SQLite, a `tsquery`
/// for PostgreSQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorWords {
    pub words: Vec<String>,
    pub fts5: String,
    pub tsquery: String,
}

impl ErrorWords {
    /// The words of `text` (split at white space); none when it has none.
    pub fn new(text: &str) -> Option<ErrorWords> {
        // Control characters part words as white space does (the
        // indexes' tokenizers drop them; a NUL would end FTS5's string).
        let words: Vec<String> = text
            .split(|c: char| c.is_whitespace() || c.is_control())
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect();
        if words.is_empty() {
            return None;
        }
        // FTS5: each word a quoted string (`"` doubled), a prefix (`*`);
        // words side by side must all be there.
        let fts5 = words
            .iter()
            .map(|w| format!("\"{}\"*", w.replace('"', "\"\"")))
            .collect::<Vec<_>>()
            .join(" ");
        // tsquery: each word a quoted lexeme (`'` doubled, `\` escaped), a
        // prefix (`:*`), joined by `&`.
        let tsquery = words
            .iter()
            .map(|w| format!("'{}':*", w.replace('\\', "\\\\").replace('\'', "''")))
            .collect::<Vec<_>>()
            .join(" & ");
        Some(ErrorWords {
            words,
            fts5,
            tsquery,
        })
    }
}

/// Where in a tree of instances the listed ones stand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Lineage {
    /// Any instance, root or child.
    #[default]
    Any,
    /// Only instances without a parent (started on their own).
    Roots,
    /// Only the direct children of this instance.
    ChildrenOf(InstanceId),
}

/// The first text above every text that starts with `prefix` (its last
/// character moved on by one; text compares as UTF-8 bytes, which is code
/// point order, and so do PostgreSQL's ids, `COLLATE "C"`), or None when
/// there is none.
pub(crate) fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match last as u32 + 1 {
            0xD800 => 0xE000, // past the surrogates
            n => n,
        };
        if let Some(c) = char::from_u32(next) {
            chars.push(c);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

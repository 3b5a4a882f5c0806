//! The list's search box (`/?q=…`): what a person types, read into the
//! list's own filters, to which the page then redirects, so the URL holds
//! the filters (shareable, each shown in its field) and never the box's
//! words. `name=value` is a label; `status:`, `workflow:`, `parent:`,
//! `since:`, `queue:`, `id:` and `error:` name a filter; any other word is
//! a workflow's name when a workflow has it, else an id prefix when an
//! instance's id starts with it, else a word of the errors searched.
//! [`parse`] is pure; [`resolve`] asks the store about the bare words.

use crate::store::{Store, StoreError};

/// The filters a search names, as the list's query string spells them.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Search {
    /// (parameter, value) pairs, in the order typed.
    pub pairs: Vec<(&'static str, String)>,
    /// Words that named no filter, still to be resolved.
    pub bare: Vec<String>,
}

/// The filters a `key:value` term may name.
const KEYS: [&str; 7] = [
    "status", "workflow", "parent", "since", "queue", "id", "error",
];

/// Reads `q`: each white-space separated term a filter or a bare word.
pub fn parse(q: &str) -> Search {
    let mut s = Search::default();
    for term in q.split_whitespace() {
        if let Some((k, v)) = term.split_once(':')
            && let Some(key) = KEYS.iter().find(|key| **key == k)
            && !v.is_empty()
        {
            s.pairs.push((key, v.to_string()));
        } else if let Some((name, value)) = term.split_once('=')
            && !name.is_empty()
        {
            s.pairs.push(("label", format!("{name}={value}")));
        } else {
            s.bare.push(term.to_string());
        }
    }
    s
}

/// The shortest id prefix taken as one (shorter words are error words).
const MIN_ID_PREFIX: usize = 4;

/// `s` with its bare words resolved: a workflow's name (one that is
/// registered or has an instance), an instance's id prefix, or else words
/// of the errors (all of them one `error` filter).
pub async fn resolve(store: &Store, mut s: Search) -> Result<Search, crate::engine::EngineError> {
    let registered: Vec<String> = store
        .workflows()
        .await?
        .into_iter()
        .map(|w| w.name)
        .collect();
    let mut words = Vec::new();
    for term in std::mem::take(&mut s.bare) {
        let has_workflow = !s.pairs.iter().any(|(k, _)| *k == "workflow");
        if has_workflow && (registered.contains(&term) || has_instances_of(store, &term).await?) {
            s.pairs.push(("workflow", term));
            continue;
        }
        if term.chars().count() >= MIN_ID_PREFIX && !s.pairs.iter().any(|(k, _)| *k == "id") {
            match store.resolve_id(&term).await {
                Ok(_) | Err(StoreError::Ambiguous { .. }) => {
                    s.pairs.push(("id", term));
                    continue;
                }
                Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        words.push(term);
    }
    if !words.is_empty() {
        match s.pairs.iter_mut().find(|(k, _)| *k == "error") {
            Some((_, v)) => {
                v.push(' ');
                v.push_str(&words.join(" "));
            }
            None => s.pairs.push(("error", words.join(" "))),
        }
    }
    Ok(s)
}

/// Whether workflow `name` has an instance.
async fn has_instances_of(store: &Store, name: &str) -> Result<bool, crate::engine::EngineError> {
    let q = crate::engine::actions::ListQuery {
        workflow: Some(name.to_string()),
        limit: 1,
        ..Default::default()
    };
    Ok(!crate::engine::actions::list(store, &q).await?.0.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_name_filters_labels_or_are_left_bare() {
        let s = parse("status:failed  team=payments deploy connection refused since:1d id: x=");
        assert_eq!(
            s.pairs,
            vec![
                ("status", "failed".to_string()),
                ("label", "team=payments".to_string()),
                ("since", "1d".to_string()),
                ("label", "x=".to_string()),
            ]
        );
        assert_eq!(s.bare, vec!["deploy", "connection", "refused", "id:"]);
    }

    #[test]
    fn an_unknown_key_is_a_bare_word() {
        let s = parse("host:port error:timeout");
        assert_eq!(s.pairs, vec![("error", "timeout".to_string())]);
        assert_eq!(s.bare, vec!["host:port"]);
    }
}

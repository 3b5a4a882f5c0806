//! The definition a run runs: the one pinned when the instance was made,
//! with the pinned definitions of the workflows it calls, read from the
//! store (from its validated form when that is current), whatever the
//! files say now.

use super::EngineError;
use super::RunOptions;
use crate::store::{self, Store, StoreError};
use crate::workflow::Workflow;
use std::sync::Arc;

/// The workflow `inst` runs: the caller's when it is the pinned one, else
/// the pinned definition.
pub(super) async fn workflow_of(
    store: &Store,
    inst: &store::InstanceRow,
    opts: &RunOptions,
) -> Result<Arc<Workflow>, EngineError> {
    let wf = match &opts.workflow {
        Some(wf) if wf.hash == inst.definition_hash => wf.clone(),
        _ => Arc::new(pinned_workflow(store, inst).await?),
    };
    Ok(wf)
}

/// The instance's pinned definition, with the pinned definitions of the
/// workflows it calls ([`Workflow::children`]): a resume runs what the
/// instance was started with, whatever the files say now.
pub async fn pinned_workflow(
    store: &Store,
    inst: &store::InstanceRow,
) -> Result<Workflow, EngineError> {
    let label = format!("{} (pinned definition of {})", inst.workflow_path, inst.id);
    let def = store.definition(&inst.definition_hash).await?;
    let (compiled, children) = def.map(|d| (d.compiled, d.children)).unwrap_or_default();
    let hash = &inst.definition_hash;
    let wf = pinned_one(
        &inst.definition,
        compiled.as_deref(),
        hash,
        &children,
        &label,
    )?;
    with_children(store, wf, hash, children, &label, 0).await
}

/// The definition pinned under `hash` (a registered workflow's), with the
/// pinned definitions of the workflows it calls.
pub async fn pinned_by_hash(
    store: &Store,
    hash: &str,
    label: &str,
) -> Result<Workflow, EngineError> {
    let def = store.definition(hash).await?.ok_or_else(|| {
        EngineError::Store(StoreError::Corrupt(format!(
            "{label}: its pinned definition {hash} is missing"
        )))
    })?;
    let wf = pinned_one(
        &def.source,
        def.compiled.as_deref(),
        hash,
        &def.children,
        label,
    )?;
    with_children(store, wf, hash, def.children, label, 0).await
}

/// A pinned text's workflow: its compiled form when this version of wf
/// wrote it for exactly this text (the text and `children` hash to
/// `hash`), else the text parsed again.
fn pinned_one(
    source: &str,
    compiled: Option<&str>,
    hash: &str,
    children: &std::collections::BTreeMap<String, String>,
    label: &str,
) -> Result<Workflow, EngineError> {
    if let Some(wf) = compiled.and_then(|c| Workflow::from_compiled(c, source))
        && crate::workflow::tree_hash(
            &wf.hash,
            children.iter().map(|(p, h)| (p.as_str(), h.as_str())),
        ) == hash
    {
        return Ok(wf);
    }
    Ok(Workflow::from_pinned(source, label)?)
}

/// Deeper than any tree of files can be: a pinned tree this deep is corrupt.
const MAX_PINNED_DEPTH: usize = 64;

/// `wf` with the pinned definitions of the workflows it calls attached
/// (`children`: path as written -> hash), recursively; checked against
/// `hash`, the tree's hash it was pinned under.
async fn with_children(
    store: &Store,
    mut wf: Workflow,
    hash: &str,
    children: std::collections::BTreeMap<String, String>,
    label: &str,
    depth: usize,
) -> Result<Workflow, EngineError> {
    let corrupt = |why: String| EngineError::Store(StoreError::Corrupt(format!("{label}: {why}")));
    if depth > MAX_PINNED_DEPTH {
        return Err(corrupt(
            "the pinned workflows call each other too deep".into(),
        ));
    }
    for (path, child_hash) in children {
        let def = store
            .definition(&child_hash)
            .await?
            .ok_or_else(|| corrupt(format!("the pinned definition of `{path}` is missing")))?;
        let child = pinned_one(
            &def.source,
            def.compiled.as_deref(),
            &child_hash,
            &def.children,
            label,
        )?;
        let child = Box::pin(with_children(
            store,
            child,
            &child_hash,
            def.children,
            label,
            depth + 1,
        ))
        .await?;
        wf.children.insert(path, Arc::new(child));
    }
    if let Some(call) = wf.calls.iter().find(|c| !wf.children.contains_key(&c.path)) {
        return Err(corrupt(format!(
            "step `{}` calls `{}`, whose definition was not pinned",
            call.step, call.path
        )));
    }
    let tree = crate::workflow::tree_hash(&wf.hash, crate::workflow::child_hashes(&wf));
    if tree != hash {
        return Err(corrupt(format!(
            "the pinned definitions do not hash to {hash} (they hash to {tree})"
        )));
    }
    wf.hash = tree;
    Ok(wf)
}

#[cfg(test)]
mod tests {
    //! A tree of workflow files pinned with an instance and read back: the
    //! children come from the store, not from the files, once pinned.

    use super::*;
    use crate::store::Location;
    use crate::vocab::InstanceStatus;

    fn write(dir: &std::path::Path, name: &str, text: &str) {
        std::fs::write(dir.join(name), text).expect("write");
    }

    #[test]
    fn a_pinned_tree_reads_back_whatever_the_files_say_now() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        write(
            d,
            "top.yaml",
            "name: top\nsteps:\n  - id: a\n    workflow: mid.yaml\n  - id: b\n    workflow: leaf.yaml\n    with: { n: 1 }\n",
        );
        write(
            d,
            "mid.yaml",
            "name: mid\nsteps:\n  - id: m\n    workflow: ./leaf.yaml\n    with: { n: 2 }\n",
        );
        write(
            d,
            "leaf.yaml",
            "name: leaf\ninputs: { n: { required: true } }\nsteps:\n  - id: x\n    run: echo ${{ inputs.n }}\n",
        );
        let wf = Workflow::load(&d.join("top.yaml")).expect("valid");
        let defs = crate::engine::definitions_of(&wf);
        assert_eq!(defs.len(), 3, "leaf is pinned once, though called twice");
        assert_eq!(defs[0].hash, wf.hash);
        assert_ne!(
            wf.hash,
            crate::workflow::validate::hash_source(&wf.source),
            "the tree's hash covers the children"
        );

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let mut store = Store::open(&Location::Sqlite(d.join("wf.db")))
                .await
                .expect("open");
            let row = store::InstanceRow {
                workflow_path: d.join("top.yaml").display().to_string(),
                base_dir: d.display().to_string(),
                ..store::InstanceRow::for_test(&wf, "i1", InstanceStatus::Running)
            };
            assert!(store.create_instance(&row, &defs, "", &|_| true).await.expect("create"));

            // The leaf's file changes: a new load differs, the pinned tree does not.
            write(
                d,
                "leaf.yaml",
                "name: leaf\ninputs: { n: { required: true } }\nsteps:\n  - id: y\n    run: echo changed\n",
            );
            assert_ne!(Workflow::load(&d.join("top.yaml")).expect("valid").hash, wf.hash);
            let inst = store.instance(&row.id).await.expect("instance");
            let pinned = pinned_workflow(&store, &inst).await.expect("pinned");
            assert_eq!(pinned.hash, wf.hash);
            let leaf = &pinned.children["leaf.yaml"];
            assert_eq!(leaf.steps[0].id, "x", "the leaf as pinned");
            let mid = &pinned.children["mid.yaml"];
            assert_eq!(mid.children["./leaf.yaml"].hash, leaf.hash);

            // A child's pinned definition gone: corrupt, said so.
            rusqlite::Connection::open(d.join("wf.db"))
                .and_then(|c| {
                    c.execute("DELETE FROM definitions WHERE hash = ?1", [&leaf.hash])
                })
                .expect("delete");
            let err = pinned_workflow(&store, &inst).await.expect_err("corrupt");
            assert!(err.to_string().contains("is missing"), "{err}");
        });
    }
}

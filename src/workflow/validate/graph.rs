//! The `needs` graph: no cycles, and every `steps.X` a step reads comes from
//! a step that runs before it.

use super::*;

impl Checker<'_> {
    /// A step sees `steps.X` only when X runs before it: X is among what
    /// it needs, directly or through the steps those need (a compensation
    /// also sees its own step). Anything else would render as nothing.
    pub(super) fn check_upstream(&self, steps: &[Step]) -> Result<(), DefinitionError> {
        let refs = self.step_refs.borrow();
        let mut upstream: HashMap<usize, std::collections::HashSet<usize>> = HashMap::new();
        for r in refs.iter() {
            let Some(&to) = self.step_ids.get(&r.to) else {
                continue;
            };
            let before = upstream.entry(r.from).or_insert_with(|| {
                let mut seen = std::collections::HashSet::new();
                let mut todo: Vec<usize> = steps[r.from].needs.clone();
                while let Some(i) = todo.pop() {
                    if seen.insert(i) {
                        todo.extend(steps[i].needs.iter().copied());
                    }
                }
                seen
            });
            if before.contains(&to) || (r.compensation && to == r.from) {
                continue;
            }
            let from = &steps[r.from].id;
            let message = if to == r.from {
                format!(
                    "step `{from}` refers to its own result `steps.{}` (its result is `output`, in `set_state`)",
                    r.to
                )
            } else {
                format!(
                    "step `{from}` refers to `steps.{}`, which does not run before it: add `{}` to its `needs` (or to a step it needs)",
                    r.to, r.to
                )
            };
            return Err(self.err(r.at, message));
        }
        Ok(())
    }

    pub(super) fn check_cycles(
        &self,
        raw: &[Spanned<RawStep>],
        steps: &[Step],
    ) -> Result<(), DefinitionError> {
        // Kahn's algorithm; whatever is left over sits on or behind a cycle.
        let n = steps.len();
        let mut indegree: Vec<usize> = steps.iter().map(|s| s.needs.len()).collect();
        let mut dependents = vec![Vec::new(); n];
        for (i, s) in steps.iter().enumerate() {
            for &d in &s.needs {
                dependents[d].push(i);
            }
        }
        let mut queue: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut seen = 0;
        while let Some(i) = queue.pop() {
            seen += 1;
            for &j in &dependents[i] {
                indegree[j] -= 1;
                if indegree[j] == 0 {
                    queue.push(j);
                }
            }
        }
        if seen == n {
            return Ok(());
        }
        // Walk `needs` from a leftover step until a step repeats: that is the cycle.
        let start = (0..n).find(|&i| indegree[i] > 0).unwrap_or(0);
        let mut path = vec![start];
        let mut cur = start;
        loop {
            let next = steps[cur]
                .needs
                .iter()
                .copied()
                .find(|&d| indegree[d] > 0)
                .unwrap_or(start);
            if let Some(k) = path.iter().position(|&p| p == next) {
                let cycle: Vec<&str> = path[k..]
                    .iter()
                    .chain(std::iter::once(&next))
                    .map(|&i| steps[i].id.as_str())
                    .collect();
                let first = path[k];
                return Err(self.err(
                    (&raw[first]).into(),
                    format!("cycle in `needs`: {}", cycle.join(" -> ")),
                ));
            }
            path.push(next);
            cur = next;
        }
    }
}

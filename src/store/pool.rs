//! Connections kept for the next run of the same process: a worker's runs
//! (and `wf serve`'s requests) each take one and give it back, so a run
//! does not open the database again nor prepare its statements again (for
//! 1000 children, when they were pooled so: 20.9 -> 4.5 ms a child on
//! PostgreSQL, bench/RESULTS.md; children now share `store::shared`). For one thread's tasks: not shared across threads.

use super::{Location, Result, Store};
use std::cell::RefCell;
use std::rc::Rc;

/// The connections to `location` not in use; cloned, it is the same pool.
#[derive(Clone)]
pub struct Pool {
    location: Location,
    idle: Rc<RefCell<Vec<Store>>>,
}

impl Pool {
    pub fn new(location: Location) -> Pool {
        Pool {
            location,
            idle: Rc::default(),
        }
    }

    /// A connection given back earlier, else a new one.
    pub async fn take(&self) -> Result<Store> {
        let idle = self.idle.borrow_mut().pop();
        match idle {
            Some(store) => Ok(store),
            None => Store::open(&self.location).await,
        }
    }

    /// Keeps `store` for the next run, if it can serve one.
    pub fn give(&self, store: Store) {
        if store.is_usable() {
            self.idle.borrow_mut().push(store);
        }
    }
}

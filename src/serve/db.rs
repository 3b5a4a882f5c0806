//! Where requests meet the store. The HTTP side of axum wants `Send`
//! futures; the store is not `Sync` (a SQLite connection) and the engine's
//! runs share one thread (`store::Pool` is `Rc`). So a request hands a job
//! to the local task set through a channel ([`Db::run`]): the job runs on
//! the server's thread with a connection from the pool, and its `Send`
//! result comes back to the request. At most [`MAX_CONNECTIONS`] jobs hold
//! a connection at once, so 1,000 concurrent requests open no more (a
//! PostgreSQL server's `max_connections` is 100 by default).

use super::error::ApiError;
use crate::store::{FileId, Location, Pool, Store};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

/// The most store connections the server's requests hold at once.
pub const MAX_CONNECTIONS: usize = 16;

type Job = Box<dyn FnOnce(Rc<Local>) -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// A request's way to the store (cheap to clone, `Send`).
#[derive(Clone)]
pub struct Db {
    tx: mpsc::UnboundedSender<Job>,
}

/// What a job has on the server's thread.
pub struct Local {
    pub location: Location,
    /// The SQLite file as the server opened it: a request finds the file
    /// deleted, moved or replaced and is refused (503) rather than read
    /// or written to a file nobody will read again.
    file: Option<FileId>,
    pool: Pool,
    permits: Arc<Semaphore>,
    /// Runs the server drives itself (a cancel's compensations, a resume,
    /// a restart), awaited before it exits.
    pub background: std::cell::RefCell<Vec<tokio::task::JoinHandle<()>>>,
    /// Where those runs say how they ended: the server's log.
    pub printer: crate::printer::Printer,
}

/// A connection of the pool, given back when dropped.
pub struct Conn {
    store: Option<Store>,
    pool: Pool,
    _permit: OwnedSemaphorePermit,
}

impl std::ops::Deref for Conn {
    type Target = Store;
    fn deref(&self) -> &Store {
        self.store.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Store {
        self.store.as_mut().expect("held until dropped")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(s) = self.store.take() {
            self.pool.give(s);
        }
    }
}

impl Local {
    /// A connection, once fewer than [`MAX_CONNECTIONS`] are in use.
    pub async fn conn(&self) -> Result<Conn, ApiError> {
        self.location.still(self.file).map_err(|why| {
            ApiError::unavailable(format!(
                "{why} while the server ran: nothing is read or written until it is restarted"
            ))
        })?;
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ApiError::unavailable("the server is stopping"))?;
        let store = self.pool.take().await.map_err(ApiError::from_store)?;
        Ok(Conn {
            store: Some(store),
            pool: self.pool.clone(),
            _permit: permit,
        })
    }

    /// Runs `f` beside the requests, on the server's thread, until it ends
    /// (the server waits for it before it exits).
    pub fn background(&self, f: impl Future<Output = ()> + 'static) {
        let mut tasks = self.background.borrow_mut();
        tasks.retain(|t| !t.is_finished());
        tasks.push(tokio::task::spawn_local(f));
    }
}

impl Db {
    /// Runs `f` on the server's thread and gives back its result.
    pub async fn run<T, F, Fut>(&self, f: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce(Rc<Local>) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, ApiError>> + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |local| {
            Box::pin(async move {
                let _ = tx.send(f(local).await);
            })
        });
        self.tx
            .send(job)
            .map_err(|_| ApiError::unavailable("the server is stopping"))?;
        rx.await
            .map_err(|_| ApiError::unavailable("the server is stopping"))?
    }
}

impl Db {
    /// Runs `f` on the server's thread, not waiting for it (what a request
    /// need not wait for: when a token was last used).
    pub fn spawn<F, Fut>(&self, f: F)
    where
        F: FnOnce(Rc<Local>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let job: Job = Box::new(move |local| Box::pin(f(local)));
        let _ = self.tx.send(job);
    }
}

/// The channel's two ends: the [`Db`] requests use, and the loop that runs
/// their jobs ([`dispatch`]) on the local task set.
pub fn channel(
    location: Location,
    printer: crate::printer::Printer,
) -> (Db, Rc<Local>, mpsc::UnboundedReceiver<Job>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let file = location.file_id().and_then(Result::ok);
    let local = Rc::new(Local {
        pool: Pool::new(location.clone()),
        file,
        location,
        permits: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
        background: Default::default(),
        printer,
    });
    (Db { tx }, local, rx)
}

/// Runs each job as its own local task, until every [`Db`] is dropped.
pub async fn dispatch(local: Rc<Local>, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(job) = rx.recv().await {
        tokio::task::spawn_local(job(local.clone()));
    }
}

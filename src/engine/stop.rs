//! What stops a running attempt: the run's interrupt (a signal, a cancel,
//! the workflow's deadline), which stops every attempt of the run, or the
//! attempt's own (a `matrix` step's `fail_fast`, which stops the other
//! combinations of one step). A job waits on both at once, so a unit can be
//! stopped without a task per attempt to forward the run's word.

use tokio::sync::watch;

/// The two words an attempt's work listens for.
pub struct StopSignal {
    run: watch::Receiver<bool>,
    own: watch::Receiver<bool>,
}

impl StopSignal {
    pub fn new(run: watch::Receiver<bool>, own: watch::Receiver<bool>) -> StopSignal {
        StopSignal { run, own }
    }

    /// Returns once either word is given (never, if neither can be).
    pub async fn fired(&mut self) {
        tokio::select! {
            () = wait_true(&mut self.run) => {}
            () = wait_true(&mut self.own) => {}
        }
    }
}

/// Returns once `rx` holds `true`; never, once its sender is gone.
async fn wait_true(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}

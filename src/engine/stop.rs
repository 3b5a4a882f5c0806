//! What stops a running attempt: the run's interrupt (a signal, a cancel,
//! the workflow's deadline), which stops every attempt of the run, or the
//! attempt's own (a `matrix` step's `fail_fast`, which stops the other
//! combinations of one step), or news of the run's lease (taken over, or
//! lapsed: `lapse`), heard here even while the run's loop waits on the
//! database. A job waits on all at once, so a unit can be stopped without a
//! task per attempt to forward the run's word.

use tokio::sync::watch;

/// The two words an attempt's work listens for.
pub struct StopSignal {
    run: watch::Receiver<bool>,
    own: watch::Receiver<bool>,
    lease: Option<watch::Receiver<Option<super::lapse::Lapse>>>,
}

impl StopSignal {
    pub fn new(run: watch::Receiver<bool>, own: watch::Receiver<bool>) -> StopSignal {
        StopSignal {
            run,
            own,
            lease: None,
        }
    }

    /// Also stops on news of the run's lease.
    pub fn with_lease(mut self, lease: watch::Receiver<Option<super::lapse::Lapse>>) -> StopSignal {
        self.lease = Some(lease);
        self
    }

    /// Returns once any word is given (never, if none can be).
    pub async fn fired(&mut self) {
        let lease = async {
            let heard = match &mut self.lease {
                Some(rx) => rx.wait_for(Option::is_some).await.is_ok(),
                None => false,
            };
            if !heard {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = wait_true(&mut self.run) => {}
            () = wait_true(&mut self.own) => {}
            () = lease => {}
        }
    }
}

/// Returns once `rx` holds `true`; never, once its sender is gone.
async fn wait_true(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}

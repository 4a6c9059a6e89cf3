//! The request queue as a worker sees it: the jobs, and whether one of them waits with no worker
//! free to take it (then a worker streaming to a slow client must not wait on that client:
//! [`super::client_stream::ClientSink`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::job::Job;

pub(crate) struct Queue {
    jobs: Receiver<Box<Job>>,
    /// Workers waiting for a job now (shared by every worker).
    idle: Arc<AtomicUsize>,
}

impl Queue {
    /// One worker's view of the queue `jobs`; `idle` is shared by all workers.
    pub fn new(jobs: Receiver<Box<Job>>, idle: Arc<AtomicUsize>) -> Queue {
        Queue { jobs, idle }
    }

    /// The next job, waiting at most `timeout` for one.
    pub fn take(&self, timeout: Duration) -> Result<Box<Job>, RecvTimeoutError> {
        self.idle.fetch_add(1, Ordering::SeqCst);
        let job = self.jobs.recv_timeout(timeout);
        self.idle.fetch_sub(1, Ordering::SeqCst);
        job
    }

    /// A job waits and no worker is free to take it.
    pub fn others_wait(&self) -> bool {
        !self.jobs.is_empty() && self.idle.load(Ordering::SeqCst) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_waits_for_a_worker_only_while_none_is_idle() {
        let (send, jobs) = crossbeam_channel::unbounded();
        let idle = Arc::new(AtomicUsize::new(0));
        let queue = Queue::new(jobs, Arc::clone(&idle));
        assert!(!queue.others_wait(), "nothing queued");
        send.send(Job::new()).unwrap();
        assert!(queue.others_wait(), "queued, every worker busy");
        idle.store(1, Ordering::SeqCst);
        assert!(!queue.others_wait(), "queued, a worker about to take it");
        idle.store(0, Ordering::SeqCst);
        assert!(queue.take(Duration::from_millis(10)).is_ok());
        assert!(!queue.others_wait(), "taken");
        assert_eq!(idle.load(Ordering::SeqCst), 0, "the taker is busy again");
    }
}

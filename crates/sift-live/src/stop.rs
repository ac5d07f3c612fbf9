//! Stopping a capture from elsewhere: another thread, or a signal handler.
//!
//! A [`Stopper`] is a flag plus an `eventfd` that the capture polls together with its socket: the
//! flag says "stop", the event wakes a capture that is waiting for the next block. Setting the
//! flag before writing the event, and the capture checking the flag after every wake-up, means a
//! stop is never lost, whenever it happens.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::sys;

#[derive(Debug)]
struct Shared {
    stopped: AtomicBool,
    wake: OwnedFd,
}

/// A handle that stops a [`crate::Capture`]: `Send + Sync`, cheap to clone.
///
/// [`Stopper::stop`] only stores an atomic flag and calls `write(2)`, both async-signal-safe, so
/// it may be called from a signal handler (keep a clone somewhere the handler can reach without
/// allocating, e.g. a `OnceLock<Stopper>` set before the handler is installed).
#[derive(Clone, Debug)]
pub struct Stopper {
    shared: Arc<Shared>,
}

impl Stopper {
    pub(crate) fn new() -> io::Result<Stopper> {
        Ok(Stopper {
            shared: Arc::new(Shared {
                stopped: AtomicBool::new(false),
                wake: sys::event_fd()?,
            }),
        })
    }

    /// Asks the capture to stop: its current or next [`crate::Capture::next_packet`] returns
    /// `Ok(None)`. Idempotent.
    pub fn stop(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        sys::signal_event(self.shared.wake.as_fd());
    }

    /// Whether [`Stopper::stop`] has been called.
    pub fn is_stopped(&self) -> bool {
        self.shared.stopped.load(Ordering::SeqCst)
    }

    /// The descriptor that becomes readable on [`Stopper::stop`].
    pub(crate) fn wake_fd(&self) -> BorrowedFd<'_> {
        self.shared.wake.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_sets_the_flag_and_wakes_a_poller() {
        let stopper = Stopper::new().unwrap();
        assert!(!stopper.is_stopped());
        let other = stopper.clone();
        let waiter = std::thread::spawn(move || {
            // Blocks until the event is written (no timeout); an interrupted poll just retries.
            loop {
                let ready = sys::poll_two(other.wake_fd(), other.wake_fd(), -1).unwrap();
                if ready.first & libc::POLLIN != 0 {
                    return other.is_stopped();
                }
            }
        });
        stopper.stop();
        stopper.stop();
        assert!(waiter.join().unwrap());
        assert!(stopper.is_stopped());
    }
}

//! The deterministic executor: every actor is a future polled by one seeded scheduler, and every
//! call an actor makes to a service first yields, so any other actor may run (and the clock may
//! move, and the actor may crash or stall) between any two calls.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use floe_core::{Error, ErrorKind, Result};

use crate::world::{Fault, World};

pub type Shared = Rc<RefCell<World>>;

/// A scheduling point: pending once, then ready.
struct Yield(bool);

impl Future for Yield {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}

/// Let the scheduler run someone else.
pub async fn step() {
    Yield(false).await
}

/// One call to a service: a scheduling point, then `f` under the fault plan — refused before it
/// applies, or applied with its answer lost (both an error the caller sees).
pub async fn op<T>(w: &Shared, what: &str, f: impl FnOnce(&mut World) -> T) -> Result<T> {
    step().await;
    let mut world = w.borrow_mut();
    let fault = world.fault();
    if world.opts.trace {
        eprintln!(
            "{:>8} p{} {what}{}",
            world.now % 1_000_000,
            world.current,
            match fault {
                Fault::None => "",
                Fault::Fail => " FAILED",
                Fault::Lost => " (answer lost)",
            }
        );
    }
    match fault {
        Fault::None => Ok(f(&mut world)),
        Fault::Fail => {
            Err(Error::new(ErrorKind::Io, format!("{what}: 503 (simulated)")).with_retryable(true))
        }
        Fault::Lost => {
            f(&mut world);
            Err(Error::new(
                ErrorKind::StateUnknown,
                format!("{what}: answer lost (simulated)"),
            )
            .with_retryable(true))
        }
    }
}

/// A read: a refused read and a lost answer look the same to the caller.
pub async fn read<T>(w: &Shared, what: &str, f: impl FnOnce(&World) -> T) -> Result<T> {
    op(w, what, |w| f(w)).await
}

pub type Task = Pin<Box<dyn Future<Output = ()>>>;

/// Poll `task` once; true when it finished.
pub fn poll_once(task: &mut Task) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    task.as_mut().poll(&mut cx).is_ready()
}

//! Retrying a fallible async operation: one policy type and one loop for every client of floe.
//!
//! A [`RetryPolicy`] says how long to wait before each retry (an initial delay multiplied at
//! every retry up to a cap, optionally jittered) and how many attempts to make in all. A [`Retry`]
//! applies it: it counts attempts, asks a predicate whether a failure is worth another attempt
//! ([`Error::is_retryable`] unless told otherwise), stops when the next wait would pass the
//! deadline, and sleeps through a [`Clock`] (tokio's timer by default, a fake in tests).
//!
//! Two ways to use it:
//!
//! - [`Retry::run`] / [`Retry::run_with`] take the operation as a closure and loop until it
//!   succeeds or the retry gives up; `run_with` also runs a hook before each retry (to re-check
//!   whether a write whose answer was lost landed after all, to reload a routing table, …).
//! - the stepping methods, [`Retry::backoff`] and [`Retry::next_delay`], for a loop written by
//!   the caller whose attempts need `&mut` access to state the closure form cannot lend:
//!
//! ```ignore
//! let mut retry = Retry::new(POLICY).with_deadline(deadline);
//! loop {
//!     match attempt(&mut state).await {
//!         Ok(v) => break v,
//!         Err(e) => retry.backoff(e).await?, // gives the error back once retrying is over
//!     }
//! }
//! ```
//!
//! Delays: the wait after attempt `n` (counting from 1) is `initial_delay · multiplierⁿ⁻¹`, capped
//! at `max_delay`, then jittered. The attempt count includes attempts retried without a wait
//! ([`Retry::retry_now`]), so a redirect followed by a failure still waits as the second retry.
//!
//! When retrying stops, the error of the last attempt is returned with its kind unchanged (a
//! caller may act on `StateUnknown` or `NotFound`), with an `attempts` context pair; when it was
//! the deadline that stopped it, the message says so.

use std::fmt;
use std::future::Future;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// How a delay is randomised, so that many clients failing together do not retry together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Jitter {
    /// The delay as computed.
    #[default]
    None,
    /// Uniform in `[0, delay)`.
    Full,
    /// Uniform in `[delay / 2, delay)`: never less than half the computed delay.
    Equal,
}

/// How long to wait before each retry and how many attempts to make; see the module doc.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Wait after the first failed attempt.
    pub initial_delay: Duration,
    /// Factor applied to the delay at each further retry (1 keeps it constant).
    pub multiplier: u32,
    /// Longest wait between two attempts (before jitter).
    pub max_delay: Duration,
    /// Attempts in all, the first included; `u32::MAX` means "until the deadline".
    pub max_attempts: u32,
    /// Randomisation of each delay.
    pub jitter: Jitter,
}

impl RetryPolicy {
    /// Delays from `initial_delay` doubling up to `max_delay`, no jitter, no attempt limit.
    pub const fn new(initial_delay: Duration, max_delay: Duration) -> Self {
        RetryPolicy {
            initial_delay,
            multiplier: 2,
            max_delay,
            max_attempts: u32::MAX,
            jitter: Jitter::None,
        }
    }

    /// The factor applied at each retry.
    pub const fn with_multiplier(mut self, multiplier: u32) -> Self {
        self.multiplier = multiplier;
        self
    }

    /// At most `max_attempts` attempts, the first included (0 counts as 1).
    pub const fn with_max_attempts(mut self, max_attempts: u32) -> Self {
        self.max_attempts = max_attempts;
        self
    }

    /// Jitter each delay.
    pub const fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// The wait after failed attempt `attempt` (1 for the first), before jitter.
    pub fn base_delay(&self, attempt: u32) -> Duration {
        let mut delay = self.initial_delay.min(self.max_delay);
        for _ in 1..attempt {
            if delay >= self.max_delay || self.multiplier <= 1 {
                break;
            }
            delay = delay
                .checked_mul(self.multiplier)
                .unwrap_or(self.max_delay)
                .min(self.max_delay);
        }
        delay
    }

    /// The wait after failed attempt `attempt` (1 for the first), jittered.
    pub fn delay(&self, attempt: u32) -> Duration {
        jittered(self.base_delay(attempt), self.jitter, random_u64())
    }

    /// The waits after attempts 1, 2, 3, … (jittered), for polling loops that are not retrying
    /// a failure but want the same growth.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + '_ {
        (1u32..).map(|attempt| self.delay(attempt))
    }
}

fn jittered(delay: Duration, jitter: Jitter, random: u64) -> Duration {
    let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
    match jitter {
        Jitter::None => delay,
        _ if nanos == 0 => delay,
        Jitter::Full => Duration::from_nanos(random % nanos),
        Jitter::Equal => {
            let half = nanos / 2;
            Duration::from_nanos(half + random % (nanos - half))
        }
    }
}

/// A random number for jitter, without a dependency: std's per-process random hash keys,
/// hashed with a counter.
fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// What a [`Retry`] reads the time from and sleeps with.
pub trait Clock {
    /// Now.
    fn now(&self) -> Instant;
    /// Wait `delay`.
    fn sleep(&self, delay: Duration) -> impl Future<Output = ()> + Send;
}

/// tokio's timer (it follows a paused test clock), the default [`Clock`].
#[cfg(feature = "tokio")]
#[derive(Clone, Copy, Debug, Default)]
pub struct TokioClock;

#[cfg(feature = "tokio")]
impl Clock for TokioClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn sleep(&self, delay: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep(delay)
    }
}

type Predicate = Box<dyn Fn(&Error) -> bool + Send + Sync>;

/// A policy applied to one operation: see the module doc.
pub struct Retry<C> {
    policy: RetryPolicy,
    deadline: Option<Instant>,
    clock: C,
    retry_if: Predicate,
    attempts: u32,
}

impl<C> fmt::Debug for Retry<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retry")
            .field("policy", &self.policy)
            .field("deadline", &self.deadline)
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "tokio")]
impl Retry<TokioClock> {
    /// `policy` on tokio's timer, retrying what [`Error::is_retryable`] allows, no deadline.
    pub fn new(policy: RetryPolicy) -> Self {
        Retry::with_clock(policy, TokioClock)
    }
}

impl<C: Clock> Retry<C> {
    /// `policy` on `clock`, retrying what [`Error::is_retryable`] allows, no deadline.
    pub fn with_clock(policy: RetryPolicy, clock: C) -> Self {
        Retry {
            policy,
            deadline: None,
            clock,
            retry_if: Box::new(Error::is_retryable),
            attempts: 0,
        }
    }

    /// Do not start a wait that would end at or after `deadline`.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// A deadline `timeout` from now, by the retry's clock.
    pub fn with_timeout(self, timeout: Duration) -> Self {
        let deadline = self.clock.now() + timeout;
        self.with_deadline(deadline)
    }

    /// Retry the failures `retry_if` accepts instead of the retryable ones.
    pub fn retry_if(mut self, retry_if: impl Fn(&Error) -> bool + Send + Sync + 'static) -> Self {
        self.retry_if = Box::new(retry_if);
        self
    }

    /// The policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Attempts that failed so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Count the failed attempt that gave `err` and decide: the wait before the next attempt,
    /// or `err` back (annotated, see the module doc) when it is not to be retried, the attempts
    /// are used up, or the wait would pass the deadline.
    pub fn next_delay(&mut self, err: Error) -> Result<Duration> {
        match self.verdict(&err, true) {
            Verdict::Wait(delay) => Ok(delay),
            stop => Err(self.give_up(err, stop)),
        }
    }

    /// [`Retry::next_delay`], then wait.
    pub async fn backoff(&mut self, err: Error) -> Result<()> {
        let delay = self.next_delay(err)?;
        self.clock.sleep(delay).await;
        Ok(())
    }

    /// Count the failed attempt that gave `err` and allow the next one at once, without a wait
    /// (the failure itself said where to go next, as a redirect does); `err` back when it is not
    /// to be retried, the attempts are used up or the deadline has passed.
    pub fn retry_now(&mut self, err: Error) -> Result<()> {
        match self.verdict(&err, false) {
            Verdict::Wait(_) => Ok(()),
            stop => Err(self.give_up(err, stop)),
        }
    }

    /// Wait `delay` on the retry's clock.
    pub async fn sleep(&self, delay: Duration) {
        self.clock.sleep(delay).await;
    }

    /// Run `op` (given the attempt number, from 1) until it succeeds or retrying stops.
    pub async fn run<T, F, Fut>(self, op: F) -> Result<T>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        self.run_with(op, |_, _| async { Ok(()) }).await
    }

    /// [`Retry::run`], running `before_retry` (given the last failure and the number of the
    /// attempt about to start) after each wait, just before the attempt; an error from the hook
    /// ends the retry with that error.
    pub async fn run_with<T, F, Fut, H, HFut>(mut self, mut op: F, mut before_retry: H) -> Result<T>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T>>,
        H: FnMut(&Error, u32) -> HFut,
        HFut: Future<Output = Result<()>>,
    {
        loop {
            let err = match op(self.attempts + 1).await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            match self.verdict(&err, true) {
                Verdict::Wait(delay) => self.clock.sleep(delay).await,
                stop => return Err(self.give_up(err, stop)),
            }
            before_retry(&err, self.attempts + 1).await?;
        }
    }

    /// Count a failed attempt and decide what comes next (a wait of zero when `wait` is false).
    fn verdict(&mut self, err: &Error, wait: bool) -> Verdict {
        self.attempts = self.attempts.saturating_add(1);
        if !(self.retry_if)(err) {
            return Verdict::NotRetryable;
        }
        if self.attempts >= self.policy.max_attempts.max(1) {
            return Verdict::OutOfAttempts;
        }
        let delay = if wait {
            self.policy.delay(self.attempts)
        } else {
            Duration::ZERO
        };
        match self.deadline {
            Some(deadline) if wait && self.clock.now() + delay >= deadline => Verdict::Deadline,
            Some(deadline) if !wait && self.clock.now() >= deadline => Verdict::Deadline,
            _ => Verdict::Wait(delay),
        }
    }

    fn give_up(&self, err: Error, why: Verdict) -> Error {
        let n = self.attempts;
        match why {
            Verdict::NotRetryable | Verdict::Wait(_) => err,
            Verdict::OutOfAttempts => err.with_context("attempts", n.to_string()),
            Verdict::Deadline => {
                let tries = if n == 1 { "attempt" } else { "attempts" };
                err.while_doing(format!(
                    "stopped retrying after {n} {tries}: the next one would pass the deadline"
                ))
                .with_context("attempts", n.to_string())
            }
        }
    }
}

/// What [`Retry`] decided after a failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Wait(Duration),
    NotRetryable,
    OutOfAttempts,
    Deadline,
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::ErrorKind;

    /// A clock that only moves when slept on, and remembers every wait.
    #[derive(Clone)]
    struct FakeClock {
        start: Instant,
        state: Arc<Mutex<(Duration, Vec<Duration>)>>,
    }

    impl FakeClock {
        fn new() -> Self {
            FakeClock {
                start: Instant::now(),
                state: Arc::new(Mutex::new((Duration::ZERO, Vec::new()))),
            }
        }
        fn slept(&self) -> Vec<Duration> {
            self.state.lock().unwrap().1.clone()
        }
    }

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            self.start + self.state.lock().unwrap().0
        }
        fn sleep(&self, delay: Duration) -> impl Future<Output = ()> + Send {
            let mut s = self.state.lock().unwrap();
            s.0 += delay;
            s.1.push(delay);
            std::future::ready(())
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn block_on<F: Future>(f: F) -> F::Output {
        // The fake clock never pends, so one poll finishes every future here.
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("the fake clock never waits"),
        }
    }

    fn io() -> Error {
        Error::new(ErrorKind::Io, "connection reset")
    }

    #[test]
    fn delays_grow_by_the_multiplier_and_stop_at_the_cap() {
        let p = RetryPolicy::new(ms(100), ms(1000));
        let d: Vec<_> = (1..=6).map(|a| p.base_delay(a)).collect();
        assert_eq!(d, [ms(100), ms(200), ms(400), ms(800), ms(1000), ms(1000)]);
        let p = p.with_multiplier(3);
        assert_eq!(p.base_delay(3), ms(900));
        let constant = RetryPolicy::new(ms(50), ms(50)).with_multiplier(1);
        assert_eq!(constant.delays().take(3).collect::<Vec<_>>(), [ms(50); 3]);
        assert_eq!(p.base_delay(u32::MAX), ms(1000));
    }

    #[test]
    fn jitter_stays_in_its_range() {
        let p = RetryPolicy::new(ms(1000), ms(1000));
        for _ in 0..200 {
            let full = p.with_jitter(Jitter::Full).delay(1);
            assert!(full < ms(1000), "{full:?}");
            let equal = p.with_jitter(Jitter::Equal).delay(1);
            assert!(equal >= ms(500) && equal < ms(1000), "{equal:?}");
        }
        assert_eq!(jittered(ms(10), Jitter::Equal, 0), ms(5));
        assert_eq!(jittered(Duration::ZERO, Jitter::Full, 7), Duration::ZERO);
    }

    #[test]
    fn attempts_are_counted_and_waits_follow_the_policy() {
        let clock = FakeClock::new();
        let policy = RetryPolicy::new(ms(100), ms(300)).with_max_attempts(10);
        let calls = Mutex::new(Vec::new());
        let out = block_on(Retry::with_clock(policy, clock.clone()).run(|attempt| {
            calls.lock().unwrap().push(attempt);
            async move { if attempt < 5 { Err(io()) } else { Ok(attempt) } }
        }));
        assert_eq!(out.unwrap(), 5);
        assert_eq!(*calls.lock().unwrap(), [1, 2, 3, 4, 5]);
        assert_eq!(clock.slept(), [ms(100), ms(200), ms(300), ms(300)]);
    }

    #[test]
    fn max_attempts_ends_with_the_last_error() {
        let clock = FakeClock::new();
        let policy = RetryPolicy::new(ms(10), ms(10)).with_max_attempts(3);
        let calls = Mutex::new(0);
        let e = block_on(Retry::with_clock(policy, clock.clone()).run(|_| {
            *calls.lock().unwrap() += 1;
            async { Err::<(), _>(io()) }
        }))
        .unwrap_err();
        assert_eq!(*calls.lock().unwrap(), 3);
        assert_eq!(clock.slept().len(), 2, "no wait after the last attempt");
        assert_eq!(e.kind(), ErrorKind::Io);
        assert_eq!(e.to_string(), "connection reset");
        assert!(e.context().contains(&("attempts", "3".to_owned())), "{e:?}");
    }

    #[test]
    fn a_failure_not_to_be_retried_stops_at_once() {
        let clock = FakeClock::new();
        let calls = Mutex::new(0);
        let e = block_on(
            Retry::with_clock(RetryPolicy::new(ms(10), ms(10)), clock.clone()).run(|_| {
                *calls.lock().unwrap() += 1;
                async { Err::<(), _>(Error::new(ErrorKind::Auth, "denied")) }
            }),
        )
        .unwrap_err();
        assert_eq!((*calls.lock().unwrap(), e.kind()), (1, ErrorKind::Auth));
        assert!(clock.slept().is_empty());
        assert_eq!(e.to_string(), "denied");

        // A predicate widens (or narrows) what is retried.
        let calls = Mutex::new(0);
        let out = block_on(
            Retry::with_clock(RetryPolicy::new(ms(10), ms(10)), clock.clone())
                .retry_if(|e| e.kind() == ErrorKind::Auth)
                .run(|attempt| {
                    *calls.lock().unwrap() += 1;
                    async move {
                        if attempt == 1 {
                            Err(Error::new(ErrorKind::Auth, "stale token"))
                        } else {
                            Ok(())
                        }
                    }
                }),
        );
        assert!(out.is_ok());
        assert_eq!(*calls.lock().unwrap(), 2);
    }

    #[test]
    fn the_deadline_stops_a_wait_that_would_pass_it() {
        let clock = FakeClock::new();
        let deadline = clock.now() + ms(650);
        let policy = RetryPolicy::new(ms(100), ms(10_000));
        let calls = Mutex::new(0);
        let e = block_on(
            Retry::with_clock(policy, clock.clone())
                .with_deadline(deadline)
                .run(|_| {
                    *calls.lock().unwrap() += 1;
                    async { Err::<(), _>(io()) }
                }),
        )
        .unwrap_err();
        // Waits of 100, 200 (300 in all); the next, 400, would end at 700 > 650.
        assert_eq!(clock.slept(), [ms(100), ms(200)]);
        assert_eq!(*calls.lock().unwrap(), 3);
        assert_eq!(e.kind(), ErrorKind::Io);
        assert!(e.is_retryable());
        assert_eq!(
            e.to_string(),
            "stopped retrying after 3 attempts: the next one would pass the deadline: connection reset"
        );

        // with_timeout measures from the clock's now.
        let mut r = Retry::with_clock(RetryPolicy::new(ms(100), ms(100)), clock.clone())
            .with_timeout(ms(100));
        assert!(
            r.next_delay(io()).is_err(),
            "a wait ending at the deadline is refused"
        );
    }

    #[test]
    fn the_hook_runs_before_each_retry_and_can_stop_it() {
        let clock = FakeClock::new();
        let seen = Mutex::new(Vec::new());
        let out = block_on(
            Retry::with_clock(RetryPolicy::new(ms(1), ms(1)), clock.clone()).run_with(
                |attempt| async move {
                    if attempt < 3 {
                        Err(Error::new(
                            ErrorKind::StateUnknown,
                            format!("lost {attempt}"),
                        ))
                    } else {
                        Ok("done")
                    }
                },
                |e, next| {
                    seen.lock().unwrap().push((e.to_string(), next));
                    async { Ok(()) }
                },
            ),
        );
        assert_eq!(out.unwrap(), "done");
        assert_eq!(
            *seen.lock().unwrap(),
            [("lost 1".to_owned(), 2), ("lost 2".to_owned(), 3)]
        );

        let e = block_on(
            Retry::with_clock(RetryPolicy::new(ms(1), ms(1)), clock).run_with(
                |_| async { Err::<(), _>(io()) },
                |_, _| async { Err(Error::new(ErrorKind::NotFound, "landed elsewhere")) },
            ),
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound);
    }

    #[test]
    fn stepping_counts_immediate_retries_too() {
        let clock = FakeClock::new();
        let policy = RetryPolicy::new(ms(100), ms(1000)).with_max_attempts(4);
        let mut r = Retry::with_clock(policy, clock.clone());
        r.retry_now(io()).unwrap();
        block_on(r.backoff(io())).unwrap();
        assert_eq!(
            clock.slept(),
            [ms(200)],
            "the second failure waits as the second"
        );
        assert_eq!(r.next_delay(io()).unwrap(), ms(400));
        let e = r.retry_now(io()).unwrap_err();
        assert_eq!(r.attempts(), 4);
        assert!(e.context().contains(&("attempts", "4".to_owned())));
    }
}

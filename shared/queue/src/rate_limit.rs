//! `scan.rate-limit.records-per-second`: a token bucket shared by everything that hands out
//! records of one source (queue messages, listed objects).
//!
//! The bucket holds up to one second of tokens and refills continuously. [`RateLimiter::acquire`]
//! takes `n` tokens at once and, when that leaves the bucket short, sleeps until the shortfall
//! has refilled; the debt is carried, so a caller taking a batch of 10 at 2/s waits about 5 s
//! (less the tokens saved up), and the long-run rate is exact.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// A token bucket; see the module doc. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct RateLimiter {
    per_second: f64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    tokens: f64,
    last: Instant,
}

impl RateLimiter {
    /// A bucket for `per_second` records per second (must be > 0), starting full.
    pub fn new(per_second: f64) -> Self {
        let per_second = if per_second.is_finite() && per_second > 0.0 {
            per_second
        } else {
            f64::MAX
        };
        RateLimiter {
            per_second,
            state: Mutex::new(State {
                tokens: per_second.clamp(1.0, f64::MAX / 2.0),
                last: Instant::now(),
            }),
        }
    }

    /// The configured rate.
    pub fn per_second(&self) -> f64 {
        self.per_second
    }

    /// Take `n` tokens, waiting as long as the bucket needs to pay them back.
    pub async fn acquire(&self, n: usize) {
        let wait = self.take(n);
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Take the tokens now and say how long the caller owes.
    fn take(&self, n: usize) -> Duration {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let capacity = self.per_second.max(1.0);
        let elapsed = now.duration_since(st.last).as_secs_f64();
        st.tokens = (st.tokens + elapsed * self.per_second).min(capacity);
        st.last = now;
        st.tokens -= n as f64;
        if st.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-st.tokens / self.per_second)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_long_run_rate_is_the_configured_one() {
        let limiter = RateLimiter::new(10.0);
        let start = Instant::now();
        // 10 saved up, then 40 more at 10/s: 4 s.
        for _ in 0..50 {
            limiter.acquire(1).await;
        }
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(3_990) && took <= Duration::from_millis(4_100),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_pays_its_debt() {
        let limiter = RateLimiter::new(2.0);
        let start = Instant::now();
        limiter.acquire(2).await; // the saved-up second
        assert!(start.elapsed() < Duration::from_millis(10));
        limiter.acquire(10).await; // 10 tokens at 2/s
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(4_990) && took <= Duration::from_millis(5_100),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn fractional_rates_work() {
        let limiter = RateLimiter::new(0.5);
        let start = Instant::now();
        limiter.acquire(1).await;
        limiter.acquire(1).await;
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(1_990) && took <= Duration::from_millis(2_100),
            "{took:?}"
        );
    }
}

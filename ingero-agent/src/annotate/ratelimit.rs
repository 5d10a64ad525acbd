//! Token buckets limiting lines per second, one per connection and one for
//! the whole server. A line over the limit is refused (`rate_limited`), never
//! waited for: the writer must not be slowed down by the agent.

use std::sync::Mutex;
use std::time::Instant;

/// A classic token bucket: `rate` tokens per second, at most `burst`
/// stored. A rate of 0 means unlimited.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    pub(crate) fn new(rate: u32, burst: u32, now: Instant) -> TokenBucket {
        // A burst below 1 could never admit a line.
        let burst = f64::from(burst.max(1));
        TokenBucket {
            rate: f64::from(rate),
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Take one token if available.
    pub(crate) fn try_take(&mut self, now: Instant) -> bool {
        if self.rate == 0.0 {
            return true;
        }
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The server-wide bucket, shared by all connections.
#[derive(Debug)]
pub(crate) struct GlobalLimiter {
    bucket: Option<Mutex<TokenBucket>>,
}

impl GlobalLimiter {
    /// `rate` lines per second overall with one second of burst; 0 = none.
    pub(crate) fn new(rate: u32) -> GlobalLimiter {
        GlobalLimiter {
            bucket: (rate > 0).then(|| Mutex::new(TokenBucket::new(rate, rate, Instant::now()))),
        }
    }

    pub(crate) fn try_take(&self, now: Instant) -> bool {
        match &self.bucket {
            None => true,
            // A poisoned lock only means another connection panicked while
            // holding it; the bucket itself is still consistent.
            Some(m) => m.lock().unwrap_or_else(|p| p.into_inner()).try_take(now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn burst_then_refill_at_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(100, 10, t0);
        let admitted = (0..50).filter(|_| b.try_take(t0)).count();
        assert_eq!(admitted, 10, "only the burst at once");
        // 100/s: after 50 ms, 5 more.
        let t1 = t0 + Duration::from_millis(50);
        let admitted = (0..50).filter(|_| b.try_take(t1)).count();
        assert_eq!(admitted, 5);
        // Refill never exceeds the burst.
        let t2 = t1 + Duration::from_secs(100);
        assert_eq!((0..50).filter(|_| b.try_take(t2)).count(), 10);
    }

    #[test]
    fn zero_rate_is_unlimited() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(0, 0, t0);
        assert!((0..10_000).all(|_| b.try_take(t0)));
        let g = GlobalLimiter::new(0);
        assert!((0..10_000).all(|_| g.try_take(t0)));
    }

    #[test]
    fn global_limiter_bounds_the_total() {
        let g = GlobalLimiter::new(20);
        let now = Instant::now();
        assert!((0..20).filter(|_| g.try_take(now)).count() <= 20);
        assert!(!g.try_take(now));
    }
}

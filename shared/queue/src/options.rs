//! The consumer options, with the OSS CDC connector's names and ranges.
//!
//! | option | default | range | meaning |
//! |---|---|---|---|
//! | `batch-size` | 1 | 1–16 (MNS), 1–10 (SQS) | messages per receive |
//! | `polling-wait-time` | `10s` | 0–30 s (MNS), 0–20 s (SQS), whole seconds | long-poll wait |
//! | `delete-max-retries` | 3 | 0–100 | retries of a failed delete, with backoff |
//! | `scan.rate-limit.records-per-second` | none (no limit) | > 0 | messages per second handed out |
//! | `max-deliveries` | 5 | 1–1000 | receives after which a message is poison (dead-lettered) |
//! | `visibility-extension` | `30s` | 1 s – 12 h | how much longer a message stays hidden per extension while its object is processed |
//!
//! Durations are written as Flink writes them: a number and a unit (`ms`, `s`, `min`, `h`);
//! a bare number is milliseconds. The SQS limits are SQS's own (10 messages, 20 s).

use std::collections::BTreeMap;
use std::time::Duration;

use floe_core::{Error, Result};

/// Which queue service, for the ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueKind {
    /// Alibaba MNS.
    Mns,
    /// AWS SQS.
    Sqs,
}

impl QueueKind {
    /// Most messages per receive.
    pub fn max_batch(self) -> usize {
        match self {
            QueueKind::Mns => 16,
            QueueKind::Sqs => 10,
        }
    }

    /// Longest long-poll wait, in seconds.
    pub fn max_wait_secs(self) -> u64 {
        match self {
            QueueKind::Mns => 30,
            QueueKind::Sqs => 20,
        }
    }
}

/// Option names.
pub mod keys {
    /// Messages per receive.
    pub const BATCH_SIZE: &str = "batch-size";
    /// Long-poll wait.
    pub const POLLING_WAIT_TIME: &str = "polling-wait-time";
    /// Delete retries.
    pub const DELETE_MAX_RETRIES: &str = "delete-max-retries";
    /// Rate limit.
    pub const RATE_LIMIT: &str = "scan.rate-limit.records-per-second";
    /// Poison threshold.
    pub const MAX_DELIVERIES: &str = "max-deliveries";
    /// Visibility extension step.
    pub const VISIBILITY_EXTENSION: &str = "visibility-extension";
    /// Every option this module reads.
    pub const ALL: [&str; 6] = [
        BATCH_SIZE,
        POLLING_WAIT_TIME,
        DELETE_MAX_RETRIES,
        RATE_LIMIT,
        MAX_DELIVERIES,
        VISIBILITY_EXTENSION,
    ];
}

/// Validated consumer options; see the module doc for names, defaults and ranges.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueOptions {
    /// `batch-size`: messages per receive; default 1.
    pub batch_size: usize,
    /// `polling-wait-time`: the long-poll wait, whole seconds; default 10 s.
    pub polling_wait: Duration,
    /// `delete-max-retries`: retries of a failed delete (so up to this + 1 tries); default 3.
    pub delete_max_retries: u32,
    /// `scan.rate-limit.records-per-second`: messages per second; default none (no limit).
    pub records_per_second: Option<f64>,
    /// `max-deliveries`: a message received more often than this is poison; default 5.
    pub max_deliveries: u32,
    /// `visibility-extension`: seconds of invisibility added per extension; default 30 s.
    pub visibility_extension: Duration,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            batch_size: 1,
            polling_wait: Duration::from_secs(10),
            delete_max_retries: 3,
            records_per_second: None,
            max_deliveries: 5,
            visibility_extension: Duration::from_secs(30),
        }
    }
}

impl QueueOptions {
    /// Read the options from `options` (other keys are ignored: they belong to other
    /// components), check them against `kind`'s ranges. Errors name the option.
    pub fn from_options(options: &BTreeMap<String, String>, kind: QueueKind) -> Result<Self> {
        let mut o = QueueOptions::default();
        let get = |k: &str| options.get(k).map(|v| v.trim());
        if let Some(v) = get(keys::BATCH_SIZE) {
            o.batch_size = parse_int(keys::BATCH_SIZE, v, 1, kind.max_batch() as u64)? as usize;
        }
        if let Some(v) = get(keys::POLLING_WAIT_TIME) {
            o.polling_wait = parse_duration(keys::POLLING_WAIT_TIME, v)?;
        }
        if let Some(v) = get(keys::DELETE_MAX_RETRIES) {
            o.delete_max_retries = parse_int(keys::DELETE_MAX_RETRIES, v, 0, 100)? as u32;
        }
        if let Some(v) = get(keys::RATE_LIMIT) {
            let rate: f64 = v
                .parse()
                .map_err(|_| Error::config(keys::RATE_LIMIT, format!("`{v}` is not a number")))?;
            if !(rate.is_finite() && rate > 0.0) {
                return Err(Error::config(
                    keys::RATE_LIMIT,
                    format!("must be greater than 0, got {v}"),
                ));
            }
            o.records_per_second = Some(rate);
        }
        if let Some(v) = get(keys::MAX_DELIVERIES) {
            o.max_deliveries = parse_int(keys::MAX_DELIVERIES, v, 1, 1000)? as u32;
        }
        if let Some(v) = get(keys::VISIBILITY_EXTENSION) {
            o.visibility_extension = parse_duration(keys::VISIBILITY_EXTENSION, v)?;
        }
        o.validate(kind)?;
        Ok(o)
    }

    /// Check the ranges for `kind` (also for options built in code).
    pub fn validate(&self, kind: QueueKind) -> Result<()> {
        let max_batch = kind.max_batch();
        if !(1..=max_batch).contains(&self.batch_size) {
            return Err(Error::config(
                keys::BATCH_SIZE,
                format!("must be 1..={max_batch}, got {}", self.batch_size),
            ));
        }
        let wait = self.polling_wait;
        let max_wait = kind.max_wait_secs();
        if wait.subsec_nanos() != 0 || wait.as_secs() > max_wait {
            return Err(Error::config(
                keys::POLLING_WAIT_TIME,
                format!("must be whole seconds from 0s to {max_wait}s, got {wait:?}"),
            ));
        }
        if self.delete_max_retries > 100 {
            return Err(Error::config(
                keys::DELETE_MAX_RETRIES,
                format!("must be 0..=100, got {}", self.delete_max_retries),
            ));
        }
        if !(1..=1000).contains(&self.max_deliveries) {
            return Err(Error::config(
                keys::MAX_DELIVERIES,
                format!("must be 1..=1000, got {}", self.max_deliveries),
            ));
        }
        let ext = self.visibility_extension;
        if ext.subsec_nanos() != 0 || !(1..=43_200).contains(&ext.as_secs()) {
            return Err(Error::config(
                keys::VISIBILITY_EXTENSION,
                format!("must be whole seconds from 1s to 12h, got {ext:?}"),
            ));
        }
        if let Some(r) = self.records_per_second
            && !(r.is_finite() && r > 0.0)
        {
            return Err(Error::config(
                keys::RATE_LIMIT,
                format!("must be greater than 0, got {r}"),
            ));
        }
        Ok(())
    }
}

fn parse_int(option: &str, v: &str, min: u64, max: u64) -> Result<u64> {
    let n: u64 = v
        .parse()
        .map_err(|_| Error::config(option, format!("`{v}` is not a whole number")))?;
    if n < min || n > max {
        return Err(Error::config(
            option,
            format!("must be {min}..={max}, got {n}"),
        ));
    }
    Ok(n)
}

/// A Flink-style duration: `10s`, `10 s`, `500ms`, `1min`, `2h`; a bare number is ms.
pub fn parse_duration(option: &str, v: &str) -> Result<Duration> {
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| Error::config(option, format!("`{v}` is not a duration such as `10s`")))?;
    let ms = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "ms" | "milli" | "millis" | "millisecond" | "milliseconds" => Some(n),
        "s" | "sec" | "secs" | "second" | "seconds" => n.checked_mul(1000),
        "min" | "m" | "minute" | "minutes" => n.checked_mul(60_000),
        "h" | "hour" | "hours" => n.checked_mul(3_600_000),
        _ => {
            return Err(Error::config(
                option,
                format!("`{v}` has an unknown unit (use ms, s, min or h)"),
            ));
        }
    };
    ms.map(Duration::from_millis)
        .ok_or_else(|| Error::config(option, format!("`{v}` is too long")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_and_good_values() {
        let o = QueueOptions::from_options(&opts(&[("endpoint", "x")]), QueueKind::Mns).unwrap();
        assert_eq!(o, QueueOptions::default());
        let o = QueueOptions::from_options(
            &opts(&[
                ("batch-size", "16"),
                ("polling-wait-time", "30s"),
                ("delete-max-retries", "0"),
                ("scan.rate-limit.records-per-second", "2.5"),
                ("max-deliveries", "3"),
                ("visibility-extension", "2min"),
            ]),
            QueueKind::Mns,
        )
        .unwrap();
        assert_eq!(o.batch_size, 16);
        assert_eq!(o.polling_wait, Duration::from_secs(30));
        assert_eq!(o.delete_max_retries, 0);
        assert_eq!(o.records_per_second, Some(2.5));
        assert_eq!(o.max_deliveries, 3);
        assert_eq!(o.visibility_extension, Duration::from_secs(120));
        let o = QueueOptions::from_options(&opts(&[("polling-wait-time", "5 s")]), QueueKind::Sqs)
            .unwrap();
        assert_eq!(o.polling_wait, Duration::from_secs(5));
    }

    #[test]
    fn bad_values_name_the_option() {
        for (kind, key, value) in [
            (QueueKind::Mns, "batch-size", "0"),
            (QueueKind::Mns, "batch-size", "17"),
            (QueueKind::Sqs, "batch-size", "11"),
            (QueueKind::Mns, "batch-size", "many"),
            (QueueKind::Mns, "polling-wait-time", "31s"),
            (QueueKind::Sqs, "polling-wait-time", "21s"),
            (QueueKind::Mns, "polling-wait-time", "1500ms"),
            (QueueKind::Mns, "polling-wait-time", "10"),
            (QueueKind::Mns, "polling-wait-time", "10 fortnights"),
            (QueueKind::Mns, "delete-max-retries", "-1"),
            (QueueKind::Mns, "delete-max-retries", "101"),
            (QueueKind::Mns, "scan.rate-limit.records-per-second", "0"),
            (QueueKind::Mns, "scan.rate-limit.records-per-second", "fast"),
            (QueueKind::Mns, "scan.rate-limit.records-per-second", "NaN"),
            (QueueKind::Mns, "max-deliveries", "0"),
            (QueueKind::Mns, "visibility-extension", "0s"),
            (QueueKind::Mns, "visibility-extension", "13h"),
        ] {
            let e = QueueOptions::from_options(&opts(&[(key, value)]), kind).unwrap_err();
            assert_eq!(e.kind(), floe_core::ErrorKind::Config, "{key}={value}");
            assert!(
                e.to_string().contains(&format!("`{key}`")),
                "{key}={value}: {e}"
            );
        }
    }

    #[test]
    fn durations() {
        for (v, ms) in [
            ("0", 0),
            ("250", 250),
            ("250ms", 250),
            ("10s", 10_000),
            ("10 s", 10_000),
            ("1min", 60_000),
            ("2h", 7_200_000),
        ] {
            assert_eq!(
                parse_duration("d", v).unwrap(),
                Duration::from_millis(ms),
                "{v}"
            );
        }
        assert!(parse_duration("d", "s").is_err());
        assert!(parse_duration("d", "1.5s").is_err());
    }
}

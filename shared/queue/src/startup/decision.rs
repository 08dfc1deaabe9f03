//! The pure part of the startup modes: parsing the options, deciding at first start, checking
//! a configuration against a stored decision, and the queue filter. No IO, no clock: `now_ms`
//! is passed in.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use floe_core::{Error, Result};
use serde::{Deserialize, Serialize};

use crate::consumer::QueueMessage;

/// Option names.
pub mod keys {
    /// The startup mode.
    pub const MODE: &str = "scan.startup.mode";
    /// The start time for `TIMESTAMP`, epoch milliseconds.
    pub const TIMESTAMP_MILLIS: &str = "scan.startup.timestamp-millis";
}

/// `scan.startup.mode`; see the module doc of [`crate::startup`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StartupMode {
    /// Everything in the queue.
    EarliestOffset,
    /// Only messages enqueued from the first start on.
    LatestOffset,
    /// Resume the stored decision; `LatestOffset` when there is none.
    CommittedOffset,
    /// Messages enqueued from `scan.startup.timestamp-millis` on.
    Timestamp,
    /// A listing, then the queue from when the listing started.
    Initial,
    /// A listing only.
    Snapshot,
}

impl StartupMode {
    /// The option value.
    pub fn as_str(self) -> &'static str {
        match self {
            StartupMode::EarliestOffset => "EARLIEST_OFFSET",
            StartupMode::LatestOffset => "LATEST_OFFSET",
            StartupMode::CommittedOffset => "COMMITTED_OFFSET",
            StartupMode::Timestamp => "TIMESTAMP",
            StartupMode::Initial => "INITIAL",
            StartupMode::Snapshot => "SNAPSHOT",
        }
    }

    const ALL: [StartupMode; 6] = [
        StartupMode::EarliestOffset,
        StartupMode::LatestOffset,
        StartupMode::CommittedOffset,
        StartupMode::Timestamp,
        StartupMode::Initial,
        StartupMode::Snapshot,
    ];
}

impl fmt::Display for StartupMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for StartupMode {
    type Err = Error;

    /// Case-insensitive; `-` and `_` are the same.
    fn from_str(s: &str) -> Result<Self> {
        let norm = s.trim().to_ascii_uppercase().replace('-', "_");
        StartupMode::ALL
            .into_iter()
            .find(|m| m.as_str() == norm)
            .ok_or_else(|| {
                Error::config(
                    keys::MODE,
                    format!(
                        "`{s}` is not one of EARLIEST_OFFSET, LATEST_OFFSET, COMMITTED_OFFSET, \
                         TIMESTAMP, INITIAL, SNAPSHOT"
                    ),
                )
            })
    }
}

/// The configured startup options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StartupConfig {
    /// `scan.startup.mode`; default `COMMITTED_OFFSET`.
    pub mode: StartupMode,
    /// `scan.startup.timestamp-millis`: epoch milliseconds, required for `TIMESTAMP` and
    /// ignored (with a log line) otherwise; default none.
    pub timestamp_millis: Option<i64>,
}

impl Default for StartupConfig {
    fn default() -> Self {
        StartupConfig {
            mode: StartupMode::CommittedOffset,
            timestamp_millis: None,
        }
    }
}

impl StartupConfig {
    /// Read `scan.startup.mode` and `scan.startup.timestamp-millis`; other keys are ignored.
    pub fn from_options(options: &BTreeMap<String, String>) -> Result<Self> {
        let mode = match options.get(keys::MODE) {
            Some(v) => v.parse()?,
            None => StartupMode::CommittedOffset,
        };
        let timestamp_millis = match options.get(keys::TIMESTAMP_MILLIS) {
            None => None,
            Some(v) => Some(v.trim().parse::<i64>().map_err(|_| {
                Error::config(
                    keys::TIMESTAMP_MILLIS,
                    format!("`{v}` is not a whole number of milliseconds"),
                )
            })?),
        };
        let config = StartupConfig {
            mode,
            timestamp_millis,
        };
        config.validate()?;
        Ok(config)
    }

    /// Check the combination.
    pub fn validate(&self) -> Result<()> {
        match (self.mode, self.timestamp_millis) {
            (StartupMode::Timestamp, None) => Err(Error::config(
                keys::TIMESTAMP_MILLIS,
                "is required when scan.startup.mode is TIMESTAMP",
            )),
            (_, Some(t)) if t < 0 => Err(Error::config(
                keys::TIMESTAMP_MILLIS,
                format!("must not be negative, got {t}"),
            )),
            (m, Some(_)) if m != StartupMode::Timestamp => {
                tracing::info!(mode = %m, "scan.startup.timestamp-millis is ignored: the mode is not TIMESTAMP");
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The decision a first start makes at `now_ms`.
    pub fn decide(&self, now_ms: i64) -> StartupDecision {
        let (mode, start_ms, listing) = match self.mode {
            StartupMode::EarliestOffset => (StartupMode::EarliestOffset, None, None),
            StartupMode::LatestOffset | StartupMode::CommittedOffset => {
                (StartupMode::LatestOffset, Some(now_ms), None)
            }
            StartupMode::Timestamp => (StartupMode::Timestamp, self.timestamp_millis, None),
            StartupMode::Initial => (
                StartupMode::Initial,
                Some(now_ms),
                Some(Listing {
                    started_ms: now_ms,
                    done_ms: None,
                }),
            ),
            StartupMode::Snapshot => (
                StartupMode::Snapshot,
                None,
                Some(Listing {
                    started_ms: now_ms,
                    done_ms: None,
                }),
            ),
        };
        StartupDecision {
            mode,
            requested: self.mode,
            decided_at_ms: now_ms,
            start_ms,
            listing,
            committed_ms: None,
        }
    }

    /// Whether this configuration may resume `stored` (see the module doc); the error names
    /// `scan.startup.mode`.
    pub fn check_resume(&self, stored: &StartupDecision) -> Result<()> {
        if self.mode == StartupMode::CommittedOffset {
            return Ok(());
        }
        let same_mode = self.mode == stored.mode || self.mode == stored.requested;
        let same_time =
            self.mode != StartupMode::Timestamp || self.timestamp_millis == stored.start_ms;
        if same_mode && same_time {
            return Ok(());
        }
        let configured = match (self.mode, self.timestamp_millis) {
            (StartupMode::Timestamp, Some(t)) => format!("TIMESTAMP at {t}"),
            (m, _) => m.to_string(),
        };
        Err(Error::config(
            keys::MODE,
            format!(
                "the source already started as {} (decided at {} ms); {configured} would change \
                 what it skips: set COMMITTED_OFFSET to resume, or reset the source's cursor to \
                 start over",
                stored.describe(),
                stored.decided_at_ms
            ),
        ))
    }
}

/// The listing of `INITIAL` and `SNAPSHOT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// When the listing started, epoch ms (for `INITIAL`, where the queue takes over).
    pub started_ms: i64,
    /// When it was marked done, epoch ms; `None` while it runs.
    pub done_ms: Option<i64>,
}

/// What a source does now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// List the `path` prefixes (backfill); do not touch the queue yet.
    Listing,
    /// Consume the queue through the [`QueueFilter`].
    Queue,
    /// Nothing more (`SNAPSHOT` after its listing).
    Done,
}

/// The decision stored under `cursor/<source>`; see the module doc of [`crate::startup`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartupDecision {
    /// The mode in force: never `COMMITTED_OFFSET` (a first start under it decides as
    /// `LATEST_OFFSET`).
    pub mode: StartupMode,
    /// The mode configured at the first start.
    pub requested: StartupMode,
    /// When the decision was made, epoch ms.
    pub decided_at_ms: i64,
    /// Messages enqueued before this are skipped (epoch ms); `None`: none are.
    pub start_ms: Option<i64>,
    /// The listing, for `INITIAL` and `SNAPSHOT`.
    #[serde(default)]
    pub listing: Option<Listing>,
    /// The newest enqueue time whose work is durable (a watermark, not a filter).
    #[serde(default)]
    pub committed_ms: Option<i64>,
}

impl StartupDecision {
    /// What the source does now.
    pub fn phase(&self) -> Phase {
        match (self.mode, self.listing) {
            (StartupMode::Snapshot, Some(l)) if l.done_ms.is_some() => Phase::Done,
            (StartupMode::Initial | StartupMode::Snapshot, Some(l)) if l.done_ms.is_none() => {
                Phase::Listing
            }
            (StartupMode::Snapshot, _) => Phase::Done,
            _ => Phase::Queue,
        }
    }

    /// The filter for queue messages; `None` when the mode takes nothing from the queue
    /// (`SNAPSHOT`). For `INITIAL` it is defined from the start but applies only once the
    /// phase is [`Phase::Queue`].
    pub fn queue_filter(&self) -> Option<QueueFilter> {
        match self.mode {
            StartupMode::Snapshot => None,
            _ => Some(QueueFilter {
                start_ms: self.start_ms,
            }),
        }
    }

    /// `LATEST_OFFSET from 1700000000000`, for messages.
    pub fn describe(&self) -> String {
        match self.start_ms {
            Some(t) if self.mode != StartupMode::Snapshot => format!("{} from {t}", self.mode),
            _ => self.mode.to_string(),
        }
    }
}

/// What to do with one queue message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Process it (and delete it once its work is durable).
    Process,
    /// It is before the start: delete it without processing.
    SkipAndDelete,
}

/// The queue side of a decision: a lower bound on enqueue time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueFilter {
    /// Messages enqueued before this are skipped; `None`: none are.
    pub start_ms: Option<i64>,
}

impl QueueFilter {
    /// [`Admit::SkipAndDelete`] for a message enqueued before the start, else
    /// [`Admit::Process`].
    pub fn admit(&self, msg: &QueueMessage) -> Admit {
        match self.start_ms {
            Some(start) if msg.enqueue_time_ms < start => Admit::SkipAndDelete,
            _ => Admit::Process,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(enqueue_time_ms: i64) -> QueueMessage {
        QueueMessage {
            id: format!("m{enqueue_time_ms}"),
            receipt: "r".into(),
            body: Vec::new(),
            enqueue_time_ms,
            receive_count: 1,
        }
    }

    fn config(mode: StartupMode, ts: Option<i64>) -> StartupConfig {
        StartupConfig {
            mode,
            timestamp_millis: ts,
        }
    }

    #[test]
    fn each_mode_decides_its_filter_and_phase() {
        use Admit::*;
        use StartupMode::*;
        let now = 10_000;
        // (mode, timestamp, phase, admit for messages at 0, 5_000, 10_000, 20_000)
        let cases = [
            (EarliestOffset, None, Phase::Queue, Some([Process; 4])),
            (
                LatestOffset,
                None,
                Phase::Queue,
                Some([SkipAndDelete, SkipAndDelete, Process, Process]),
            ),
            (
                CommittedOffset,
                None,
                Phase::Queue,
                Some([SkipAndDelete, SkipAndDelete, Process, Process]),
            ),
            (
                Timestamp,
                Some(5_000),
                Phase::Queue,
                Some([SkipAndDelete, Process, Process, Process]),
            ),
            (
                Initial,
                None,
                Phase::Listing,
                Some([SkipAndDelete, SkipAndDelete, Process, Process]),
            ),
            (Snapshot, None, Phase::Listing, None),
        ];
        for (mode, ts, phase, admits) in cases {
            let d = config(mode, ts).decide(now);
            assert_eq!(d.phase(), phase, "{mode}");
            assert_eq!(d.requested, mode);
            assert_ne!(d.mode, CommittedOffset);
            let got = d
                .queue_filter()
                .map(|f| [0, 5_000, 10_000, 20_000].map(|t| f.admit(&msg(t))));
            assert_eq!(got, admits, "{mode}");
        }
    }

    #[test]
    fn listing_done_moves_initial_to_the_queue_and_snapshot_to_done() {
        let mut initial = config(StartupMode::Initial, None).decide(1);
        let mut snapshot = config(StartupMode::Snapshot, None).decide(1);
        for d in [&mut initial, &mut snapshot] {
            if let Some(l) = d.listing.as_mut() {
                l.done_ms = Some(2);
            }
        }
        assert_eq!(initial.phase(), Phase::Queue);
        assert_eq!(snapshot.phase(), Phase::Done);
    }

    #[test]
    fn options_parse_and_fail_naming_the_option() {
        let opts = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            StartupConfig::from_options(&opts(&[])).unwrap(),
            StartupConfig::default()
        );
        let c = StartupConfig::from_options(&opts(&[
            ("scan.startup.mode", "timestamp"),
            ("scan.startup.timestamp-millis", "1700000000000"),
        ]))
        .unwrap();
        assert_eq!(c, config(StartupMode::Timestamp, Some(1_700_000_000_000)));
        assert_eq!(
            "latest-offset".parse::<StartupMode>().unwrap(),
            StartupMode::LatestOffset
        );
        for (pairs, option) in [
            (vec![("scan.startup.mode", "NEWEST")], "scan.startup.mode"),
            (
                vec![("scan.startup.mode", "TIMESTAMP")],
                "scan.startup.timestamp-millis",
            ),
            (
                vec![
                    ("scan.startup.mode", "TIMESTAMP"),
                    ("scan.startup.timestamp-millis", "soon"),
                ],
                "scan.startup.timestamp-millis",
            ),
            (
                vec![
                    ("scan.startup.mode", "TIMESTAMP"),
                    ("scan.startup.timestamp-millis", "-1"),
                ],
                "scan.startup.timestamp-millis",
            ),
        ] {
            let e = StartupConfig::from_options(&opts(&pairs)).unwrap_err();
            assert!(
                e.to_string().contains(&format!("`{option}`")),
                "{pairs:?}: {e}"
            );
        }
    }

    #[test]
    fn changing_the_mode_of_a_started_source_is_refused_unless_it_resumes() {
        use StartupMode::*;
        let latest = config(CommittedOffset, None).decide(100); // recorded as LATEST
        let ts = config(Timestamp, Some(50)).decide(100);
        for (stored, configured, ok) in [
            (&latest, config(CommittedOffset, None), true),
            (&latest, config(LatestOffset, None), true),
            (&latest, config(EarliestOffset, None), false),
            (&latest, config(Snapshot, None), false),
            (&ts, config(Timestamp, Some(50)), true),
            (&ts, config(Timestamp, Some(60)), false),
            (&ts, config(CommittedOffset, None), true),
        ] {
            let r = configured.check_resume(stored);
            assert_eq!(r.is_ok(), ok, "{stored:?} {configured:?}");
            if let Err(e) = r {
                assert!(e.to_string().contains("`scan.startup.mode`"), "{e}");
                assert!(e.to_string().contains(&stored.describe()), "{e}");
            }
        }
    }

    #[test]
    fn the_stored_form_is_stable_json() {
        let d = config(StartupMode::Initial, None).decide(7);
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"mode":"INITIAL","requested":"INITIAL","decided_at_ms":7,
                "start_ms":7,"listing":{"started_ms":7,"done_ms":null},"committed_ms":null})
        );
        let back: StartupDecision = serde_json::from_value(json).unwrap();
        assert_eq!(back, d);
    }
}

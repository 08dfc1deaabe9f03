//! `floe dead-letters list | show | replay`: what was set aside, and landing it again once fixed.
//!
//! The dead letters are read from `[dead-letter] path` (a folder, or a prefix of a bucket), so
//! this works the same for a local run and for deployed functions whose letters are in the
//! state bucket. `list` and `show` only read letters; `replay` opens the whole pipeline and lands
//! objects through [`Pipeline::replay`] (ingest under the checkpoint's rules) and a commit.
//!
//! Which objects `replay` takes: an object some letter set aside whole (no `line`) is replayed;
//! one whose letters are only about single records is not, unless `--include-partial`: its good
//! records landed when it was first read, and the routes append, so landing a fixed version adds
//! all its records again beside those. The output says which objects were left out and why.

use std::collections::{BTreeMap, BTreeSet};
use std::process::ExitCode;
use std::sync::Arc;

use floe_core::{Error, Provider, Result};
use floe_pipeline::config::SourceConfig;
use floe_pipeline::deadletter::{
    LetterFile, LetteredObject, lettered_objects, list_files, read_file,
};
use floe_pipeline::pipeline::open_dead_letters;
use floe_pipeline::replay::ReplayItem;
use floe_pipeline::{FloeConfig, Outcome, Pipeline};
use floe_storage::ObjectStore;
use serde_json::json;

use crate::cli::{DeadLettersListArgs, DeadLettersShowArgs, ReplayArgs};
use crate::output::print_commits;

/// Every dead-letter file of the configuration, read.
async fn read_all(store: &dyn ObjectStore) -> Result<Vec<LetterFile>> {
    let mut files = Vec::new();
    for meta in list_files(store).await? {
        files.push(read_file(store, &meta.key).await?);
    }
    Ok(files)
}

async fn open_letters(config: &FloeConfig) -> Result<Arc<dyn ObjectStore>> {
    open_dead_letters(&config.dead_letter).await
}

/// How an object is named in the output: the URL its letter gave when that URL is the object's,
/// else `bucket/key` (a MaxCompute letter's URL is its staged file's).
fn object_name(o: &LetteredObject) -> String {
    if o.url.ends_with(&o.key) && !o.url.contains('#') {
        o.url.clone()
    } else {
        format!("{}/{}", o.bucket, o.key)
    }
}

fn reasons_text(reasons: &BTreeMap<String, u64>) -> String {
    reasons
        .iter()
        .map(|(r, n)| format!("{n}× {r}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `floe dead-letters list`.
pub async fn list(args: DeadLettersListArgs) -> Result<ExitCode> {
    let config = FloeConfig::load(&args.config.config)?;
    let store = open_letters(&config).await?;
    let files = read_all(store.as_ref()).await?;
    let objects = lettered_objects(&files);
    let letters: usize = files.iter().map(|f| f.letters.len()).sum();
    let whole = objects.iter().filter(|o| o.whole).count();
    if args.json {
        let files_json: Vec<_> = files
            .iter()
            .map(|f| {
                let objs = lettered_objects(std::slice::from_ref(f));
                let mut reasons: BTreeMap<&str, u64> = BTreeMap::new();
                for l in &f.letters {
                    *reasons.entry(l.reason.as_str()).or_insert(0) += 1;
                }
                json!({
                    "key": f.key,
                    "url": f.url,
                    "letters": f.letters.len(),
                    "reasons": reasons,
                    "objects": objs.iter().map(|o| json!({
                        "bucket": o.bucket,
                        "key": o.key,
                        "url": object_name(o),
                        "whole": o.whole,
                        "records": o.records,
                    })).collect::<Vec<_>>(),
                    "unreadable_lines": f.unreadable_lines,
                })
            })
            .collect();
        let doc = json!({
            "location": config.dead_letter.location(),
            "files": files_json,
            "totals": {
                "files": files.len(),
                "letters": letters,
                "objects": objects.len(),
                "whole_objects": whole,
            },
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc)
                .map_err(|e| Error::unexpected("failed to encode the listing").with_source(e))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!("dead letters at {}", config.dead_letter.location());
    for f in &files {
        let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
        for l in &f.letters {
            *reasons.entry(l.reason.clone()).or_insert(0) += 1;
        }
        let objs: Vec<String> = lettered_objects(std::slice::from_ref(f))
            .iter()
            .map(|o| {
                let what = match (o.whole, o.records) {
                    (true, 0) => "whole".to_owned(),
                    (true, n) => format!("whole, {n} records"),
                    (false, n) => format!("{n} records"),
                };
                format!("{} ({what})", object_name(o))
            })
            .collect();
        let unreadable = if f.unreadable_lines.is_empty() {
            String::new()
        } else {
            format!(" | {} unreadable lines", f.unreadable_lines.len())
        };
        println!(
            "{} | {} letters | reasons: {} | objects: {}{unreadable}",
            f.key,
            f.letters.len(),
            reasons_text(&reasons),
            if objs.is_empty() {
                "none".to_owned()
            } else {
                objs.join(", ")
            }
        );
    }
    println!(
        "total: {} files, {letters} letters, {} objects ({whole} set aside whole, {} with bad records only)",
        files.len(),
        objects.len(),
        objects.len() - whole
    );
    Ok(ExitCode::SUCCESS)
}

/// `floe dead-letters show KEY`.
pub async fn show(args: DeadLettersShowArgs) -> Result<ExitCode> {
    let config = FloeConfig::load(&args.config.config)?;
    let store = open_letters(&config).await?;
    let root = store.url("");
    let key = args
        .key
        .strip_prefix(root.as_str())
        .unwrap_or(&args.key)
        .trim_start_matches('/');
    if store.head(key).await?.is_none() {
        return Err(Error::new(
            floe_core::ErrorKind::NotFound,
            format!(
                "no dead-letter file {} (`floe dead-letters list` names them)",
                store.url(key)
            ),
        ));
    }
    let f = read_file(store.as_ref(), key).await?;
    println!("{}: {} letters", f.url, f.letters.len());
    for l in &f.letters {
        let line = l
            .line
            .map_or("whole object".to_owned(), |n| format!("line {n}"));
        let route = if l.route.is_empty() {
            String::new()
        } else {
            format!(" [route {}]", l.route)
        };
        let raw = if l.raw.is_empty() {
            String::new()
        } else {
            format!(" | raw: {}", l.raw.replace('\n', "\\n"))
        };
        println!(
            "{} {line}{route} at {}: {}{raw}",
            if l.url.is_empty() { &l.key } else { &l.url },
            l.time,
            l.reason.replace('\n', " ")
        );
    }
    for n in &f.unreadable_lines {
        println!("line {n} of the file is not a dead letter (cut short?)");
    }
    Ok(ExitCode::SUCCESS)
}

/// `OBJECT` of `replay` as (bucket, key).
fn resolve_object(
    arg: &str,
    source: &SourceConfig,
    objects: &[LetteredObject],
) -> Result<(String, String)> {
    if let Some(o) = objects
        .iter()
        .find(|o| object_name(o) == arg || o.url == arg)
    {
        return Ok((o.bucket.clone(), o.key.clone()));
    }
    let scheme = arg.split_once("://");
    match (source, scheme) {
        (SourceConfig::Cloud(c), Some((scheme, rest))) => {
            let want = match c.provider {
                Provider::Oss => "oss",
                _ => "s3",
            };
            if scheme != want {
                return Err(Error::invalid_input(format!(
                    "{arg}: the source reads {want}:// objects"
                )));
            }
            match rest.split_once('/') {
                Some((b, k)) if !b.is_empty() && !k.is_empty() => Ok((b.to_owned(), k.to_owned())),
                _ => Err(Error::invalid_input(format!(
                    "{arg}: expected {want}://bucket/key"
                ))),
            }
        }
        (SourceConfig::Cloud(_), None) => Err(Error::invalid_input(format!(
            "{arg}: name the object as s3://bucket/key or oss://bucket/key"
        ))),
        (SourceConfig::Local { bucket, .. }, None) => Ok((bucket.clone(), arg.to_owned())),
        (SourceConfig::Local { .. }, Some(_)) => Err(Error::invalid_input(format!(
            "{arg}: the source is a local folder: name the object by its key"
        ))),
    }
}

/// What a replayed object's outcome means, and whether it is a problem (exit status 3).
fn describe(item: &ReplayItem, letter_batches: &BTreeSet<String>) -> (String, bool) {
    let etag = item
        .change
        .as_ref()
        .and_then(|c| c.etag.clone())
        .unwrap_or_default();
    match &item.outcome {
        None => ("skipped: the object no longer exists".into(), false),
        Some(Outcome::Staged) => (format!("landed (version {etag})"), false),
        Some(Outcome::Duplicate) => {
            let unfixed = item
                .recorded_batch
                .as_ref()
                .is_some_and(|b| letter_batches.contains(b));
            if unfixed {
                (
                    format!(
                        "skipped: version {etag} is the one that was dead-lettered; fix the object (write it again) and replay"
                    ),
                    false,
                )
            } else {
                (
                    format!("skipped: version {etag} already landed (a duplicate lands nothing)"),
                    false,
                )
            }
        }
        Some(Outcome::Stale) => (
            "skipped: a newer version of it is already recorded".into(),
            false,
        ),
        Some(Outcome::Ignored(why)) => (format!("skipped: {why}"), false),
        Some(Outcome::DeadLettered(why)) => (format!("dead-lettered again: {why}"), true),
        Some(Outcome::Busy) => (
            "busy: another batch is landing it; replay again later".into(),
            true,
        ),
        Some(Outcome::Failed(e)) => (format!("failed: {e}"), true),
    }
}

/// `floe dead-letters replay`.
pub async fn replay(args: ReplayArgs) -> Result<ExitCode> {
    if !args.all && args.objects.is_empty() {
        return Err(Error::invalid_input(
            "name the objects to replay, or give --all",
        ));
    }
    let config = FloeConfig::load(&args.config.config)?;
    let pipeline = Pipeline::open(config).await?;
    let files = read_all(pipeline.dead_letters().as_ref()).await?;
    let objects = lettered_objects(&files);
    let by_object: BTreeMap<(String, String), &LetteredObject> = objects
        .iter()
        .map(|o| ((o.bucket.clone(), o.key.clone()), o))
        .collect();

    let mut asked: Vec<(String, String)> = Vec::new();
    if args.all {
        asked.extend(objects.iter().map(|o| (o.bucket.clone(), o.key.clone())));
    } else {
        for a in &args.objects {
            let o = resolve_object(a, &pipeline.config().source, &objects)?;
            if !asked.contains(&o) {
                asked.push(o);
            }
        }
    }
    let mut chosen = Vec::new();
    let mut left_out = 0;
    for (bucket, key) in asked {
        match by_object.get(&(bucket.clone(), key.clone())) {
            Some(o) if o.is_partial() && !args.include_partial => {
                left_out += 1;
                println!(
                    "left out: {} ({} bad records; its good records landed already; --include-partial lands all of it again)",
                    object_name(o),
                    o.records
                );
            }
            Some(_) => chosen.push((bucket, key)),
            None => {
                println!("note: no dead letter names {bucket}/{key}; replaying it anyway");
                chosen.push((bucket, key));
            }
        }
    }
    if chosen.is_empty() {
        println!("replay: nothing to replay ({left_out} left out)");
        return Ok(ExitCode::SUCCESS);
    }

    let report = pipeline.replay(&chosen).await?;
    let mut problems = 0;
    let mut landed = 0;
    for item in &report.items {
        let batches: BTreeSet<String> = files
            .iter()
            .flat_map(|f| f.letters.iter())
            .filter(|l| l.bucket == item.bucket && l.key == item.key)
            .map(|l| l.batch.clone())
            .collect();
        let (text, problem) = describe(item, &batches);
        if problem {
            problems += 1;
        }
        if matches!(item.outcome, Some(Outcome::Staged)) {
            landed += 1;
        }
        println!("{}: {text}", item.url);
    }
    let commits = pipeline.commit(!args.no_commit).await?;
    println!(
        "replay: {} objects asked, {landed} landed ({} rows), {} skipped, {problems} not landed, {left_out} left out | bad records: {} | dead letters: {}",
        report.items.len(),
        report.totals.rows,
        report.items.len() - landed - problems,
        report.bad_records,
        report.totals.dead_letters
    );
    print_commits(&commits);
    Ok(if problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn object(url: &str, bucket: &str, key: &str) -> LetteredObject {
        LetteredObject {
            bucket: bucket.into(),
            key: key.into(),
            url: url.into(),
            whole: true,
            ..Default::default()
        }
    }

    fn source(text: &str) -> SourceConfig {
        let text = format!("[source]\n{text}\n[[routes]]\ntable = \"a.b\"\n");
        FloeConfig::from_raw(
            floe_pipeline::config::parse(&text, false).unwrap(),
            Path::new("/cfg"),
        )
        .unwrap()
        .source
    }

    #[test]
    fn objects_are_named_by_url_letter_url_or_local_key() {
        let s3 = source("type = \"s3\"\nbucket = \"landing\"\n");
        let local = source("folder = \"landing\"\n");
        let letters = [
            object("s3://landing/a.json", "landing", "a.json"),
            object("file:///cfg/landing/b.json", "landing", "b.json"),
        ];
        assert_eq!(
            resolve_object("s3://landing/x/y.json", &s3, &letters).unwrap(),
            ("landing".into(), "x/y.json".into())
        );
        assert!(resolve_object("oss://landing/x", &s3, &letters).is_err());
        assert!(resolve_object("s3://landing", &s3, &letters).is_err());
        assert!(resolve_object("x/y.json", &s3, &letters).is_err());
        assert_eq!(
            resolve_object("file:///cfg/landing/b.json", &local, &letters).unwrap(),
            ("landing".into(), "b.json".into())
        );
        assert_eq!(
            resolve_object("c/d.json", &local, &letters).unwrap(),
            ("landing".into(), "c/d.json".into())
        );
        assert!(resolve_object("s3://landing/q", &local, &letters).is_err());
    }

    #[test]
    fn a_maxcompute_letter_names_the_object_not_the_staged_file() {
        let o = object("file:///wh/data/x.parquet", "landing", "a.json");
        assert_eq!(object_name(&o), "landing/a.json");
        let o = object("mns://q#123", "landing", "a.json");
        assert_eq!(object_name(&o), "landing/a.json");
    }
}

//! The behaviour every checkpoint backend must show, as a test suite any backend's tests call:
//! `floe_checkpoint::conformance::run_all(&store).await`.
//!
//! Includes a concurrency check: many tasks incrementing one counter with compare-and-set must
//! never lose an update.

use std::sync::Arc;
use std::time::Duration;

use floe_core::Result;

use crate::store::{CheckpointStore, StoreExt, Version};

fn check(cond: bool, what: &str) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(floe_core::Error::unexpected(format!("conformance: {what}")))
    }
}

/// Keys are put under `prefix` so one backend instance can run the suite more than once.
pub async fn basic_cas(store: &dyn CheckpointStore, prefix: &str) -> Result<()> {
    let k = format!("{prefix}/a");
    check(store.get(&k).await?.is_none(), "a new key reads as absent")?;
    let v1 = store.put_if_absent(&k, b"one", None).await?;
    check(v1.is_some(), "put_if_absent on an absent key succeeds")?;
    let v1 = v1.unwrap_or_else(|| unreachable!());
    check(
        store.put_if_absent(&k, b"again", None).await?.is_none(),
        "put_if_absent on a present key fails",
    )?;
    let e = store.get(&k).await?;
    check(
        e.as_ref().map(|e| e.value.as_slice()) == Some(b"one"),
        "get returns the value",
    )?;
    check(
        e.map(|e| e.version) == Some(v1.clone()),
        "get returns the version",
    )?;
    let v2 = store.put_if_version(&k, b"two", &v1, None).await?;
    check(
        v2.is_some(),
        "put_if_version with the current version succeeds",
    )?;
    let v2 = v2.unwrap_or_else(|| unreachable!());
    check(v2 != v1, "a write changes the version")?;
    check(
        store
            .put_if_version(&k, b"stale", &v1, None)
            .await?
            .is_none(),
        "put_if_version with a stale version fails",
    )?;
    check(
        !store.delete_if_version(&k, &v1).await?,
        "delete_if_version with a stale version fails",
    )?;
    check(
        store.delete_if_version(&k, &v2).await?,
        "delete_if_version with the current version succeeds",
    )?;
    check(
        store.get(&k).await?.is_none(),
        "a deleted key reads as absent",
    )?;
    let v3 = store.put_if_absent(&k, b"three", None).await?;
    check(v3.is_some(), "a deleted key can be written again")?;
    check(
        v3.as_ref() != Some(&v1),
        "a rewritten key does not reuse an old version (no ABA)",
    )?;
    check(
        store.put_if_version(&k, b"aba", &v1, None).await?.is_none(),
        "an old version does not match a rewritten key",
    )?;
    Ok(())
}

/// Scans return live entries under a prefix, in key order, and nothing else.
pub async fn scan_prefix(store: &dyn CheckpointStore, prefix: &str) -> Result<()> {
    for k in ["s/b", "s/a", "s/c/d", "t/a", "s"] {
        store
            .put_if_absent(&format!("{prefix}/{k}"), k.as_bytes(), None)
            .await?;
    }
    let keys: Vec<String> = store
        .scan(&format!("{prefix}/s/"))
        .await?
        .into_iter()
        .map(|e| e.key)
        .collect();
    let want: Vec<String> = ["s/a", "s/b", "s/c/d"]
        .iter()
        .map(|k| format!("{prefix}/{k}"))
        .collect();
    check(
        keys == want,
        &format!("scan returns the keys under the prefix in order, got {keys:?}"),
    )
}

/// Expired entries read as absent, can be inserted over, and are purged.
pub async fn ttl(store: &dyn CheckpointStore, prefix: &str) -> Result<()> {
    let k = format!("{prefix}/ttl");
    let v = store
        .put_if_absent(&k, b"short", Some(Duration::from_millis(50)))
        .await?;
    check(v.is_some(), "insert with ttl")?;
    check(
        store.get(&k).await?.is_some(),
        "an entry is live before its ttl",
    )?;
    tokio::time::sleep(Duration::from_millis(120)).await;
    check(
        store.get(&k).await?.is_none(),
        "an expired entry reads as absent",
    )?;
    check(
        store.scan(&k).await?.is_empty(),
        "an expired entry is not scanned",
    )?;
    let stale = v.unwrap_or_else(|| unreachable!());
    check(
        store
            .put_if_version(&k, b"late", &stale, None)
            .await?
            .is_none(),
        "an expired entry cannot be updated",
    )?;
    let k2 = format!("{prefix}/ttl2");
    store
        .put_if_absent(&k2, b"short", Some(Duration::from_millis(10)))
        .await?;
    tokio::time::sleep(Duration::from_millis(40)).await;
    check(
        store.put_if_absent(&k, b"fresh", None).await?.is_some(),
        "an expired key can be inserted again",
    )?;
    check(
        store.purge_expired("").await? >= 1,
        "purge removes expired entries",
    )?;

    // Purges by prefix touch only that prefix; a scan that purges returns the live entries
    // and leaves no dead one behind.
    let short = Some(Duration::from_millis(10));
    for name in ["a", "b"] {
        let key = format!("{prefix}/purge-{name}/1");
        store.put_if_absent(&key, b"short", short).await?;
    }
    tokio::time::sleep(Duration::from_millis(40)).await;
    check(
        store.purge_expired(&format!("{prefix}/purge-a/")).await? == 1,
        "a purge by prefix removes that prefix's dead entry",
    )?;
    check(
        store.purge_expired(&format!("{prefix}/purge-b/")).await? == 1,
        "and leaves the other prefixes' alone",
    )?;
    let c = format!("{prefix}/purge-c/");
    store.put_if_absent(&format!("{c}live"), b"1", None).await?;
    let gone = format!("{c}gone");
    if let Some(v) = store.put_if_absent(&gone, b"1", None).await? {
        store.delete_if_version(&gone, &v).await?;
    }
    let live = store.scan_and_purge(&c).await?;
    check(
        live.len() == 1 && live[0].key == format!("{c}live"),
        "scan_and_purge returns the live entries",
    )?;
    check(
        store.purge_expired(&c).await? == 0,
        "scan_and_purge removed the dead ones",
    )?;
    Ok(())
}

/// `tasks` tasks each add 1 to a shared counter `rounds` times with read / compare-and-set /
/// retry; the final value must be `tasks * rounds` (no lost update). Tasks take the given store
/// handles in turn, so several handles on one backend (as several processes would hold) contend
/// for the same key.
pub async fn concurrent_counter(
    stores: &[Arc<dyn CheckpointStore>],
    prefix: &str,
    tasks: usize,
    rounds: usize,
) -> Result<()> {
    let store = stores
        .first()
        .ok_or_else(|| floe_core::Error::unexpected("conformance: no store given"))?
        .clone();
    let k = format!("{prefix}/counter");
    store.insert_json(&k, &0u64, None).await?;
    let mut handles = Vec::new();
    for t in 0..tasks {
        let store = stores[t % stores.len()].clone();
        let k = k.clone();
        handles.push(tokio::spawn(async move {
            let mut conflicts = 0u64;
            for _ in 0..rounds {
                loop {
                    let (n, v) = store
                        .get_json::<u64>(&k)
                        .await?
                        .ok_or_else(|| floe_core::Error::unexpected("counter vanished"))?;
                    if store.update_json(&k, &(n + 1), &v, None).await?.is_some() {
                        break;
                    }
                    conflicts += 1;
                    tokio::task::yield_now().await;
                }
            }
            Ok::<u64, floe_core::Error>(conflicts)
        }));
    }
    for h in handles {
        h.await
            .map_err(|e| floe_core::Error::unexpected(format!("task failed: {e}")))??;
    }
    let (n, _) = store
        .get_json::<u64>(&k)
        .await?
        .ok_or_else(|| floe_core::Error::unexpected("counter vanished"))?;
    check(
        n == (tasks * rounds) as u64,
        &format!("counter is {n}, expected {}", tasks * rounds),
    )
}

/// `get_many` returns entries in key order given, `write_many` applies each write on its own.
pub async fn many(store: &dyn CheckpointStore, prefix: &str) -> Result<()> {
    use crate::store::Write;
    let (a, b, c) = (
        format!("{prefix}/m/a"),
        format!("{prefix}/m/b"),
        format!("{prefix}/m/c"),
    );
    let va = store
        .put_if_absent(&a, b"a0", None)
        .await?
        .unwrap_or_else(|| unreachable!());
    let stale = crate::store::Version("stale".into());
    let results = store
        .write_many(&[
            Write::Insert {
                key: &a,
                value: b"lost".to_vec(),
                ttl: None,
            },
            Write::Insert {
                key: &b,
                value: b"b1".to_vec(),
                ttl: None,
            },
            Write::Update {
                key: &a,
                value: b"a1".to_vec(),
                expected: &va,
                ttl: None,
            },
            Write::Update {
                key: &c,
                value: b"none".to_vec(),
                expected: &stale,
                ttl: None,
            },
        ])
        .await?;
    let won: Vec<bool> = results.iter().map(Option::is_some).collect();
    check(
        won == [false, true, true, false],
        &format!("write_many results, got {won:?}"),
    )?;
    let got = store.get_many(&[c.clone(), a.clone(), b.clone()]).await?;
    let values: Vec<Option<Vec<u8>>> = got.into_iter().map(|e| e.map(|e| e.value)).collect();
    check(
        values == [None, Some(b"a1".to_vec()), Some(b"b1".to_vec())],
        "get_many returns the values in the order asked",
    )?;
    check(
        store.get(&a).await?.map(|e| e.version) == results[2].clone(),
        "write_many returns the new versions",
    )
}

/// `write_many` over more distinct keys than one statement or request carries: each write is
/// judged on its own (a live key refuses an insert, an expired one takes it, a stale or absent
/// version refuses an update), and every winner's new version is the one stored.
pub async fn many_large(store: &dyn CheckpointStore, prefix: &str) -> Result<()> {
    use crate::store::Write;
    const N: usize = 150;
    let key = |i: usize| format!("{prefix}/ml/{i:04}");
    let keys: Vec<String> = (0..4 * N).map(key).collect();
    // 0..N live, N..2N expired; 2N..3N live (to update); 3N..4N absent.
    let mut live = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let ttl = (N..2 * N).contains(&i).then(|| Duration::from_millis(1));
        if i < 3 * N {
            let v = store
                .put_if_absent(k, b"old", ttl)
                .await?
                .ok_or_else(|| floe_core::Error::unexpected("conformance: setup insert lost"))?;
            live.push(v);
        }
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let stale = Version("stale".into());
    let mut writes = Vec::new();
    for k in &keys[..2 * N] {
        writes.push(Write::Insert {
            key: k,
            value: b"new".to_vec(),
            ttl: None,
        });
    }
    for (j, k) in keys[2 * N..].iter().enumerate() {
        // Even ones name their version; odd ones and the absent keys a stale one.
        let expected = if j < N && j.is_multiple_of(2) {
            &live[2 * N + j]
        } else {
            &stale
        };
        writes.push(Write::Update {
            key: k,
            value: b"new".to_vec(),
            expected,
            ttl: None,
        });
    }
    let results = store.write_many(&writes).await?;
    check(
        results.len() == writes.len(),
        "write_many answers every write",
    )?;
    let wins = |i: usize| match i {
        i if i < N => false,
        i if i < 2 * N => true,
        i if i < 3 * N => (i - 2 * N).is_multiple_of(2),
        _ => false,
    };
    let got = store.get_many(&keys).await?;
    for (i, (r, e)) in results.iter().zip(&got).enumerate() {
        check(
            r.is_some() == wins(i),
            &format!("write_many result of key {i}: won = {}", r.is_some()),
        )?;
        let want: Option<&[u8]> = match i {
            i if i >= 3 * N => None,
            i if wins(i) => Some(b"new"),
            _ => Some(b"old"),
        };
        check(
            e.as_ref().map(|e| e.value.as_slice()) == want,
            &format!("value of key {i} after write_many"),
        )?;
        if let (Some(v), Some(e)) = (r, e) {
            check(
                &e.version == v,
                &format!("version of key {i} is the one returned"),
            )?;
        }
    }
    Ok(())
}

/// Run every check.
pub async fn run_all(store: Arc<dyn CheckpointStore>, prefix: &str) -> Result<()> {
    basic_cas(store.as_ref(), prefix).await?;
    scan_prefix(store.as_ref(), prefix).await?;
    ttl(store.as_ref(), prefix).await?;
    many(store.as_ref(), prefix).await?;
    many_large(store.as_ref(), prefix).await?;
    concurrent_counter(&[store], prefix, 8, 25).await
}

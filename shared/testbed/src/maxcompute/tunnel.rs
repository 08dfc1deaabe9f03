//! Tunnel handlers (`/projects/…/tables/<t>[/upserts]`): upload and upsert sessions, and download
//! sessions as far as their record count.
//!
//! Blocks are inflated by their `Content-Encoding` and decoded with `floe-tunnel-codec`, so
//! every record CRC and the block checksum are checked; a bad block is refused with 400
//! `MalformedDataStream` and changes nothing. Upload commits apply all blocks at once (in block
//! id order; `overwrite` replaces the partition). Upsert blocks are checked for their bucket
//! (the session's hasher over its hash keys) and routing header, queued, and applied by primary
//! key at commit.

use std::collections::BTreeMap;

use axum::http::{Method, StatusCode};
use floe_tunnel_codec::{
    Compression, HasherKind, RecordHasher, TableSchema, UpsertOperation, Value, decode_block,
    upsert_schema,
};

use super::faults::{FaultAction, FaultPoint};
use super::model::{State, Table, Upload, Upsert};
use super::server::{Incoming, Reply, Shared, table_path, tunnel_error};

const ROUTED: &str = "odps-tunnel-routed-server";
const DAY_MS: i64 = 24 * 3600 * 1000;

pub(crate) fn handle(sh: &Shared, req: &Incoming) -> Reply {
    let Some((key, label, rest)) = table_path(&req.segments, None) else {
        return tunnel_error(StatusCode::NOT_FOUND, "NoSuchObject", "no such resource");
    };
    if req.header("x-odps-tunnel-version").is_none() {
        return tunnel_error(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "x-odps-tunnel-version is missing",
        );
    }
    let upserts = match rest.as_slice() {
        [] => false,
        [u] if u == "upserts" => true,
        _ => return tunnel_error(StatusCode::NOT_FOUND, "NoSuchObject", "no such resource"),
    };
    match (upserts, &req.method) {
        (false, &Method::POST) if req.params.contains_key("uploads") => {
            create_upload(sh, req, &key, &label)
        }
        (false, &Method::POST) if req.params.contains_key("downloads") => {
            create_download(sh, req, &key, &label)
        }
        (false, &Method::GET) => with_upload(sh, req, |st, u, id| Ok(upload_json(st, u, id))),
        (false, &Method::PUT) => write_block(sh, req),
        (false, &Method::POST) => commit_upload(sh, req),
        (true, &Method::POST) if req.params.contains_key("slotnum") => {
            create_upsert(sh, req, &key, &label)
        }
        (true, &Method::GET) => reload_upsert(sh, req),
        (true, &Method::PUT) => write_upsert(sh, req),
        (true, &Method::POST) => commit_upsert(sh, req),
        (true, &Method::DELETE) => abort_upsert(sh, req),
        _ => tunnel_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the emulator does not serve this call",
        ),
    }
}

fn status_of(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// Apply a fault before the request: `Some(reply)` to answer instead.
fn fault_before(action: &Option<FaultAction>) -> Option<Reply> {
    match action {
        Some(FaultAction::DropConnection) => Some(Reply::dropped()),
        Some(FaultAction::Fail { status, code }) => {
            Some(tunnel_error(status_of(*status), code, "injected fault"))
        }
        _ => None,
    }
}

/// Apply a fault after the request took effect.
fn fault_after(action: Option<FaultAction>, reply: Reply) -> Reply {
    match action {
        Some(FaultAction::DropConnectionAfterApply) => Reply::dropped(),
        Some(FaultAction::FailAfterApply { status, code }) => {
            tunnel_error(status_of(status), &code, "injected fault")
        }
        _ => reply,
    }
}

pub(crate) fn expire_upload(u: &mut Upload, now: i64, lifetime_ms: i64) {
    if u.status == "NORMAL" && now - u.created_ms > lifetime_ms {
        u.status = "EXPIRED";
        u.blocks.clear();
    }
}

fn expire_upsert(u: &mut Upsert, now: i64) {
    if u.status == "NORMAL" && now - u.created_ms > u.lifetime_ms {
        u.status = "EXPIRED";
        u.ops.clear();
    }
}

fn lifetime(sh: &Shared) -> i64 {
    i64::try_from(sh.config.upload_lifetime.as_millis()).unwrap_or(i64::MAX)
}

fn partition_of(t: &Table, req: &Incoming) -> Result<String, Reply> {
    match (req.param("partition"), t.def.partition_columns.is_empty()) {
        (None, true) => Ok(String::new()),
        (Some(_), true) => Err(tunnel_error(
            StatusCode::BAD_REQUEST,
            "InvalidPartitionSpec",
            "the table is not partitioned",
        )),
        (None, false) => Err(tunnel_error(
            StatusCode::BAD_REQUEST,
            "InvalidPartitionSpec",
            "the table is partitioned: name a partition",
        )),
        (Some(p), false) => t
            .partition_key(p)
            .map_err(|m| tunnel_error(StatusCode::BAD_REQUEST, "InvalidPartitionSpec", &m)),
    }
}

fn upload_json(st: &State, u: &Upload, id: &str) -> Reply {
    let schema = st
        .tables
        .get(&u.table)
        .map(|t| t.schema_json(false))
        .unwrap_or(serde_json::Value::Null);
    Reply::json(
        StatusCode::OK,
        &serde_json::json!({
            "UploadID": id,
            "Status": u.status,
            "UploadedBlockList": u.blocks.keys().map(|b| serde_json::json!({"BlockID": b})).collect::<Vec<_>>(),
            "Schema": schema,
            "MaxFieldSize": 8_388_608,
            "QuotaName": "",
        }),
    )
}

/// A download session: served only as far as its `RecordCount` (the rows of the table or
/// partition now); no data is read through it.
fn create_download(sh: &Shared, req: &Incoming, key: &str, label: &str) -> Reply {
    let st = sh.lock();
    let Some(t) = st.tables.get(key) else {
        return tunnel_error(
            StatusCode::NOT_FOUND,
            "NoSuchTable",
            &format!("table {label} does not exist"),
        );
    };
    let count = match req.param("partition") {
        None => t.partitions.values().map(Vec::len).sum::<usize>(),
        Some(_) => match partition_of(t, req) {
            Ok(p) => match t.partitions.get(&p) {
                Some(rows) => rows.len(),
                None => {
                    return tunnel_error(
                        StatusCode::NOT_FOUND,
                        "NoSuchPartition",
                        &format!("partition {p} of {label} does not exist"),
                    );
                }
            },
            Err(r) => return r,
        },
    };
    Reply::json(
        StatusCode::OK,
        &serde_json::json!({
            "DownloadID": format!("download-{key}-{count}"),
            "Status": "NORMAL",
            "RecordCount": count,
            "Schema": t.schema_json(false),
            "QuotaName": "",
        }),
    )
}

fn create_upload(sh: &Shared, req: &Incoming, key: &str, label: &str) -> Reply {
    let fault = sh.take_fault(FaultPoint::CreateUpload);
    if let Some(r) = fault_before(&fault) {
        return r;
    }
    let now = sh.now_ms();
    let reply = {
        let mut st = sh.lock();
        let Some(t) = st.tables.get(key) else {
            return tunnel_error(
                StatusCode::NOT_FOUND,
                "NoSuchTable",
                &format!("table {label} does not exist"),
            );
        };
        let partition = match partition_of(t, req) {
            Ok(p) => p,
            Err(r) => return r,
        };
        if !t.partitions.contains_key(&partition) {
            if req.param("create_partition") == Some("true") {
                if let Some(t) = st.tables.get_mut(key) {
                    t.partitions.insert(partition.clone(), Vec::new());
                }
            } else {
                return tunnel_error(
                    StatusCode::NOT_FOUND,
                    "NoSuchPartition",
                    &format!("partition {partition} of {label} does not exist"),
                );
            }
        }
        let id = st.next_id("2025011508304");
        let upload = Upload {
            table: key.to_owned(),
            partition,
            overwrite: req.param("overwrite") == Some("true"),
            status: "NORMAL",
            blocks: BTreeMap::new(),
            created_ms: now,
        };
        let reply = upload_json(&st, &upload, &id);
        st.uploads.insert(id, upload);
        reply
    };
    fault_after(fault, reply)
}

/// Run `f` on the upload named by `uploadid` (after expiring it if due).
fn with_upload(
    sh: &Shared,
    req: &Incoming,
    f: impl FnOnce(&mut State, &mut Upload, &str) -> Result<Reply, Reply>,
) -> Reply {
    let Some(id) = req.param("uploadid") else {
        return tunnel_error(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "uploadid is missing",
        );
    };
    let now = sh.now_ms();
    let life = lifetime(sh);
    let st = sh.lock();
    let Some(mut u) = st.uploads.get(id).cloned() else {
        return tunnel_error(
            StatusCode::NOT_FOUND,
            "NoSuchUpload",
            &format!("upload session {id} does not exist"),
        );
    };
    expire_upload(&mut u, now, life);
    drop(st);
    let mut st = sh.lock();
    let out = f(&mut st, &mut u, id);
    st.uploads.insert(id.to_owned(), u);
    drop(st);
    out.unwrap_or_else(|r| r)
}

fn not_open(kind: &str, id: &str, status: &str) -> Reply {
    tunnel_error(
        StatusCode::CONFLICT,
        "StatusConflict",
        &format!("{kind} session {id} is {status}"),
    )
}

fn decode(req: &Incoming, schema: &TableSchema) -> Result<Vec<Vec<Value>>, Reply> {
    let bad = |m: String| tunnel_error(StatusCode::BAD_REQUEST, "MalformedDataStream", &m);
    let compression = Compression::from_content_encoding(req.header("content-encoding"))
        .map_err(|e| bad(e.to_string()))?;
    let raw = match compression {
        Some(c) => c
            .decompress(&req.body, 512 << 20)
            .map_err(|e| bad(e.to_string()))?,
        None => req.body.clone(),
    };
    if req.param("arrow").is_some() {
        return super::arrow::decode_arrow_block(schema, &raw)
            .map_err(|e| bad(format!("arrow block refused: {e}")));
    }
    decode_block(schema, &raw)
        .map(|b| b.records)
        .map_err(|e| bad(format!("block refused: {e}")))
}

fn write_block(sh: &Shared, req: &Incoming) -> Reply {
    let Some(block) = req
        .param("blockid")
        .and_then(|b| b.parse::<u32>().ok())
        .filter(|b| *b < 20_000)
    else {
        return tunnel_error(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "blockid is missing or out of range 0..20000",
        );
    };
    let fault = sh.take_fault(FaultPoint::WriteBlock(Some(block)));
    if let Some(r) = fault_before(&fault) {
        return r;
    }
    let reply = with_upload(sh, req, |st, u, id| {
        if u.status != "NORMAL" {
            return Err(not_open("upload", id, u.status));
        }
        let schema = st
            .tables
            .get(&u.table)
            .map(|t| t.def.columns.clone())
            .ok_or_else(|| {
                tunnel_error(
                    StatusCode::NOT_FOUND,
                    "NoSuchTable",
                    "the table was dropped",
                )
            })?;
        let rows = decode(req, &schema)?;
        u.blocks.insert(block, rows);
        Ok(Reply::empty(StatusCode::OK))
    });
    if reply.status != StatusCode::OK {
        return reply;
    }
    fault_after(fault, reply)
}

fn commit_upload(sh: &Shared, req: &Incoming) -> Reply {
    let fault = sh.take_fault(FaultPoint::CommitUpload);
    if let Some(r) = fault_before(&fault) {
        return r;
    }
    let mut done: Option<(Upload, String)> = None;
    let reply = with_upload(sh, req, |st, u, id| {
        if u.status != "NORMAL" {
            return Err(not_open("upload", id, u.status));
        }
        let t = st.tables.get_mut(&u.table).ok_or_else(|| {
            tunnel_error(
                StatusCode::NOT_FOUND,
                "NoSuchTable",
                "the table was dropped",
            )
        })?;
        let rows: Vec<Vec<Value>> = u.blocks.values().flatten().cloned().collect();
        let target = t.partitions.entry(u.partition.clone()).or_default();
        if u.overwrite {
            *target = rows;
        } else {
            target.extend(rows);
        }
        u.status = "CLOSED";
        done = Some((u.clone(), id.to_owned()));
        Ok(Reply::empty(StatusCode::OK))
    });
    match done {
        Some((u, id)) => {
            let json = upload_json(&sh.lock(), &u, &id);
            fault_after(fault, json)
        }
        None => reply,
    }
}

fn upsert_json(sh: &Shared, st: &State, u: &Upsert, id: &str) -> Reply {
    let schema = st
        .tables
        .get(&u.table)
        .map(|t| t.schema_json(false))
        .unwrap_or(serde_json::Value::Null);
    let hash_key = st
        .tables
        .get(&u.table)
        .map(|t| t.def.primary_key.clone())
        .unwrap_or_default();
    let mut slots: BTreeMap<&str, (&str, Vec<usize>)> = BTreeMap::new();
    for (b, (slot, worker)) in u.routes.iter().enumerate() {
        slots
            .entry(slot.as_str())
            .or_insert((worker.as_str(), Vec::new()))
            .1
            .push(b);
    }
    let slots: Vec<_> = slots
        .into_iter()
        .map(|(slot, (worker, buckets))| serde_json::json!({"slot_id": slot, "worker_addr": worker, "buckets": buckets}))
        .collect();
    Reply::json(
        StatusCode::OK,
        &serde_json::json!({
            "id": id,
            "status": u.status,
            "slots": slots,
            "schema": schema,
            "hash_key": hash_key,
            "hasher": sh.config.upsert_hasher,
            "enable_partial_update": false,
            "quota_name": "",
        }),
    )
}

fn create_upsert(sh: &Shared, req: &Incoming, key: &str, label: &str) -> Reply {
    let fault = sh.take_fault(FaultPoint::CreateUpsert);
    if let Some(r) = fault_before(&fault) {
        return r;
    }
    let now = sh.now_ms();
    let mut st = sh.lock();
    let Some(t) = st.tables.get(key) else {
        return tunnel_error(
            StatusCode::NOT_FOUND,
            "NoSuchTable",
            &format!("table {label} does not exist"),
        );
    };
    if !t.def.transactional || t.def.primary_key.is_empty() {
        return tunnel_error(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            &format!("table {label} is not a transactional table with a primary key"),
        );
    }
    let partition = match partition_of(t, req) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let slots = req
        .param("slotnum")
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(1)
        .max(1);
    let buckets = sh.config.upsert_buckets.max(1);
    let lifetime_ms = req
        .param("lifecycle")
        .and_then(|h| h.parse::<i64>().ok())
        .filter(|h| (1..=24).contains(h))
        .map_or(DAY_MS, |h| h * 3600 * 1000);
    let routes = (0..buckets)
        .map(|b| {
            let slot = b % slots;
            (slot.to_string(), format!("worker-{slot}.emulator:8080"))
        })
        .collect();
    let id = st.next_id("upsert");
    let u = Upsert {
        table: key.to_owned(),
        partition,
        status: "NORMAL",
        routes,
        ops: Vec::new(),
        created_ms: now,
        lifetime_ms,
        commit_polls_left: 0,
    };
    let reply = upsert_json(sh, &st, &u, &id);
    st.upserts.insert(id, u);
    drop(st);
    fault_after(fault, reply)
}

fn upsert_id(req: &Incoming) -> Result<&str, Reply> {
    req.param("upsertid").ok_or_else(|| {
        tunnel_error(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "upsertid is missing",
        )
    })
}

fn session_gone(id: &str) -> Reply {
    tunnel_error(
        StatusCode::NOT_FOUND,
        "UpsertSessionNotFound",
        &format!("upsert session {id} does not exist"),
    )
}

fn reload_upsert(sh: &Shared, req: &Incoming) -> Reply {
    let id = match upsert_id(req) {
        Ok(id) => id,
        Err(r) => return r,
    };
    let now = sh.now_ms();
    let mut st = sh.lock();
    let Some(mut u) = st.upserts.get(id).cloned() else {
        return session_gone(id);
    };
    expire_upsert(&mut u, now);
    if u.status == "COMMITTING" {
        if u.commit_polls_left == 0 {
            u.status = "COMMITTED";
        } else {
            u.commit_polls_left -= 1;
        }
    }
    let reply = upsert_json(sh, &st, &u, id);
    st.upserts.insert(id.to_owned(), u);
    reply
}

fn write_upsert(sh: &Shared, req: &Incoming) -> Reply {
    let id = match upsert_id(req) {
        Ok(id) => id,
        Err(r) => return r,
    };
    let fault = sh.take_fault(FaultPoint::WriteUpsert);
    if let Some(r) = fault_before(&fault) {
        return r;
    }
    let now = sh.now_ms();
    let mut st = sh.lock();
    let Some(mut u) = st.upserts.get(id).cloned() else {
        return session_gone(id);
    };
    expire_upsert(&mut u, now);
    if u.status != "NORMAL" {
        st.upserts.insert(id.to_owned(), u.clone());
        return not_open("upsert", id, u.status);
    }
    let bad = |m: &str| tunnel_error(StatusCode::BAD_REQUEST, "InvalidArgument", m);
    let Some(bucket) = req
        .param("bucketid")
        .and_then(|b| b.parse::<usize>().ok())
        .filter(|b| *b < u.routes.len())
    else {
        return bad("bucketid is missing or out of range");
    };
    let (slot, worker) = &u.routes[bucket];
    if req.param("slotid") != Some(slot.as_str()) {
        return bad("slotid does not own this bucket");
    }
    if req.header(ROUTED) != Some(worker.as_str()) {
        return Reply::empty(StatusCode::PERMANENT_REDIRECT).with_header(ROUTED, worker.clone());
    }
    let Some(t) = st.tables.get(&u.table) else {
        return tunnel_error(
            StatusCode::NOT_FOUND,
            "NoSuchTable",
            "the table was dropped",
        );
    };
    let columns = t.def.columns.clone();
    let Ok(schema) = upsert_schema(&columns) else {
        return bad("the table cannot take upserts");
    };
    let records = match decode(req, &schema) {
        Ok(r) => r,
        Err(r) => return r,
    };
    if req
        .param("record_count")
        .and_then(|c| c.parse::<usize>().ok())
        != Some(records.len())
    {
        return bad("record_count does not match the block");
    }
    let hasher = HasherKind::from_name(&sh.config.upsert_hasher)
        .and_then(|k| RecordHasher::new(&columns, k, &t.def.primary_key));
    let Ok(hasher) = hasher else {
        return bad("the table's primary key cannot be hashed");
    };
    let n = columns.len();
    let mut ops = Vec::with_capacity(records.len());
    for (i, mut r) in records.into_iter().enumerate() {
        match hasher.bucket(&r[..n], u.routes.len() as u32) {
            Ok(b) if b as usize == bucket => {}
            _ => return bad(&format!("record {i} does not hash to bucket {bucket}")),
        }
        let op = match r.get(n + 2) {
            Some(Value::TinyInt(85)) => UpsertOperation::Upsert,
            Some(Value::TinyInt(68)) => UpsertOperation::Delete,
            _ => return bad(&format!("record {i} has no valid __operation")),
        };
        r.truncate(n);
        ops.push((op, r));
    }
    u.ops.extend(ops);
    st.upserts.insert(id.to_owned(), u);
    drop(st);
    fault_after(fault, Reply::empty(StatusCode::OK))
}

fn commit_upsert(sh: &Shared, req: &Incoming) -> Reply {
    let id = match upsert_id(req) {
        Ok(id) => id,
        Err(r) => return r,
    };
    let fault = sh.take_fault(FaultPoint::CommitUpsert);
    if let Some(r) = fault_before(&fault) {
        return r;
    }
    let now = sh.now_ms();
    let mut st = sh.lock();
    let Some(mut u) = st.upserts.get(id).cloned() else {
        return session_gone(id);
    };
    expire_upsert(&mut u, now);
    match u.status {
        "NORMAL" => {}
        "COMMITTING" | "COMMITTED" => {
            let reply = upsert_json(sh, &st, &u, id);
            return fault_after(fault, reply);
        }
        other => {
            st.upserts.insert(id.to_owned(), u.clone());
            return not_open("upsert", id, other);
        }
    }
    if let Some(t) = st.tables.get_mut(&u.table) {
        let pk = t.pk_indexes();
        let rows = t.partitions.entry(u.partition.clone()).or_default();
        for (op, row) in &u.ops {
            let same = |r: &Vec<Value>| pk.iter().all(|&i| r[i] == row[i]);
            let at = rows.iter().position(same);
            match (op, at) {
                (UpsertOperation::Upsert, Some(i)) => rows[i] = row.clone(),
                (UpsertOperation::Upsert, None) => rows.push(row.clone()),
                (UpsertOperation::Delete, Some(i)) => {
                    rows.remove(i);
                }
                (UpsertOperation::Delete, None) => {}
            }
        }
    }
    u.ops.clear();
    u.status = if sh.config.upsert_commit_polls > 0 {
        "COMMITTING"
    } else {
        "COMMITTED"
    };
    u.commit_polls_left = sh.config.upsert_commit_polls;
    let reply = upsert_json(sh, &st, &u, id);
    st.upserts.insert(id.to_owned(), u);
    drop(st);
    fault_after(fault, reply)
}

fn abort_upsert(sh: &Shared, req: &Incoming) -> Reply {
    let id = match upsert_id(req) {
        Ok(id) => id,
        Err(r) => return r,
    };
    let mut st = sh.lock();
    let Some(u) = st.upserts.get_mut(id) else {
        return session_gone(id);
    };
    if u.status != "NORMAL" {
        let status = u.status;
        return not_open("upsert", id, status);
    }
    u.status = "ABORTED";
    u.ops.clear();
    Reply::empty(StatusCode::OK)
}

//! REST handlers (`/api/projects/…`): table metadata, partitions, the tunnel endpoint lookup,
//! and SQL instances.

use axum::http::{Method, StatusCode};

use super::faults::{FaultAction, FaultPoint};
use super::server::{Incoming, Reply, Shared, rest_error, table_path, xml_text};
use super::sql::{Scope, execute};

fn cdata(s: &str) -> String {
    format!("<![CDATA[{}]]>", s.replace("]]>", "]]]]><![CDATA[>"))
}

pub(crate) fn handle(sh: &Shared, req: &Incoming) -> Reply {
    let seg: Vec<&str> = req.segments.iter().map(String::as_str).collect();
    match (&req.method, seg.as_slice()) {
        (&Method::GET, ["projects", _, "tunnel"]) if req.params.contains_key("service") => {
            Reply::new(StatusCode::OK, "text/plain", sh.host.clone())
        }
        (&Method::POST, ["projects", p, "instances"]) => submit(sh, req, p),
        (&Method::GET, ["projects", _, "instances", id]) => instance(sh, req, id),
        (&Method::GET, _) => match table_path(&req.segments, req.param("curr_schema")) {
            Some((key, label, rest)) if rest.is_empty() => table(sh, req, &key, &label),
            _ => rest_error(StatusCode::NOT_FOUND, "NoSuchObject", "no such resource"),
        },
        _ => rest_error(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the emulator does not serve this call",
        ),
    }
}

fn table(sh: &Shared, req: &Incoming, key: &str, label: &str) -> Reply {
    let st = sh.lock();
    let Some(t) = st.tables.get(key) else {
        return rest_error(
            StatusCode::NOT_FOUND,
            "NoSuchTable",
            &format!("table {label} does not exist"),
        );
    };
    if req.params.contains_key("partitions") {
        let page = sh.config.partition_page_size.max(1);
        let keys: Vec<&String> = t.partitions.keys().filter(|k| !k.is_empty()).collect();
        let start = req
            .param("marker")
            .and_then(|m| m.parse::<usize>().ok())
            .unwrap_or(0);
        let end = (start + page).min(keys.len());
        let marker = if end < keys.len() {
            end.to_string()
        } else {
            String::new()
        };
        let mut body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Partitions><Marker>{marker}</Marker><MaxItems>{page}</MaxItems>"
        );
        for k in keys.get(start..end).unwrap_or(&[]) {
            body.push_str("<Partition>");
            for kv in k.split(',') {
                let (c, v) = kv.split_once('=').unwrap_or((kv, ""));
                body.push_str(&format!(
                    "<Column Name=\"{}\" Value=\"{}\"/>",
                    xml_text(c),
                    xml_text(v)
                ));
            }
            body.push_str("</Partition>");
        }
        body.push_str("</Partitions>");
        return Reply::xml(StatusCode::OK, body);
    }
    if let Some(spec) = req.param("partition") {
        let found = t
            .partition_key(spec)
            .ok()
            .filter(|k| t.partitions.contains_key(k));
        return match found {
            Some(k) => {
                let cols: String = k
                    .split(',')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(c, v)| {
                        format!(
                            "<Column Name=\"{}\" Value=\"{}\"/>",
                            xml_text(c),
                            xml_text(v)
                        )
                    })
                    .collect();
                Reply::xml(
                    StatusCode::OK,
                    format!(
                        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Partition>{cols}<Schema>{}</Schema></Partition>",
                        cdata("{}")
                    ),
                )
            }
            None => rest_error(
                StatusCode::NOT_FOUND,
                "NoSuchPartition",
                &format!("partition {spec} of table {label} does not exist"),
            ),
        };
    }
    let extended = req.params.contains_key("extended");
    let schema = t.schema_json(extended);
    Reply::xml(
        StatusCode::OK,
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Table><Name>{}</Name><TableId>{}</TableId><Owner>ALIYUN$emulator</Owner><Schema>{}</Schema></Table>",
            xml_text(&t.def.name),
            xml_text(key),
            cdata(&schema.to_string())
        ),
    )
}

/// The query and the `odps.default.schema` setting of a submitted job document.
fn job(body: &[u8]) -> Option<(String, Option<String>)> {
    use quick_xml::events::Event;
    let text = std::str::from_utf8(body).ok()?;
    let mut reader = quick_xml::Reader::from_str(text);
    let mut buf = String::new();
    let mut last_name = String::new();
    let mut query = None;
    let mut schema = None;
    loop {
        match reader.read_event().ok()? {
            Event::Start(_) => buf.clear(),
            Event::Text(t) => buf.push_str(&t.xml_content().ok()?),
            Event::CData(c) => buf.push_str(&String::from_utf8_lossy(&c)),
            Event::GeneralRef(r) => {
                let name = r.decode().ok()?;
                match r.resolve_char_ref().ok()? {
                    Some(c) => buf.push(c),
                    None => buf.push_str(quick_xml::escape::resolve_predefined_entity(&name)?),
                }
            }
            Event::End(e) => {
                match e.local_name().as_ref() {
                    b"Query" => query = Some(buf.clone()),
                    b"Name" => last_name = buf.clone(),
                    b"Value" if last_name == "settings" => {
                        let v: serde_json::Value = serde_json::from_str(&buf).ok()?;
                        schema = v
                            .get("odps.default.schema")
                            .and_then(|x| x.as_str())
                            .map(str::to_owned);
                    }
                    _ => {}
                }
                buf.clear();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    query.map(|q| (q, schema))
}

fn submit(sh: &Shared, req: &Incoming, project: &str) -> Reply {
    let fault = sh.take_fault(FaultPoint::SubmitSql);
    if let Some(FaultAction::DropConnection) = fault {
        return Reply::dropped();
    }
    if let Some(FaultAction::Fail { status, code }) = &fault {
        return rest_error(
            StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            code,
            "injected fault",
        );
    }
    let Some((sql, schema)) = job(&req.body) else {
        return rest_error(
            StatusCode::BAD_REQUEST,
            "InvalidArgument",
            "the job document has no SQL query",
        );
    };
    let mut st = sh.lock();
    let scope = Scope {
        project,
        schema: schema.as_deref(),
    };
    let outcome = execute(&mut st, &scope, &sql);
    st.sql_log.push(sql);
    let id = st.next_id("2025");
    st.instances.insert(
        id.clone(),
        super::model::Instance {
            polls_left: sh.config.sql_running_polls,
            outcome,
        },
    );
    drop(st);
    match fault {
        Some(FaultAction::DropConnectionAfterApply) => Reply::dropped(),
        Some(FaultAction::FailAfterApply { status, code }) => rest_error(
            StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            &code,
            "injected fault",
        ),
        _ => Reply::empty(StatusCode::CREATED).with_header(
            "location",
            format!("http://{}/api/projects/{project}/instances/{id}", sh.host),
        ),
    }
}

fn instance(sh: &Shared, req: &Incoming, id: &str) -> Reply {
    let mut st = sh.lock();
    let Some(inst) = st.instances.get_mut(id) else {
        return rest_error(
            StatusCode::NOT_FOUND,
            "NoSuchObject",
            &format!("instance {id} does not exist"),
        );
    };
    let (status, task_status) = match (&inst.outcome, inst.polls_left) {
        (_, n) if n > 0 => ("Running", "Running"),
        (Ok(_), _) => ("Terminated", "Success"),
        (Err(_), _) => ("Terminated", "Failed"),
    };
    let head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    if req.params.contains_key("result") {
        let text = match &inst.outcome {
            Ok(t) | Err(t) => t.clone(),
        };
        return Reply::xml(
            StatusCode::OK,
            format!(
                "{head}<Instance><Tasks><Task Type=\"SQL\"><Name>AnonymousSQLTask</Name><Result Transform=\"false\" Format=\"text\">{}</Result></Task></Tasks></Instance>",
                cdata(&text)
            ),
        );
    }
    if req.params.contains_key("taskstatus") {
        return Reply::xml(
            StatusCode::OK,
            format!(
                "{head}<Instance><Status>{status}</Status><Tasks><Task Type=\"SQL\"><Name>AnonymousSQLTask</Name><Status>{task_status}</Status></Task></Tasks></Instance>"
            ),
        );
    }
    if inst.polls_left > 0 {
        inst.polls_left -= 1;
    }
    Reply::xml(
        StatusCode::OK,
        format!("{head}<Instance><Status>{status}</Status></Instance>"),
    )
}

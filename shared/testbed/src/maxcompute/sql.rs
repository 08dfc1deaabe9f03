//! The handful of SQL statements the save modes issue, run against the emulator's tables:
//!
//! - `CREATE TABLE [IF NOT EXISTS] t (col type [NOT NULL] [COMMENT '…'], …, [PRIMARY KEY (…)])
//!   [COMMENT '…'] [PARTITIONED BY (col type, …)] [TBLPROPERTIES ("transactional"="true")] [LIFECYCLE n]`
//! - `DROP TABLE [IF EXISTS] t`, `TRUNCATE TABLE t [PARTITION (…)]`
//! - `ALTER TABLE t ADD [IF NOT EXISTS] PARTITION (…)`, `ALTER TABLE t DROP [IF EXISTS] PARTITION (…)`
//! - `SELECT COUNT(*) FROM t [WHERE col = lit AND …]`
//! - `INSERT INTO [TABLE] t [PARTITION (…)] VALUES (…), …`, `DELETE FROM t [WHERE col = lit AND …]`
//!
//! Names are `t`, `` `t` ``, `p.t` or `p.s.t`. Failures read like the service's
//! (`ODPS-0130131:… Table not found`), so a client maps them the same way.

use floe_tunnel_codec::{Column, DataType, TableSchema, Value};

use super::model::{Literal, State, Table, TableDef, literal_value, table_key};

/// Where unqualified names resolve.
pub(crate) struct Scope<'a> {
    pub project: &'a str,
    pub schema: Option<&'a str>,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Quoted(String),
    Str(String),
    DStr(String),
    Num(String),
    Sym(char),
}

fn tokenize(sql: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(Tok::Word(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit()
            || (c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let start = i;
            i += 1;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            out.push(Tok::Num(chars[start..i].iter().collect()));
        } else if c == '`' || c == '\'' || c == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                let Some(&ch) = chars.get(i) else {
                    return Err("unterminated quote".into());
                };
                if ch == '\\' && c != '`' {
                    if let Some(&n) = chars.get(i + 1) {
                        s.push(n);
                    }
                    i += 2;
                    continue;
                }
                if ch == c {
                    if c == '`' && chars.get(i + 1) == Some(&'`') {
                        s.push('`');
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                s.push(ch);
                i += 1;
            }
            out.push(match c {
                '`' => Tok::Quoted(s),
                '\'' => Tok::Str(s),
                _ => Tok::DStr(s),
            });
        } else {
            out.push(Tok::Sym(c));
            i += 1;
        }
    }
    Ok(out)
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

fn parse_error(what: &str) -> String {
    format!("ODPS-0130161:[1,1] Parse exception - {what}")
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(kw))
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.is_kw(kw) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect_kw(&mut self, kw: &str) -> Result<(), String> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            Err(parse_error(&format!("expected {kw}")))
        }
    }

    fn eat_sym(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Sym(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect_sym(&mut self, c: char) -> Result<(), String> {
        if self.eat_sym(c) {
            Ok(())
        } else {
            Err(parse_error(&format!("expected `{c}`")))
        }
    }

    fn ident(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Tok::Word(w) | Tok::Quoted(w)) => Ok(w),
            other => Err(parse_error(&format!("expected a name, found {other:?}"))),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        match self.next() {
            Some(Tok::Str(s) | Tok::DStr(s)) => Ok(s),
            other => Err(parse_error(&format!("expected a string, found {other:?}"))),
        }
    }

    /// `a`, `p.a` or `p.s.a`.
    fn table_name(
        &mut self,
        scope: &Scope<'_>,
    ) -> Result<(String, Option<String>, String), String> {
        let mut parts = vec![self.ident()?];
        while self.eat_sym('.') {
            parts.push(self.ident()?);
        }
        let schema = scope.schema.map(str::to_owned);
        Ok(match parts.as_slice() {
            [t] => (scope.project.to_owned(), schema, t.clone()),
            [p, t] => (p.clone(), schema, t.clone()),
            [p, s, t] => (p.clone(), Some(s.clone()), t.clone()),
            _ => return Err(parse_error("bad table name")),
        })
    }

    /// A type: tokens up to a top-level `,`, `)` or keyword, joined.
    fn data_type(&mut self) -> Result<DataType, String> {
        let mut text = String::new();
        let mut depth = 0i32;
        loop {
            match self.peek() {
                None => break,
                Some(Tok::Sym(',' | ')')) if depth == 0 => break,
                Some(Tok::Word(w))
                    if depth == 0
                        && !text.is_empty()
                        && ["NOT", "COMMENT", "NULL", "DEFAULT", "PRIMARY"]
                            .iter()
                            .any(|k| w.eq_ignore_ascii_case(k)) =>
                {
                    break;
                }
                Some(t) => {
                    match t {
                        Tok::Sym('<' | '(') => depth += 1,
                        Tok::Sym('>' | ')') => depth -= 1,
                        _ => {}
                    }
                    match t {
                        Tok::Word(w) | Tok::Quoted(w) | Tok::Num(w) => text.push_str(w),
                        Tok::Sym(c) => text.push(*c),
                        _ => return Err(parse_error("bad type")),
                    }
                    self.pos += 1;
                }
            }
        }
        text.parse()
            .map_err(|e| parse_error(&format!("bad type `{text}`: {e}")))
    }

    /// `(k='v', …)` after `PARTITION`.
    fn partition(&mut self) -> Result<String, String> {
        self.expect_sym('(')?;
        let mut parts = Vec::new();
        loop {
            let k = self.ident()?;
            self.expect_sym('=')?;
            let v = match self.next() {
                Some(Tok::Str(s) | Tok::DStr(s) | Tok::Num(s) | Tok::Word(s)) => s,
                other => return Err(parse_error(&format!("bad partition value {other:?}"))),
            };
            parts.push(format!("{k}={v}"));
            if !self.eat_sym(',') {
                break;
            }
        }
        self.expect_sym(')')?;
        Ok(parts.join(","))
    }

    fn literal(&mut self) -> Result<Literal, String> {
        Ok(match self.next() {
            Some(Tok::Num(n)) => Literal::Number(n),
            Some(Tok::Str(s) | Tok::DStr(s)) => Literal::Text(s),
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case("null") => Literal::Null,
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case("true") => Literal::Bool(true),
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case("false") => Literal::Bool(false),
            other => return Err(parse_error(&format!("bad literal {other:?}"))),
        })
    }

    /// `WHERE col = lit [AND …]`, or nothing.
    fn conditions(&mut self) -> Result<Vec<(String, Literal)>, String> {
        let mut out = Vec::new();
        if self.eat_kw("WHERE") {
            loop {
                let c = self.ident()?;
                self.expect_sym('=')?;
                out.push((c, self.literal()?));
                if !self.eat_kw("AND") {
                    break;
                }
            }
        }
        Ok(out)
    }

    fn end(&mut self) -> Result<(), String> {
        while self.eat_sym(';') {}
        match self.peek() {
            None => Ok(()),
            Some(t) => Err(parse_error(&format!("unexpected {t:?}"))),
        }
    }
}

fn not_found(project: &str, schema: Option<&str>, name: &str) -> String {
    let full = match schema {
        Some(s) => format!("{project}.{s}.{name}"),
        None => format!("{project}.{name}"),
    };
    format!("ODPS-0130131:[1,1] Table not found - table {full} cannot be resolved")
}

/// Run one statement; `Ok` holds the result text (CSV for a query).
pub(crate) fn execute(state: &mut State, scope: &Scope<'_>, sql: &str) -> Result<String, String> {
    let mut p = Parser {
        toks: tokenize(sql).map_err(|e| parse_error(&e))?,
        pos: 0,
    };
    if p.eat_kw("CREATE") {
        p.expect_kw("TABLE")?;
        create(state, scope, &mut p)
    } else if p.eat_kw("DROP") {
        p.expect_kw("TABLE")?;
        let if_exists = p.eat_kw("IF") && p.eat_kw("EXISTS");
        let (proj, schema, name) = p.table_name(scope)?;
        p.end()?;
        let key = table_key(&proj, schema.as_deref(), &name);
        if state.tables.remove(&key).is_none() && !if_exists {
            return Err(not_found(&proj, schema.as_deref(), &name));
        }
        Ok(String::new())
    } else if p.eat_kw("TRUNCATE") {
        p.expect_kw("TABLE")?;
        let (table, label) = lookup(state, scope, &mut p)?;
        let part = if p.eat_kw("PARTITION") {
            Some(p.partition()?)
        } else {
            None
        };
        p.end()?;
        let t = table_mut(state, &table, &label)?;
        match part {
            Some(spec) => {
                let k = t.partition_key(&spec)?;
                match t.partitions.get_mut(&k) {
                    Some(rows) => rows.clear(),
                    None => {
                        return Err(format!(
                            "ODPS-0130161: partition {spec} of {label} does not exist"
                        ));
                    }
                }
            }
            None => t.partitions.values_mut().for_each(Vec::clear),
        }
        Ok(String::new())
    } else if p.eat_kw("ALTER") {
        p.expect_kw("TABLE")?;
        let (table, label) = lookup(state, scope, &mut p)?;
        let add = if p.eat_kw("ADD") {
            true
        } else if p.eat_kw("DROP") {
            false
        } else {
            return Err(parse_error("only ADD/DROP PARTITION is supported"));
        };
        let guarded =
            p.eat_kw("IF") && (p.eat_kw("EXISTS") || (p.eat_kw("NOT") && p.eat_kw("EXISTS")));
        let mut specs = Vec::new();
        while p.eat_kw("PARTITION") {
            specs.push(p.partition()?);
        }
        p.end()?;
        if specs.is_empty() {
            return Err(parse_error("expected PARTITION"));
        }
        let t = table_mut(state, &table, &label)?;
        for spec in specs {
            let k = t.partition_key(&spec)?;
            let present = t.partitions.contains_key(&k);
            match (add, present, guarded) {
                (true, false, _) => {
                    t.partitions.insert(k, Vec::new());
                }
                (false, true, _) => {
                    t.partitions.remove(&k);
                }
                (_, _, true) => {}
                (true, true, false) => {
                    return Err(format!(
                        "ODPS-0130111: partition {spec} of {label} already exists"
                    ));
                }
                (false, false, false) => {
                    return Err(format!(
                        "ODPS-0130161: partition {spec} of {label} does not exist"
                    ));
                }
            }
        }
        Ok(String::new())
    } else if p.eat_kw("SELECT") {
        p.expect_kw("COUNT")?;
        p.expect_sym('(')?;
        p.expect_sym('*')?;
        p.expect_sym(')')?;
        p.expect_kw("FROM")?;
        let (table, label) = lookup(state, scope, &mut p)?;
        let conds = p.conditions()?;
        p.end()?;
        let t = table_mut(state, &table, &label)?;
        let n: usize = t
            .partitions
            .iter()
            .map(|(k, rows)| rows.iter().filter(|r| row_matches(t, k, r, &conds)).count())
            .sum();
        Ok(format!("\"_c0\"\n{n}\n"))
    } else if p.eat_kw("INSERT") {
        p.expect_kw("INTO")?;
        p.eat_kw("TABLE");
        let (table, label) = lookup(state, scope, &mut p)?;
        let part = if p.eat_kw("PARTITION") {
            Some(p.partition()?)
        } else {
            None
        };
        p.expect_kw("VALUES")?;
        let mut rows = Vec::new();
        loop {
            p.expect_sym('(')?;
            let mut lits = Vec::new();
            loop {
                lits.push(p.literal()?);
                if !p.eat_sym(',') {
                    break;
                }
            }
            p.expect_sym(')')?;
            rows.push(lits);
            if !p.eat_sym(',') {
                break;
            }
        }
        p.end()?;
        let t = table_mut(state, &table, &label)?;
        let key = match part {
            Some(spec) => t.partition_key(&spec)?,
            None if t.def.partition_columns.is_empty() => String::new(),
            None => {
                return Err(format!(
                    "ODPS-0130071: {label} is partitioned; name a partition"
                ));
            }
        };
        let cols: Vec<Column> = t.def.columns.columns().to_vec();
        let converted = rows
            .iter()
            .map(|lits| {
                if lits.len() != cols.len() {
                    return Err(format!(
                        "ODPS-0130071: {} values for {} columns",
                        lits.len(),
                        cols.len()
                    ));
                }
                lits.iter()
                    .zip(&cols)
                    .map(|(l, c)| literal_value(l, &c.data_type))
                    .collect::<Result<Vec<Value>, String>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        t.partitions.entry(key).or_default().extend(converted);
        Ok(String::new())
    } else if p.eat_kw("DELETE") {
        p.expect_kw("FROM")?;
        let (table, label) = lookup(state, scope, &mut p)?;
        let conds = p.conditions()?;
        p.end()?;
        let t = table_mut(state, &table, &label)?;
        let snapshot = t.clone();
        for (k, rows) in t.partitions.iter_mut() {
            rows.retain(|r| !row_matches(&snapshot, k, r, &conds));
        }
        Ok(String::new())
    } else {
        Err(parse_error("statement not supported by the emulator"))
    }
}

fn lookup(state: &State, scope: &Scope<'_>, p: &mut Parser) -> Result<(String, String), String> {
    let (proj, schema, name) = p.table_name(scope)?;
    let key = table_key(&proj, schema.as_deref(), &name);
    if !state.tables.contains_key(&key) {
        return Err(not_found(&proj, schema.as_deref(), &name));
    }
    let label = match &schema {
        Some(s) => format!("{proj}.{s}.{name}"),
        None => format!("{proj}.{name}"),
    };
    Ok((key, label))
}

fn table_mut<'a>(state: &'a mut State, key: &str, label: &str) -> Result<&'a mut Table, String> {
    state.tables.get_mut(key).ok_or_else(|| {
        format!("ODPS-0130131:[1,1] Table not found - table {label} cannot be resolved")
    })
}

fn row_matches(t: &Table, partition: &str, row: &[Value], conds: &[(String, Literal)]) -> bool {
    conds.iter().all(|(col, lit)| {
        if let Some(i) = t.def.columns.index_of(col) {
            return lit.matches(&row[i]);
        }
        partition
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| k.eq_ignore_ascii_case(col))
            .is_some_and(|(_, v)| matches!(lit, Literal::Text(s) | Literal::Number(s) if s == v))
    })
}

fn create(state: &mut State, scope: &Scope<'_>, p: &mut Parser) -> Result<String, String> {
    let if_not_exists = p.eat_kw("IF") && p.eat_kw("NOT") && p.eat_kw("EXISTS");
    let (project, schema, name) = p.table_name(scope)?;
    p.expect_sym('(')?;
    let mut columns = Vec::new();
    let mut primary_key = Vec::new();
    loop {
        if p.eat_kw("PRIMARY") {
            p.expect_kw("KEY")?;
            p.expect_sym('(')?;
            loop {
                primary_key.push(p.ident()?);
                if !p.eat_sym(',') {
                    break;
                }
            }
            p.expect_sym(')')?;
        } else {
            let col = p.ident()?;
            let ty = p.data_type()?;
            let mut c = Column::new(col, ty);
            loop {
                if p.eat_kw("NOT") {
                    p.expect_kw("NULL")?;
                    c = c.not_null();
                } else if p.eat_kw("COMMENT") {
                    p.string()?;
                } else {
                    break;
                }
            }
            columns.push(c);
        }
        if !p.eat_sym(',') {
            break;
        }
    }
    p.expect_sym(')')?;
    let mut comment = String::new();
    let mut partition_columns = Vec::new();
    let mut transactional = false;
    loop {
        if p.eat_kw("COMMENT") {
            comment = p.string()?;
        } else if p.eat_kw("PARTITIONED") {
            p.expect_kw("BY")?;
            p.expect_sym('(')?;
            loop {
                partition_columns.push(p.ident()?);
                p.data_type()?;
                if p.eat_kw("COMMENT") {
                    p.string()?;
                }
                if !p.eat_sym(',') {
                    break;
                }
            }
            p.expect_sym(')')?;
        } else if p.eat_kw("TBLPROPERTIES") {
            p.expect_sym('(')?;
            loop {
                let k = p.string()?;
                p.expect_sym('=')?;
                let v = p.string()?;
                if k.eq_ignore_ascii_case("transactional") && v.eq_ignore_ascii_case("true") {
                    transactional = true;
                }
                if !p.eat_sym(',') {
                    break;
                }
            }
            p.expect_sym(')')?;
        } else if p.eat_kw("LIFECYCLE") {
            p.next();
        } else {
            break;
        }
    }
    p.end()?;
    for k in &primary_key {
        let Some(c) = columns.iter_mut().find(|c| c.name.eq_ignore_ascii_case(k)) else {
            return Err(format!(
                "ODPS-0130071: primary key column `{k}` is not a column"
            ));
        };
        if c.nullable {
            *c = c.clone().not_null();
        }
    }
    if !primary_key.is_empty() && !transactional {
        return Err("ODPS-0130071: a table with a primary key must be transactional".into());
    }
    let key = table_key(&project, schema.as_deref(), &name);
    if state.tables.contains_key(&key) {
        return if if_not_exists {
            Ok(String::new())
        } else {
            Err(format!(
                "ODPS-0110061: Failed to run ddltask - Table or view already exists - {project}.{name}"
            ))
        };
    }
    let columns = TableSchema::new(columns).map_err(|e| format!("ODPS-0130071: {e}"))?;
    let def = TableDef {
        project,
        schema,
        name,
        columns,
        partition_columns,
        primary_key,
        transactional,
        comment,
    };
    state.tables.insert(key, Table::new(def));
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ddl_and_queries_change_and_read_tables() {
        let mut st = State::default();
        let scope = Scope {
            project: "p",
            schema: None,
        };
        let ok = |st: &mut State, sql: &str| execute(st, &scope, sql).unwrap();
        ok(
            &mut st,
            "CREATE TABLE IF NOT EXISTS `t` (\n`id` bigint NOT NULL COMMENT 'k',\n`v` decimal(10,2),\n`m` map<string,array<int>>,\nPRIMARY KEY (`id`)\n) COMMENT 'c' PARTITIONED BY (`ds` STRING) TBLPROPERTIES (\"transactional\"=\"true\");",
        );
        let t = &st.tables["p.default.t"];
        assert_eq!(t.def.primary_key, ["id"]);
        assert!(t.def.transactional);
        assert_eq!(
            t.def.columns.columns()[2].data_type.to_string(),
            "map<string,array<int>>"
        );
        ok(
            &mut st,
            "ALTER TABLE p.`t` ADD IF NOT EXISTS PARTITION (`ds`='1');",
        );
        ok(
            &mut st,
            "INSERT INTO p.t PARTITION (ds='1') VALUES (1, '2.50', NULL), (2, NULL, NULL);",
        );
        assert_eq!(
            ok(&mut st, "SELECT COUNT(*) FROM p.`t` WHERE `ds`='1';"),
            "\"_c0\"\n2\n"
        );
        ok(&mut st, "DELETE FROM t WHERE id = 1");
        assert_eq!(ok(&mut st, "SELECT COUNT(*) FROM t"), "\"_c0\"\n1\n");
        ok(&mut st, "TRUNCATE TABLE p.`t` PARTITION (`ds`='1');");
        assert_eq!(ok(&mut st, "SELECT COUNT(*) FROM t"), "\"_c0\"\n0\n");
        assert!(
            execute(&mut st, &scope, "CREATE TABLE t (a int)")
                .unwrap_err()
                .contains("already exists")
        );
        ok(&mut st, "DROP TABLE IF EXISTS p.`t`;");
        assert!(
            execute(&mut st, &scope, "DROP TABLE t")
                .unwrap_err()
                .contains("ODPS-0130131")
        );
        assert!(
            execute(&mut st, &scope, "VACUUM t")
                .unwrap_err()
                .contains("Parse exception")
        );
    }
}

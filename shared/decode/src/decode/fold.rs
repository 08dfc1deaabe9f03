//! Case-insensitive names for JSON records: a key that names a column (or a field of a struct
//! column) only when case is ignored is renamed to the column's own name, in a copy of the
//! record, before the record is read. Renaming in place is exact because ASCII case folding never
//! changes a name's length, and it leaves every value's text as it was (numbers keep their
//! digits). A key that matches a column exactly wins over one that matches only case-insensitively.

use arrow_schema::{DataType, Fields};

use super::typed::{scan_string, skip_value, ws};

/// Renames the keys of records of one target schema; see the module doc.
pub(super) struct CaseFold {
    fields: Fields,
}

impl CaseFold {
    /// For records of a table whose top-level columns are `fields`.
    pub(super) fn new(fields: Fields) -> Self {
        CaseFold { fields }
    }

    /// `record` (one JSON object) with its keys renamed; `None` when no key needs it or the
    /// record is not a well-formed object (the decoder then reports what is wrong with it).
    pub(super) fn apply(&self, record: &[u8]) -> Option<Vec<u8>> {
        if record.first() != Some(&b'{') {
            return None;
        }
        let mut renames = Vec::new();
        let end = object(record, 0, &self.fields, &mut renames)?;
        if renames.is_empty() || ws(record, end) != record.len() {
            return None;
        }
        let mut out = record.to_vec();
        for (at, name) in renames {
            out[at..at + name.len()].copy_from_slice(name.as_bytes());
        }
        Some(out)
    }
}

/// Walk the value at `i` of type `ty`, adding the renames inside it; returns its end.
fn value<'a>(
    b: &[u8],
    i: usize,
    ty: &'a DataType,
    renames: &mut Vec<(usize, &'a str)>,
) -> Option<usize> {
    match (ty, b.get(i)) {
        (DataType::Struct(fields), Some(b'{')) => object(b, i, fields, renames),
        (
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _),
            Some(b'['),
        ) => array(b, i, f.data_type(), renames),
        (DataType::Map(entries, _), Some(b'{')) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => map(b, i, kv[1].data_type(), renames),
            _ => skip_value(b, i),
        },
        _ => skip_value(b, i),
    }
}

/// The object at `i` whose keys name `fields`.
fn object<'a>(
    b: &[u8],
    i: usize,
    fields: &'a Fields,
    renames: &mut Vec<(usize, &'a str)>,
) -> Option<usize> {
    let mut i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    // The object's keys (an exact key wins over a case variant wherever it stands), and the keys
    // that match a field only case-insensitively: where their text starts, and the field's name.
    let mut keys: Vec<&[u8]> = Vec::new();
    let mut variants: Vec<(usize, &'a str)> = Vec::new();
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let (end, _) = scan_string(b, i + 1)?;
        let (start, key) = (i + 1, &b[i + 1..end]);
        i = ws(b, end + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(b, i + 1);
        let field = match fields.iter().find(|f| f.name().as_bytes() == key) {
            Some(f) => Some(f),
            None => {
                let f = (fields.iter()).find(|f| key.eq_ignore_ascii_case(f.name().as_bytes()));
                if let Some(f) = f {
                    variants.push((start, f.name().as_str()));
                }
                f
            }
        };
        i = match field {
            Some(f) => value(b, i, f.data_type(), renames)?,
            None => skip_value(b, i)?,
        };
        keys.push(key);
        i = ws(b, i);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    for (n, &(at, name)) in variants.iter().enumerate() {
        let taken = keys.contains(&name.as_bytes())
            || variants[..n].iter().any(|(_, earlier)| *earlier == name);
        if !taken {
            renames.push((at, name));
        }
    }
    Some(i + 1)
}

/// The array at `i` whose elements are of type `element`.
fn array<'a>(
    b: &[u8],
    i: usize,
    element: &'a DataType,
    renames: &mut Vec<(usize, &'a str)>,
) -> Option<usize> {
    let mut i = ws(b, i + 1);
    if b.get(i) == Some(&b']') {
        return Some(i + 1);
    }
    loop {
        i = ws(b, value(b, i, element, renames)?);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b']') => return Some(i + 1),
            _ => return None,
        }
    }
}

/// The object at `i` that is a map: its keys are data (never renamed), its values of type
/// `value_type`.
fn map<'a>(
    b: &[u8],
    i: usize,
    value_type: &'a DataType,
    renames: &mut Vec<(usize, &'a str)>,
) -> Option<usize> {
    let mut i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let (end, _) = scan_string(b, i + 1)?;
        i = ws(b, end + 1);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(b, value(b, ws(b, i + 1), value_type, renames)?);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return Some(i + 1),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::{DataType, Field, Fields};

    use super::CaseFold;

    fn fold() -> CaseFold {
        let addr = Fields::from(vec![Field::new("city", DataType::Utf8, true)]);
        let entry = Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Struct(addr.clone()), true),
            ])),
            false,
        );
        CaseFold::new(Fields::from(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("Name", DataType::Utf8, true),
            Field::new("addr", DataType::Struct(addr.clone()), true),
            Field::new(
                "hist",
                DataType::List(Arc::new(Field::new("item", DataType::Struct(addr), true))),
                true,
            ),
            Field::new("tags", DataType::Map(Arc::new(entry), false), true),
        ]))
    }

    fn apply(record: &str) -> Option<String> {
        fold()
            .apply(record.as_bytes())
            .map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn keys_take_their_columns_names_at_every_depth_but_map_keys_stay_data() {
        assert_eq!(
            apply(r#"{"ID": 1.50, "name":"a", "Addr":{"CITY":"x"}, "HIST":[{"City":"y"}, null]}"#)
                .as_deref(),
            Some(r#"{"id": 1.50, "Name":"a", "addr":{"city":"x"}, "hist":[{"city":"y"}, null]}"#)
        );
        assert_eq!(
            apply(r#"{"tags":{"CITY":{"CITY":"z"}}}"#).as_deref(),
            Some(r#"{"tags":{"CITY":{"city":"z"}}}"#)
        );
        // Nothing to rename, unknown keys, and what is not one well-formed object: left alone.
        assert_eq!(apply(r#"{"id":1,"Name":"a","other":{"ID":2}}"#), None);
        assert_eq!(apply(r#"{"ID":1,"#), None);
        assert_eq!(apply(r#"{"ID":1} {"ID":2}"#), None);
        assert_eq!(apply(r#"[{"ID":1}]"#), None);
    }

    #[test]
    fn an_exact_key_wins_over_its_case_variants_and_the_first_variant_over_later_ones() {
        assert_eq!(apply(r#"{"ID":2,"id":1}"#), None);
        assert_eq!(apply(r#"{"id":1,"Id":2}"#), None);
        assert_eq!(
            apply(r#"{"ID":1,"Id":2}"#).as_deref(),
            Some(r#"{"id":1,"Id":2}"#)
        );
    }
}

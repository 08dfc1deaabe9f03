//! How a record's field names find a table's columns (Kafka Connect's
//! `iceberg.tables.schema-case-insensitive`).

/// How names in the data are matched to a table's column names, at every level (top-level
/// columns and the fields of struct columns), for every format, and by schema evolution when it
/// decides whether a field is new.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Names {
    /// Byte for byte: `ID` is not the column `id` (and is a new column under schema evolution).
    Exact,
    /// The exact name first, then the first name that differs only in ASCII case (floe's
    /// default, as the OSS CDC connector matches columns).
    #[default]
    CaseInsensitive,
}

impl Names {
    /// `true` for [`Names::CaseInsensitive`].
    pub fn from_case_insensitive(case_insensitive: bool) -> Self {
        if case_insensitive {
            Names::CaseInsensitive
        } else {
            Names::Exact
        }
    }

    /// Whether `a` and `b` name the same column.
    pub fn same(self, a: &str, b: &str) -> bool {
        a == b || (self == Names::CaseInsensitive && a.eq_ignore_ascii_case(b))
    }

    /// The position of `name` in `names`: an exact match first, then (case-insensitively) the
    /// first that differs only in case.
    pub fn position<'a, I>(self, names: I, name: &str) -> Option<usize>
    where
        I: IntoIterator<Item = &'a str>,
        I::IntoIter: Clone,
    {
        let names = names.into_iter();
        names
            .clone()
            .position(|n| n == name)
            .or_else(|| match self {
                Names::Exact => None,
                Names::CaseInsensitive => names.clone().position(|n| n.eq_ignore_ascii_case(name)),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::Names;

    #[test]
    fn the_exact_name_wins_and_exact_matching_ignores_case_variants() {
        let cols = ["Id", "id", "NAME"];
        assert_eq!(Names::CaseInsensitive.position(cols, "id"), Some(1));
        assert_eq!(Names::CaseInsensitive.position(cols, "ID"), Some(0));
        assert_eq!(Names::CaseInsensitive.position(cols, "name"), Some(2));
        assert_eq!(Names::Exact.position(cols, "name"), None);
        assert_eq!(Names::Exact.position(cols, "NAME"), Some(2));
        assert!(Names::CaseInsensitive.same("Ts", "tS"));
        assert!(!Names::Exact.same("Ts", "tS"));
        // Only ASCII letters fold: a name's length never changes.
        assert!(!Names::CaseInsensitive.same("straße", "STRASSE"));
    }
}

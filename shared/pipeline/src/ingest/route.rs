//! Routes: which table (and how) an object change lands in.
//!
//! A route matches on bucket, key prefixes, suffixes and a glob; the first matching route takes
//! the object. Its `table` may use placeholders filled from the object:
//!
//! | placeholder | value for `landing/orders/2025/01/a.json` under prefix `landing/` |
//! |---|---|
//! | `${bucket}` | the bucket |
//! | `${prefix}` | `landing` (the matched prefix, without the trailing `/`) |
//! | `${table_name}` | `orders` (the first folder below the prefix, SeaTunnel's upstream table name) |
//! | `${dir}` | `01` (the object's folder) |
//!
//! Values are made safe for table names: lowercase, anything but `[a-z0-9_]` becomes `_`. A
//! route's MaxCompute `table_name` takes the same placeholders, filled with the same values.

use floe_core::{Error, ObjectChange, Result};
use globset::GlobMatcher;

use crate::config::RouteConfig;

/// The compiled routes.
#[derive(Debug)]
pub struct Router {
    routes: Vec<(RouteConfig, Option<GlobMatcher>)>,
}

/// A route's decision for one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Routed {
    /// Index of the route in the configuration.
    pub route: usize,
    /// The resolved table, `namespace.table`.
    pub table: String,
    /// The resolved MaxCompute table name, when the route has a MaxCompute target.
    pub maxcompute: Option<String>,
}

impl Router {
    /// Compile the routes.
    pub fn new(routes: &[RouteConfig]) -> Result<Self> {
        let routes = routes
            .iter()
            .map(|r| {
                let glob = match &r.glob {
                    Some(g) => Some(
                        globset::GlobBuilder::new(g)
                            .literal_separator(true)
                            .build()
                            .map_err(|e| Error::config(&format!("route {}: glob", r.name), e))?
                            .compile_matcher(),
                    ),
                    None => None,
                };
                Ok((r.clone(), glob))
            })
            .collect::<Result<_>>()?;
        Ok(Router { routes })
    }

    /// The route configuration at `i`.
    pub fn config(&self, i: usize) -> &RouteConfig {
        &self.routes[i].0
    }

    /// The first route that takes `change`, with its table resolved.
    pub fn route(&self, change: &ObjectChange) -> Result<Option<Routed>> {
        for (i, (r, glob)) in self.routes.iter().enumerate() {
            if r.bucket.as_deref().is_some_and(|b| b != change.bucket) {
                continue;
            }
            let prefix = if r.prefixes.is_empty() {
                Some("")
            } else {
                r.prefixes
                    .iter()
                    .map(String::as_str)
                    .find(|p| change.key.starts_with(p))
            };
            let Some(prefix) = prefix else { continue };
            if !r.suffixes.is_empty()
                && !r.suffixes.iter().any(|s| change.key.ends_with(s.as_str()))
            {
                continue;
            }
            if glob.as_ref().is_some_and(|g| !g.is_match(&change.key)) {
                continue;
            }
            let table = resolve_table(&r.table, change, prefix)?;
            let maxcompute = match &r.targets.maxcompute {
                Some(m) => Some(crate::targets::maxcompute::resolve_table_name(
                    &m.table_name,
                    &resolve_table(&m.table_name, change, prefix)?,
                    change,
                )?),
                None => None,
            };
            return Ok(Some(Routed {
                route: i,
                table,
                maxcompute,
            }));
        }
        Ok(None)
    }
}

fn sanitize(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() { "_".into() } else { out }
}

fn resolve_table(template: &str, change: &ObjectChange, prefix: &str) -> Result<String> {
    if !template.contains("${") {
        return Ok(template.to_owned());
    }
    let rest = &change.key[prefix.len()..];
    let table_name = rest
        .split('/')
        .next()
        .filter(|s| !s.is_empty() && rest.contains('/'));
    let dir = change
        .key
        .rsplit_once('/')
        .map(|(d, _)| d.rsplit('/').next().unwrap_or(d));
    let mut out = template.to_owned();
    for (name, value) in [
        ("bucket", Some(change.bucket.as_str())),
        (
            "prefix",
            Some(prefix.trim_end_matches('/')).filter(|p| !p.is_empty()),
        ),
        ("table_name", table_name),
        ("dir", dir),
    ] {
        let ph = format!("${{{name}}}");
        if out.contains(&ph) {
            let value = value.ok_or_else(|| {
                Error::invalid_input(format!(
                    "object {} gives no value for `{ph}` in table `{template}`",
                    change.key
                ))
            })?;
            out = out.replace(&ph, &sanitize(value));
        }
    }
    if out.contains("${") {
        return Err(Error::config(
            "table",
            format!("`{template}` has an unknown placeholder"),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{FloeConfig, parse};

    fn change(bucket: &str, key: &str) -> ObjectChange {
        ObjectChange {
            operation: floe_core::Operation::Created,
            provider: floe_core::Provider::S3,
            bucket: bucket.into(),
            key: key.into(),
            region: None,
            size: Some(1),
            etag: Some("e".into()),
            version_id: None,
            sequencer: None,
            event_time: None,
            event_name: "ObjectCreated:Put".into(),
            message_id: None,
        }
    }

    fn router(routes: &str) -> Router {
        let text = format!("[source]\nfolder = \"b\"\n{routes}");
        let c =
            FloeConfig::from_raw(parse(&text, false).unwrap(), std::path::Path::new("/x")).unwrap();
        Router::new(&c.routes).unwrap()
    }

    #[test]
    fn first_match_wins_and_placeholders_resolve() {
        let r = router(
            "[[routes]]\nprefix = \"landing/\"\nsuffix = [\".json\", \".ndjson\"]\ntable = \"raw.${table_name}\"\n\
             [[routes]]\nglob = \"logs/**/*.csv\"\ntable = \"${bucket}.${dir}\"\n\
             [[routes]]\nbucket = \"only\"\ntable = \"meta.${prefix}_x\"\nprefix = \"a/\"\n",
        );
        let cases = [
            (
                "b",
                "landing/Orders-2025/x/a.json",
                Some((0, "raw.orders_2025")),
            ),
            ("b", "landing/a.json", None),
            ("b", "landing/o/a.csv", None),
            (
                "My-Bucket",
                "logs/2025/01/app.csv",
                Some((1, "my_bucket.01")),
            ),
            ("b", "logs/app.csv", Some((1, "b.logs"))),
            ("only", "a/z", Some((2, "meta.a_x"))),
            ("other", "a/z", None),
        ];
        for (bucket, key, want) in cases {
            let got = r.route(&change(bucket, key));
            match (got, want) {
                (Ok(Some(r)), Some((i, t))) => {
                    assert_eq!((r.route, r.table.as_str()), (i, t), "{key}")
                }
                (Ok(None), None) => {}
                (Err(e), None) => assert!(e.to_string().contains("gives no value"), "{key}: {e}"),
                (got, want) => panic!("{bucket}/{key}: got {got:?}, want {want:?}"),
            }
        }
    }
}

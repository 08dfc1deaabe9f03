//! [`wrap_catalog!`]: a catalog that passes every call to an inner one except its table
//! commits, which it handles itself (floe's single-attempt commits; tests that delay or race
//! commits).

/// Implement `iceberg::Catalog` and [`FloeCatalog`](crate::FloeCatalog) for `$ty` by passing
/// every call to `self.$inner` (a field holding a `&dyn FloeCatalog` or `Arc<dyn FloeCatalog>`,
/// or any `Catalog` when the commit body does not call it) except the table commits, whose body
/// is given once for both entry points (`update_table` hands its requirements and updates to
/// it):
///
/// ```ignore
/// struct Slow(Arc<dyn FloeCatalog>);
/// floe_iceberg::wrap_catalog!(Slow, 0, |self, ident, requirements, updates| {
///     tokio::time::sleep(Duration::from_secs(3)).await;
///     self.0.commit_updates(ident, requirements, updates).await
/// });
/// ```
///
/// The crate using it depends on `iceberg` and `async-trait`.
///
/// A second form also gives `load_table`'s body (a wrapper that must answer loads itself):
/// `wrap_catalog!(Ty, 0, load |self, ident| { .. }, commit |self, ident, reqs, updates| { .. })`.
#[macro_export]
macro_rules! wrap_catalog {
    ($ty:ty, $inner:tt, |$s:ident, $ident:ident, $reqs:ident, $updates:ident| $commit:block) => {
        $crate::wrap_catalog!($ty, $inner, load |$s, ident| { $s.$inner.load_table(ident).await },
            commit |$s, $ident, $reqs, $updates| $commit);
    };
    ($ty:ty, $inner:tt, load |$s:ident, $lident:ident| $load:block,
        commit |$s2:ident, $ident:ident, $reqs:ident, $updates:ident| $commit:block) => {
        #[::async_trait::async_trait]
        impl $crate::FloeCatalog for $ty {
            async fn commit_updates(
                &$s2,
                $ident: &::iceberg::TableIdent,
                $reqs: Vec<::iceberg::TableRequirement>,
                $updates: Vec<::iceberg::TableUpdate>,
            ) -> ::iceberg::Result<::iceberg::table::Table> $commit
        }

        #[::async_trait::async_trait]
        impl ::iceberg::Catalog for $ty {
            async fn list_namespaces(
                &$s,
                parent: Option<&::iceberg::NamespaceIdent>,
            ) -> ::iceberg::Result<Vec<::iceberg::NamespaceIdent>> {
                $s.$inner.list_namespaces(parent).await
            }
            async fn create_namespace(
                &$s,
                n: &::iceberg::NamespaceIdent,
                p: ::std::collections::HashMap<String, String>,
            ) -> ::iceberg::Result<::iceberg::Namespace> {
                $s.$inner.create_namespace(n, p).await
            }
            async fn get_namespace(
                &$s,
                n: &::iceberg::NamespaceIdent,
            ) -> ::iceberg::Result<::iceberg::Namespace> {
                $s.$inner.get_namespace(n).await
            }
            async fn namespace_exists(&$s, n: &::iceberg::NamespaceIdent) -> ::iceberg::Result<bool> {
                $s.$inner.namespace_exists(n).await
            }
            async fn update_namespace(
                &$s,
                n: &::iceberg::NamespaceIdent,
                p: ::std::collections::HashMap<String, String>,
            ) -> ::iceberg::Result<()> {
                $s.$inner.update_namespace(n, p).await
            }
            async fn drop_namespace(&$s, n: &::iceberg::NamespaceIdent) -> ::iceberg::Result<()> {
                $s.$inner.drop_namespace(n).await
            }
            async fn list_tables(
                &$s,
                n: &::iceberg::NamespaceIdent,
            ) -> ::iceberg::Result<Vec<::iceberg::TableIdent>> {
                $s.$inner.list_tables(n).await
            }
            async fn create_table(
                &$s,
                n: &::iceberg::NamespaceIdent,
                c: ::iceberg::TableCreation,
            ) -> ::iceberg::Result<::iceberg::table::Table> {
                $s.$inner.create_table(n, c).await
            }
            async fn load_table(
                &$s,
                $lident: &::iceberg::TableIdent,
            ) -> ::iceberg::Result<::iceberg::table::Table> $load
            async fn drop_table(&$s, t: &::iceberg::TableIdent) -> ::iceberg::Result<()> {
                $s.$inner.drop_table(t).await
            }
            async fn purge_table(&$s, t: &::iceberg::TableIdent) -> ::iceberg::Result<()> {
                $s.$inner.purge_table(t).await
            }
            async fn table_exists(&$s, t: &::iceberg::TableIdent) -> ::iceberg::Result<bool> {
                $s.$inner.table_exists(t).await
            }
            async fn rename_table(
                &$s,
                src: &::iceberg::TableIdent,
                dest: &::iceberg::TableIdent,
            ) -> ::iceberg::Result<()> {
                $s.$inner.rename_table(src, dest).await
            }
            async fn register_table(
                &$s,
                t: &::iceberg::TableIdent,
                location: String,
            ) -> ::iceberg::Result<::iceberg::table::Table> {
                $s.$inner.register_table(t, location).await
            }
            async fn update_table(
                &$s,
                commit: ::iceberg::TableCommit,
            ) -> ::iceberg::Result<::iceberg::table::Table> {
                let (ident, requirements, updates) = $crate::catalog::commit_parts(commit);
                $crate::FloeCatalog::commit_updates($s, &ident, requirements, updates).await
            }
        }
    };
}

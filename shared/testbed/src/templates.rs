//! The deployment templates as the platforms read them: `tests/py/render_templates.py` renders
//! the environment that `template.yaml` (SAM) and `s.yaml` (Serverless Devs, FC 3.0) give each
//! function, so tests run the function binaries with exactly that environment.

use std::path::{Path, PathBuf};

use floe_core::{Error, Result};
use serde_json::Value;

use crate::venv::{python_with, run_python};

/// The repository's root (the workspace folder).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `template.yaml` of the repository.
pub fn sam_template() -> PathBuf {
    repo_root().join("template.yaml")
}

/// `s.yaml` of the repository.
pub fn fc_template() -> PathBuf {
    repo_root().join("s.yaml")
}

/// Run the renderer: `mode` is `sam`, `fc`, `sam-combinations` or `fc-combinations`; `args`
/// are its flags (`--param K=V`, `--resource-value L=V`, `--attr L.A=V`, `--var K=V`, …).
pub fn render(mode: &str, template: &Path, args: &[String]) -> Result<Value> {
    let python = python_with(&[("yaml", "pyyaml")])?;
    let script = repo_root().join("tests/py/render_templates.py");
    let template = template.to_string_lossy().into_owned();
    let mut all: Vec<&str> = vec![mode, &template];
    all.extend(args.iter().map(String::as_str));
    let out = run_python(&python, &script, &all)?;
    serde_json::from_str(out.trim()).map_err(|e| {
        Error::unexpected(format!("the renderer printed no json: {out}")).with_source(e)
    })
}

/// A function's rendered environment as pairs (`functions.<name>.env` of a render).
pub fn function_env(render: &Value, function: &str) -> Vec<(String, String)> {
    render["functions"][function]["env"]
        .as_object()
        .unwrap_or_else(|| panic!("no function {function} in {render}"))
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                v.as_str()
                    .unwrap_or_else(|| panic!("{function}: {k} is not a string"))
                    .to_owned(),
            )
        })
        .collect()
}

/// Another binary of the workspace beside `own` (a test's `CARGO_BIN_EXE_…`): `cargo test
/// --workspace` builds every package's binaries before any test runs.
pub fn sibling_binary(own: &str, name: &str) -> PathBuf {
    let path = Path::new(own).with_file_name(name);
    assert!(
        path.exists(),
        "{} is not built: run `cargo build --workspace --bins` (or `cargo test --workspace`)",
        path.display()
    );
    path
}

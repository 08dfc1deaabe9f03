//! The Python virtualenv the Python-based stand-ins (lakana-server, moto) and the pyiceberg
//! read-back scripts come from: `$FLOE_VENV`, default `~/.cache/floe/venv` (where `make
//! test-deps` makes it).
//!
//! A missing tool is an error that says how to install it; tests never skip silently.

use std::path::{Path, PathBuf};
use std::process::Command;

use floe_core::{Error, ErrorKind, Result};

/// The venv folder: `$FLOE_VENV`, else `$HOME/.cache/floe/venv` (`/root` without a `HOME`).
pub fn venv_dir() -> PathBuf {
    if let Some(v) = std::env::var_os("FLOE_VENV").filter(|v| !v.is_empty()) {
        return PathBuf::from(v);
    }
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root"));
    home.join(".cache/floe/venv")
}

/// The path of `bin/<name>` in the venv, or an error naming what to `pip install`
/// (`requirement`, e.g. `lakana-server==0.20.0`).
pub fn tool(name: &str, requirement: &str) -> Result<PathBuf> {
    let dir = venv_dir();
    let path = dir.join("bin").join(name);
    if path.is_file() {
        return Ok(path);
    }
    Err(Error::new(
        ErrorKind::NotFound,
        format!(
            "{name} not found at {}: install it with `python3 -m venv {d} && {d}/bin/pip install '{requirement}'` \
             (or point FLOE_VENV at a venv that has it)",
            path.display(),
            d = dir.display()
        ),
    ))
}

/// The venv's python, checked to import `modules` (each `(module, pip requirement)`).
pub fn python_with(modules: &[(&str, &str)]) -> Result<PathBuf> {
    let python = tool("python", "pip")?;
    for (module, requirement) in modules {
        let ok = Command::new(&python)
            .args(["-c", &format!("import {module}")])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !ok {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!(
                    "python module `{module}` is missing from {}: install it with `{}/bin/pip install '{requirement}'`",
                    venv_dir().display(),
                    venv_dir().display()
                ),
            ));
        }
    }
    Ok(python)
}

/// Run `python script args…` from the venv and return its stdout; a failure carries stderr.
pub fn run_python(python: &Path, script: &Path, args: &[&str]) -> Result<String> {
    let out = Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .map_err(|e| Error::from(e).while_doing(format!("failed to run {}", script.display())))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(Error::new(
            ErrorKind::Unexpected,
            format!(
                "{} failed ({}): {}{}",
                script.display(),
                out.status,
                stdout,
                String::from_utf8_lossy(&out.stderr)
            ),
        ));
    }
    Ok(stdout)
}

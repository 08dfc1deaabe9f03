//! The deployment templates: `template.yaml` passes `cfn-lint` (with the SAM transform), and
//! `s.yaml` has what FC 3.0 needs of floe's functions (`tests/py/check_s_yaml.py`). Both tools
//! come from the test venv (`make test-deps`); a missing one fails with the install hint.

use std::path::{Path, PathBuf};
use std::process::Command;

use floe_testbed::venv::{python_with, tool};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn sam_template_passes_cfn_lint() {
    let cfn_lint = tool("cfn-lint", "cfn-lint==1.58.0").unwrap();
    let out = Command::new(cfn_lint)
        .arg(root().join("template.yaml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cfn-lint found problems in template.yaml:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn serverless_devs_template_has_what_fc3_requires() {
    let python = python_with(&[("yaml", "pyyaml")]).unwrap();
    let out = Command::new(python)
        .arg(root().join("tests/py/check_s_yaml.py"))
        .arg(root().join("s.yaml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

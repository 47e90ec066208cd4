//! `compat` and `kubectl kcp crd compat` as users run them: the exit code says whether the new
//! CRD is compatible, the incompatibilities go to standard error with their field paths, and
//! `--lcd` writes a CRD the server accepts.

use std::process::Command;

use super::support::{Kcp, kubectl_with_plugins, write_file};

fn widget(properties: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: widgets.compat.example.com}}
spec:
  group: compat.example.com
  scope: Namespaced
  names: {{plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties: {properties}
"
    )
}

#[test]
fn compat_reports_incompatibilities_and_writes_a_usable_lcd() {
    let dir = tempfile::tempdir().unwrap();
    let old = write_file(
        dir.path(),
        "old.yaml",
        &widget("{size: {type: integer, maximum: 10}, color: {type: string, enum: [red, blue]}}"),
    );
    let new = write_file(
        dir.path(),
        "new.yaml",
        &widget(
            "{size: {type: integer, maximum: 5}, color: {type: string, enum: [red]}, shape: {type: string}}",
        ),
    );
    let compat = env!("CARGO_BIN_EXE_compat");
    let checked = Command::new(compat).args([&old, &new]).output().unwrap();
    assert_eq!(checked.status.code(), Some(1));
    let errors = String::from_utf8_lossy(&checked.stderr);
    assert_eq!(
        errors,
        "schema.openAPIV3Schema.properties[spec].properties[color].enum: Invalid value: [\"blue\"]: enum value has been changed in an incompatible way\n\
         schema.openAPIV3Schema.properties[spec].properties[size].maximum: Invalid value: 5: maximum value has been changed in an incompatible way\n"
    );
    let same = Command::new(compat).args([&old, &old]).output().unwrap();
    assert!(same.status.success());

    // The plugin answers the same; the LCD is a CRD a workspace accepts.
    let kcp = Kcp::shared("compat");
    let kubeconfig = kcp.kubeconfig_in(dir.path(), kcp.home(), None);
    let plugin = kubectl_with_plugins(&kubeconfig, &["kcp", "crd", "compat", "--lcd", &old, &new]);
    assert!(
        plugin.status.success(),
        "{}",
        String::from_utf8_lossy(&plugin.stderr)
    );
    let lcd = write_file(
        dir.path(),
        "lcd.yaml",
        &String::from_utf8_lossy(&plugin.stdout),
    );
    kcp.kubectl_ok(&["apply", "-f", &lcd]);
    kcp.wait_established(kcp.home(), "widgets.compat.example.com");
    let explained = kcp.kubectl_ok(&["explain", "widgets.spec.color"]);
    assert!(explained.contains("red"), "{explained}");
    assert!(!explained.contains("blue"), "{explained}");
}

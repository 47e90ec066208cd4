//! `kcp-bench compat`: the `compat` binary (`cargo build --release -p kcp`, next to this
//! executable) on the largest CRDs of the prometheus-operator family (from the Go module proxy,
//! or `--dir`): each compared with itself, and narrowed to the LCD (`--lcd`), the median of
//! five runs each, reading and parsing included. Baseline: the same binary on a one-field CRD
//! (what starting it costs). The largest is also grown just past 1 MiB (properties of its
//! `spec` copied under new names): the size. Target: ≤ 100 ms for that one.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::api::verdict;
use crate::measure::median;
use crate::table;

const TARGET: Duration = Duration::from_millis(100);
const RUNS: usize = 5;
/// How many of the largest CRD files are timed.
const LARGEST: usize = 4;

#[derive(clap::Args)]
pub struct Options {
    /// A directory of CRD manifests instead of prometheus-operator's.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The compat binary (default: `compat` next to this executable).
    #[arg(long)]
    compat_binary: Option<PathBuf>,
}

const TINY: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: tinies.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: tinies, kind: Tiny}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {a: {type: string}}}}
";

/// The median wall time of `compat [--lcd] file file`, which must succeed.
fn time(binary: &Path, file: &Path, lcd: bool) -> anyhow::Result<Duration> {
    let mut times = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let mut command = std::process::Command::new(binary);
        if lcd {
            command.arg("--lcd");
        }
        let began = Instant::now();
        let output = command.arg(file).arg(file).output().context("run compat")?;
        times.push(began.elapsed());
        anyhow::ensure!(
            output.status.success(),
            "compat {}: {}",
            file.display(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(median(times))
}

/// Writes `crd` (YAML) to `out` as YAML just over 1 MiB: the properties of every version's
/// `spec` schema copied, one after the other, under new names until it is; its size.
fn over_one_mib(crd: &Path, out: &Path) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(crd).with_context(|| format!("read {}", crd.display()))?;
    let mut crd: serde_json::Value = serde_saphyr::from_str(&text).context("parse the CRD")?;
    let fields: Vec<String> = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        ["spec"]["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    for (copy, field) in fields.iter().cycle().enumerate().take(4096) {
        let yaml = serde_saphyr::to_string(&crd)?;
        if yaml.len() > 1024 * 1024 {
            std::fs::write(out, &yaml)?;
            return Ok(yaml.len() as u64);
        }
        for version in crd["spec"]["versions"].as_array_mut().into_iter().flatten() {
            let properties =
                &mut version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
            let schema = properties[field.as_str()].clone();
            properties[format!("{field}{copy}")] = schema;
        }
    }
    anyhow::bail!("{} does not grow past 1 MiB", out.display())
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let binary = match options.compat_binary {
        Some(binary) => binary,
        None => std::env::current_exe()?
            .parent()
            .context("the bench's directory")?
            .join("compat"),
    };
    anyhow::ensure!(
        binary.exists(),
        "{} is missing: cargo build --release -p kcp",
        binary.display()
    );
    let dir = match options.dir {
        Some(dir) => dir,
        None => crate::crds::corpus::module_dir(crate::crds::corpus::CORPUS[0])?,
    };
    let mut files: Vec<(u64, PathBuf)> = std::fs::read_dir(&dir)
        .with_context(|| format!("read {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.len(), p)))
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    files.truncate(LARGEST);
    anyhow::ensure!(!files.is_empty(), "no CRDs in {}", dir.display());
    let scratch = tempfile::tempdir()?;
    // The largest grown past 1 MiB (the size), first in the table.
    let grown = scratch.path().join(format!(
        "{}-over-1MiB.yaml",
        files[0].1.file_stem().unwrap_or_default().to_string_lossy()
    ));
    let size = over_one_mib(&files[0].1, &grown)?;
    files.insert(0, (size, grown));
    let tiny = scratch.path().join("tiny.yaml");
    std::fs::write(&tiny, TINY)?;
    let baseline = time(&binary, &tiny, false)?;
    let mut rows = vec![vec![
        "CRD (compared with itself)".to_string(),
        "size".to_string(),
        "check".to_string(),
        "--lcd".to_string(),
        "target".to_string(),
    ]];
    rows.push(vec![
        "baseline: a one-field CRD".into(),
        format!("{} B", TINY.len()),
        format!("{:.1} ms", baseline.as_secs_f64() * 1e3),
        String::new(),
        String::new(),
    ]);
    for (i, (size, file)) in files.iter().enumerate() {
        let check = time(&binary, file, false)?;
        let lcd = time(&binary, file, true)?;
        let target = match i {
            0 => verdict(
                check.max(lcd) <= TARGET,
                format!("<= {} ms", TARGET.as_millis()),
            ),
            _ => String::new(),
        };
        rows.push(vec![
            file.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            format!("{:.0} KiB", *size as f64 / 1024.0),
            format!("{:.1} ms", check.as_secs_f64() * 1e3),
            format!("{:.1} ms", lcd.as_secs_f64() * 1e3),
            target,
        ]);
    }
    println!(
        "kcp-bench compat: {}, median of {RUNS} runs each",
        binary.display()
    );
    print!("{}", table::render(&rows));
    Ok(())
}

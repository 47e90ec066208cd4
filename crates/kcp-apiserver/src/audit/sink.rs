//! Where audit events go, without ever holding a request up: each backend has a bounded queue
//! that `emit` only tries to fill; an event that does not fit is dropped, counted
//! (`apiserver_audit_error_total{plugin="buffered"}`) and logged at most once a second.
//!
//! - The log backend (`--audit-log-path`, `-` for standard output) writes one JSON event per
//!   line on a thread of its own, rotating the file as kube-apiserver's lumberjack does past
//!   `--audit-log-maxsize` megabytes (the old file renamed `<name>-<time>.<ext>`), keeping at
//!   most `--audit-log-maxbackup` old files no older than `--audit-log-maxage` days.
//! - The webhook backend (`--audit-webhook-config-file`) posts `EventList`s of at most
//!   `--audit-webhook-batch-max-size` events, at least every
//!   `--audit-webhook-batch-max-wait`; a batch the webhook refuses, or does not take within
//!   its timeout, is counted and dropped.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::webhook_client::{Endpoint, WebhookClients};

/// How the log backend writes.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    /// A file, or `-` for standard output.
    pub path: PathBuf,
    /// Megabytes before the file is rotated (0: never).
    pub max_size_mb: u64,
    /// Old files kept at most (0: all).
    pub max_backups: usize,
    /// Days an old file is kept at most (0: forever).
    pub max_age_days: u64,
}

/// How the webhook backend batches.
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    pub endpoint: Endpoint,
    pub batch_max_size: usize,
    pub batch_max_wait: Duration,
    /// The time a call may take.
    pub timeout: Duration,
}

/// Events queued per backend at most (kube-apiserver's buffer size).
pub const QUEUE_EVENTS: usize = 10_000;

type Labels = Vec<(String, String)>;

/// The audit counters, registered with the server's metrics.
#[derive(Clone, Default)]
pub struct AuditMetrics {
    pub events: Counter,
    pub errors: Family<Labels, Counter>,
}

impl AuditMetrics {
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "apiserver_audit_event",
            "Counter of audit events generated and sent to the audit backend.",
            self.events.clone(),
        );
        registry.register(
            "apiserver_audit_error",
            "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error.",
            self.errors.clone(),
        );
    }

    fn error(&self, plugin: &str, count: u64) {
        self.errors
            .get_or_create(&vec![("plugin".to_string(), plugin.to_string())])
            .inc_by(count);
    }
}

/// The backends' queues.
pub struct Sink {
    log: Option<std::sync::mpsc::SyncSender<Arc<[u8]>>>,
    webhook: Option<tokio::sync::mpsc::Sender<Arc<[u8]>>>,
    metrics: AuditMetrics,
    last_drop_logged: AtomicU64,
    started: Instant,
}

impl Sink {
    /// Starts the backends (the webhook's on the current tokio runtime).
    pub fn start(
        log: Option<LogOptions>,
        webhook: Option<WebhookOptions>,
        metrics: AuditMetrics,
    ) -> Result<Sink, String> {
        let log = match log {
            None => None,
            Some(options) => {
                let mut writer = LogWriter::open(options)?;
                let (sender, receiver) = std::sync::mpsc::sync_channel::<Arc<[u8]>>(QUEUE_EVENTS);
                let errors = metrics.clone();
                std::thread::Builder::new()
                    .name("audit-log".into())
                    .spawn(move || {
                        // Written through a buffer, flushed whenever the queue runs empty.
                        while let Ok(line) = receiver.recv() {
                            let mut next = Some(line);
                            while let Some(line) = next {
                                if let Err(error) = writer.write(&line) {
                                    errors.error("log", 1);
                                    tracing::warn!(%error, "writing the audit log");
                                }
                                next = receiver.try_recv().ok();
                            }
                            if let Err(error) = writer.flush() {
                                tracing::warn!(%error, "writing the audit log");
                            }
                        }
                    })
                    .map_err(|e| e.to_string())?;
                Some(sender)
            }
        };
        let webhook = webhook.map(|options| {
            let (sender, receiver) = tokio::sync::mpsc::channel(QUEUE_EVENTS);
            tokio::spawn(post_batches(options, receiver, metrics.clone()));
            sender
        });
        Ok(Sink {
            log,
            webhook,
            metrics,
            last_drop_logged: AtomicU64::new(0),
            started: Instant::now(),
        })
    }

    /// Queues one event (a JSON line without its newline) for every backend.
    pub fn emit(&self, event: Arc<[u8]>) {
        self.metrics.events.inc();
        let mut dropped = false;
        if let Some(log) = &self.log {
            dropped |= log.try_send(event.clone()).is_err();
        }
        if let Some(webhook) = &self.webhook {
            dropped |= webhook.try_send(event).is_err();
        }
        if dropped {
            self.metrics.error("buffered", 1);
            let now = self.started.elapsed().as_secs() + 1;
            if self.last_drop_logged.swap(now, Ordering::Relaxed) != now {
                tracing::warn!("audit backend queue full: dropping audit events");
            }
        }
    }
}

async fn post_batches(
    options: WebhookOptions,
    mut receiver: tokio::sync::mpsc::Receiver<Arc<[u8]>>,
    metrics: AuditMetrics,
) {
    let clients = WebhookClients::default();
    let max = options.batch_max_size.max(1);
    loop {
        let Some(first) = receiver.recv().await else {
            return;
        };
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + options.batch_max_wait;
        while batch.len() < max {
            match tokio::time::timeout_at(deadline, receiver.recv()).await {
                Ok(Some(event)) => batch.push(event),
                Ok(None) | Err(_) => break,
            }
        }
        let mut body = Vec::with_capacity(batch.iter().map(|e| e.len() + 1).sum::<usize>() + 64);
        body.extend_from_slice(
            br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":["#,
        );
        for (i, event) in batch.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(event);
        }
        body.extend_from_slice(b"]}");
        let posted = tokio::time::timeout(
            options.timeout,
            clients.post(&options.endpoint, body, "response"),
        )
        .await;
        let failure = match posted {
            Ok(Ok(_)) => None,
            // An empty or non-JSON body is a fine answer to an EventList.
            Ok(Err(error)) if error.starts_with("the response is not a JSON") => None,
            Ok(Err(error)) => Some(error),
            Err(_) => Some("context deadline exceeded".to_string()),
        };
        if let Some(error) = failure {
            metrics.error("webhook", batch.len() as u64);
            tracing::warn!(%error, events = batch.len(), "the audit webhook did not take a batch");
        }
    }
}

/// The audit log file and its rotation.
struct LogWriter {
    options: LogOptions,
    file: Option<std::io::BufWriter<File>>,
    size: u64,
}

impl LogWriter {
    fn open(options: LogOptions) -> Result<LogWriter, String> {
        let mut writer = LogWriter {
            options,
            file: None,
            size: 0,
        };
        if writer.options.path.as_os_str() != "-" {
            writer.reopen()?;
        }
        Ok(writer)
    }

    fn reopen(&mut self) -> Result<(), String> {
        let path = &self.options.path;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("open the audit log {}: {e}", path.display()))?;
        self.size = file.metadata().map(|m| m.len()).unwrap_or(0);
        self.file = Some(std::io::BufWriter::with_capacity(64 * 1024, file));
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.file.as_mut() {
            Some(file) => file.flush(),
            None => std::io::stdout().flush(),
        }
    }

    fn write(&mut self, event: &[u8]) -> std::io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            let mut out = std::io::stdout().lock();
            out.write_all(event)?;
            return out.write_all(b"\n");
        };
        let limit = self.options.max_size_mb.saturating_mul(1 << 20);
        if limit > 0 && self.size > 0 && self.size + event.len() as u64 + 1 > limit {
            file.flush()?;
            self.rotate()?;
        }
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no audit log"))?;
        file.write_all(event)?;
        file.write_all(b"\n")?;
        self.size += event.len() as u64 + 1;
        Ok(())
    }

    /// Renames the file `<stem>-<time>.<ext>`, opens a new one, and prunes old ones.
    fn rotate(&mut self) -> std::io::Result<()> {
        let path = self.options.path.clone();
        let rotated = backup_name(&path, SystemTime::now());
        std::fs::rename(&path, &rotated)?;
        self.reopen().map_err(std::io::Error::other)?;
        prune(&path, self.options.max_backups, self.options.max_age_days);
        Ok(())
    }
}

/// lumberjack's name of a rotated file: `audit-2026-11-29T17-20-00.000.log`.
fn backup_name(path: &Path, at: SystemTime) -> PathBuf {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("audit");
    let extension = path
        .extension()
        .and_then(|s| s.to_str())
        .map(|e| format!(".{e}"))
        .unwrap_or_default();
    let time = jiff::Timestamp::try_from(at)
        .map(|t| t.strftime("%Y-%m-%dT%H-%M-%S%.3f").to_string())
        .unwrap_or_default();
    path.with_file_name(format!("{stem}-{time}{extension}"))
}

/// The rotated files of `path`, newest first.
fn backups(path: &Path) -> Vec<(PathBuf, SystemTime)> {
    let Some(dir) = path.parent() else {
        return Vec::new();
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("audit");
    let prefix = format!("{stem}-");
    let mut found: Vec<(PathBuf, SystemTime)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .filter_map(|e| Some((e.path(), e.metadata().ok()?.modified().ok()?)))
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found
}

fn prune(path: &Path, max_backups: usize, max_age_days: u64) {
    let max_age = Duration::from_secs(max_age_days * 24 * 3600);
    for (i, (old, modified)) in backups(path).into_iter().enumerate() {
        let too_many = max_backups > 0 && i >= max_backups;
        let too_old = max_age_days > 0 && modified.elapsed().is_ok_and(|age| age > max_age);
        if too_many || too_old {
            let _ = std::fs::remove_file(old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_rotates_and_keeps_its_backups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let mut writer = LogWriter::open(LogOptions {
            path: path.clone(),
            max_size_mb: 1,
            max_backups: 2,
            max_age_days: 0,
        })
        .unwrap();
        let line = vec![b'x'; 300 * 1024];
        for _ in 0..16 {
            writer.write(&line).unwrap();
            // Distinct rotation times.
            std::thread::sleep(Duration::from_millis(2));
        }
        let kept = backups(&path);
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert!(std::fs::metadata(&path).unwrap().len() <= 1 << 20);
        let name = kept[0].0.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            name.starts_with("audit-") && name.ends_with(".log"),
            "{name}"
        );
    }
}

//! A fuzzer on stable Rust, without coverage feedback: each target first runs over its corpus
//! (`corpus/<target>/`), then over random mutations of it (bit flips, byte changes, insertions,
//! deletions, duplicated ranges, splices of two entries, dictionary tokens, deep nesting,
//! repetition) for a bounded time.
//!
//! Reproducible: iteration `i` of seed `s` mutates with an RNG seeded by `s + i`, so a failure
//! names its seed and iteration (and writes its input next to the build's `target/`);
//! `KCP_FUZZ_SEED=s` replays the same sequence. Inputs run on a thread with a 2 MiB stack, the
//! stack of the server's runtime threads, so what would overflow there overflows here.
//!
//! Environment: `KCP_FUZZ_SECONDS` (default 5 per target), `KCP_FUZZ_SEED` (default: from the
//! clock, printed), `KCP_FUZZ_KEEP_LAST` (write each input to `<target>-last` before running it,
//! to keep what made the process abort, e.g. a stack overflow).

use std::fmt;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::Target;

/// Inputs never grow past this many bytes.
pub const MAX_INPUT: usize = 256 * 1024;

/// The stack inputs run on (tokio's default for its worker threads).
pub const STACK: usize = 2 * 1024 * 1024;

/// How one run goes.
#[derive(Debug, Clone)]
pub struct Config {
    pub seconds: f64,
    pub seed: u64,
    /// Where failing inputs are written.
    pub crash_dir: PathBuf,
}

impl Config {
    /// From `KCP_FUZZ_SECONDS` and `KCP_FUZZ_SEED`.
    pub fn from_env() -> Config {
        let seconds = std::env::var("KCP_FUZZ_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(5.0);
        let seed = std::env::var("KCP_FUZZ_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0)
            });
        let crash_dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../target/kcp-fuzz-crashes")
            .to_path_buf();
        Config {
            seconds,
            seed,
            crash_dir,
        }
    }
}

/// A property that failed.
#[derive(Debug)]
pub struct Failure {
    pub target: &'static str,
    pub seed: u64,
    /// `None` for a corpus entry.
    pub iteration: Option<u64>,
    pub message: String,
    pub input: Vec<u8>,
    pub saved: Option<PathBuf>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.iteration {
            Some(i) => write!(
                f,
                "{} failed at seed {} iteration {i} (KCP_FUZZ_SEED={} replays it): {}",
                self.target, self.seed, self.seed, self.message
            )?,
            None => write!(
                f,
                "{} failed on a corpus entry: {}",
                self.target, self.message
            )?,
        }
        write!(f, "\ninput: {:?}", String::from_utf8_lossy(&self.input))?;
        if let Some(saved) = &self.saved {
            write!(f, "\nsaved to {}", saved.display())?;
        }
        Ok(())
    }
}

/// What a run did.
#[derive(Debug, Clone, Copy)]
pub struct Report {
    pub corpus: usize,
    pub iterations: u64,
}

/// The corpus of `target`: every file in `corpus/<name>/`, sorted by name.
pub fn corpus(target: &Target) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target.name);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    paths.sort();
    paths
        .iter()
        .filter_map(|path| std::fs::read(path).ok())
        .collect()
}

/// Runs `target` over its corpus, then over mutations until the time is up.
pub fn run(target: &'static Target, config: &Config) -> Result<Report, Failure> {
    // Written past the test harness's capture, so it shows even if the process aborts.
    let _ = writeln!(
        std::io::stderr(),
        "kcp-fuzz: {} seed {} for {}s",
        target.name,
        config.seed,
        config.seconds
    );
    let config = config.clone();
    std::thread::Builder::new()
        .name(format!("fuzz-{}", target.name))
        .stack_size(STACK)
        .spawn(move || run_here(target, &config))
        .expect("spawn the fuzzing thread")
        .join()
        .unwrap_or_else(|_| {
            Err(Failure {
                target: target.name,
                seed: 0,
                iteration: None,
                message: "the fuzzing thread died".into(),
                input: Vec::new(),
                saved: None,
            })
        })
}

fn run_here(target: &'static Target, config: &Config) -> Result<Report, Failure> {
    let corpus = corpus(target);
    let seeds: Vec<Vec<u8>> = if corpus.is_empty() {
        vec![Vec::new()]
    } else {
        corpus.clone()
    };
    for input in &corpus {
        check(target, config, None, input)?;
    }
    let deadline = Instant::now() + Duration::from_secs_f64(config.seconds.max(0.0));
    let mut iteration = 0u64;
    while Instant::now() < deadline {
        let mut rng = fastrand::Rng::with_seed(config.seed.wrapping_add(iteration));
        let input = mutate(&mut rng, &seeds, target.dictionary);
        check(target, config, Some(iteration), &input)?;
        iteration += 1;
    }
    Ok(Report {
        corpus: corpus.len(),
        iterations: iteration,
    })
}

fn check(
    target: &'static Target,
    config: &Config,
    iteration: Option<u64>,
    input: &[u8],
) -> Result<(), Failure> {
    if std::env::var_os("KCP_FUZZ_KEEP_LAST").is_some() {
        // What an abort (a stack overflow) cannot save afterwards.
        let _ = std::fs::create_dir_all(&config.crash_dir);
        let _ = std::fs::write(
            config.crash_dir.join(format!("{}-last", target.name)),
            input,
        );
    }
    let outcome = catch_unwind(AssertUnwindSafe(|| (target.run)(input)));
    let Err(panic) = outcome else {
        return Ok(());
    };
    let message = panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into());
    let saved = std::fs::create_dir_all(&config.crash_dir)
        .ok()
        .and_then(|()| {
            let path = config.crash_dir.join(format!(
                "{}-{}-{}",
                target.name,
                config.seed,
                iteration.map_or("corpus".to_string(), |i| i.to_string())
            ));
            std::fs::write(&path, input).ok().map(|()| path)
        });
    Err(Failure {
        target: target.name,
        seed: config.seed,
        iteration,
        message,
        input: input.to_vec(),
        saved,
    })
}

/// One input: a corpus entry with one to eight stacked mutations.
pub fn mutate(rng: &mut fastrand::Rng, corpus: &[Vec<u8>], dictionary: &[&str]) -> Vec<u8> {
    let mut data = corpus[rng.usize(..corpus.len())].clone();
    for _ in 0..rng.usize(1..=8) {
        mutate_once(rng, &mut data, corpus, dictionary);
        data.truncate(MAX_INPUT);
    }
    data
}

const INTERESTING: &[u8] = b"{}[]\":,\\\0\n -0123456789aeflnrstu\xff\x7f";

fn mutate_once(
    rng: &mut fastrand::Rng,
    data: &mut Vec<u8>,
    corpus: &[Vec<u8>],
    dictionary: &[&str],
) {
    let len = data.len();
    let at = rng.usize(..=len);
    match rng.u8(..10) {
        0 if len > 0 => {
            let i = rng.usize(..len);
            data[i] ^= 1 << rng.u8(..8);
        }
        1 if len > 0 => {
            let i = rng.usize(..len);
            data[i] = if rng.bool() {
                INTERESTING[rng.usize(..INTERESTING.len())]
            } else {
                rng.u8(..)
            };
        }
        2 => {
            let count = rng.usize(1..=4);
            let bytes: Vec<u8> = (0..count)
                .map(|_| INTERESTING[rng.usize(..INTERESTING.len())])
                .collect();
            data.splice(at..at, bytes);
        }
        3 if len > 0 => {
            let end = (at + rng.usize(1..=16)).min(len);
            data.drain(at.min(end)..end);
        }
        4 if len > 0 => {
            let start = rng.usize(..len);
            let end = (start + rng.usize(1..=64)).min(len);
            let chunk = data[start..end].to_vec();
            data.splice(at..at, chunk);
        }
        5 => {
            let other = &corpus[rng.usize(..corpus.len())];
            let cut = rng.usize(..=other.len());
            data.truncate(at);
            data.extend_from_slice(&other[cut..]);
        }
        6 if !dictionary.is_empty() => {
            let token = dictionary[rng.usize(..dictionary.len())].as_bytes();
            data.splice(at..at, token.iter().copied());
        }
        7 => {
            // Deep nesting around a range: just over the limit, or far over it.
            let levels =
                [crate::MAX_DEPTH - 1, crate::MAX_DEPTH + 1, 130, 300, 5_000][rng.usize(..5)];
            let (open, close): (&[u8], &[u8]) = match rng.u8(..3) {
                0 => (b"[", b"]"),
                1 => (b"{\"a\":", b"}"),
                _ => (b"- ", b""),
            };
            let end = rng.usize(at..=len);
            let mut out = data[..at].to_vec();
            out.extend(open.repeat(levels));
            out.extend_from_slice(&data[at..end]);
            out.extend(close.repeat(levels));
            out.extend_from_slice(&data[end..]);
            *data = out;
        }
        8 if len > 0 => {
            let start = rng.usize(..len);
            let end = (start + rng.usize(1..=32)).min(len);
            let chunk = data[start..end].to_vec();
            let times = rng.usize(2..=200);
            data.splice(end..end, chunk.repeat(times));
        }
        _ => {
            if len > 0 {
                let i = rng.usize(..len);
                data[i] = data[i].wrapping_add(rng.u8(1..4));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_reproducible_from_the_seed() {
        let corpus = vec![b"{\"a\": [1, 2]}".to_vec(), b"x".to_vec()];
        let run = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..50)
                .map(|_| mutate(&mut rng, &corpus, &["tok"]))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
        assert!(run(9).iter().all(|input| input.len() <= MAX_INPUT));
    }

    #[test]
    fn failures_name_the_seed_and_save_the_input() {
        fn fails_on_x(data: &[u8]) {
            assert!(!data.contains(&b'x'), "found an x");
        }
        static FAILING: Target = Target {
            name: "failing",
            run: fails_on_x,
            dictionary: &["x"],
        };
        let dir = std::env::temp_dir().join(format!("kcp-fuzz-test-{}", std::process::id()));
        let config = Config {
            seconds: 5.0,
            seed: 42,
            crash_dir: dir.clone(),
        };
        let failure = run(&FAILING, &config).unwrap_err();
        assert_eq!(failure.seed, 42);
        let iteration = failure.iteration.unwrap();
        assert!(failure.to_string().contains("KCP_FUZZ_SEED=42"));
        let saved = std::fs::read(failure.saved.as_ref().unwrap()).unwrap();
        assert_eq!(saved, failure.input);
        assert!(saved.contains(&b'x'));
        // The same seed finds the same input at the same iteration.
        let again = run(&FAILING, &config).unwrap_err();
        assert_eq!(again.iteration, Some(iteration));
        assert_eq!(again.input, failure.input);
        let _ = std::fs::remove_dir_all(dir);
    }
}

//! A helper for the crash test: writes to an embedded store in a loop and prints a line for every
//! acknowledged write, until it is killed.
//!
//! Usage: `kcp-storage-crash-writer <store file>`. Lines are `create <key>` (the value is the key
//! reversed) and `counter <key> <n>` (the counter now holds n).

use std::io::Write;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use kcp_storage::Storage;
use kcp_storage_redb::RedbStorage;

const WRITERS: usize = 16;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let path = std::env::args()
        .nth(1)
        .expect("usage: kcp-storage-crash-writer <store file>");
    let store = RedbStorage::open(path.as_ref()).expect("open the store");
    let run = std::process::id();
    let out = Arc::new(Mutex::new(std::io::stdout()));
    println!("ready");
    let tasks: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let store = store.clone();
            let out = Arc::clone(&out);
            tokio::spawn(async move {
                let counter = format!("/crash/counter/{writer}");
                let mut current = match store.get(counter.as_bytes(), 0).await.unwrap().kv {
                    Some(kv) => kv,
                    None => match store.create(counter.as_bytes(), Bytes::from("0")).await {
                        Ok(kv) => kv,
                        Err(_) => store.get(counter.as_bytes(), 0).await.unwrap().kv.unwrap(),
                    },
                };
                for n in 0u64.. {
                    let key = format!("/crash/{run}/{writer}/{n}");
                    let value: String = key.chars().rev().collect();
                    store
                        .create(key.as_bytes(), Bytes::from(value))
                        .await
                        .unwrap();
                    report(&out, &format!("create {key}"));

                    let next: u64 = std::str::from_utf8(&current.value)
                        .unwrap()
                        .parse::<u64>()
                        .unwrap()
                        + 1;
                    current = store
                        .update(
                            counter.as_bytes(),
                            Bytes::from(next.to_string()),
                            current.mod_revision,
                        )
                        .await
                        .unwrap();
                    report(&out, &format!("counter {counter} {next}"));
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
}

fn report(out: &Mutex<std::io::Stdout>, line: &str) {
    let mut out = out.lock().unwrap();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

//! Every fuzz target over its corpus, then over seeded random mutations for `KCP_FUZZ_SECONDS`
//! (default 5) each. A failure prints its seed and iteration and saves its input under
//! `target/kcp-fuzz-crashes/`; add it to `corpus/<target>/` once fixed.

use kcp_fuzz::runner::{self, Config};

fn fuzz(name: &str) {
    let target = kcp_fuzz::target(name).expect("a known target");
    assert!(
        !runner::corpus(target).is_empty(),
        "corpus/{name}/ has seed inputs"
    );
    match runner::run(target, &Config::from_env()) {
        Ok(report) => eprintln!(
            "{name}: {} corpus entries, {} mutations",
            report.corpus, report.iterations
        ),
        Err(failure) => panic!("{failure}"),
    }
}

macro_rules! targets {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                fuzz(stringify!($name));
            }
        )*

        #[test]
        fn every_target_has_a_test() {
            let tested = [$(stringify!($name)),*];
            for target in kcp_fuzz::TARGETS {
                assert!(tested.contains(&target.name), "{} has no test", target.name);
            }
        }
    };
}

targets!(
    json_body,
    yaml_body,
    protobuf_body,
    json_patch,
    merge_patch,
    strategic_patch,
    label_selector,
    field_selector,
    stored_object,
    registry_writes,
);

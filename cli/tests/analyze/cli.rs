//! `p5 analyze maketrace`, `convert`, `score` and friends from the command line.
use crate::{fixture, p5, s};
use p5_analyze::pattern::read_json;
use p5_analyze::score::Scores;
use std::path::PathBuf;

#[test]
fn maketrace_convert_and_score_from_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, truth) = (dir.path().join("t.p5t"), dir.path().join("gt.json"));
    let (copy, scores) = (dir.path().join("c.p5t"), dir.path().join("s.json"));
    let cfg = fixture("fig18-children-d-cc.toml");
    p5(&[
        "maketrace",
        &cfg,
        "--seed",
        "4",
        "-o",
        s(&trace),
        "--truth",
        s(&truth),
        "--duration",
        "20s",
        "--record",
        "both",
        "--skew",
        "C=+3ms",
        "--capture-rate",
        "2000",
    ])
    .unwrap();
    p5(&["convert", "--trace", s(&trace), "-o", s(&copy)]).unwrap();
    assert_eq!(
        std::fs::read(&trace).unwrap(),
        std::fs::read(&copy).unwrap()
    );
    p5(&[
        "score",
        "--truth",
        s(&truth),
        s(&truth),
        "--json",
        "-o",
        s(&scores),
        "--top",
        "1..3",
    ])
    .unwrap();
    let sc: Scores = serde_json::from_slice(&std::fs::read(&scores).unwrap()).unwrap();
    assert_eq!(sc.patterns.false_negatives + sc.patterns.false_positives, 0);
    assert_eq!(sc.messages.misplaced, 0);
    assert!(sc.messages.total > 100);
    assert_eq!(sc.top_n.len(), 9);
    // The truth file is also a result (algorithm "truth") for the other analyses.
    let r = read_json(&truth).unwrap();
    assert_eq!(r.algorithm, "truth");
    assert_eq!(r.patterns.len(), 2);
}

#[test]
fn a_missing_pattern_is_a_false_negative_at_every_level() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, truth) = (dir.path().join("t.p5t"), dir.path().join("gt.json"));
    let cfg = fixture("fig18-children-0-2.toml");
    p5(&[
        "maketrace",
        &cfg,
        "-o",
        s(&trace),
        "--truth",
        s(&truth),
        "--duration",
        "10s",
    ])
    .unwrap();
    let mut r = read_json(&truth).unwrap();
    let dropped = r.patterns.remove(1);
    r.instances.retain(|i| i.pattern == 0);
    let inferred = dir.path().join("inf.json");
    std::fs::write(&inferred, serde_json::to_vec(&r).unwrap()).unwrap();
    let out = dir.path().join("s.json");
    p5(&[
        "score",
        "--truth",
        s(&truth),
        s(&inferred),
        "--json",
        "-o",
        s(&out),
        "--top",
        "2",
    ])
    .unwrap();
    let sc: Scores = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(
        (sc.patterns.false_negatives, sc.patterns.false_positives),
        (1, 0)
    );
    assert_eq!(sc.instances.false_negatives, dropped.count);
    assert!(sc.messages.misplaced > 0);
    assert!(
        sc.top_n.iter().all(|t| t.omitted == 1 && t.rate == 0.5),
        "{:?}",
        sc.top_n
    );
}

#[test]
fn maketrace_writes_the_same_bytes_for_the_same_seed() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (run, seed) in [(0, "11"), (1, "11"), (2, "12")] {
        let (t, g) = (
            dir.path().join(format!("{run}.p5t")),
            dir.path().join(format!("{run}.json")),
        );
        let cfg = fixture("fig18-penalty-breaker.toml");
        p5(&[
            "maketrace",
            &cfg,
            "--seed",
            seed,
            "-o",
            s(&t),
            "--truth",
            s(&g),
            "--duration",
            "10s",
            "--capture-rate",
            "150",
        ])
        .unwrap();
        files.push((std::fs::read(&t).unwrap(), std::fs::read(&g).unwrap()));
    }
    assert_eq!(files[0], files[1]);
    assert_ne!(files[0].0, files[2].0);
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[tracelet]]\ntree = \"A>B(\"\n").unwrap();
    let out = dir.path().join("o.p5t");
    let e = p5(&["maketrace", s(&bad), "-o", s(&out)]).unwrap_err();
    assert!(e.to_string().contains("bad.toml"), "{e}");
    let missing = PathBuf::from("/nonexistent/x.json");
    assert!(p5(&["score", "--truth", s(&missing), s(&missing)]).is_err());
    let notjson = dir.path().join("n.json");
    std::fs::write(&notjson, "{").unwrap();
    let e = p5(&["score", "--truth", s(&notjson), s(&notjson)]).unwrap_err();
    assert!(e.to_string().contains("not a p5 analyze result"), "{e}");
    let cfg = fixture("fig18-children-0-2.toml");
    assert!(p5(&["maketrace", &cfg, "-o", s(&out), "--skew", "B"]).is_err());
    let e = p5(&["maketrace", &cfg, "-o", s(&out), "--skew", "Z=+1ms"]).unwrap_err();
    assert!(e.to_string().contains("nodes: A, B, C"), "{e}");
    assert!(p5(&["maketrace", &cfg, "-o", s(&out), "--capture-rate", "0"]).is_err());
    let still = dir.path().join("still.toml");
    let cfg =
        "net = \"0ms\"\n[[tracelet]]\ntree = \"A>B\"\ncall_delay = \"0ms\"\nret_delay = \"0ms\"\n";
    std::fs::write(&still, cfg).unwrap();
    let e = p5(&["maketrace", s(&still), "-o", s(&out)]).unwrap_err();
    assert!(e.to_string().contains("time would stand still"), "{e}");
}

#[test]
fn convert_skews_a_node_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let (inp, fast, back) = (
        dir.path().join("in.p5t"),
        dir.path().join("f.p5t"),
        dir.path().join("b.p5t"),
    );
    std::fs::write(&inp, "1.000\tCALL_SENT\ta\tb\t1\n1.010\tCALL_SENT\tb\tc\t2\n1.020\tRET_SENT\tc\tb\t2\n1.030\tRET_SENT\tb\ta\t1\n").unwrap();
    p5(&[
        "convert",
        "--trace",
        s(&inp),
        "-o",
        s(&fast),
        "--skew",
        "b=+15",
    ])
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(&fast).unwrap(),
        "1.000\tCALL_SENT\ta\tb\t1\n1.020\tRET_SENT\tc\tb\t2\n1.025\tCALL_SENT\tb\tc\t2\n1.045\tRET_SENT\tb\ta\t1\n"
    );
    p5(&[
        "convert",
        "--trace",
        s(&fast),
        "-o",
        s(&back),
        "--skew",
        "b=-15",
    ])
    .unwrap();
    assert_eq!(std::fs::read(&back).unwrap(), std::fs::read(&inp).unwrap());
    assert!(
        p5(&[
            "convert",
            "--trace",
            s(&inp),
            "-o",
            s(&back),
            "--skew",
            "q=1"
        ])
        .is_err()
    );
}

#[test]
fn convert_aggregates_clients_and_coalesces() {
    let dir = tempfile::tempdir().unwrap();
    let (inp, out) = (dir.path().join("in.p5t"), dir.path().join("out.p5t"));
    let mut text = String::new();
    for i in 0..40 {
        let c = format!("10.1.0.{}:{}", i + 1, 40000 + i);
        text.push_str(&format!("{i}.0\tMSG_SENT\t{c}\t10.0.0.1:80\n"));
        text.push_str(&format!("{i}.1\tMSG_SENT\t{c}\t10.0.0.1:80\n"));
        text.push_str(&format!("{i}.2\tMSG_SENT\t10.0.0.1:80\t{c}\n"));
    }
    std::fs::write(&inp, text).unwrap();
    p5(&[
        "convert",
        "--trace",
        s(&inp),
        "-o",
        s(&out),
        "--aggregate-clients",
        "--coalesce",
    ])
    .unwrap();
    let got = std::fs::read_to_string(&out).unwrap();
    assert_eq!(got.lines().count(), 80, "{got}");
    assert!(
        got.starts_with("0.0\tMSG_SENT\tCLIENT\t10.0.0.1:80\n0.2\tMSG_SENT\t10.0.0.1:80\tCLIENT\n"),
        "{got}"
    );
}

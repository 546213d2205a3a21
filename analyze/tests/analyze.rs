//! Integration tests of p5-analyze: the paper's worked examples, the generator's ground
//! truth scored against itself, and the command line.

use p5_analyze::pattern::{AnalysisResult, Instance, Pattern};
use p5_analyze::score::{ScoreOptions, score};

fn result(pats: &[(&str, &[&[u64]])]) -> AnalysisResult {
    let mut r = AnalysisResult::default();
    for (i, (sig, insts)) in pats.iter().enumerate() {
        r.patterns.push(Pattern {
            signature: (*sig).into(),
            count: insts.len() as u64,
            expectation: insts.len() as f64,
            ..Pattern::default()
        });
        for m in *insts {
            r.instances.push(Instance {
                pattern: i as u32,
                prob: 1.0,
                messages: m.to_vec(),
                ..Instance::default()
            });
        }
    }
    r
}

/// [P5] §7.5.1: the truth is A→B→C→D twice; the inference one ABCD, one AB, one CD.
#[test]
fn the_papers_worked_example_scores_exactly() {
    let truth = result(&[("A>B(C(D))", &[&[1, 2, 3], &[4, 5, 6]])]);
    let inferred = result(&[
        ("A>B(C(D))", &[&[1, 2, 3]]),
        ("A>B", &[&[4]]),
        ("C>D", &[&[6]]),
    ]);
    let s = score(&truth, &inferred, &ScoreOptions::default());
    assert_eq!(
        (s.patterns.false_negatives, s.patterns.false_positives),
        (0, 2)
    );
    assert_eq!(
        (s.instances.false_negatives, s.instances.false_positives),
        (1, 2)
    );
    assert_eq!((s.messages.misplaced, s.messages.total), (3, 6));
    let perfect = score(&truth, &truth, &ScoreOptions::default());
    assert_eq!(perfect.messages.misplaced, 0);
    assert!(perfect.top_n.iter().all(|t| t.omitted == 0));
}

#[test]
fn every_fixture_generates_a_trace_the_reader_accepts() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let cfg = p5_analyze::maketrace::Config::parse(&text, &path).unwrap();
        let g = p5_analyze::maketrace::generate(
            &cfg,
            &p5_analyze::maketrace::Options {
                duration: Some(3_000_000_000),
                queue: 64,
                ..Default::default()
            },
        );
        let t = p5_analyze::text::read(&g.text(), "f", Default::default());
        assert!(
            t.report.counts.is_empty(),
            "{}: {}",
            path.display(),
            t.report
        );
        assert_eq!(
            t.trace.messages.len(),
            g.truth.messages.len(),
            "{}",
            path.display()
        );
        n += 1;
    }
    assert_eq!(n, 6);
}

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

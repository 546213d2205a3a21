use super::*;

fn v(parent: u32, node: &str, t_call: Time, t_ret: Time) -> Visit<'_> {
    Visit {
        parent,
        node,
        t_call,
        t_ret,
        t_call_recv: NO_TIME,
        net_offset: 0,
    }
}

/// Weighted samples beyond the reservoir: exact count, mean, minimum and maximum;
/// percentiles close to the weighted ones; bounded memory.
#[test]
fn weighted_samples_keep_exact_moments_and_a_bounded_reservoir() {
    let mut s = Samples::default();
    // 0..100_000 with weight 1 below 50_000 and 0.25 above: 62,500 in all.
    let (mut sw, mut swx) = (0.0f64, 0.0f64);
    for x in 0..100_000i64 {
        let w = if x < 50_000 { 1.0f32 } else { 0.25 };
        sw += f64::from(w);
        swx += f64::from(w) * x as f64;
        s.push(x, Some(w));
    }
    assert!(s.v.len() < 2 * RESERVOIR);
    let st = s.stats().unwrap();
    assert_eq!((st.n, st.min_ns, st.max_ns), (100_000, 0, 99_999));
    assert!((st.mean_ns - swx / sw).abs() < 1e-6);
    // Cumulative weight reaches half (31,250) at x = 31,250.
    assert!((st.p50_ns - 31_250).abs() < 2_500, "{}", st.p50_ns);
    let mut small = Samples::default();
    for x in [10, 20, 30] {
        small.push(x, Some(if x == 30 { 3.0 } else { 1.0 }));
    }
    let st = small.stats().unwrap();
    assert_eq!(
        (st.p50_ns, st.n),
        (30, 3),
        "weighted exactly below the reservoir"
    );
}

#[test]
fn signatures_print_and_parse() {
    let sig = "CLIENT>WS1(AUTH(DB),AP2(DB,DB))";
    let (root, callees) = parse_signature(sig).unwrap();
    assert_eq!(root, "CLIENT");
    assert_eq!(callees[0].children.len(), 2);
    assert_eq!(signature(&root, &callees), sig);
    let odd = signature(
        "a>b",
        &[CallTree {
            name: "f(x),y".into(),
            children: vec![],
        }],
    );
    assert_eq!(odd, r"a\>b>f\(x\)\,y");
    let (r, c) = parse_signature(&odd).unwrap();
    assert_eq!((r.as_str(), c[0].name.as_str()), ("a>b", "f(x),y"));
    assert!(parse_signature("A").is_err());
    assert!(parse_signature("A>B(C").is_err());
    assert!(parse_signature("A>B)").is_err());
    assert_eq!(parse_signature("A>B,C(D)").unwrap().1.len(), 2);
}

#[test]
fn collector_aggregates_by_signature_with_node_stats() {
    let mut c = Collector::default();
    // CLIENT calls WS1 at 0, WS1 calls AUTH at 10 (back at 20) and DB at 30 (back at 40).
    for k in 0..3 {
        let b = k * 1000;
        let visits = [
            v(0, "WS1", b, b + 50),
            v(1, "AUTH", b + 10, b + 20),
            v(1, "DB", b + 30 + k, b + 40),
        ];
        c.add("CLIENT", &visits, 1.0, vec![k as u64]);
    }
    c.add("CLIENT", &[v(0, "WS1", 5000, 5001)], 0.5, vec![9]);
    let r = c.finish("test", serde_json::Value::Null);
    assert_eq!(r.patterns[0].signature, "CLIENT>WS1(AUTH,DB)");
    assert_eq!(r.patterns[0].count, 3);
    assert_eq!(r.patterns[1].signature, "CLIENT>WS1");
    assert_eq!(r.patterns[1].max_prob, 0.5);
    let db = &r.patterns[0].nodes[3];
    assert_eq!((db.node.as_str(), db.parent, db.ord), ("DB", Some(1), 1));
    let d = db.call_delay.as_ref().unwrap();
    assert_eq!((d.n, d.min_ns, d.max_ns, d.mean_ns), (3, 30, 32, 31.0));
    assert_eq!(r.patterns[0].latency.as_ref().unwrap().p50_ns, 50);
    assert_eq!(r.instances[3].pattern, 1);
    assert_eq!((r.instances[1].t_start, r.instances[1].t_end), (1000, 1050));
}

#[test]
fn visits_out_of_preorder_get_the_same_signature() {
    let mut c = Collector::default();
    // A>B(C(D),E) listed as B, C, E, D.
    let visits = [
        v(0, "B", 0, 100),
        v(1, "C", 1, 10),
        v(1, "E", 20, 30),
        v(2, "D", 2, 3),
    ];
    c.add("A", &visits, 1.0, vec![]);
    let r = c.finish("t", serde_json::Value::Null);
    assert_eq!(r.patterns[0].signature, "A>B(C(D),E)");
    let names: Vec<&str> = r.patterns[0]
        .nodes
        .iter()
        .map(|n| n.node.as_str())
        .collect();
    assert_eq!(names, ["A", "B", "C", "D", "E"]);
    assert_eq!(
        r.patterns[0].nodes[4].latency.as_ref().unwrap().mean_ns,
        10.0
    );
}

#[test]
fn json_round_trips_and_minimal_json_reads() {
    let mut c = Collector::default();
    c.add("A", &[v(0, "B", 0, 5)], 1.0, vec![1, 2]);
    let r = c.finish("t", serde_json::json!({"x": 2}));
    let s = serde_json::to_string(&r).unwrap();
    assert_eq!(serde_json::from_str::<AnalysisResult>(&s).unwrap(), r);
    let min: AnalysisResult =
        serde_json::from_str(r#"{"patterns": [{"signature": "A>B", "count": 3}]}"#).unwrap();
    assert_eq!(min.patterns[0].count, 3);
}

/// The signature and preorder written straight from the visits equal those of the node
/// list they stand for, on many random call trees (names that need escaping included).
#[test]
fn signatures_from_visits_equal_those_from_node_lists() {
    let names = ["A", "B", "C(x)", "D,E", "F>G", "H\\I"];
    let mut seed = 7u64;
    let mut rnd = |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % n
    };
    for _ in 0..2000 {
        let len = rnd(9);
        let visits: Vec<Visit<'_>> = (0..len)
            .map(|i| v(rnd(i + 1) as u32, names[rnd(names.len())], 0, 1))
            .collect();
        let (mut sig, mut order, mut links) = (String::new(), Vec::new(), Vec::new());
        tree_of_visits("R,", &visits, &mut links, &mut sig, &mut order);
        let mut nodes = vec![PatternNode {
            node: "R,".into(),
            ..PatternNode::default()
        }];
        let mut kids = vec![0u32; len + 1];
        for (i, x) in visits.iter().enumerate() {
            let p = (x.parent as usize).min(i);
            nodes.push(PatternNode {
                parent: Some(p as u32),
                ord: kids[p],
                node: x.node.into(),
                ..PatternNode::default()
            });
            kids[p] += 1;
        }
        let (nodes, want_order) = preorder(nodes);
        assert_eq!(sig, signature_of_nodes(&nodes));
        assert_eq!(order, want_order);
    }
}

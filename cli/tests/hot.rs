//! Hot real programs (issue 21): the Lua 5.4 interpreter (crates.io `lua-src`) instrumented
//! with `--functions`, built with `-O2` and recorded by `p5 record` with default settings,
//! running a workload of tiny hot functions — recursion, a sort, string matching — and of
//! `longjmp`s: every coroutine yield and every caught error leaves C scopes without their exits.
//! The hot functions are throttled and reported; the functions where the jumps land
//! (`luaD_rawrunprotected`, which calls `setjmp` through the `LUAI_TRY` macro) are never
//! throttled, so their exits close the abandoned scopes and the nesting stays shallow.

mod lua;

use lua::{build_lua, read_session, record};
use p5_tracedb::read;

const WORK: &str = r#"local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end
local t = {}
for i = 1, 3000 do t[#t+1] = string.format("k%05d:%d", (i * 7919) % 3001, fib(i % 12)) end
table.sort(t)
local n = 0
for _, s in ipairs(t) do if s:match("^k0*(%d+):(%d+)$") then n = n + 1 end end
local co = coroutine.wrap(function() for i = 1, 3000 do coroutine.yield(i * i) end end)
local sum = 0
for i = 1, 3000 do sum = sum + co() end
local errs = 0
for i = 1, 3000 do if not pcall(function() error("e" .. i) end) then errs = errs + 1 end end
print("result", #t, n, sum, errs, fib(22))
"#;

#[test]
fn a_hot_lua_is_throttled_reported_and_nests_through_its_longjmps() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_lua(dir.path(), "-O2");
    let script = dir.path().join("work.lua");
    std::fs::write(&script, WORK).unwrap();
    let store = dir.path().join("store");
    let stdout = record(&exe, &script, &store, "hot");
    assert!(
        stdout.contains("result\t3000\t3000\t9004500500\t3000\t17711"),
        "{stdout}"
    );
    // Throttled sensors are reported in the summary; no call was nested past the merge's
    // depth limit (before: thousands of abandoned scopes piled up under throttled callers).
    assert!(stdout.contains("throttled: "), "{stdout}");
    assert!(!stdout.contains("too-deep"), "{stdout}");
    let (sensors, calls, intervals) = read_session(&store, async |db, sid| {
        (
            read::sensors(db, sid).await.unwrap(),
            read::sensor_calls(db, sid).await.unwrap(),
            read::intervals(db, sid).await.unwrap(),
        )
    });
    let name = |id: i64| {
        sensors
            .iter()
            .find(|s| s.id == id)
            .map_or("?", |s| s.name.as_str())
    };
    let throttled: Vec<&str> = calls.iter().map(|c| name(c.sensor_id)).collect();
    assert!(throttled.len() >= 10, "{throttled:?}");
    assert!(
        !throttled.contains(&"luaD_rawrunprotected"),
        "the landing point of the jumps was throttled: {throttled:?}"
    );
    let counted: i64 = calls.iter().map(|c| c.calls).sum();
    assert!(counted > 100_000, "{counted} calls counted");
    // The jumps landed 6,000 times; the scopes they skipped were closed at the landing point's
    // exit, so nesting stays as shallow as Lua's C stack (the interpreter does not recurse
    // in C for Lua calls).
    let deepest = intervals.iter().map(|i| i.depth).max().unwrap();
    assert!(deepest < 64, "nesting reached depth {deepest}");
    // A long call of a throttled sensor is recorded at its exit, after the calls inside it;
    // merge nests those calls under it all the same (`merge::intervals`, late calls).
    let throttled_ids: Vec<i64> = calls.iter().map(|c| c.sensor_id).collect();
    let mut by_thread: Vec<&p5_tracedb::read::IntervalRow> = intervals.iter().collect();
    by_thread.sort_by_key(|i| (i.thread, i.t_start, i.depth));
    let mut wrapping = 0;
    for (k, late) in by_thread.iter().enumerate() {
        if !throttled_ids.contains(&late.sensor) {
            continue;
        }
        let inside = by_thread[k + 1..]
            .iter()
            .take_while(|i| i.thread == late.thread && i.t_start < late.t_end)
            .filter(|i| i.t_end <= late.t_end && i.t_start > late.t_start);
        for i in inside {
            wrapping += 1;
            assert!(
                i.depth > late.depth,
                "{} at depth {} ({}..{}) inside {} at depth {} ({}..{})\n{stdout}",
                name(i.sensor),
                i.depth,
                i.t_start,
                i.t_end,
                name(late.sensor),
                late.depth,
                late.t_start,
                late.t_end
            );
        }
    }
    assert!(
        wrapping > 0,
        "no call recorded inside a long throttled call"
    );
    let rawrun = intervals
        .iter()
        .filter(|i| name(i.sensor) == "luaD_rawrunprotected")
        .count();
    assert!(rawrun >= 6_000, "{rawrun} luaD_rawrunprotected intervals");
}

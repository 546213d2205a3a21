//! Sensors that describe themselves (issue 13 part 4): the Lua 5.4 interpreter (crates.io
//! `lua-src`, code nobody here wrote) instrumented with `p5-instrument --functions`, built,
//! and recorded with `p5 record -- ./lua script` and no other flag — no `--manifest`. Every
//! recorded sensor is named from the tables the instrumented files registered, and clicking
//! back from a sensor (`p5 web`'s source API) gives the Lua source with the function's lines.

mod lua;
mod web_get;

use lua::{build_lua, read_session, record};
use p5_tracedb::read;
use web_get::web_get;

#[test]
fn a_recorded_lua_names_its_sensors_and_clicks_back_without_a_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_lua(dir.path(), "-O1");
    let script = dir.path().join("work.lua");
    std::fs::write(
        &script,
        "local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end\n\
         local t = {} for i = 1, 2000 do t[i] = (i * 7919) % 1000 end table.sort(t)\n\
         print(fib(18), t[1], string.find(\"hello world\", \"o w\"))\n",
    )
    .unwrap();
    let store = dir.path().join("store");
    let stdout = record(&exe, &script, &store, "lua");
    assert!(stdout.contains("2584\t"), "{stdout}");
    assert!(
        !stdout.contains("--manifest"),
        "asks for a manifest:\n{stdout}"
    );
    let (sid, sensors, lvm) = read_session(&store, async |db, sid| {
        let sensors = read::sensors(db, sid).await.unwrap();
        let v = sensors.iter().find(|s| s.name == "luaV_execute").unwrap();
        let file = v.source_file_id.expect("luaV_execute has a source file");
        let lvm = read::source_file(db, sid, file).await.unwrap().unwrap();
        (sid, sensors, lvm)
    });
    // Every sensor the run fired (and every other one of the tables) has a name and a place.
    let unnamed: Vec<_> = sensors.iter().filter(|s| s.file.is_none()).collect();
    assert!(unnamed.is_empty(), "{} unnamed: {unnamed:?}", unnamed.len());
    let names: Vec<&str> = sensors.iter().map(|s| s.name.as_str()).collect();
    for f in [
        "luaV_execute",
        "luaD_rawrunprotected",
        "main",
        "luaH_getstr",
    ] {
        assert!(names.contains(&f), "{f} missing");
    }
    assert_eq!(lvm.path, "lvm.c");
    assert!(
        lvm.lines > 1000 && lvm.text.is_some(),
        "{} lines",
        lvm.lines
    );
    // Click-back: the source panel of luaV_execute shows lvm.c at the function's lines.
    let v = sensors.iter().find(|s| s.name == "luaV_execute").unwrap();
    let panel = web_get(
        &store.join("p5.sqlite"),
        &format!("/api/v1/sessions/{sid}/sensors/{}/source", v.hex),
    );
    let text = panel["text"].as_str().unwrap_or_default();
    let line = v.line.unwrap() as usize;
    let at = text.lines().nth(line - 1).unwrap_or_default();
    assert!(at.contains("luaV_execute"), "line {line}: {at:?}\n{panel}");
    assert_eq!(panel["file"]["path"], "lvm.c", "{panel}");
}
